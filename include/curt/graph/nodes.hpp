// curt/graph/nodes.hpp: graphs built node by node, each node after the dependencies named when it
// is added (node_dependencies, graph/node.hpp); the kinds themselves are in graph/node_kinds.hpp.
//
//   auto in = curt::add_memcpy_node(g, {}, device_x, host_x);              // typed, sizes checked
//   auto k = curt::add_kernel_node(g, {in}, config, saxpy, 2.0f, x, y, n);  // checked like launch
//   curt::add_kernel_node(g, {curt::programmatic_edge(k)}, config, consumer, y, n);
//   curt::add_host_node(g, {k}, [&] { ++launches; });                      // any callable
//
// What curt can tell is wrong is refused before CUDA is called; what CUDA refuses is explained.
// A refused addition leaves the graph as it was.
#pragma once

#include <curt/core/entries.hpp>
#include <curt/graph/node.hpp>

namespace curt {

/// An allocation node, and its allocation (the same at every launch) as a typed range.
template <class T>
class allocation_node : public graph_node {
 public:
  allocation_node() noexcept = default;  ///< empty, or `node` and its `size` elements at `data` @{
  allocation_node(graph_node node, T* data, std::size_t size) noexcept
      : graph_node(node), data_(data), size_(size) {}  ///@}

  T* data() const noexcept { return data_; }  ///< the allocation's address, fixed for every launch
  std::size_t size() const noexcept { return size_; }                    ///< its number of elements
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }  ///< size() * sizeof(T)
  /// As any span-like view of its elements (cuda::std::span<T>): a kernel argument.
  template <class S, detail::span_like_of<S, T> = 0>
  operator S() const {  // NOLINT: implicit, as curt's buffers convert
    return S(data_, size_);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

namespace detail {

// The graph's handle for `function` ("curt::add_kernel_node"); refuses null dependencies.
inline cudaGraph_t prepare_node(graph_ref g, const node_dependencies& dependencies,
                                const char* function) {
  if (CURT_UNLIKELY(!g.valid())) (void)graph_access::handle(g, fmt("%s()", function + 6).c_str());
  check_dependencies(dependencies, function);
  return g.get();
}
// Why CUDA refused to add a node, where it can be told. Needs a context.
CURT_COLD inline std::string explain_add_node_failure(cudaGraph_t graph,
                                                      const node_dependencies& dependencies,
                                                      const cudaGraphNodeParams& p) {
  std::size_t n = 0;
  bool listed = cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess;
  entries<cudaGraphNode_t> nodes(n);
  listed = listed && (n == 0 || cudaGraphGetNodes(graph, nodes.data(), &n) == cudaSuccess);
  const cudaGraphEdgeData* data = dependencies.data();
  for (std::size_t i = 0; i < dependencies.size(); ++i) {
    const cudaGraphNode_t d = dependencies.nodes()[i];
    const std::string which = fmt("dependency %zu", i);
    for (std::size_t j = 0; j < i; ++j)
      if (dependencies.nodes()[j] == d)
        return fmt("%s repeats dependency %zu: name each node once", which.c_str(), j);
    bool in_graph = !listed;
    for (cudaGraphNode_t node : nodes) in_graph = in_graph || node == d;
    if (!in_graph)
      return fmt("%s (%s) is not a node of this graph", which.c_str(), describe_node(d).c_str());
    cudaGraphNodeType from = cudaGraphNodeTypeCount;
    if (!data || (data[i].type == cudaGraphDependencyTypeDefault && !data[i].from_port)) continue;
    if (cudaGraphNodeGetType(d, &from) != cudaSuccess) from = cudaGraphNodeTypeCount;
    if (from != cudaGraphNodeTypeKernel || p.type != cudaGraphNodeTypeKernel)
      return fmt("%s is a programmatic or launch-completion edge, which joins two kernel nodes; "
                 "here it joins %s node -> %s node", which.c_str(), node_type_name(from),
                 node_type_name(p.type));
  }
  const single_exec_nodes child = p.type == cudaGraphNodeTypeGraph ? census(p.graph.graph)
                                                                   : single_exec_nodes{};
  if (child.conditional)
    return fmt("the child graph holds %zu conditional node(s), and CUDA cannot embed such a graph "
               "as a child: add its work to this graph directly (its conditional nodes too)",
               child.conditional);
  if (child.memory)
    return fmt("the child graph holds %zu memory allocation or free node(s), which CUDA embeds "
               "only when the parent takes the child over, and only once: pass it as "
               "std::move(child) (a curt::graph)", child.memory);
  if (!allowed_in_conditional_body(p.type))
    return fmt("if this graph is a conditional body: a conditional body holds only %s, in its "
               "child graphs too", kinds_with(&node_kind::in_body).c_str());
  return {};
}
/// Adds the node `params` describes (cudaGraphAddNode, with edge data).
inline cudaGraphNode_t add_graph_node(cudaGraph_t graph, const node_dependencies& dependencies,
                                      cudaGraphNodeParams& params, const char* function) {
  cudaGraphNode_t node = nullptr;
  const cudaError_t status = call_in([&] {
    return cudaGraphAddNode(&node, graph, dependencies.nodes(), dependencies.data(),
                            dependencies.size(), &params);
  }, any_context);
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_error(
        make_error_code(status), describe_node_params(function, params), __FILE__, __LINE__, [&] {
          return diagnose([&] { return explain_add_node_failure(graph, dependencies, params); },
                          any_context);
        });
  return node;
}
template <class Build>
graph_node add_node(graph_ref g, const node_dependencies& dependencies, const char* function,
                    Build&& build) {
  cudaGraph_t graph = prepare_node(g, dependencies, function);
  cudaGraphNodeParams params = build();
  return add_graph_node(graph, dependencies, params, function);
}
// Adds the kernel node and sets the configuration's attributes; one CUDA refuses removes it again.
inline cudaGraphNode_t add_kernel(cudaGraph_t graph, const node_dependencies& dependencies,
                                  const launch_config& config, cudaGraphNodeParams& params,
                                  const char* function) {
  context_scope in(any_context);
  cudaGraphNode_t node = add_graph_node(graph, dependencies, params, function);
  for (unsigned i = 0; i < config.attribute_count(); ++i) {
    const cudaLaunchAttribute& a = config.attributes()[i];
    cudaError_t status = attribute_is_off(a) ? cudaSuccess
                                             : cudaGraphKernelNodeSetAttribute(node, a.id, &a.val);
    if (CURT_LIKELY(status == cudaSuccess)) continue;
    (void)cudaGraphDestroyNode(node);
    throw_error(make_error_code(status),
                describe_call("cudaGraphKernelNodeSetAttribute", {"node", {"attribute", a.id}}),
                __FILE__, __LINE__,
                "the attribute was refused, so the node was removed again: the graph is as it was");
  }
  return node;
}
/// Makes kernel node `node` device-updatable (the flag first: copies are checked from then on).
inline cudaError_t set_device_updatable(cudaGraphNode_t node) noexcept {
  device_updatable_nodes_made().store(true, order::relaxed);
  cudaLaunchAttributeValue value{};
  value.deviceUpdatableKernelNode.deviceUpdatable = 1;
  return cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                         &value);
}
/// The handle device code changes device-updatable kernel node `node` by. Needs a context.
inline cudaGraphDeviceNode_t device_handle_of(cudaGraphNode_t node) {
  cudaLaunchAttributeValue value{};
  check(cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode, &value),
        "cudaGraphKernelNodeGetAttribute(node, device-updatable)", __FILE__, __LINE__);
  return value.deviceUpdatableKernelNode.devNode;
}
template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies, device d,
                                       std::size_t count, const device* first, const device* last) {
  static_assert(std::is_trivially_copyable_v<T>,
                "curt::add_allocation_node: the elements must be trivially copyable (nothing "
                "constructs or destroys them)");
  const char* function = "curt::add_allocation_node";
  cudaGraph_t graph = prepare_node(g, dependencies, function);
  if (CURT_UNLIKELY(count == 0 || count > static_cast<std::size_t>(-1) / sizeof(T)))
    raise(cudaErrorInvalidValue,
          fmt("curt::add_allocation_node(%zu elements of %zu bytes)", count, sizeof(T)),
          count == 0 ? "an allocation node allocates at least one element"
                     : "the size in bytes overflows",
          __FILE__, __LINE__);
  entries<cudaMemAccessDesc> access;  // read and write for each other device, once
  for (const device* other = first; other != last; ++other) {
    bool listed = *other == d;
    for (const cudaMemAccessDesc& a : access) listed = listed || a.location.id == other->ordinal();
    if (!listed)
      access.push_back(
          {{cudaMemLocationTypeDevice, other->ordinal()}, cudaMemAccessFlagsProtReadWrite});
  }
  cudaGraphNodeParams p =
      allocation_node_params(d.ordinal(), count * sizeof(T), access.data(), access.size());
  graph_node node = add_graph_node(graph, dependencies, p, function);
  return allocation_node<T>(node, static_cast<T*>(p.alloc.dptr), count);
}
inline graph_node add_child(graph_ref g, const node_dependencies& dependencies, graph_ref child,
                            cudaGraphChildGraphNodeOwnership ownership) {
  const char* function = "curt::add_child_graph_node";
  cudaGraph_t graph = prepare_node(g, dependencies, function);
  cudaGraph_t inner = graph_access::handle(child, "add_child_graph_node() (the child graph)");
  cudaGraphNodeParams p = child_node_params(inner, ownership);
  if (ownership == cudaGraphChildGraphOwnershipClone) {
    context_scope in(any_context);
    refuse_device_updatable_copy(inner, "curt::add_child_graph_node(child graph, copied)",
                                 "move the graph in instead, curt::add_child_graph_node(parent, "
                                 "dependencies, std::move(child)): the handles then name the "
                                 "parent's nodes");
  }
  return add_graph_node(graph, dependencies, p, function);
}

}  // namespace detail

/// Adds a kernel node running `kernel` with `config` on `args` (checked as curt::launch does).
template <class... Params, class... Args>
graph_node add_kernel_node(graph_ref g, const node_dependencies& dependencies,
                           const launch_config& config, void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::add_kernel_node: the number of arguments differs from the kernel's "
                "parameters");
  if constexpr (detail::arguments_fit<std::tuple<Params...>, std::tuple<Args&&...>>()) {
    const char* function = "curt::add_kernel_node";
    cudaGraph_t graph = detail::prepare_node(g, dependencies, function);
    detail::check_kernel_node_config(config, function);
    detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
    cudaGraphNodeParams p = detail::kernel_node_params(
        config, reinterpret_cast<const void*>(kernel), arguments.pointers);
    return detail::add_kernel(graph, dependencies, config, p, function);
  }
  return {};
}

#if defined(__CUDACC__)
/// The same for a functor or device lambda (the kernel curt::kernel_for(function, args...)).
template <class Function, class... Args, detail::if_functor<Function> = 0>
graph_node add_kernel_node(graph_ref g, const node_dependencies& dependencies,
                           const launch_config& config, Function&& function, Args&&... args) {
  return add_kernel_node(g, dependencies, config, kernel_for(function, std::forward<Args>(args)...),
                         std::forward<Function>(function), std::forward<Args>(args)...);
}
#endif

/// Makes kernel node `node` updatable from device code for good; its handle for device code.
inline cudaGraphDeviceNode_t make_device_updatable(graph_node node) {
  detail::require_node(node, "curt::make_device_updatable");
  detail::context_scope in(detail::any_context);
  detail::check(detail::set_device_updatable(node.get()),
                "cudaGraphKernelNodeSetAttribute(node, device-updatable)", __FILE__, __LINE__);
  return detail::device_handle_of(node.get());
}
/// Adds a node copying src into dst at every launch: one element type, equal non-zero sizes.
template <class Dst, class Src>
graph_node add_memcpy_node(graph_ref g, const node_dependencies& dependencies, Dst&& dst,
                           Src&& src) {
  if constexpr (detail::memcpy_node_ranges<Dst, Src>()) {
    detail::check_kept_range<Dst>(dst, "curt::add_memcpy_node: the destination");
    detail::check_kept_range<Src>(src, "curt::add_memcpy_node: the source");
    return detail::add_node(g, dependencies, "curt::add_memcpy_node", [&] {
      return detail::typed_memcpy_params(dst, src, "add_memcpy_node");
    });
  }
  return {};
}
/// Adds a node setting every byte of dst's elements to `byte` at every launch.
template <class Dst>
graph_node add_memset_node(graph_ref g, const node_dependencies& dependencies, Dst&& dst,
                           unsigned char byte) {
  if constexpr (detail::memcpy_node_ranges<Dst>()) {
    detail::check_kept_range<Dst>(dst, "curt::add_memset_node: the destination");
    return detail::add_node(g, dependencies, "curt::add_memset_node", [&] {
      return detail::fill_node_params(dst.data(), dst.size() * sizeof(*dst.data()), &byte, 1,
                                      "add_memset_node");
    });
  }
  return {};
}
/// Adds a memset node setting every element of dst to `value` (bytes all equal, or 2 or 4 bytes).
template <class Dst>
graph_node add_fill_node(graph_ref g, const node_dependencies& dependencies, Dst&& dst,
                         const detail::range_value_t<Dst>& value) {
  if constexpr (detail::memcpy_node_ranges<Dst>()) {
    detail::check_kept_range<Dst>(dst, "curt::add_fill_node: the destination");
    return detail::add_node(g, dependencies, "curt::add_fill_node", [&] {
      return detail::fill_node_params(dst.data(), dst.size(), &value, sizeof value,
                                      "add_fill_node");
    });
  }
  return {};
}
/// Adds a node calling `function()` (no CUDA calls) on a runtime thread at every launch. The
/// graph owns it; what it throws goes to the error handler as a host_function_error.
template <class F>
graph_node add_host_node(graph_ref g, const node_dependencies& dependencies, F&& function) {
  if constexpr (detail::host_node_callable_v<F>()) {
    const char* name = "curt::add_host_node";
    cudaGraph_t graph = detail::prepare_node(g, dependencies, name);
    auto owned = std::make_unique<detail::host_node_task<F>>(std::forward<F>(function), 0);
    detail::context_scope in(detail::any_context);
    cudaUserObject_t object = nullptr;
    auto& task = detail::retain_in_graph(graph, std::move(owned), &object);
    task.function.object = object;  // a whole update of an owner keeps it alive across
    cudaGraphNodeParams p = detail::host_node_params(&task.function);
    return detail::add_graph_node(graph, dependencies, p, name);
  }
  return {};
}
/// Adds a node running a copy of `child` (not of one with memory or device-updatable nodes).
inline graph_node add_child_graph_node(graph_ref g, const node_dependencies& dependencies,
                                       graph_ref child) {
  return detail::add_child(g, dependencies, child, cudaGraphChildGraphOwnershipClone);
}
/// Adds a node running `child` itself, which the parent takes over (unless CUDA refuses).
inline graph_node add_child_graph_node(graph_ref g, const node_dependencies& dependencies,
                                       graph&& child) {
  graph_node node = detail::add_child(g, dependencies, child, cudaGraphChildGraphOwnershipMove);
  (void)child.release();  // the parent owns it now
  return node;
}
/// Adds a node that does nothing: a join point, or a placeholder.
inline graph_node add_empty_node(graph_ref g, const node_dependencies& dependencies) {
  return detail::add_node(g, dependencies, "curt::add_empty_node",
                          [] { return detail::node_params(cudaGraphNodeTypeEmpty); });
}
/// Adds a node recording `e` at every launch (`e` outlives the graph's use of it).
inline graph_node add_event_record_node(graph_ref g, const node_dependencies& dependencies,
                                        event_ref e) {
  return detail::add_node(g, dependencies, "curt::add_event_record_node", [&] {
    return detail::event_node_params(cudaGraphNodeTypeEventRecord, e.get());
  });
}
/// Adds a node waiting for the work `e` last captured, at every launch (`e` outlives the graph).
inline graph_node add_event_wait_node(graph_ref g, const node_dependencies& dependencies,
                                      event_ref e) {
  return detail::add_node(g, dependencies, "curt::add_event_wait_node", [&] {
    return detail::event_node_params(cudaGraphNodeTypeWaitEvent, e.get());
  });
}
/// Adds a node allocating `count` elements of T on device `d` at every launch, at a fixed address
/// (freed by a free node, cudaFreeAsync, or the next auto_free_on_launch launch), mapped for the
/// kernels of `also_accessible_from` too (each with a peer path to `d`).
template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies,
                                       device d, std::size_t count,
                                       std::initializer_list<device> also_accessible_from = {}) {
  return detail::add_allocation_node<T>(g, dependencies, d, count, also_accessible_from.begin(),
                                        also_accessible_from.end());
}
template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies,
                                       device d, std::size_t count,
                                       const std::vector<device>& also_accessible_from) {
  return detail::add_allocation_node<T>(g, dependencies, d, count, also_accessible_from.data(),
                                        also_accessible_from.data() + also_accessible_from.size());
}
/// Adds a node freeing `pointer`, which an allocation node allocated, at every launch.
inline graph_node add_free_node(graph_ref g, const node_dependencies& dependencies,
                                const void* pointer) {
  return detail::add_node(g, dependencies, "curt::add_free_node", [&] {
    if (CURT_UNLIKELY(pointer == nullptr))
      detail::raise(cudaErrorInvalidValue, "curt::add_free_node(null)",
                    "there is nothing to free at a null pointer", __FILE__, __LINE__);
    return detail::free_node_params(pointer);
  });
}
template <class T>
graph_node add_free_node(graph_ref g, const node_dependencies& dependencies,
                         const allocation_node<T>& allocation) {
  return add_free_node(g, dependencies, static_cast<const void*>(allocation.data()));
}

}  // namespace curt
