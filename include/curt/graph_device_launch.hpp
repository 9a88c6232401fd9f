// curt/graph_device_launch.hpp: graphs launched from the device, and kernel nodes that device code
// changes. A kernel decides what runs next, with no host round trip.
//
//   // Host: graphs a kernel may launch, instantiated for it and uploaded.
//   curt::graph_exec even = g_even.instantiate(curt::instantiate_flags::device_launch);
//   curt::device_graph next_even(even, stream);           // checks the flag, uploads on stream
//   auto resize = curt::add_device_updatable_kernel_node(g, {}, config, work, x, y, n);
//   //   resize.device_handle() is a curt::device_kernel_node_for<decltype(work)>; while
//   //   capturing: auto node = curt::launch_device_updatable(stream, config, work, x, y, n);
//
//   // Device (nvcc), in a kernel that runs in a graph, given node = resize.device_handle():
//   if (threadIdx.x == 0) {
//     curt::set_grid(node, dim3(blocks));                  // the node's next run uses this grid
//     curt::set_argument<2>(node, count);                  // parameter 2 (n), typed
//     curt::set_enabled(node, count > 0);
//     curt::tail_launch(sum > 0 ? next_even : next_odd);   // runs once this graph is done
//   }
//
// ---- Device graph launch (CUDA Programming Guide, "Device graph launch") --------------------
// - A graph is launchable from the device only if it was instantiated with
//   instantiate_flags::device_launch (then it holds only kernel, memcpy, memset and child-graph
//   nodes of one device, no dynamic parallelism, copies of device or mapped pinned memory only).
//   curt::device_graph(exec) refuses, on the host, an executable graph whose flags (as
//   cudaGraphExecGetFlags reports them) lack device_launch, with a cuda_error naming the flag.
// - It must be uploaded before a kernel launches it: curt::device_graph(exec, stream) uploads it,
//   as do exec.upload(stream), graph::instantiate_and_upload(stream, flags) and a first launch
//   from the host. After any host-side change of the executable graph (update(), per-node updates,
//   set_node_enabled) upload it again before a kernel launches it; a device launch while a host
//   update is being applied is undefined. curt cannot ask CUDA whether a graph was uploaded.
// - From the device it is launched only by a kernel that runs in a graph (launched from the host
//   or the device), one call per launch (the call is per thread: pick one thread), and only in one
//   of three modes, never into a stream:
//     tail_launch(g)     runs g once the launching graph and all it fired and forgot are done;
//                        tail launches run in the order they were made, at most 255 pending;
//                        a graph may relaunch itself (tail_launch(current_device_graph())), one
//                        such relaunch pending at a time;
//     fire_and_forget(g) starts g now, as a child of the launching graph (which is done only when
//                        g is): at most 120 per execution of the launching graph;
//     sibling_launch(g)  starts g now, as a child of the launching graph's parent: it does not
//                        hold back the launching graph's tail launches.
//   A host synchronize of the stream the first graph was launched on waits for all of them.
// - A graph launched from the device while it runs already gets cudaErrorInvalidValue; launching
//   one graph from the host and the device at once is undefined.
// - The device calls return CUDA's status (cudaSuccess or the error); nothing is thrown on the
//   device. curt::device_graph is trivially copyable: pass it to kernels by value, or store it in
//   device memory.
//
// ---- Device-updatable kernel nodes ----------------------------------------------------------
// add_device_updatable_kernel_node adds a kernel node (checked like add_kernel_node), and
// launch_device_updatable captures a launch (checked like curt::launch) as one, that device
// code changes through the trivially copyable handle they return: set_grid, set_enabled,
// set_argument<I> (typed: parameter I of the kernel, at the offset CUDA reports for it) and
// set_param (raw, at a byte offset), from a kernel of the same device, in the same graph before
// the node (its run in that launch sees the change) or anywhere else before a launch. A change
// lasts until device or host code changes the node again. CUDA's rules for such nodes and graphs
// (curt refuses what it can tell on the host; CUDA refuses the rest and curt's error says why):
// - the node cannot be removed from its graph, nor made not device-updatable again, nor have its
//   attributes copied (cudaGraphKernelNodeCopyAttributes);
// - its graph has one executable graph at a time (a second instantiation is refused, naming the
//   device-updatable node(s)), and neither the graph nor that executable graph can be given to
//   graph_exec::update (cudaGraphExecUpdate);
// - its graph is never copied: the copy's node is not the one the handle names, so device-side
//   changes would not reach it. curt refuses clone() and add_child_graph_node(parent, deps, g)
//   (a copy) of such a graph, also as a child of another, before CUDA is called; move it in
//   instead, add_child_graph_node(parent, deps, std::move(g)), and the handle names the node
//   the parent runs (the parent then has these rules);
// - the executable graph must be uploaded before a launch whose own kernels change the node (and
//   before any launch that should see changes made from the device: instantiate_and_upload or
//   upload());
// - a host-side change of the node (update_kernel_node, set_node_enabled) replaces the device's
//   changes at the next upload or launch; making one while device code changes the node is
//   undefined; node_enabled() on the host does not see the device's set_enabled;
// - every grid dimension is at least 1 (a grid of 0 blocks is an error): disable the node instead;
// - if the changed node is the immediate dependent of the changing kernel through a programmatic
//   edge, the kernel calls __threadfence() before cudaTriggerProgrammaticLaunchCompletion().
//
// ---- Building --------------------------------------------------------------------------------
// Neither relocatable device code (-rdc) nor cudadevrt is needed: in CUDA 13.0 the device-side
// cudaGraphLaunch and cudaGraphKernelNode* calls are resolved when the module is loaded, as
// cudaGraphSetConditional is (a whole-program cubin keeps them as undefined symbols, and linking
// cudadevrt does not define them); cudaGetCurrentGraphExec reads a special register. The device
// functions exist only for nvcc (__CUDACC__); the types and host calls compile with any C++17
// compiler.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/graph_errors.hpp>
#include <curt/detail/graph_node_add.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>
#include <curt/graph_node.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace curt {

// ---- device graphs ------------------------------------------------------------------------------

namespace detail {

/// Refuses executable-graph flags without device_launch (no CUDA call: tested without a device).
inline void require_device_launch_flags(unsigned long long flags, const char* operation) {
  if (CURT_LIKELY((flags & cudaGraphInstantiateFlagDeviceLaunch) != 0)) return;
  raise(cudaErrorInvalidValue, operation,
        "this executable graph was not instantiated for device launch (its flags: " +
            describe_instantiate_flags(flags) +
            "), so no kernel can launch it: instantiate it with "
            "curt::instantiate_flags::device_launch (graph.instantiate(curt::instantiate_flags::"
            "device_launch), or graph.instantiate_and_upload(stream, curt::instantiate_flags::"
            "device_launch))",
        __FILE__, __LINE__);
}

}  // namespace detail

/// An executable graph as device code launches it: trivially copyable, passed to kernels by
/// value. Made on the host from an executable graph instantiated with
/// instantiate_flags::device_launch (the constructors refuse any other). Refers to the executable
/// graph without owning it: keep the curt::graph_exec alive while kernels may launch it.
/// Launched from the device with tail_launch, fire_and_forget and sibling_launch.
class device_graph {
 public:
  /// Null: refers to no graph; launching it is an error.
  constexpr device_graph() noexcept = default;

  /// The executable graph `exec`, which must have been instantiated with
  /// instantiate_flags::device_launch (else a cuda_error, cudaErrorInvalidValue, naming the flag)
  /// and must be uploaded before a kernel launches it (upload(), instantiate_and_upload, a host
  /// launch, or the constructor below).
  explicit device_graph(graph_exec_ref exec) : handle_(checked(exec, "curt::device_graph(exec)")) {}
  /// The same, and uploads `exec` on `upload_stream` (in its order: device launches by work
  /// queued after it there find it on the device).
  device_graph(graph_exec_ref exec, stream_ref upload_stream)
      : handle_(checked(exec, "curt::device_graph(exec, upload_stream)")) {
    exec.upload(upload_stream);
  }
  /// Not from a temporary owner: it would destroy the executable graph at the end of the
  /// statement, leaving the handle dangling. Keep the curt::graph_exec in a variable.
  device_graph(graph_exec&&) = delete;
  device_graph(graph_exec&&, stream_ref) = delete;

  /// Unchecked: for a handle device code got from CUDA (current_device_graph()) or one the host
  /// checked already.
  CURT_HOST_DEVICE static constexpr device_graph from_native_handle(
      cudaGraphExec_t native) noexcept {
    device_graph g;
    g.handle_ = native;
    return g;
  }

  CURT_HOST_DEVICE constexpr cudaGraphExec_t native() const noexcept { return handle_; }
  /// False for a null handle (a default-constructed one, or current_device_graph() outside a
  /// device graph).
  CURT_HOST_DEVICE constexpr bool valid() const noexcept { return handle_ != nullptr; }

  friend CURT_HOST_DEVICE constexpr bool operator==(device_graph a, device_graph b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend CURT_HOST_DEVICE constexpr bool operator!=(device_graph a, device_graph b) noexcept {
    return a.handle_ != b.handle_;
  }

 private:
  static cudaGraphExec_t checked(graph_exec_ref exec, const char* operation) {
    cudaGraphExec_t e = detail::graph_exec_access(exec).handle("device_graph()");
    detail::require_device_launch_flags(static_cast<unsigned long long>(exec.flags()), operation);
    return e;
  }

  cudaGraphExec_t handle_ = nullptr;
};

#if defined(__CUDACC__)
/// Queues `g` to run once the graph of the calling kernel, and everything it fired and forgot,
/// is done (cudaGraphLaunch(g, cudaStreamGraphTailLaunch)). Tail launches run in the order they
/// were queued; at most 255 pending. Returns CUDA's status.
__device__ inline cudaError_t tail_launch(device_graph g) {
  return cudaGraphLaunch(g.native(), cudaStreamGraphTailLaunch);
}
/// Starts `g` now, as a child of the calling kernel's graph, which is done only once `g` is
/// (cudaStreamGraphFireAndForget). At most 120 per execution of the launching graph.
__device__ inline cudaError_t fire_and_forget(device_graph g) {
  return cudaGraphLaunch(g.native(), cudaStreamGraphFireAndForget);
}
/// Starts `g` now, as a child of the launching graph's parent
/// (cudaStreamGraphFireAndForgetAsSibling): the launching graph's tail launches do not wait for it.
__device__ inline cudaError_t sibling_launch(device_graph g) {
  return cudaGraphLaunch(g.native(), cudaStreamGraphFireAndForgetAsSibling);
}
/// The device graph the calling kernel runs in (cudaGetCurrentGraphExec), to relaunch it with
/// tail_launch (one such relaunch pending at a time); null (!valid()) when the kernel is not a
/// node of a device graph.
__device__ inline device_graph current_device_graph() {
  return device_graph::from_native_handle(cudaGetCurrentGraphExec());
}
#endif

// ---- device-updatable kernel nodes ------------------------------------------------------------

/// A device-updatable kernel node as device code changes it (cudaGraphDeviceNode_t): trivially
/// copyable. Untyped: arguments are set by byte offset (set_param). The typed handle that
/// add_device_updatable_kernel_node gives (device_kernel_node) derives from it.
class device_node {
 public:
  constexpr device_node() noexcept = default;
  /// A handle from CUDA (curt::make_device_updatable, or the attribute read back).
  CURT_HOST_DEVICE constexpr explicit device_node(cudaGraphDeviceNode_t native) noexcept
      : node_(native) {}

  CURT_HOST_DEVICE constexpr cudaGraphDeviceNode_t native() const noexcept { return node_; }
  CURT_HOST_DEVICE constexpr bool valid() const noexcept { return node_ != nullptr; }

  friend CURT_HOST_DEVICE constexpr bool operator==(device_node a, device_node b) noexcept {
    return a.node_ == b.node_;
  }
  friend CURT_HOST_DEVICE constexpr bool operator!=(device_node a, device_node b) noexcept {
    return a.node_ != b.node_;
  }

 private:
  cudaGraphDeviceNode_t node_ = nullptr;
};

namespace detail {
struct device_node_access;
template <class Kernel>
struct device_kernel_node_from;
}  // namespace detail

/// A device-updatable kernel node of a kernel with parameters Params..., with the offset of each
/// parameter in the node's argument buffer as CUDA reports it (cudaFuncGetParamInfo): device
/// code sets parameter I with set_argument<I>(node, value), checked against its type at compile
/// time. Trivially copyable. Name it from the kernel:
/// curt::device_kernel_node_for<decltype(kernel)>.
template <class... Params>
class device_kernel_node : public device_node {
 public:
  static constexpr std::size_t parameter_count = sizeof...(Params);

  constexpr device_kernel_node() noexcept = default;

  /// The byte offset of parameter `index` in the node's argument buffer (0 past the last one).
  CURT_HOST_DEVICE constexpr std::size_t argument_offset(std::size_t index) const noexcept {
    return index < parameter_count ? offsets_[index] : 0;
  }

 private:
  friend struct detail::device_node_access;
  CURT_HOST_DEVICE constexpr device_kernel_node(cudaGraphDeviceNode_t native,
                                                const unsigned* offsets) noexcept
      : device_node(native) {
    for (std::size_t i = 0; i < parameter_count; ++i) offsets_[i] = offsets[i];
  }

  unsigned offsets_[parameter_count > 0 ? parameter_count : 1] = {};
};

namespace detail {

struct device_node_access {
  template <class... Params>
  static device_kernel_node<Params...> make(cudaGraphDeviceNode_t native, const unsigned* offsets) {
    return device_kernel_node<Params...>(native, offsets);
  }
};

template <class... Params>
struct device_kernel_node_from<void(Params...)> {
  using type = device_kernel_node<Params...>;
};

}  // namespace detail

/// The device handle type for kernel `Kernel`: a function type, or a pointer to one
/// (curt::device_kernel_node_for<decltype(my_kernel)>).
template <class Kernel>
using device_kernel_node_for = typename detail::device_kernel_node_from<std::remove_cv_t<
    std::remove_pointer_t<std::remove_cv_t<std::remove_reference_t<Kernel>>>>>::type;

/// What add_device_updatable_kernel_node gives: the node, as a graph_node (a dependency of later
/// nodes, a node of host-side updates), and the handle device code changes it through.
template <class... Params>
class updatable_kernel_node : public graph_node {
 public:
  updatable_kernel_node() noexcept = default;
  updatable_kernel_node(graph_node node, device_kernel_node<Params...> handle) noexcept
      : graph_node(node), handle_(handle) {}

  /// The handle for device code: pass it to kernels by value, or copy it into device memory.
  device_kernel_node<Params...> device_handle() const noexcept { return handle_; }

 private:
  device_kernel_node<Params...> handle_;
};

#if defined(__CUDACC__)
/// Enables or disables the node for its next runs (cudaGraphKernelNodeSetEnabled): a disabled
/// node does nothing. From a kernel of the node's device; returns CUDA's status.
__device__ inline cudaError_t set_enabled(device_node node, bool enabled) {
  return cudaGraphKernelNodeSetEnabled(node.native(), enabled);
}
/// Sets the node's grid for its next runs (cudaGraphKernelNodeSetGridDim); every dimension at
/// least 1 (disable the node to run nothing).
__device__ inline cudaError_t set_grid(device_node node, dim3 grid) {
  return cudaGraphKernelNodeSetGridDim(node.native(), grid);
}
/// Writes `value`'s bytes at byte `offset` of the node's argument buffer
/// (cudaGraphKernelNodeSetParam). Untyped: set_argument<I> checks the type and finds the offset.
template <class T>
__device__ cudaError_t set_param(device_node node, std::size_t offset, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>,
                "curt::set_param: kernel arguments are copied bytewise; T must be trivially "
                "copyable");
  return cudaGraphKernelNodeSetParam(node.native(), offset, &value, sizeof(T));
}
/// Sets parameter `I` (0-based) of the node's kernel to `value`, converted to the parameter's
/// type as a launch would convert it, at the offset CUDA reported for it.
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

/// Says why a parameter's size on the device differs from the host's (no CUDA call).
CURT_COLD inline std::string describe_parameter_size_mismatch(std::size_t index,
                                                              std::size_t device_size,
                                                              std::size_t host_size) {
  return "parameter " + std::to_string(index) + " takes " + std::to_string(device_size) +
         " bytes on the device but its C++ type has " + std::to_string(host_size) +
         ": set_argument could not write it safely. Nothing was added";
}

// The offset of each of the kernel's parameters in its argument buffer (cudaFuncGetParamInfo),
// checked against the parameter types' sizes. The caller has made the context current.
// The query runs in relaxed capture mode: it must not spoil a capture in progress (this stream's,
// for launch_device_updatable, or another thread's in global mode).
template <class... Params>
void query_parameter_offsets(const void* kernel, unsigned* offsets, const char* function) {
  constexpr std::size_t sizes[sizeof...(Params) + 1] = {sizeof(std::decay_t<Params>)..., 0};
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode",
        __FILE__, __LINE__);
  struct mode_back {  // the thread's own mode back, also when a refusal below throws
    cudaStreamCaptureMode& mode;
    ~mode_back() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
  } restore{mode};
  for (std::size_t i = 0; i < sizeof...(Params); ++i) {
    std::size_t offset = 0, size = 0;
    cudaError_t status = cudaFuncGetParamInfo(kernel, i, &offset, &size);
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      std::string log = take_driver_log();
      (void)cudaGetLastError();
      std::string name = diagnose([&] { return kernel_name(kernel); });
      throw_error_with_log(
          make_error_code(status),
          "cudaFuncGetParamInfo(" + name + ", parameter " + std::to_string(i) + ")",
          location(__FILE__, __LINE__),
          std::string(function) +
              " needs each parameter's offset for set_argument (CUDA 12.4 or "
              "later). Nothing was added",
          std::move(log));
    }
    if (CURT_UNLIKELY(size != sizes[i]))
      raise(cudaErrorInvalidValue,
            std::string(function) + "(" + diagnose([&] { return kernel_name(kernel); }) + ")",
            describe_parameter_size_mismatch(i, size, sizes[i]), __FILE__, __LINE__);
    offsets[i] = static_cast<unsigned>(offset);
  }
}

// CUDA refused to make the node device-updatable: the node is removed again (it is not
// device-updatable, so CUDA lets it go).
[[noreturn]] CURT_COLD inline void throw_device_updatable_refused(cudaError_t status,
                                                                  cudaGraphNode_t node,
                                                                  const void* kernel) {
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  std::string name = diagnose([&] { return kernel_name(kernel); });
  bool removed = cudaGraphDestroyNode(node) == cudaSuccess;
  (void)cudaGetLastError();
  throw_error_with_log(make_error_code(status),
                       "cudaGraphKernelNodeSetAttribute(kernel node of " + name +
                           ", cudaLaunchAttributeDeviceUpdatableKernelNode = 1)",
                       location(__FILE__, __LINE__),
                       removed ? "CUDA refused to make the kernel node device-updatable, so the "
                                 "node was removed again: the graph is as it was"
                               : "CUDA refused to make the kernel node device-updatable, and "
                                 "refused to remove it again: the graph holds it as a plain "
                                 "kernel node",
                       std::move(log));
}

// Makes `node` device-updatable and returns its device handle. The caller has made the context
// current.
inline cudaGraphDeviceNode_t make_node_device_updatable(cudaGraphNode_t node, const void* kernel) {
  cudaError_t status = set_device_updatable(node);
  if (CURT_UNLIKELY(status != cudaSuccess)) throw_device_updatable_refused(status, node, kernel);
  cudaLaunchAttributeValue read{};
  status =
      cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode, &read);
  cudaGraphDeviceNode_t handle =
      status == cudaSuccess ? read.deviceUpdatableKernelNode.devNode : nullptr;
  if (CURT_UNLIKELY(handle == nullptr)) {
    if (status == cudaSuccess) status = cudaErrorUnknown;
    std::string log = take_driver_log();
    (void)cudaGetLastError();
    throw_error_with_log(make_error_code(status),
                         "cudaGraphKernelNodeGetAttribute(node, "
                         "cudaLaunchAttributeDeviceUpdatableKernelNode)",
                         location(__FILE__, __LINE__),
                         "the kernel node is device-updatable, but CUDA gave no device handle for "
                         "it; it stays in the graph (CUDA removes no device-updatable node)",
                         std::move(log));
  }
  return handle;
}

// Why a device-updatable launch needs a capturing stream.
inline constexpr const char* device_updatable_needs_capture =
    "the stream is not capturing: a device-updatable kernel node exists only in a graph (CUDA "
    "refuses the attribute on a launch that is not captured); launch it inside curt::capture, "
    "or add it to a graph with curt::add_device_updatable_kernel_node. Nothing was launched";

// The node a launch just captured on `stream` (what the stream's next work depends on: that node
// alone) and its device handle. The caller has made the stream's context current.
inline std::pair<cudaGraphNode_t, cudaGraphDeviceNode_t> captured_device_node(
    cudaStream_t stream, const cudaLaunchAttribute& written_back) {
  const capture_point point =  // after the launch: only an invalidated capture fails here
      active_capture(stream, "curt::launch_device_updatable",
                     "the stream's capture ended during the launch, so the node it captured "
                     "cannot be found");
  const std::size_t count = point.count;
  cudaGraphNode_t node = count == 1 ? point.nodes[0] : nullptr;
  cudaGraphDeviceNode_t handle = nullptr;
  if (node != nullptr) {
    cudaLaunchAttributeValue read{};
    if (cudaGraphKernelNodeGetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                        &read) == cudaSuccess)
      handle = read.deviceUpdatableKernelNode.devNode;
    (void)cudaGetLastError();
  }
  if (handle == nullptr) handle = written_back.val.deviceUpdatableKernelNode.devNode;
  if (CURT_UNLIKELY(node == nullptr || handle == nullptr))
    raise(cudaErrorUnknown, "curt::launch_device_updatable",
          node == nullptr
              ? "the launch was captured, but the stream's capture does not end in that one node "
                "(" + std::to_string(count) + " dependencies): its handle cannot be found"
              : std::string("the launch was captured as a device-updatable kernel node, but CUDA "
                            "gave no device handle for it"),
          __FILE__, __LINE__);
  return {node, handle};
}

}  // namespace detail

/// Adds a kernel node that device code can change (cudaLaunchAttributeDeviceUpdatableKernelNode):
/// `kernel` with `config` on `args`, checked as add_kernel_node checks them (argument types at
/// compile time; attributes kernel nodes do not take refused before CUDA is called). Returns the
/// node and its device handle (device_handle()), which knows where each parameter lies for
/// set_argument. CUDA's rules for such nodes are in the file comment: above all, the graph then has
/// one executable graph at a time, is never given to graph_exec::update, is uploaded before a
/// launch that should see device-side changes, and is never copied (clone(), or a copied child
/// graph: refused, since the copy's node is not the handle's; move it into a parent instead:
/// add_child_graph_node(parent, deps, std::move(g))). A refused addition leaves the graph as it
/// was.
template <class... Params, class... Args>
updatable_kernel_node<Params...> add_device_updatable_kernel_node(
    graph_ref g, const node_dependencies& dependencies, const launch_config& config,
    void (*kernel)(Params...), Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::add_device_updatable_kernel_node: the number of arguments differs from the "
                "kernel's parameters");
  if constexpr (sizeof...(Params) == sizeof...(Args)) {
    constexpr bool convertible =
        detail::check_arguments<std::tuple<Params...>, std::tuple<Args&&...>>(
            std::index_sequence_for<Params...>{});
    if constexpr (convertible) {  // otherwise only curt's static_assert speaks
      const char* function = "curt::add_device_updatable_kernel_node";
      cudaGraph_t graph = detail::prepare_node(g, dependencies, cudaGraphNodeTypeKernel, function,
                                               "add_device_updatable_kernel_node()");
      detail::check_kernel_node_config(config, function);
      const void* entry = reinterpret_cast<const void*>(kernel);
      detail::current_device_scope in_context;
      unsigned offsets[sizeof...(Params) > 0 ? sizeof...(Params) : 1] = {};
      detail::query_parameter_offsets<Params...>(entry, offsets, function);
      detail::kernel_arguments<Params...> arguments(std::forward<Args>(args)...);
      cudaGraphNodeParams p = detail::kernel_node_params(config, entry, arguments.pointers);
      cudaGraphNode_t node = detail::add_kernel_with_attributes(graph, dependencies, config, p);
      cudaGraphDeviceNode_t handle = detail::make_node_device_updatable(node, entry);
      return updatable_kernel_node<Params...>(
          graph_node(node), detail::device_node_access::make<Params...>(handle, offsets));
    }
  }
  return {};
}

/// Launches `kernel` on `capturing`, a stream being captured, as curt::launch does (arguments
/// checked at compile time, the configuration's attributes kept) and with
/// cudaLaunchAttributeDeviceUpdatableKernelNode: the captured node is device-updatable. Returns the
/// node (what the stream's next captured work depends on) and its device handle, as
/// add_device_updatable_kernel_node does; the same rules apply to the graph. A stream that is not
/// capturing is refused before anything is launched (CUDA refuses the attribute there).
template <class... Params, class... Args>
updatable_kernel_node<Params...> launch_device_updatable(stream_ref capturing,
                                                         const launch_config& config,
                                                         void (*kernel)(Params...),
                                                         Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::launch_device_updatable: the number of arguments differs from the kernel's "
                "parameters");
  if constexpr (sizeof...(Params) == sizeof...(Args)) {
    constexpr bool convertible =
        detail::check_arguments<std::tuple<Params...>, std::tuple<Args&&...>>(
            std::index_sequence_for<Params...>{});
    if constexpr (convertible) {
      const char* function = "curt::launch_device_updatable";
      cudaStream_t stream = capturing.get();
      const void* entry = reinterpret_cast<const void*>(kernel);
      detail::stream_context_scope in_context(stream);
      (void)detail::active_capture(stream, function, detail::device_updatable_needs_capture);
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
      cudaError_t status = detail::launch_native(native, entry, arguments.pointers);
      if (CURT_UNLIKELY(status != cudaSuccess)) detail::throw_launch_error(status, native, entry);
      std::pair<cudaGraphNode_t, cudaGraphDeviceNode_t> captured =
          detail::captured_device_node(stream, attributes[kept]);
      return updatable_kernel_node<Params...>(
          graph_node(captured.first),
          detail::device_node_access::make<Params...>(captured.second, offsets));
    }
  }
  return {};
}

}  // namespace curt
