// curt/graph_nodes.hpp: graphs built node by node (cudaGraphAddNode with edge data), each node
// after the dependencies named when it is added.
//
//   curt::graph g = curt::graph::create();
//   auto in = curt::add_memcpy_node(g, {}, device_x, host_x);              // typed, sizes checked
//   auto k = curt::add_kernel_node(g, {in}, config, saxpy, 2.0f, x, y, n);  // checked like launch
//   auto next = curt::add_kernel_node(g, {curt::programmatic_edge(k)}, config, consumer, y, n);
//   curt::add_host_node(g, {next}, [&] { ++launches; });                   // any callable
//   curt::graph_exec exec = g.instantiate();
//
// - Every add_*_node(graph, dependencies, ...) returns the new node's graph_node and takes what
//   it waits for as node_dependencies: nodes, and edges with data (programmatic_edge,
//   launch_completion_edge between kernel nodes); see <curt/graph_node.hpp>.
// - Kernel nodes take a __global__ function or (nvcc) a functor / device lambda with arguments
//   checked against its parameters at compile time, as curt::launch does, and a launch_config's
//   grid, block, dynamic shared memory and the attributes CUDA 13.0 takes on kernel nodes
//   (clusters, preferred clusters, cooperative, priority, memory sync domain, access policy
//   window). Attributes kernel nodes do not take are refused before CUDA is called, saying what
//   to use instead (programmatic serialization and events are edges in a graph).
// - Memcpy, memset and fill nodes take typed ranges as curt::copy and curt::fill do (same element
//   type, equal sizes, no temporary that owns its elements: the node reads and writes them at every
//   launch).
// - A host node's callable is owned by the graph (a user object): it lives as long as the graph
//   and its executable graphs, and is destroyed on a user thread (curt's next drain point: a
//   synchronize() of a stream, event or device, a stream's destructor). It must not call CUDA. What
//   it throws goes to curt's error handler as a curt::host_function_error ("in a graph"): a graph
//   has no stream to rethrow on, as for a host_call captured into a graph.
// - Child graph nodes copy the child, or take it over when it is moved in (std::move(child)):
//   CUDA embeds a child that holds memory allocation or free nodes only that way.
// - Memory allocation nodes give the address (fixed for the graph's life) as a typed range.
// - A conditional body (<curt/graph_conditional.hpp>) holds only kernel, empty, child-graph,
//   memset, memcpy and conditional nodes: a host, event or memory node added to a body curt made
//   is refused before CUDA is called.
//
// Per-node updates of an executable graph and enabling nodes: <curt/graph_node_update.hpp>.
//
// Contexts: as for the other graph calls, on a thread with no current context nodes are added in
// the primary context of the runtime's current device (kernel nodes belong to that context).
// A refused addition leaves the graph as it was (a host node's callable stays with the graph).
#pragma once

#include <curt/copy.hpp>
#include <curt/detail/graph_node_add.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_node.hpp>
#include <curt/launch.hpp>
#include <curt/peer.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt {

/// What a memory allocation node gives: the node, and the address of its allocation (the same
/// at every launch, for the graph's life) as a typed range: hand it to memcpy, memset and kernel
/// nodes that come after the node (and before its free node), or to curt::copy.
template <class T>
class allocation_node : public graph_node {
 public:
  allocation_node() noexcept = default;
  allocation_node(graph_node node, T* data, std::size_t size) noexcept
      : graph_node(node), data_(data), size_(size) {}

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }

  /// As any span-like view of its elements (cuda::std::span<T>, std::span<T>): a kernel argument.
  template <class S, detail::span_like_of<S, T> = 0>
  operator S() const {  // NOLINT: implicit, as curt's buffers convert
    return S(data_, size_);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// ---- kernel nodes ------------------------------------------------------------------------------

/// Adds a kernel node running `kernel` with `config` (grid, block, dynamic shared memory, and
/// the attributes kernel nodes take) on `args`, which are checked against its parameters at
/// compile time (as curt::launch checks them) and copied into the node. Attributes kernel nodes
/// do not take are refused before CUDA is called (see the file comment).
template <class... Params, class... Args>
graph_node add_kernel_node(graph_ref g, const node_dependencies& dependencies,
                           const launch_config& config, void (*kernel)(Params...),
                           Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::add_kernel_node: the number of arguments differs from the kernel's "
                "parameters");
  if constexpr (sizeof...(Params) == sizeof...(Args)) {
    constexpr bool convertible =
        detail::check_arguments<std::tuple<Params...>, std::tuple<Args&&...>>(
            std::index_sequence_for<Params...>{});
    if constexpr (convertible) {  // otherwise only curt's static_assert speaks
      cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeKernel,
                                               "curt::add_kernel_node", "add_kernel_node()");
      detail::check_kernel_node_config(config, "curt::add_kernel_node");
      detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
      cudaGraphNodeParams p = detail::kernel_node_params(
          config, reinterpret_cast<const void*>(kernel), arguments.pointers);
      return detail::add_kernel_with_attributes(graph, dependencies, config, p);
    }
  }
  return {};
}

#if defined(__CUDACC__)
/// Adds a kernel node in which every thread calls function(args...): a functor or device lambda,
/// through the same kernel curt::launch uses (curt::kernel_for(function, args...)).
template <class Function, class... Args,
          std::enable_if_t<!std::is_pointer_v<std::decay_t<Function>> &&
                               !std::is_function_v<std::remove_reference_t<Function>>,
                           int> = 0>
graph_node add_kernel_node(graph_ref g, const node_dependencies& dependencies,
                           const launch_config& config, Function&& function, Args&&... args) {
  return add_kernel_node(g, dependencies, config, kernel_for(function, args...),
                         std::forward<Function>(function), std::forward<Args>(args)...);
}
#endif

/// Makes kernel node `node` updatable from device code (cudaLaunchAttributeDeviceUpdatableKernelNode)
/// and returns the handle device code gives cudaGraphKernelNodeSetParam, SetEnabled and
/// SetGridDim. There is no way back; a graph holding such a node can be instantiated only once
/// at a time, never updated as a whole, and its executable graph must be uploaded before device
/// code updates the node.
inline cudaGraphDeviceNode_t make_device_updatable(graph_node node) {
  detail::require_node(node, "curt::make_device_updatable");
  detail::current_device_scope in_context;
  detail::check(detail::set_device_updatable(node.get()),
                "cudaGraphKernelNodeSetAttribute(node, device-updatable)", __FILE__, __LINE__);
  cudaLaunchAttributeValue out{};
  detail::check(
      cudaGraphKernelNodeGetAttribute(node.get(), cudaLaunchAttributeDeviceUpdatableKernelNode, &out),
      "cudaGraphKernelNodeGetAttribute(node, device-updatable)", __FILE__, __LINE__);
  return out.deviceUpdatableKernelNode.devNode;
}

// ---- memcpy, memset and fill nodes ---------------------------------------------------------------

namespace detail {

/// The node copying src into dst (equal, non-zero sizes), for `operation` ("add_memcpy_node").
template <class Dst, class Src>
cudaGraphNodeParams typed_memcpy_params(Dst& dst, const Src& src, const char* operation) {
  using T = range_value_t<Dst>;
  std::size_t n = static_cast<std::size_t>(dst.size());
  if (CURT_UNLIKELY(n != static_cast<std::size_t>(src.size())))
    throw_size_mismatch(operation, n, static_cast<std::size_t>(src.size()), sizeof(T));
  if (CURT_UNLIKELY(n == 0))
    raise(cudaErrorInvalidValue, std::string("curt::") + operation + "(0 elements)",
          "a memcpy node copies at least one element (CUDA refuses an empty copy); add an empty "
          "node where a placeholder is needed",
          __FILE__, __LINE__);
  return memcpy_node_params(static_cast<void*>(dst.data()), static_cast<const void*>(src.data()),
                            n * sizeof(T));
}

}  // namespace detail

/// Adds a node copying src into dst (cudaMemcpyDefault: host, device, managed memory alike) at
/// every launch. As curt::copy: same element type, exactly as many elements (else a cuda_error
/// naming both sizes, before CUDA is called), and no temporary that owns its elements (the node
/// reads and writes them at every launch). An empty copy is refused.
template <class Dst, class Src>
graph_node add_memcpy_node(graph_ref g, const node_dependencies& dependencies, Dst&& dst,
                           Src&& src) {
  if constexpr (detail::copyable_ranges<Dst, Src>()) {
    detail::check_kept_range<Dst>(dst, "curt::add_memcpy_node: the destination");
    detail::check_kept_range<Src>(src, "curt::add_memcpy_node: the source");
    cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeMemcpy,
                                             "curt::add_memcpy_node", "add_memcpy_node()");
    cudaGraphNodeParams p = detail::typed_memcpy_params(dst, src, "add_memcpy_node");
    detail::current_device_scope in_context;
    return detail::add_graph_node(graph, dependencies, p, "curt::add_memcpy_node");
  }
  return {};
}

/// Adds a node setting every byte of dst's elements to `byte` at every launch (memory the device
/// can address). An empty range is refused.
template <class Dst>
graph_node add_memset_node(graph_ref g, const node_dependencies& dependencies, Dst&& dst,
                           unsigned char byte) {
  static_assert(detail::is_range_v<Dst>,
                "curt::add_memset_node: the destination must be a contiguous range with data() "
                "and size()");
  if constexpr (detail::is_range_v<Dst>) {
    using E = detail::element_of_t<Dst>;
    static_assert(!std::is_const_v<E>, "curt::add_memset_node: the destination's elements are const");
    detail::check_kept_range<Dst>(dst, "curt::add_memset_node: the destination");
    cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeMemset,
                                             "curt::add_memset_node", "add_memset_node()");
    cudaGraphNodeParams p = detail::fill_node_params(
        static_cast<void*>(dst.data()), static_cast<std::size_t>(dst.size()) * sizeof(E), &byte,
        1, "add_memset_node");
    detail::current_device_scope in_context;
    return detail::add_graph_node(graph, dependencies, p, "curt::add_memset_node");
  }
  return {};
}

/// Adds a node setting every element of dst to `value` at every launch: a memset node, so the
/// value must be one a memset writes (its bytes all equal, or a 2- or 4-byte value with dst
/// aligned to its elements); anything else is refused before CUDA is called (a kernel node can
/// fill it).
template <class Dst>
graph_node add_fill_node(graph_ref g, const node_dependencies& dependencies, Dst&& dst,
                         const detail::range_value_t<Dst>& value) {
  static_assert(detail::is_range_v<Dst>,
                "curt::add_fill_node: the destination must be a contiguous range with data() and "
                "size()");
  if constexpr (detail::is_range_v<Dst>) {
    using E = detail::element_of_t<Dst>;
    static_assert(!std::is_const_v<E>, "curt::add_fill_node: the destination's elements are const");
    static_assert(std::is_trivially_copyable_v<std::remove_cv_t<E>>,
                  "curt::add_fill_node: the elements must be trivially copyable");
    detail::check_kept_range<Dst>(dst, "curt::add_fill_node: the destination");
    cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeMemset,
                                             "curt::add_fill_node", "add_fill_node()");
    cudaGraphNodeParams p = detail::fill_node_params(
        static_cast<void*>(dst.data()), static_cast<std::size_t>(dst.size()), &value, sizeof(E),
        "add_fill_node");
    detail::current_device_scope in_context;
    return detail::add_graph_node(graph, dependencies, p, "curt::add_fill_node");
  }
  return {};
}

// ---- host nodes ---------------------------------------------------------------------------------

/// Adds a node that calls `function()` on a runtime thread at every launch. The graph owns
/// `function` (moved in, or copied from an lvalue): it lives as long as the graph and its
/// executable graphs, and is destroyed on a user thread, so its captures may own CUDA resources.
/// It must not call CUDA. What it throws goes to the error handler (curt::set_error_handler) as a
/// curt::host_function_error whose original() is the exception; the launch goes on. The
/// executable graphs of one graph share the callable: launched at once, they may call it at once.
template <class F>
graph_node add_host_node(graph_ref g, const node_dependencies& dependencies, F&& function) {
  if constexpr (detail::host_node_callable<F>()) {
    cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeHost,
                                             "curt::add_host_node", "add_host_node()");
    auto owned = std::make_unique<detail::graph_host_task_for<F>>(std::forward<F>(function));
    detail::current_device_scope in_context;
    // The graph owns the callable from here, also if the node cannot be added.
    detail::graph_host_callable& callable = detail::retain_in_graph(graph, std::move(owned));
    cudaGraphNodeParams p = detail::host_node_params(&callable);
    return detail::add_graph_node(graph, dependencies, p, "curt::add_host_node");
  }
  return {};
}

// ---- child graph, empty, event and memory nodes -------------------------------------------------

/// Adds a node running a copy of `child` (cudaGraphChildGraphOwnershipClone): `child` stays the
/// caller's, and changing it later does not change the node. CUDA copies no graph that holds
/// memory allocation or free nodes (move such a child in) or conditional nodes (never a child);
/// curt copies none that holds device-updatable kernel nodes (move it in: their device handles
/// name the original's nodes, not the copy's).
inline graph_node add_child_graph_node(graph_ref g, const node_dependencies& dependencies,
                                       graph_ref child) {
  return detail::add_child(g, dependencies, child, cudaGraphChildGraphOwnershipClone);
}
/// Adds a node running `child` itself, which the parent takes over (cudaGraphChildGraphOwnershipMove):
/// the owner is released and the child is destroyed with the parent. The way to embed a child
/// that holds memory allocation or free nodes, or device-updatable kernel nodes (their handles
/// keep naming them). If CUDA refuses, `child` keeps its graph.
inline graph_node add_child_graph_node(graph_ref g, const node_dependencies& dependencies,
                                       graph&& child) {
  graph_node node = detail::add_child(g, dependencies, child, cudaGraphChildGraphOwnershipMove);
  (void)child.release();  // the parent owns it now
  return node;
}

/// Adds a node that does nothing: a join point, or a placeholder.
inline graph_node add_empty_node(graph_ref g, const node_dependencies& dependencies) {
  cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeEmpty,
                                           "curt::add_empty_node", "add_empty_node()");
  cudaGraphNodeParams p = detail::node_params(cudaGraphNodeTypeEmpty);
  detail::current_device_scope in_context;
  return detail::add_graph_node(graph, dependencies, p, "curt::add_empty_node");
}

/// Adds a node recording `e` at every launch, once its dependencies are done: streams and other
/// graphs can wait on it. The event must outlive the graph's use of it.
inline graph_node add_event_record_node(graph_ref g, const node_dependencies& dependencies,
                                        event_ref e) {
  cudaGraph_t graph =
      detail::prepare_node(g, dependencies, cudaGraphNodeTypeEventRecord,
                           "curt::add_event_record_node", "add_event_record_node()");
  cudaGraphNodeParams p = detail::node_params(cudaGraphNodeTypeEventRecord);
  p.eventRecord.event = e.get();
  detail::current_device_scope in_context;
  return detail::add_graph_node(graph, dependencies, p, "curt::add_event_record_node");
}

/// Adds a node that waits, at every launch, for the work `e` last captured (as
/// cudaStreamWaitEvent does) before the nodes after it run. The event must outlive the graph's
/// use of it.
inline graph_node add_event_wait_node(graph_ref g, const node_dependencies& dependencies,
                                      event_ref e) {
  cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeWaitEvent,
                                           "curt::add_event_wait_node", "add_event_wait_node()");
  cudaGraphNodeParams p = detail::node_params(cudaGraphNodeTypeWaitEvent);
  p.eventWait.event = e.get();
  detail::current_device_scope in_context;
  return detail::add_graph_node(graph, dependencies, p, "curt::add_event_wait_node");
}

namespace detail {

// The access descriptors of an allocation node on `resident` for `accessors`: the resident
// device and repeats are left out (CUDA maps it for its own device), and a device with no peer
// path to it is refused before CUDA is called, naming both.
inline std::vector<cudaMemAccessDesc> allocation_access(device resident, const device* first,
                                                        const device* last) {
  std::vector<cudaMemAccessDesc> access;
  for (const device* d = first; d != last; ++d) {
    if (*d == resident) continue;
    bool repeated = false;
    for (const cudaMemAccessDesc& a : access) repeated = repeated || a.location.id == d->ordinal();
    if (repeated) continue;
    if (CURT_UNLIKELY(!can_access_peer(*d, resident)))
      raise(cudaErrorPeerAccessUnsupported,
            "curt::add_allocation_node(device " + std::to_string(resident.ordinal()) +
                ", accessible from device " + std::to_string(d->ordinal()) + ")",
            "device " + std::to_string(d->ordinal()) + " has no peer path to device " +
                std::to_string(resident.ordinal()) + " (cudaDeviceCanAccessPeer): its kernels "
                "cannot be given this memory",
            __FILE__, __LINE__);
    cudaMemAccessDesc a{};
    a.location.type = cudaMemLocationTypeDevice;
    a.location.id = d->ordinal();
    a.flags = cudaMemAccessFlagsProtReadWrite;  // the only access allocation nodes take
    access.push_back(a);
  }
  return access;
}

template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies,
                                       device d, std::size_t count, const device* first,
                                       const device* last) {
  static_assert(std::is_trivially_copyable_v<T>,
                "curt::add_allocation_node: the elements must be trivially copyable (nothing "
                "constructs or destroys them)");
  cudaGraph_t graph = prepare_node(g, dependencies, cudaGraphNodeTypeMemAlloc,
                                   "curt::add_allocation_node", "add_allocation_node()");
  if (CURT_UNLIKELY(count == 0 || count > static_cast<std::size_t>(-1) / sizeof(T)))
    raise(cudaErrorInvalidValue,
          "curt::add_allocation_node(" + std::to_string(count) + " elements of " +
              std::to_string(sizeof(T)) + " bytes)",
          count == 0 ? "an allocation node allocates at least one element"
                     : "the size in bytes overflows",
          __FILE__, __LINE__);
  const std::vector<cudaMemAccessDesc> access = allocation_access(d, first, last);
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeMemAlloc);
  p.alloc.poolProps.allocType = cudaMemAllocationTypePinned;
  p.alloc.poolProps.handleTypes = cudaMemHandleTypeNone;
  p.alloc.poolProps.location.type = cudaMemLocationTypeDevice;
  p.alloc.poolProps.location.id = d.ordinal();
  p.alloc.accessDescs = access.empty() ? nullptr : access.data();
  p.alloc.accessDescCount = access.size();
  p.alloc.bytesize = count * sizeof(T);
  current_device_scope in_context;
  graph_node node = add_graph_node(graph, dependencies, p, "curt::add_allocation_node");
  return allocation_node<T>(node, static_cast<T*>(p.alloc.dptr), count);
}

}  // namespace detail

/// Adds a node allocating `count` elements of T in device `d`'s memory at every launch
/// (cudaGraphNodeTypeMemAlloc). The address is fixed when the node is made and returned with it;
/// work that uses the memory must come after this node and before the node (or the call) that
/// frees it: add_free_node in this graph, a later graph, cudaFreeAsync, or the next launch of an
/// executable graph instantiated with instantiate_flags::auto_free_on_launch. An executable graph
/// whose allocation is still live is refused another launch without that flag. A graph with
/// memory nodes has one executable graph at a time, is never cloned, and becomes a child graph
/// only by moving in (CUDA's rules).
template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies,
                                       device d, std::size_t count) {
  return detail::add_allocation_node<T>(g, dependencies, d, count, nullptr, nullptr);
}
/// As above, and mapped for the kernels of every device in `also_accessible_from` too (read and
/// write; Programming Guide 4.2.5.6.1): a graph's kernel nodes on another device may use it. `d`
/// needs no entry (one is ignored, as are repeats); a device with no peer path to `d` is refused,
/// naming both. Peer access need not be enabled. Relying on a mapping not asked for here is wrong
/// even where it works (CUDA may map a reused address for more devices).
template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies,
                                       device d, std::size_t count,
                                       std::initializer_list<device> also_accessible_from) {
  return detail::add_allocation_node<T>(g, dependencies, d, count, also_accessible_from.begin(),
                                        also_accessible_from.end());
}
/// As above, the devices chosen at run time.
template <class T>
allocation_node<T> add_allocation_node(graph_ref g, const node_dependencies& dependencies,
                                       device d, std::size_t count,
                                       const std::vector<device>& also_accessible_from) {
  const device* first = also_accessible_from.data();
  return detail::add_allocation_node<T>(g, dependencies, d, count, first,
                                        first + also_accessible_from.size());
}

/// Adds a node freeing `pointer`, memory a graph's allocation node allocated (this graph's, or
/// another's that ran before), at every launch (cudaGraphNodeTypeMemFree). It must come after
/// every node that uses the memory.
inline graph_node add_free_node(graph_ref g, const node_dependencies& dependencies,
                                const void* pointer) {
  cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeMemFree,
                                           "curt::add_free_node", "add_free_node()");
  if (CURT_UNLIKELY(pointer == nullptr))
    detail::raise(cudaErrorInvalidValue, "curt::add_free_node(null)",
                  "there is nothing to free at a null pointer", __FILE__, __LINE__);
  cudaGraphNodeParams p = detail::node_params(cudaGraphNodeTypeMemFree);
  p.free.dptr = const_cast<void*>(pointer);
  detail::current_device_scope in_context;
  return detail::add_graph_node(graph, dependencies, p, "curt::add_free_node");
}
/// Adds a node freeing what `allocation` allocates.
template <class T>
graph_node add_free_node(graph_ref g, const node_dependencies& dependencies,
                         const allocation_node<T>& allocation) {
  return add_free_node(g, dependencies, static_cast<const void*>(allocation.data()));
}

}  // namespace curt
