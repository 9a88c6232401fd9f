// curt/execution/launch.hpp: kernel launch through cudaLaunchKernelEx with a named configuration.
//
//   curt::launch(stream, curt::launch_config(grid, block).cluster_dims(2), kernel, args...);
//   curt::launch(stream, config, [=] __device__ (int n) { ... }, n);  // nvcc --extended-lambda
//
// Arguments are checked against the kernel's parameters at compile time. A refused launch throws a
// cuda_error naming the kernel and its configuration and, for the common mistakes (block too large,
// grid not a multiple of the cluster, too much shared memory, a cooperative grid larger than the
// device or green context holds), the numbers involved. The diagnosis runs only after a refusal:
// success costs only cudaLaunchKernelEx. Programmatic dependent launch is off unless asked for.
//
// The launch itself is the driver's cuLaunchKernelEx of the kernel's context-independent handle
// (cudaGetKernel): the driver runs it in the stream's own context, so a thread with no current
// context gets none (the runtime's launch would make device 0's primary context current there).
#pragma once

#include <curt/core/config.hpp>
#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/access_policy.hpp>
#include <curt/execution/event.hpp>
#include <curt/execution/stream.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(_CXXABI_H) && \
    !defined(__CXXABI_H)  // curt's one <cxxabi.h> call (libstdc++'s and libc++abi's guards)
namespace __cxxabiv1 { extern "C" char* __cxa_demangle(const char*, char*, std::size_t*, int*); }
#endif

namespace curt::detail::driver_fn {
// CUlaunchConfig; attributes as cudaLaunchAttribute (driver and runtime share ids and values).
struct launch_config {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_memory;
  cudaStream_t stream;
  const cudaLaunchAttribute* attributes;
  unsigned attribute_count;
};
// CUdevResource of the 12040 ABI (144 bytes): type, 92 bytes, CUdevSmResource in a 48-byte union.
struct dev_resource {
  int type;
  unsigned char padding[92];
  unsigned sm_count, min_partition_size, coscheduled_alignment;
  unsigned char rest[36];
};
static_assert(sizeof(dev_resource) == 144, "CUdevResource of the 12040 ABI has 144 bytes");
CURT_DETAIL_DRIVER_TYPE(cuLaunchKernelEx_v11060, const launch_config* config, cudaKernel_t kernel,
                        void** arguments, void** extra);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxGetDevResource_v12040, CUgreenCtx green, dev_resource* resource,
                        int type);
}  // namespace curt::detail::driver_fn

namespace curt {

/// Blocks to cover `count` items, `per_block` per block: count / per_block rounded up, in the two's
/// common type (no overflow near its maximum, no narrowing). count >= 0; per_block > 0.
template <class T, class U>
constexpr std::common_type_t<T, U> ceil_div(T count, U per_block) noexcept {
  static_assert(std::is_integral_v<T> && std::is_integral_v<U>, "curt::ceil_div takes integers");
  using R = std::common_type_t<T, U>;
  return static_cast<R>(static_cast<R>(count) / static_cast<R>(per_block) +
                        (static_cast<R>(count) % static_cast<R>(per_block) != 0 ? 1 : 0));
}

/// Grid, block, dynamic shared memory and launch attributes, set by name; the last setting wins.
class launch_config {
 public:
  launch_config() = default;
  /// `grid` blocks of `block` threads and `dynamic_shared_memory` bytes, without attributes.
  launch_config(dim3 grid, dim3 block, std::size_t dynamic_shared_memory = 0) noexcept
      : grid_(grid), block_(block), dynamic_shared_memory_(dynamic_shared_memory) {}

  /// The grid, in blocks. Each setter returns *this, for chaining.
  launch_config& grid(dim3 blocks) noexcept {
    grid_ = blocks;
    return *this;
  }
  /// The block, in threads.
  launch_config& block(dim3 threads) noexcept {
    block_ = threads;
    return *this;
  }
  /// Dynamic shared memory bytes per block (over 48 KiB: set_max_dynamic_shared_memory).
  launch_config& dynamic_shared_memory(std::size_t bytes) noexcept {
    dynamic_shared_memory_ = bytes;
    return *this;
  }
  /// Blocks per cluster; the grid must be a multiple of it in each dimension.
  launch_config& cluster_dims(dim3 blocks) noexcept {
    slot(cudaLaunchAttributeClusterDimension).clusterDim = {blocks.x, blocks.y, blocks.z};
    return *this;
  }
  /// A larger cluster shape to use where the device can; a multiple of cluster_dims.
  launch_config& preferred_cluster_dims(dim3 blocks) noexcept {
    slot(cudaLaunchAttributePreferredClusterDimension).preferredClusterDim = {blocks.x, blocks.y,
                                                                              blocks.z};
    return *this;
  }
  /// All blocks resident at once, so the grid may synchronize (cooperative_groups grid.sync()).
  launch_config& cooperative(bool on = true) noexcept {
    slot(cudaLaunchAttributeCooperative).cooperative = on;
    return *this;
  }
  /// Programmatic dependent launch: this kernel may start before the previous kernel in the
  /// stream finishes; it waits with cudaGridDependencySynchronize() where it needs that result.
  launch_config& programmatic_stream_serialization(bool on = true) noexcept {
    slot(cudaLaunchAttributeProgrammaticStreamSerialization)
        .programmaticStreamSerializationAllowed = on;
    return *this;
  }
  /// Records `e` once all blocks have triggered (cudaTriggerProgrammaticLaunchCompletion) or
  /// started, so kernels on other streams can wait on this kernel's early part (with
  /// cudaGridDependencySynchronize). The host may see it fire only after the kernel is done:
  /// on the H200, ready() stayed false while the kernel ran. `e` must not record timing.
  launch_config& programmatic_event(event_ref e, bool trigger_at_block_start = false) {
    cudaEvent_t event = e.get();  // before slot(): it may throw
    cudaLaunchAttributeValue& v = slot(cudaLaunchAttributeProgrammaticEvent);
    v.programmaticEvent.event = event;
    v.programmaticEvent.triggerAtBlockStart = trigger_at_block_start;
    return *this;
  }
  /// Records `e` once all blocks have started (driver's best effort); `e` must not record timing.
  launch_config& launch_completion_event(event_ref e) {
    cudaEvent_t event = e.get();
    slot(cudaLaunchAttributeLaunchCompletionEvent).launchCompletionEvent.event = event;
    return *this;
  }
  /// Scheduling priority of this kernel (same scale as stream priorities).
  launch_config& priority(int value) noexcept {
    slot(cudaLaunchAttributePriority).priority = value;
    return *this;
  }
  /// Memory synchronization domain of this kernel (its stream's otherwise).
  launch_config& memory_sync_domain(cudaLaunchMemSyncDomain domain) noexcept {
    slot(cudaLaunchAttributeMemSyncDomain).memSyncDomain = domain;
    return *this;
  }
  /// L2 persistence for this kernel (its stream's window otherwise).
  launch_config& access_policy_window(const curt::access_policy_window& window) noexcept {
    slot(cudaLaunchAttributeAccessPolicyWindow).accessPolicyWindow = window.native();
    return *this;
  }
  /// Percent of the unified L1/shared memory to carve out as shared memory for this launch.
  launch_config& preferred_shared_memory_carveout(unsigned percent) noexcept {
    slot(cudaLaunchAttributePreferredSharedMemoryCarveout).sharedMemCarveout = percent;
    return *this;
  }

  /// As set; unset, the grid and the block are 1 x 1 x 1 and dynamic shared memory is 0 bytes. @{
  dim3 grid_dims() const noexcept { return grid_; }
  dim3 block_dims() const noexcept { return block_; }
  std::size_t dynamic_shared_memory_bytes() const noexcept { return dynamic_shared_memory_; }  ///@}
  static constexpr unsigned max_attributes = 12;  ///< Capacity: a slot per attribute id it can set.
  /// The attributes set, one per id: attribute_count() of them (none unless set), in an array. @{
  unsigned attribute_count() const noexcept { return count_; }
  const cudaLaunchAttribute* attributes() const noexcept { return attributes_.data(); }  ///@}
  /// The attribute with this id, or nullptr when not set.
  const cudaLaunchAttribute* find(cudaLaunchAttributeID id) const noexcept {
    for (unsigned i = 0; i < count_; ++i)
      if (attributes_[i].id == id) return &attributes_[i];
    return nullptr;
  }

  /// The runtime's form, pointing into this object's attributes, for `stream`.
  cudaLaunchConfig_t native(cudaStream_t stream) const noexcept {
    cudaLaunchConfig_t config{};
    config.gridDim = grid_;
    config.blockDim = block_;
    config.dynamicSmemBytes = dynamic_shared_memory_;
    config.stream = stream;
    config.attrs = const_cast<cudaLaunchAttribute*>(attributes_.data());  // the API never writes
    config.numAttrs = count_;
    return config;
  }

 private:
  // The zeroed value of attribute `id`, to be set: one slot per id, so it never overflows.
  cudaLaunchAttributeValue& slot(cudaLaunchAttributeID id) noexcept {
    unsigned i = 0;
    while (i < count_ && attributes_[i].id != id) ++i;
    if (i == count_) ++count_;
    attributes_[i].id = id;
    return attributes_[i].val = cudaLaunchAttributeValue{};
  }

  dim3 grid_{1, 1, 1};
  dim3 block_{1, 1, 1};
  std::size_t dynamic_shared_memory_ = 0;
  std::array<cudaLaunchAttribute, max_attributes> attributes_{};
  unsigned count_ = 0;
};

namespace detail {

inline std::string dims_text(dim3 d) { return fmt("%ux%ux%u", d.x, d.y, d.z); }
inline unsigned long long volume(dim3 d) {
  return static_cast<unsigned long long>(d.x) * d.y * d.z;
}

// The error path is templates (Config: cudaLaunchConfig_t): only units that launch compile it.

template <class Char>  // a symbol's name as in the source (demangled if the compiler lets us)
std::string demangle(const Char* name) {
#if defined(__GNUC__) || defined(__clang__)
  int status = 0;
  char* demangled = __cxxabiv1::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string text;
  try {
    if (status == 0 && demangled) text = demangled;
  } catch (...) {
    std::free(demangled);
    throw;
  }
  std::free(demangled);
  if (!text.empty()) return text;
#endif
  return name;
}

// The kernel's name as written in the source. (A library kernel's handle cast to const void*
// is taken too: the runtime's cudaFuncGetName accepts a cudaKernel_t that way.)
template <class Kernel>
std::string kernel_name(Kernel kernel) {
  const char* name = nullptr;
  if (cudaFuncGetName(&name, kernel) != cudaSuccess || !name) {
    (void)cudaGetLastError();
    return "<unknown kernel>";
  }
  return demangle(name);
}

template <class Config>
std::string describe_launch(const Config& config, const std::string& kernel) {
  std::string text = fmt("curt::launch(%s, grid %s, block %s, %zu B dynamic shared memory",
                         kernel.c_str(), dims_text(config.gridDim).c_str(),
                         dims_text(config.blockDim).c_str(), config.dynamicSmemBytes);
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    const cudaLaunchAttributeValue& v = config.attrs[i].val;
    switch (config.attrs[i].id) {
      case cudaLaunchAttributeClusterDimension:
        text += fmt(", cluster %ux%ux%u", v.clusterDim.x, v.clusterDim.y, v.clusterDim.z);
        break;
      case cudaLaunchAttributePreferredClusterDimension:
        text += fmt(", preferred cluster %ux%ux%u", v.preferredClusterDim.x,
                    v.preferredClusterDim.y, v.preferredClusterDim.z);
        break;
      case cudaLaunchAttributeCooperative:
        if (v.cooperative) text += ", cooperative";
        break;
      case cudaLaunchAttributeProgrammaticStreamSerialization:
        if (v.programmaticStreamSerializationAllowed) text += ", programmatic stream serialization";
        break;
      case cudaLaunchAttributePriority:
        text += fmt(", priority %d", v.priority);
        break;
      case cudaLaunchAttributeProgrammaticEvent:
        text += ", programmatic event";
        break;
      case cudaLaunchAttributeLaunchCompletionEvent:
        text += ", launch completion event";
        break;
      case cudaLaunchAttributeMemSyncDomain:
        text += fmt(", memory sync domain %d", static_cast<int>(v.memSyncDomain));
        break;
      case cudaLaunchAttributeAccessPolicyWindow:
        text += fmt(", access policy window of %zu B", v.accessPolicyWindow.num_bytes);
        break;
      case cudaLaunchAttributePreferredSharedMemoryCarveout:
        text += fmt(", shared memory carveout %u%%", v.sharedMemCarveout);
        break;
      default:
        text += fmt(", attribute %d", static_cast<int>(config.attrs[i].id));
    }
  }
  return text + ")";
}

// The SMs of the green context `stream` belongs to (cuStreamGetGreenCtx, then its SM resource);
// 0 for a stream of an ordinary context, or when the driver cannot tell. The caller has made the
// stream's context current. (A template, as the rest of the error path: Stream is cudaStream_t.)
template <class Stream>
CURT_COLD unsigned green_sm_count(Stream stream) noexcept {
  try {
    CUgreenCtx green = nullptr;
    driver_fn::dev_resource resource{};
    if (CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetGreenCtx, 12040)(stream, &green) != 0 ||
        green == nullptr ||
        CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxGetDevResource, 12040)(green, &resource, 1) != 0)
      return 0;
    return resource.sm_count;
  } catch (...) {  // a driver without green contexts: the device's count applies
    return 0;
  }
}

// Says in numbers why the driver refused a launch, for the mistakes that can be told apart. The
// kernel's attributes and occupancy are read in the stream's context: they differ per device.
template <class Config>
std::string explain_launch_failure(const Config& config, const void* kernel) {
  CUcontext context = stream_context(config.stream);
  if (context == nullptr && !is_default_stream_handle(config.stream)) return {};
  context_scope in_stream_context(context ? context : context_of(config.stream));
  int ordinal = 0;
  if (cudaStreamGetDevice(config.stream, &ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  const cudaDeviceProp& p = cached_properties(ordinal);
  const dim3 grid = config.gridDim, block = config.blockDim;
  const unsigned long long threads = volume(block), blocks = volume(grid);
  if (threads == 0 || blocks == 0) return "grid and block dimensions must all be at least 1";
  if (threads > static_cast<unsigned long long>(p.maxThreadsPerBlock))
    return fmt("block of %llu threads exceeds the device's limit of %d threads per block", threads,
               p.maxThreadsPerBlock);
  const unsigned block_dims[3] = {block.x, block.y, block.z};
  const unsigned grid_dims[3] = {grid.x, grid.y, grid.z};
  for (int i = 0; i < 3; ++i) {
    if (block_dims[i] > static_cast<unsigned>(p.maxThreadsDim[i]))
      return fmt("block dimension %c = %u exceeds the device's limit of %d", "xyz"[i],
                 block_dims[i], p.maxThreadsDim[i]);
    if (grid_dims[i] > static_cast<unsigned>(p.maxGridSize[i]))
      return fmt("grid dimension %c = %u exceeds the device's limit of %d", "xyz"[i],
                 grid_dims[i], p.maxGridSize[i]);
  }
  cudaFuncAttributes f{};
  bool have_attributes = cudaFuncGetAttributes(&f, kernel) == cudaSuccess;
  if (!have_attributes) (void)cudaGetLastError();
  if (have_attributes && threads > static_cast<unsigned long long>(f.maxThreadsPerBlock))
    return fmt("block of %llu threads exceeds this kernel's limit of %d (its register use or "
               "__launch_bounds__)", threads, f.maxThreadsPerBlock);
  if (have_attributes) {
    std::size_t total = config.dynamicSmemBytes + f.sharedSizeBytes;
    if (total > p.sharedMemPerBlockOptin)
      return fmt("%zu B of dynamic shared memory (+ %zu B static) exceeds the device's limit of "
                 "%zu B per block", config.dynamicSmemBytes, f.sharedSizeBytes,
                 p.sharedMemPerBlockOptin);
    if (config.dynamicSmemBytes > static_cast<std::size_t>(f.maxDynamicSharedSizeBytes))
      return fmt("%zu B of dynamic shared memory exceeds this kernel's limit of %d B; raise it "
                 "with curt::set_max_dynamic_shared_memory (the device allows up to %zu B)",
                 config.dynamicSmemBytes, f.maxDynamicSharedSizeBytes,
                 p.sharedMemPerBlockOptin - f.sharedSizeBytes);
  }
  bool cooperative = false;
  for (unsigned i = 0; i < config.numAttrs; ++i) {
    const cudaLaunchAttribute& a = config.attrs[i];
    if (a.id == cudaLaunchAttributeCooperative) cooperative = a.val.cooperative != 0;
    if (a.id != cudaLaunchAttributeClusterDimension) continue;
    dim3 cluster(a.val.clusterDim.x, a.val.clusterDim.y, a.val.clusterDim.z);
    if (volume(cluster) == 0) return "cluster dimensions must all be at least 1";
    if (grid.x % cluster.x || grid.y % cluster.y || grid.z % cluster.z)
      return fmt("grid %s is not a multiple of the cluster %s", dims_text(grid).c_str(),
                 dims_text(cluster).c_str());
    if (volume(cluster) > 8 && have_attributes && !f.nonPortableClusterSizeAllowed)
      return fmt("cluster of %llu blocks exceeds the portable maximum of 8; allow more with "
                 "curt::allow_non_portable_cluster_size", volume(cluster));
  }
  if (cooperative) {
    int per_sm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, static_cast<int>(threads),
                                                      config.dynamicSmemBytes) == cudaSuccess) {
      const unsigned green = green_sm_count(config.stream);  // green stream: only its SMs count
      const unsigned sms = green ? green : static_cast<unsigned>(p.multiProcessorCount);
      unsigned long long fit = static_cast<unsigned long long>(per_sm) * sms;
      if (blocks > fit)
        return fmt("cooperative grid of %llu blocks exceeds the %llu that can be resident at "
                   "once%s (%d per multiprocessor x %u%s)", blocks, fit,
                   green ? " on the stream's green context" : "", per_sm, sms,
                   green ? fmt(" SMs; the device has %d", p.multiProcessorCount).c_str() : "");
    }
  }
  return {};
}

template <class Config>
[[noreturn]] CURT_COLD void throw_launch_error(int result, const Config& config,
                                               const void* kernel) {
  context_scope in;  // the kernel's name is asked in the stream's context too
  try {
    in.enter(for_stream, config.stream);
  } catch (const cuda_error&) {  // one the driver cannot tell: the explanation says no more
  }
  const std::string call = describe_launch(config, kernel_name(kernel));
  throw_error(make_error_code(static_cast<cudaError_t>(result)), call, __FILE__, __LINE__,
              [&]() -> std::string {
                (void)cudaGetLastError();  // the diagnosis calls the runtime: start clean
                try {
                  return explain_launch_failure(config, kernel);
                } catch (const cuda_error&) {  // the stream's context could not be entered
                  return {};
                }
              });
}

// The driver's launch of a context-independent kernel handle (a compiled kernel's, from
// cudaGetKernel, or a library's), in the stream's own context.
inline int launch_native(const cudaLaunchConfig_t& config, cudaKernel_t handle, void** arguments) {
  // The driver takes 32 bits: a larger size would reach it cut short, and be accepted.
  if (CURT_UNLIKELY(config.dynamicSmemBytes > 0xffffffffu)) return cudaErrorInvalidValue;
  const dim3 g = config.gridDim, b = config.blockDim;
  const driver_fn::launch_config native{
      g.x, g.y, g.z, b.x, b.y, b.z, static_cast<unsigned>(config.dynamicSmemBytes),
      config.stream, config.attrs, config.numAttrs};
  return on_stream(config.stream, [&] {
    return CURT_DETAIL_DRIVER_FUNCTION(cuLaunchKernelEx, 11060)(&native, handle, arguments,
                                                                nullptr);
  });
}
inline int launch_native(const cudaLaunchConfig_t& config, const void* kernel, void** arguments) {
  cudaKernel_t handle = nullptr;
  if (cudaError_t status = cudaGetKernel(&handle, kernel); CURT_UNLIKELY(status != cudaSuccess))
    return status;
  return launch_native(config, handle, arguments);
}

// One text for both launch paths (a kernel's span parameter, a functor's view).
#define CURT_DETAIL_TEMPORARY_BUFFER_MESSAGE                                                  \
  "curt::launch: a temporary buffer gives the kernel no view of its elements: it is freed at " \
  "the end of the statement, before the kernel runs; give it a name"

template <class A, class = void>
struct is_memory_owner : std::false_type {};
template <class A>
struct is_memory_owner<A, std::void_t<typename std::decay_t<A>::kernel_view>> : std::true_type {};

template <std::size_t Index, class Param, class Arg>
constexpr bool check_argument() {
  // A temporary owner refuses every view (memory/owner.hpp); a named one would have converted.
  constexpr bool temporary_owner =
      !std::is_lvalue_reference_v<Arg> && is_memory_owner<Arg>::value &&
      std::is_convertible_v<std::remove_reference_t<Arg>&, Param>;
  static_assert(!temporary_owner, CURT_DETAIL_TEMPORARY_BUFFER_MESSAGE);
  static_assert(temporary_owner || std::is_convertible_v<Arg, Param>,
                "curt::launch: an argument does not convert to the kernel's parameter type; "
                "see Index (0-based), Param and Arg in the instantiation below");
  return std::is_convertible_v<Arg, Param>;
}

template <class ParamTuple, class ArgTuple, std::size_t... I>
constexpr bool check_arguments(std::index_sequence<I...>) {
  return (
      check_argument<I, std::tuple_element_t<I, ParamTuple>, std::tuple_element_t<I, ArgTuple>>() &&
      ...);
}

// Launches `kernel` (a __global__ function's address, or a context-independent handle such as a
// library kernel's); a failure throws, explained.
template <class Kernel>
void launch_or_throw(const cudaLaunchConfig_t& config, Kernel kernel, void** arguments) {
  if (int result = launch_native(config, kernel, arguments); CURT_UNLIKELY(result != 0))
    throw_launch_error(result, config, static_cast<const void*>(kernel));
}

// Checks at compile time that the arguments convert to the kernel's parameters, then launches
// the parameters by value, in the kernel's own types, as <<<>>> would pass them.
template <class... Params, class Kernel, class... Args>
void launch_converted(const cudaLaunchConfig_t& config, Kernel kernel, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "curt::launch: the number of arguments differs from the kernel's parameters");
  if constexpr (sizeof...(Params) == sizeof...(Args)) {
    constexpr bool convertible = check_arguments<std::tuple<Params...>, std::tuple<Args&&...>>(
        std::index_sequence_for<Params...>{});
    if constexpr (convertible) {  // otherwise only curt's static_assert speaks
      using values_t = std::tuple<std::decay_t<Params>...>;
      values_t values = values_t(std::forward<Args>(args)...);
      std::apply(
          [&](auto&... v) {
            void* pointers[sizeof...(Params) + 1] = {static_cast<void*>(&v)..., nullptr};
            launch_or_throw(config, kernel, pointers);
          },
          values);
    }
  }
}

}  // namespace detail

/// Launches `kernel` on `stream` with `config`; the arguments must convert to its parameters.
template <class... Params, class... Args>
inline void launch(stream_ref stream, const launch_config& config, void (*kernel)(Params...),
                   Args&&... args) {
  detail::launch_converted<Params...>(config.native(stream.get()),
                                      reinterpret_cast<const void*>(kernel),
                                      std::forward<Args>(args)...);
}

namespace detail {
// What a functor's kernel takes for an argument: its value, or for a curt owner of memory (which
// names its kernel_view) a view of the elements, which the functor's span parameter takes.
template <class A, class = void>
struct kernel_argument {
  using type = std::decay_t<A>;
};
template <class A>
struct kernel_argument<A, std::void_t<typename std::decay_t<A>::kernel_view>> {
  static_assert(std::is_lvalue_reference_v<A>, CURT_DETAIL_TEMPORARY_BUFFER_MESSAGE);
  using element = std::remove_reference_t<decltype(*std::declval<A>().data())>;
  using type = typename std::decay_t<A>::kernel_view::template rebind<element>;
};
#undef CURT_DETAIL_TEMPORARY_BUFFER_MESSAGE
template <class A>
using kernel_argument_t = typename kernel_argument<A>::type;
}  // namespace detail

#if defined(__CUDACC__)

namespace detail {
template <class Function, class... Args>
__global__ void functor_kernel(Function function, Args... args) {
  static_assert(std::is_invocable_v<Function&, Args&...>,
                "curt::launch: the functor cannot be called with these arguments; see Function "
                "and Args in the instantiation below");
  if constexpr (std::is_invocable_v<Function&, Args&...>) function(args...);
}
// Selects the overloads for a function object (not a function, nor a pointer to one, nor a
// kernel handle such as a curt::library_kernel, which says so with a kernel_handle_tag).
template <class F, class = void>
struct is_kernel_handle : std::false_type {};
template <class F>
struct is_kernel_handle<F, std::void_t<typename F::kernel_handle_tag>> : std::true_type {};
template <class F>
using if_functor = std::enable_if_t<!std::is_pointer_v<std::decay_t<F>> &&
                                        !std::is_function_v<std::remove_reference_t<F>> &&
                                        !is_kernel_handle<std::decay_t<F>>::value,
                                    int>;
}  // namespace detail

/// The __global__ function curt launches for a functor of type Function with arguments of these
/// types (decayed; a curt buffer becomes a view of its elements), for occupancy queries and kernel
/// attributes. Prefer kernel_for(), which deduces the types from the very values the launch passes.
template <class Function, class... Args>
constexpr auto functor_kernel() noexcept {
  return &detail::functor_kernel<std::decay_t<Function>, detail::kernel_argument_t<Args>...>;
}

/// The __global__ function that curt::launch(stream, config, function, args...) launches, from
/// the same values: `auto k = curt::kernel_for(lambda, n, data);` then
/// `curt::max_active_blocks_per_multiprocessor(device, k, 256)`. (The values are not used.)
template <class Function, class... Args>
constexpr auto kernel_for(Function&&, Args&&...) noexcept {
  return functor_kernel<Function, Args...>();
}

/// Launches a functor or device lambda: every thread calls function(args...).
template <class Function, class... Args, detail::if_functor<Function> = 0>
inline void launch(stream_ref stream, const launch_config& config, Function&& function,
                   Args&&... args) {
  // (kernel_for only reads the arguments' types: forwarding them twice moves nothing.)
  launch(stream, config, kernel_for(function, std::forward<Args>(args)...),
         std::forward<Function>(function), std::forward<Args>(args)...);
}

#endif  // __CUDACC__

}  // namespace curt
