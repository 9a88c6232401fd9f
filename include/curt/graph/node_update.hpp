// curt/graph/node_update.hpp: in-place changes to an executable graph's node; nodes off and on.
//
//   curt::update_kernel_node(exec, k, config, saxpy, 3.0f, x, y, n);  // checked like launch
//   curt::update_memcpy_node(exec, copy, other_dst, other_src);        // typed, sizes checked
//   curt::update_host_node(exec, report, [&] { ... });
//   curt::set_node_enabled(exec, k, false);                           // kernel, memcpy, memset
//
// `node` is a node of the graph `exec` was instantiated from; the change applies to exec's later
// launches only. A refusal names the node's kind, or the kind's update rule (node_kinds.hpp).
#pragma once

#include <curt/graph/nodes.hpp>

namespace curt {
namespace detail {

/// Refuses, before the change is asked of CUDA, enabling or disabling a node of `type`.
inline void check_enable_type(cudaGraphNodeType type, const char* operation) {
  if (CURT_LIKELY(kind_of(type).toggles)) return;
  raise(cudaErrorInvalidValue, operation,
        fmt("only %s can be enabled and disabled, and this is a %s node. Nothing was changed",
            kinds_with(&node_kind::toggles).c_str(), node_type_name(type)),
        __FILE__, __LINE__);
}
[[noreturn]] CURT_COLD inline void throw_update_error(cudaError_t status, graph_node node,
                                                     const cudaGraphNodeParams& params,
                                                     const char* function) {
  throw_error(make_error_code(status), describe_node_params(function, params), __FILE__, __LINE__,
              [&] {
                return diagnose([&]() -> std::string {
                  cudaGraphNodeType type{};
                  if (cudaGraphNodeGetType(node.get(), &type) != cudaSuccess)
                    return "is the node one of the graph the executable graph was instantiated "
                           "from, and does that graph still hold it?";
                  if (type != params.type)
                    return fmt("the node is a %s node, not a %s node", node_type_name(type),
                               node_type_name(params.type));
                  return kind_of(type).update_rule ? kind_of(type).update_rule : "";
                }, any_context);
              });
}
// The executable graph's handle for `function` ("curt::update_kernel_node"); refuses a null node.
inline cudaGraphExec_t prepare_update(graph_exec_ref exec, graph_node node, const char* function) {
  if (CURT_UNLIKELY(!exec.valid()))
    (void)graph_access::handle(exec, fmt("%s()", function + 6).c_str());
  require_node(node, function);
  return exec.get();
}
/// Gives `node` of `exec` the parameters `build()` makes (cudaGraphExecNodeSetParams).
template <class Build>
void update_node(graph_exec_ref exec, graph_node node, const char* function, Build&& build) {
  cudaGraphExec_t e = prepare_update(exec, node, function);
  cudaGraphNodeParams params = build();
  const cudaError_t status =
      call_in([&] { return cudaGraphExecNodeSetParams(e, node.get(), &params); }, any_context);
  if (CURT_UNLIKELY(status != cudaSuccess)) throw_update_error(status, node, params, function);
}
// Makes host node `node` of `exec` call `function()`. With the owner's `state`, the callable it
// replaces is freed once the new one has run; through a ref, the graph keeps it until it dies.
template <class F>
void update_host_node(graph_exec_ref exec, graph_node node, F&& function, const exec_state* state) {
  const char* name = "curt::update_host_node";
  (void)prepare_update(exec, node, name);
  cudaHostNodeParams current{};
  const cudaError_t status =
      call_in([&] { return cudaGraphHostNodeGetParams(node.get(), &current); }, any_context);
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_update_error(status, node, host_node_params(nullptr), name);
  if (CURT_UNLIKELY(current.fn != &host_node_callable::run))
    raise(cudaErrorInvalidValue, name,
          "the host node was not made by curt::add_host_node (a host_call captured into the "
          "graph, or a node added by a raw call), so nothing curt knows owns its function, and "
          "nothing would own the new one. Nothing was changed",
          __FILE__, __LINE__);
  auto owned = std::make_unique<host_node_task<F>>(std::forward<F>(function), 0);
  host_node_callable* fresh = &owned->function;
  fresh->task = owned.get();
  fresh->original = static_cast<host_node_callable*>(current.userData);
  fresh->node = node.get();
  update_node(exec, node, name, [&] { return host_node_params(fresh); });
  if (!state) return fresh->original->adopt(owned.release());
  host_node_callable** link = &state->current;
  while (*link && (*link)->node != fresh->node) link = &(*link)->next_current;
  if (host_node_callable* old = *link) {
    fresh->next_current = old->next_current;
    push_task(fresh->replaced, old->task);
  }
  *link = fresh;
  (void)owned.release();
}

}  // namespace detail

/// Gives kernel node `node` of `exec` a new kernel, configuration (no attributes) and arguments.
template <class... Params, class... Args>
void update_kernel_node(graph_exec_ref exec, graph_node node, const launch_config& config,
                        void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::update_kernel_node: the number of arguments differs from the kernel's "
                "parameters");
  if constexpr (detail::arguments_fit<std::tuple<Params...>, std::tuple<Args&&...>>()) {
    const char* function = "curt::update_kernel_node";
    (void)detail::prepare_update(exec, node, function);
    detail::check_update_config(config, function);
    detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
    detail::update_node(exec, node, function, [&] {
      return detail::kernel_node_params(config, reinterpret_cast<const void*>(kernel),
                                        arguments.pointers);
    });
  }
}

#if defined(__CUDACC__)
/// The same for a functor or device lambda (the kernel curt::kernel_for(function, args...)).
template <class Function, class... Args, detail::if_functor<Function> = 0>
void update_kernel_node(graph_exec_ref exec, graph_node node, const launch_config& config,
                        Function&& function, Args&&... args) {
  update_kernel_node(exec, node, config, kernel_for(function, std::forward<Args>(args)...),
                     std::forward<Function>(function), std::forward<Args>(args)...);
}
#endif

/// Makes memcpy node `node` of `exec` copy src into dst (same rules as add_memcpy_node).
template <class Dst, class Src>
void update_memcpy_node(graph_exec_ref exec, graph_node node, Dst&& dst, Src&& src) {
  if constexpr (detail::memcpy_node_ranges<Dst, Src>()) {
    detail::check_kept_range<Dst>(dst, "curt::update_memcpy_node: the destination");
    detail::check_kept_range<Src>(src, "curt::update_memcpy_node: the source");
    detail::update_node(exec, node, "curt::update_memcpy_node", [&] {
      return detail::typed_memcpy_params(dst, src, "update_memcpy_node");
    });
  }
}
/// Makes memset node `node` of `exec` set every byte of dst's elements to `byte`.
template <class Dst>
void update_memset_node(graph_exec_ref exec, graph_node node, Dst&& dst, unsigned char byte) {
  if constexpr (detail::memcpy_node_ranges<Dst>()) {
    detail::check_kept_range<Dst>(dst, "curt::update_memset_node: the destination");
    detail::update_node(exec, node, "curt::update_memset_node", [&] {
      return detail::fill_node_params(dst.data(), dst.size() * sizeof(*dst.data()), &byte, 1,
                                      "update_memset_node");
    });
  }
}
/// Makes memset node `node` of `exec` set every element of dst to `value` (as add_fill_node).
template <class Dst>
void update_fill_node(graph_exec_ref exec, graph_node node, Dst&& dst,
                      const detail::range_value_t<Dst>& value) {
  if constexpr (detail::memcpy_node_ranges<Dst>()) {
    detail::check_kept_range<Dst>(dst, "curt::update_fill_node: the destination");
    detail::update_node(exec, node, "curt::update_fill_node", [&] {
      return detail::fill_node_params(dst.data(), dst.size(), &value, sizeof value,
                                      "update_fill_node");
    });
  }
}

/// Makes host node `node` (made by add_host_node) of `exec` call `function()` instead: the
/// graph's callable adopts it, so that it lives as long as the graph's executable graphs.
template <class F>
void update_host_node(graph_exec_ref exec, graph_node node, F&& function) {
  if constexpr (detail::host_node_callable_v<F>())
    detail::update_host_node(exec, node, std::forward<F>(function), nullptr);
}
/// The same on an owner, which frees a replaced callable once the launches that may call it are
/// done (the new one has run). Refused once the owner was updated as a whole (its host nodes then
/// call the other graph's callables; through a ref, or after a raw update, curt cannot tell).
template <class F>
void update_host_node(const graph_exec& exec, graph_node node, F&& function) {
  const detail::exec_state& state = detail::graph_access::state(exec);
  if (CURT_UNLIKELY(state.updated))
    detail::raise(cudaErrorInvalidValue, "curt::update_host_node",
                  "this executable graph was updated as a whole (graph_exec::update): its host "
                  "nodes call the callables of the graph it was updated from. Update that graph's "
                  "host node and update from it again, or instantiate anew. Nothing was changed",
                  __FILE__, __LINE__);
  if constexpr (detail::host_node_callable_v<F>())
    detail::update_host_node(graph_exec_ref(exec), node, std::forward<F>(function), &state);
}
/// Enables or disables kernel, memcpy or memset node `node` of `exec` for later launches.
inline void set_node_enabled(graph_exec_ref exec, graph_node node, bool enabled) {
  cudaGraphExec_t e = detail::prepare_update(exec, node, "curt::set_node_enabled");
  detail::check_enable_type(node.type(), enabled ? "curt::set_node_enabled(true)"
                                                 : "curt::set_node_enabled(false)");
  detail::context_scope in(detail::any_context);
  detail::check(cudaGraphNodeSetEnabled(e, node.get(), enabled ? 1u : 0u),
                "cudaGraphNodeSetEnabled", {"exec", "node", {"enabled", enabled}}, __FILE__,
                __LINE__);
}
/// Whether kernel, memcpy or memset node `node` of `exec` is enabled.
inline bool node_enabled(graph_exec_ref exec, graph_node node) {
  cudaGraphExec_t e = detail::prepare_update(exec, node, "curt::node_enabled");
  detail::check_enable_type(node.type(), "curt::node_enabled");
  unsigned enabled = 0;
  detail::context_scope in(detail::any_context);
  detail::check(cudaGraphNodeGetEnabled(e, node.get(), &enabled),
                "cudaGraphNodeGetEnabled(exec, node)", __FILE__, __LINE__);
  return enabled != 0;
}

}  // namespace curt
