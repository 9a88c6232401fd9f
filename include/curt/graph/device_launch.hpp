// curt/graph/device_launch.hpp: graphs launched from the device, and kernel nodes that device code
// changes: a kernel decides what runs next, with no host round trip.
//
//   curt::graph_exec even = g_even.instantiate(curt::instantiate_flags::device_launch);
//   curt::device_graph next_even(even, stream);           // checks the flag, uploads on stream
//   auto resize = curt::add_device_updatable_kernel_node(g, {}, config, work, x, y, n);
//   // in a kernel of a graph, given node = resize.device_handle(), from one thread:
//   curt::set_grid(node, dim3(blocks));  curt::set_argument<2>(node, count);
//   curt::set_enabled(node, count > 0);  curt::tail_launch(sum > 0 ? next_even : next_odd);
//
// CUDA's rules ("Device graph launch"): a graph launched from the device is instantiated with
// instantiate_flags::device_launch (and holds only the kinds node_kinds.hpp marks), uploaded
// before and after any host-side change, and launched by one thread of a kernel in a graph: tail
// launches (at most 255 pending) run once the launching graph is done, fire-and-forget ones (at
// most 120) as its children, sibling ones as its parent's. A device-updatable node stays so; its
// graph has one executable graph at a time, is never updated as a whole and never copied (curt
// refuses copies: move it into a parent instead). No -rdc nor cudadevrt is needed.
#pragma once

#include <curt/graph/capture.hpp>
#include <curt/graph/nodes.hpp>

namespace curt {
namespace detail {
/// Refuses executable-graph flags without device_launch (tested without a device).
inline void require_device_launch_flags(unsigned long long flags, const char* operation) {
  if (CURT_LIKELY((flags & cudaGraphInstantiateFlagDeviceLaunch) != 0)) return;
  raise(cudaErrorInvalidValue, operation,
        fmt("this executable graph was not instantiated for device launch (its flags: %s), "
            "so no kernel can launch it: instantiate it with "
            "curt::instantiate_flags::device_launch",
            describe_instantiate_flags(flags).c_str()),
        __FILE__, __LINE__);
}
}  // namespace detail

/// An executable graph for device launch, as kernels get it (by value; keep the graph_exec alive).
class device_graph : public detail::device_value<cudaGraphExec_t> {
 public:
  constexpr device_graph() noexcept = default;  ///< null, or `exec`, checked for device_launch @{
  explicit device_graph(graph_exec_ref exec)
      : device_value(checked(exec, "curt::device_graph(exec)")) {}  ///@}
  /// The same, uploaded on `upload_stream`.
  device_graph(graph_exec_ref exec, stream_ref upload_stream)
      : device_value(checked(exec, "curt::device_graph(exec, upload_stream)")) {
    exec.upload(upload_stream);
  }
  device_graph(graph_exec&&) = delete;  // it would dangle
  device_graph(graph_exec&&, stream_ref) = delete;
  /// Unchecked: for a handle from CUDA, or one the host checked already.
  CURT_HOST_DEVICE static constexpr device_graph from_native_handle(
      cudaGraphExec_t native) noexcept {
    device_graph g;
    g.native_ = native;
    return g;
  }
  /// False for a null one (default-constructed, or from a null native handle).
  CURT_HOST_DEVICE constexpr bool valid() const noexcept { return native_ != nullptr; }

 private:
  static cudaGraphExec_t checked(graph_exec_ref exec, const char* operation) {
    cudaGraphExec_t e = detail::graph_access::handle(exec, "device_graph()");
    detail::require_device_launch_flags(static_cast<unsigned long long>(exec.flags()), operation);
    return e;
  }
};

#if defined(__CUDACC__)
/// Queues `g` to run once the calling kernel's graph, and all it fired and forgot, is done.
__device__ inline cudaError_t tail_launch(device_graph g) {
  return cudaGraphLaunch(g.native(), cudaStreamGraphTailLaunch);
}
/// Starts `g` now, as a child of the calling kernel's graph (done only once `g` is).
__device__ inline cudaError_t fire_and_forget(device_graph g) {
  return cudaGraphLaunch(g.native(), cudaStreamGraphFireAndForget);
}
/// Starts `g` now, as a child of the launching graph's parent: its tail launches do not wait.
__device__ inline cudaError_t sibling_launch(device_graph g) {
  return cudaGraphLaunch(g.native(), cudaStreamGraphFireAndForgetAsSibling);
}
/// The device graph the calling kernel runs in (to relaunch it), or a null one.
__device__ inline device_graph current_device_graph() {
  return device_graph::from_native_handle(cudaGetCurrentGraphExec());
}
#endif

/// A device-updatable kernel node as device code changes it: trivially copyable, untyped.
class device_node : public detail::device_value<cudaGraphDeviceNode_t> {
 public:
  constexpr device_node() noexcept = default;  ///< null, or a native handle (unchecked) @{
  CURT_HOST_DEVICE constexpr explicit device_node(cudaGraphDeviceNode_t native) noexcept
      : device_value(native) {}  ///@}
  /// False for a null one (default-constructed, or from a null native handle).
  CURT_HOST_DEVICE constexpr bool valid() const noexcept { return native_ != nullptr; }
};

/// A device-updatable node of a kernel with parameters Params..., with each parameter's offset,
/// for `set_argument<I>`. Named from the kernel: `device_kernel_node_for<decltype(kernel)>`.
template <class... Params>
class device_kernel_node : public device_node {
 public:
  static constexpr std::size_t parameter_count = sizeof...(Params);  ///< how many the kernel takes
  constexpr device_kernel_node() noexcept = default;
  /// A handle from CUDA, with the offsets cudaFuncGetParamInfo gives.
  CURT_HOST_DEVICE constexpr device_kernel_node(cudaGraphDeviceNode_t native,
                                                const unsigned* offsets) noexcept
      : device_node(native) {
    for (std::size_t i = 0; i < parameter_count; ++i) offsets_[i] = offsets[i];
  }
  /// The byte offset of parameter `index` in the node's argument buffer (0 past the last one).
  CURT_HOST_DEVICE constexpr std::size_t argument_offset(std::size_t index) const noexcept {
    return index < parameter_count ? offsets_[index] : 0;
  }

 private:
  unsigned offsets_[parameter_count > 0 ? parameter_count : 1] = {};
};

namespace detail {
template <class... Params>  // declared only: device_kernel_node_for names its return type
device_kernel_node<Params...> device_kernel_node_of(void (*)(Params...));
}  // namespace detail

/// The device handle type for kernel `Kernel` (a function type, or a pointer to one).
template <class Kernel>
using device_kernel_node_for =
    decltype(detail::device_kernel_node_of(std::declval<std::decay_t<Kernel>>()));

/// What add_device_updatable_kernel_node gives: the node and the handle device code changes it by.
template <class... Params>
class updatable_kernel_node : public graph_node {
 public:
  updatable_kernel_node() noexcept = default;  ///< empty, or `node` and its device handle @{
  updatable_kernel_node(graph_node node, device_kernel_node<Params...> handle) noexcept
      : graph_node(node), handle_(handle) {}  ///@}
  /// The handle kernels change the node by (set_argument, set_grid, ...): pass it by value.
  device_kernel_node<Params...> device_handle() const noexcept { return handle_; }

 private:
  device_kernel_node<Params...> handle_;
};

#if defined(__CUDACC__)
/// Enables or disables the node for its next runs (cudaGraphKernelNodeSetEnabled).
__device__ inline cudaError_t set_enabled(device_node node, bool enabled) {
  return cudaGraphKernelNodeSetEnabled(node.native(), enabled);
}
/// Sets the node's grid for its next runs; every dimension at least 1 (disable it instead).
__device__ inline cudaError_t set_grid(device_node node, dim3 grid) {
  return cudaGraphKernelNodeSetGridDim(node.native(), grid);
}
/// Writes `value`'s bytes at byte `offset` of the node's argument buffer (untyped).
template <class T>
__device__ cudaError_t set_param(device_node node, std::size_t offset, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>,
                "curt::set_param: kernel arguments are copied bytewise; T must be trivially "
                "copyable");
  return cudaGraphKernelNodeSetParam(node.native(), offset, &value, sizeof(T));
}
/// Sets parameter `I` (0-based) of the node's kernel to `value`, converted as a launch would.
template <std::size_t I, class... Params, class T>
__device__ cudaError_t set_argument(const device_kernel_node<Params...>& node, const T& value) {
  static_assert(I < sizeof...(Params),
                "curt::set_argument: the kernel has no parameter with this index (0-based)");
  using parameter = std::decay_t<
      std::tuple_element_t<(I < sizeof...(Params) ? I : 0), std::tuple<Params..., void>>>;
  static_assert(std::is_convertible_v<const T&, parameter>,
                "curt::set_argument: the value does not convert to the kernel's parameter type; "
                "see I, Params and T in the instantiation below");
  if constexpr (I < sizeof...(Params) && std::is_convertible_v<const T&, parameter>) {
    const parameter converted = value;
    return cudaGraphKernelNodeSetParam(node.native(), node.argument_offset(I), &converted,
                                       sizeof(parameter));
  } else {
    return cudaErrorInvalidValue;
  }
}
#endif

namespace detail {

/// Says why a parameter's size on the device differs from the host's.
CURT_COLD inline std::string describe_parameter_size_mismatch(std::size_t index,
                                                              std::size_t device_size,
                                                              std::size_t host_size) {
  return fmt("parameter %zu takes %zu bytes on the device but its C++ type has %zu: set_argument "
             "could not write it safely. Nothing was added", index, device_size, host_size);
}
// The kernel's parameters' offsets (in relaxed capture mode: spoiling no capture). In a context.
template <class... Params>
void query_parameter_offsets(const void* kernel, unsigned* offsets, const char* function) {
  constexpr std::size_t sizes[sizeof...(Params) + 1] = {sizeof(std::decay_t<Params>)..., 0};
  relaxed_capture relaxed;  // the thread's own mode comes back also when a refusal throws
  for (std::size_t i = 0; i < sizeof...(Params); ++i) {
    std::size_t offset = 0, size = 0;
    check(cudaFuncGetParamInfo(kernel, i, &offset, &size), "cudaFuncGetParamInfo",
          {"kernel", {"parameter", static_cast<long long>(i)}}, __FILE__, __LINE__);
    if (CURT_UNLIKELY(size != sizes[i]))
      raise(cudaErrorInvalidValue, fmt("%s(%s)", function, kernel_name(kernel).c_str()),
            describe_parameter_size_mismatch(i, size, sizes[i]), __FILE__, __LINE__);
    offsets[i] = static_cast<unsigned>(offset);
  }
}
// Makes `node` device-updatable and returns its handle; if CUDA refuses, the node is removed.
inline cudaGraphDeviceNode_t make_node_device_updatable(cudaGraphNode_t node, const void* kernel) {
  cudaError_t status = set_device_updatable(node);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    std::string call = fmt("cudaGraphKernelNodeSetAttribute(kernel node of %s, device-updatable)",
                           kernel_name(kernel).c_str());
    (void)cudaGraphDestroyNode(node);
    throw_error(make_error_code(status), std::move(call), __FILE__, __LINE__,
                "CUDA refused to make the kernel node device-updatable, so the node was removed "
                "again: the graph is as it was");
  }
  return device_handle_of(node);
}
// The node a launch just captured on `stream`, and its device handle. In the stream's context.
inline std::pair<cudaGraphNode_t, cudaGraphDeviceNode_t> captured_device_node(
    cudaStream_t stream, cudaGraphDeviceNode_t written_back) {
  const capture_point point = active_capture(stream, "curt::launch_device_updatable",
                                             "the stream's capture ended during the launch");
  if (CURT_UNLIKELY(point.count != 1))
    raise(cudaErrorUnknown, "curt::launch_device_updatable",
          fmt("the launch was captured, but the stream's capture does not end in that one node "
              "(%zu dependencies): its handle cannot be found", point.count),
          __FILE__, __LINE__);
  cudaLaunchAttributeValue read{};
  if (cudaGraphKernelNodeGetAttribute(point.nodes[0], cudaLaunchAttributeDeviceUpdatableKernelNode,
                                      &read) != cudaSuccess)
    read.deviceUpdatableKernelNode.devNode = written_back;
  (void)cudaGetLastError();
  return {point.nodes[0], read.deviceUpdatableKernelNode.devNode};
}
}  // namespace detail

/// Adds a kernel node that device code can change (checked as add_kernel_node checks it).
template <class... Params, class... Args>
updatable_kernel_node<Params...> add_device_updatable_kernel_node(
    graph_ref g, const node_dependencies& dependencies, const launch_config& config,
    void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::add_device_updatable_kernel_node: the number of arguments differs from the "
                "kernel's parameters");
  if constexpr (detail::arguments_fit<std::tuple<Params...>, std::tuple<Args&&...>>()) {
    const char* function = "curt::add_device_updatable_kernel_node";
    cudaGraph_t graph = detail::prepare_node(g, dependencies, function);
    detail::check_kernel_node_config(config, function);
    const void* entry = reinterpret_cast<const void*>(kernel);
    detail::context_scope in(detail::any_context);
    unsigned offsets[sizeof...(Params) > 0 ? sizeof...(Params) : 1] = {};
    detail::query_parameter_offsets<Params...>(entry, offsets, function);
    detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
    cudaGraphNodeParams p = detail::kernel_node_params(config, entry, arguments.pointers);
    cudaGraphNode_t node = detail::add_kernel(graph, dependencies, config, p, function);
    return updatable_kernel_node<Params...>(
        node, {detail::make_node_device_updatable(node, entry), offsets});
  }
  return {};
}
/// As curt::launch on `capturing` (refused unless it is capturing), into a device-updatable node.
template <class... Params, class... Args>
updatable_kernel_node<Params...> launch_device_updatable(stream_ref capturing,
                                                         const launch_config& config,
                                                         void (*kernel)(Params...),
                                                         Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::launch_device_updatable: the number of arguments differs from the kernel's "
                "parameters");
  if constexpr (detail::arguments_fit<std::tuple<Params...>, std::tuple<Args&&...>>()) {
    const char* function = "curt::launch_device_updatable";
    cudaStream_t stream = capturing.get();
    const void* entry = reinterpret_cast<const void*>(kernel);
    detail::context_scope in(detail::for_stream, stream);
    (void)detail::active_capture(
        stream, function,
        "the stream is not capturing: a device-updatable kernel node exists only in a graph "
        "(CUDA refuses the attribute on a launch that is not captured); launch it inside "
        "curt::capture, or add it to a graph with curt::add_device_updatable_kernel_node. "
        "Nothing was launched");
    unsigned offsets[sizeof...(Params) > 0 ? sizeof...(Params) : 1] = {};
    detail::query_parameter_offsets<Params...>(entry, offsets, function);
    detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
    // The configuration's attributes and one more: device-updatable.
    cudaLaunchConfig_t native = config.native(stream);
    cudaLaunchAttribute attributes[launch_config::max_attributes + 1] = {};
    const unsigned kept = config.attribute_count();
    for (unsigned i = 0; i < kept; ++i) attributes[i] = config.attributes()[i];
    attributes[kept].id = cudaLaunchAttributeDeviceUpdatableKernelNode;
    attributes[kept].val.deviceUpdatableKernelNode.deviceUpdatable = 1;
    native.attrs = attributes;
    native.numAttrs = kept + 1;
    detail::device_updatable_nodes_made().store(true, detail::order::relaxed);
    int status = detail::launch_native(native, entry, arguments.pointers);
    if (CURT_UNLIKELY(status != 0)) detail::throw_launch_error(status, native, entry);
    auto captured = detail::captured_device_node(
        stream, attributes[kept].val.deviceUpdatableKernelNode.devNode);
    return updatable_kernel_node<Params...>(captured.first, {captured.second, offsets});
  }
  return {};
}

}  // namespace curt
