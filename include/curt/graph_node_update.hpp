// curt/graph_node_update.hpp: changes to one node of an executable graph, without a new graph or
// instantiation, and switching nodes off and on.
//
//   curt::graph_exec exec = g.instantiate();
//   curt::update_kernel_node(exec, k, config, saxpy, 3.0f, x, y, n);  // checked like launch
//   curt::update_memcpy_node(exec, copy, other_dst, other_src);        // typed, sizes checked
//   curt::update_fill_node(exec, clear, buffer, 7);
//   curt::update_host_node(exec, report, [&] { ... });
//   curt::set_node_enabled(exec, k, false);                           // kernel, memcpy, memset
//
// `node` is the node of the graph the executable graph was instantiated from (that graph must
// still hold it). A change applies to later launches only, and to this executable graph only: the
// graph and its other executable graphs keep what they had. CUDA's limits (it refuses otherwise,
// and curt's error says which node type was expected): a kernel node's new kernel belongs to the
// same context; memcpy and memset nodes point to memory of the same device and context, 1D as
// curt makes them. Launch attributes cannot change in an executable graph: a launch_config with
// any is refused before CUDA is called.
//
// Only kernel, memcpy and memset nodes can be disabled (a disabled node does nothing until it is
// enabled again; its parameters can still be updated); other nodes are refused before the change
// is asked of CUDA.
#pragma once

#include <curt/detail/graph_errors.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/launch.hpp>

#include <cuda_runtime_api.h>

#include <climits>
#include <cstddef>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace curt {
namespace detail {

// ---- messages (no CUDA calls: tested without a device) ------------------------------------------

/// Refuses, before CUDA is called, a configuration an executable graph's kernel node cannot take.
inline void check_update_config(const launch_config& config, const char* operation) {
  bool attributes = false;
  for (unsigned i = 0; i < config.attribute_count(); ++i)
    attributes = attributes || !attribute_is_off(config.attributes()[i]);
  if (attributes)
    raise(cudaErrorInvalidValue, operation,
          "an executable graph's kernel node keeps the launch attributes it was instantiated with "
          "(CUDA updates its kernel, grid, block, dynamic shared memory and arguments only): pass "
          "a launch_config without attributes; to change attributes, change the graph's node and "
          "instantiate again (or update the whole executable graph). Nothing was changed",
          __FILE__, __LINE__);
  if (config.dynamic_shared_memory_bytes() > UINT_MAX)
    raise(cudaErrorInvalidValue, operation,
          std::to_string(config.dynamic_shared_memory_bytes()) +
              " B of dynamic shared memory do not fit a kernel node's 32-bit field",
          __FILE__, __LINE__);
}

/// Whether CUDA enables and disables nodes of `type` (13.0: kernel, memcpy, memset).
constexpr bool enable_allowed(cudaGraphNodeType type) noexcept {
  return type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy ||
         type == cudaGraphNodeTypeMemset;
}

/// Refuses, before the change is asked of CUDA, enabling or disabling a node of `type`.
inline void check_enable_type(cudaGraphNodeType type, const char* operation) {
  if (CURT_LIKELY(enable_allowed(type))) return;
  raise(cudaErrorInvalidValue, operation,
        std::string("only kernel, memcpy and memset nodes can be enabled and disabled, and this is "
                    "a ") +
            node_type_name(type) + " node. Nothing was changed",
        __FILE__, __LINE__);
}

// ---- the failure path --------------------------------------------------------------------------

CURT_COLD inline std::string explain_update_failure(cudaGraphNode_t node,
                                                    cudaGraphNodeType wanted) {
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(node, &type) != cudaSuccess) {
    (void)cudaGetLastError();
    return "is the node one of the graph the executable graph was instantiated from, and does that "
           "graph still hold it?";
  }
  if (type != wanted)
    return std::string("the node is a ") + node_type_name(type) + " node, not a " +
           node_type_name(wanted) + " node";
  switch (wanted) {
    case cudaGraphNodeTypeKernel:
      return "the kernel must belong to the same context as the node's, and cannot start or stop "
             "using dynamic parallelism";
    case cudaGraphNodeTypeMemcpy:
    case cudaGraphNodeTypeMemset:
      return "an executable graph's memcpy and memset nodes can point only to memory of the same "
             "device and context as before (and a memcpy node cannot change between memory "
             "kinds such as host and device)";
    default:
      return {};
  }
}

[[noreturn]] CURT_COLD inline void throw_update_node_error(cudaError_t status, cudaGraphNode_t node,
                                                          const cudaGraphNodeParams& params,
                                                          const char* function) {
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  std::string call = describe_node_params(function, params);
  std::string why = diagnose([&] { return explain_update_failure(node, params.type); });
  throw_error_with_log(make_error_code(status), std::move(call), location(__FILE__, __LINE__),
                       std::move(why), std::move(log));
}

/// cudaGraphExecNodeSetParams for `node` of `exec`.
inline void exec_set_node_params(cudaGraphExec_t exec, graph_node node,
                                 cudaGraphNodeParams& params, const char* function) {
  cudaError_t status;
  {
    current_device_scope in_context;
    status = cudaGraphExecNodeSetParams(exec, node.get(), &params);
  }
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_update_node_error(status, node.get(), params, function);
}

}  // namespace detail

/// Gives kernel node `node` of `exec` a new kernel, grid, block, dynamic shared memory and
/// arguments (checked against the kernel's parameters at compile time, as curt::launch does).
/// `config` must have no launch attributes (an executable graph's node keeps its own).
template <class... Params, class... Args>
void update_kernel_node(graph_exec_ref exec, graph_node node, const launch_config& config,
                        void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::update_kernel_node: the number of arguments differs from the kernel's "
                "parameters");
  if constexpr (sizeof...(Params) == sizeof...(Args)) {
    constexpr bool convertible =
        detail::check_arguments<std::tuple<Params...>, std::tuple<Args&&...>>(
            std::index_sequence_for<Params...>{});
    if constexpr (convertible) {
      cudaGraphExec_t e = detail::graph_exec_access(exec).handle("update_kernel_node()");
      detail::require_node(node, "curt::update_kernel_node");
      detail::check_update_config(config, "curt::update_kernel_node");
      detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
      cudaGraphNodeParams p = detail::kernel_node_params(
          config, reinterpret_cast<const void*>(kernel), arguments.pointers);
      detail::exec_set_node_params(e, node, p, "curt::update_kernel_node");
    }
  }
}

#if defined(__CUDACC__)
/// The same for a functor or device lambda (the kernel curt::kernel_for(function, args...)).
template <class Function, class... Args,
          std::enable_if_t<!std::is_pointer_v<std::decay_t<Function>> &&
                               !std::is_function_v<std::remove_reference_t<Function>>,
                           int> = 0>
void update_kernel_node(graph_exec_ref exec, graph_node node, const launch_config& config,
                        Function&& function, Args&&... args) {
  update_kernel_node(exec, node, config, kernel_for(function, args...),
                     std::forward<Function>(function), std::forward<Args>(args)...);
}
#endif

/// Makes memcpy node `node` of `exec` copy src into dst (same rules as add_memcpy_node).
template <class Dst, class Src>
void update_memcpy_node(graph_exec_ref exec, graph_node node, Dst&& dst, Src&& src) {
  if constexpr (detail::copyable_ranges<Dst, Src>()) {
    detail::check_kept_range<Dst>(dst, "curt::update_memcpy_node: the destination");
    detail::check_kept_range<Src>(src, "curt::update_memcpy_node: the source");
    cudaGraphExec_t e = detail::graph_exec_access(exec).handle("update_memcpy_node()");
    detail::require_node(node, "curt::update_memcpy_node");
    cudaGraphNodeParams p = detail::typed_memcpy_params(dst, src, "update_memcpy_node");
    detail::exec_set_node_params(e, node, p, "curt::update_memcpy_node");
  }
}

/// Makes memset node `node` of `exec` set every byte of dst's elements to `byte`.
template <class Dst>
void update_memset_node(graph_exec_ref exec, graph_node node, Dst&& dst, unsigned char byte) {
  static_assert(detail::is_range_v<Dst>,
                "curt::update_memset_node: the destination must be a contiguous range with data() "
                "and size()");
  if constexpr (detail::is_range_v<Dst>) {
    using E = detail::element_of_t<Dst>;
    static_assert(!std::is_const_v<E>,
                  "curt::update_memset_node: the destination's elements are const");
    detail::check_kept_range<Dst>(dst, "curt::update_memset_node: the destination");
    cudaGraphExec_t e = detail::graph_exec_access(exec).handle("update_memset_node()");
    detail::require_node(node, "curt::update_memset_node");
    cudaGraphNodeParams p = detail::fill_node_params(
        static_cast<void*>(dst.data()), static_cast<std::size_t>(dst.size()) * sizeof(E), &byte,
        1, "update_memset_node");
    detail::exec_set_node_params(e, node, p, "curt::update_memset_node");
  }
}

/// Makes memset node `node` of `exec` set every element of dst to `value` (a value a memset
/// writes, as for add_fill_node).
template <class Dst>
void update_fill_node(graph_exec_ref exec, graph_node node, Dst&& dst,
                      const detail::range_value_t<Dst>& value) {
  static_assert(detail::is_range_v<Dst>,
                "curt::update_fill_node: the destination must be a contiguous range with data() "
                "and size()");
  if constexpr (detail::is_range_v<Dst>) {
    using E = detail::element_of_t<Dst>;
    static_assert(!std::is_const_v<E>, "curt::update_fill_node: the destination's elements are const");
    detail::check_kept_range<Dst>(dst, "curt::update_fill_node: the destination");
    cudaGraphExec_t e = detail::graph_exec_access(exec).handle("update_fill_node()");
    detail::require_node(node, "curt::update_fill_node");
    cudaGraphNodeParams p = detail::fill_node_params(
        static_cast<void*>(dst.data()), static_cast<std::size_t>(dst.size()), &value, sizeof(E),
        "update_fill_node");
    detail::exec_set_node_params(e, node, p, "curt::update_fill_node");
  }
}

/// Makes host node `node` of `exec` call `function()` instead. The node must have been made by
/// curt::add_host_node: its callable, which the graph owns, adopts `function`, which then lives as
/// long as it does (until the graph and its executable graphs are gone; each update keeps its
/// function until then) and is destroyed on a user thread. Exceptions go to the error handler, as
/// for add_host_node. Refused for an executable graph curt updated as a whole (its host nodes
/// then belong to the graph it was updated from); a whole-graph update done with the raw
/// cudaGraphExecUpdate is not seen: do not mix the two.
template <class F>
void update_host_node(graph_exec_ref exec, graph_node node, F&& function) {
  if constexpr (detail::host_node_callable<F>()) {
    cudaGraphExec_t e = detail::graph_exec_access(exec).handle("update_host_node()");
    detail::require_node(node, "curt::update_host_node");
    if (CURT_UNLIKELY(detail::updated_exec_table().contains(e)))
      detail::raise(cudaErrorInvalidValue, "curt::update_host_node",
                    "this executable graph was updated as a whole (graph_exec::update), so its "
                    "host nodes call the callables of the graph it was updated from, and a new "
                    "callable could not be tied to anything it holds. Update that graph's host "
                    "node (or add a new one) and update the executable graph from it again, or "
                    "instantiate anew. Nothing was changed",
                    __FILE__, __LINE__);
    cudaHostNodeParams current{};
    {
      detail::current_device_scope in_context;
      cudaError_t status = cudaGraphHostNodeGetParams(node.get(), &current);
      if (CURT_UNLIKELY(status != cudaSuccess)) {
        cudaGraphNodeParams shown = detail::host_node_params(nullptr);
        detail::throw_update_node_error(status, node.get(), shown, "curt::update_host_node");
      }
    }
    if (CURT_UNLIKELY(current.fn != &detail::run_graph_host_node))
      detail::raise(cudaErrorInvalidValue, "curt::update_host_node",
                    "the host node was not made by curt::add_host_node (a host_call captured "
                    "into the graph, or a node added by a raw call), so nothing curt knows owns "
                    "its function, and nothing would own the new one. Nothing was changed",
                    __FILE__, __LINE__);
    auto* owner = static_cast<detail::graph_host_callable*>(current.userData);
    auto owned = std::make_unique<detail::graph_host_task_for<F>>(std::forward<F>(function));
    cudaGraphNodeParams p = detail::host_node_params(owned.get());
    detail::exec_set_node_params(e, node, p, "curt::update_host_node");
    owner->adopt(owned.release());  // lives as long as the graph's callable
  }
}

/// Enables or disables kernel, memcpy or memset node `node` of `exec` for later launches
/// (cudaGraphNodeSetEnabled). Other node types are refused before the change is asked of CUDA.
inline void set_node_enabled(graph_exec_ref exec, graph_node node, bool enabled) {
  cudaGraphExec_t e = detail::graph_exec_access(exec).handle("set_node_enabled()");
  detail::require_node(node, "curt::set_node_enabled");
  cudaGraphNodeType type = node.type();
  detail::check_enable_type(type, enabled ? "curt::set_node_enabled(true)"
                                          : "curt::set_node_enabled(false)");
  detail::current_device_scope in_context;
  detail::check(cudaGraphNodeSetEnabled(e, node.get(), enabled ? 1u : 0u),
                enabled ? "cudaGraphNodeSetEnabled(exec, node, 1)"
                        : "cudaGraphNodeSetEnabled(exec, node, 0)",
                __FILE__, __LINE__);
}

/// Whether kernel, memcpy or memset node `node` of `exec` is enabled (cudaGraphNodeGetEnabled).
inline bool node_enabled(graph_exec_ref exec, graph_node node) {
  cudaGraphExec_t e = detail::graph_exec_access(exec).handle("node_enabled()");
  detail::require_node(node, "curt::node_enabled");
  detail::check_enable_type(node.type(), "curt::node_enabled");
  unsigned enabled = 0;
  detail::current_device_scope in_context;
  detail::check(cudaGraphNodeGetEnabled(e, node.get(), &enabled),
                "cudaGraphNodeGetEnabled(exec, node)", __FILE__, __LINE__);
  return enabled != 0;
}

}  // namespace curt
