// curt/device.hpp: devices, their properties and limits, the current device, versions.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/host_function.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#if defined(__GLIBCXX__)
#  include <bits/stl_iterator_base_types.h>  // the iterator tags, without all of <iterator>
#else
#  include <iterator>
#endif
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt {

/// A CUDA version such as 13.0, decoded from the runtime's 1000 * major + 10 * minor.
struct version {
  int major = 0;
  int minor = 0;

  static constexpr version from_encoded(int encoded) noexcept {
    return {encoded / 1000, encoded % 1000 / 10};
  }
  constexpr int encoded() const noexcept { return major * 1000 + minor * 10; }
  std::string to_string() const { return std::to_string(major) + "." + std::to_string(minor); }

  friend constexpr bool operator==(version a, version b) noexcept {
    return a.major == b.major && a.minor == b.minor;
  }
  friend constexpr bool operator!=(version a, version b) noexcept { return !(a == b); }
  friend constexpr bool operator<(version a, version b) noexcept {
    return a.encoded() < b.encoded();
  }
  friend constexpr bool operator>(version a, version b) noexcept { return b < a; }
  friend constexpr bool operator<=(version a, version b) noexcept { return !(b < a); }
  friend constexpr bool operator>=(version a, version b) noexcept { return !(a < b); }
};

/// The CUDA runtime curt runs on.
inline version runtime_version() {
  int encoded = 0;
  CURT_CHECK(cudaRuntimeGetVersion(&encoded));
  return version::from_encoded(encoded);
}

/// The newest CUDA version the installed driver supports; 0.0 when no driver is installed.
inline version driver_version() {
  int encoded = 0;
  CURT_CHECK(cudaDriverGetVersion(&encoded));
  return version::from_encoded(encoded);
}

/// Number of visible devices; 0 (never an exception) when there is no driver or no device.
inline int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

/// Why no device can be used ("no CUDA driver: ...", "no CUDA device: ..."); empty when one can.
inline std::string no_device_reason() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (status == cudaSuccess && count > 0) return {};
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0)
    return "no CUDA driver (libcuda.so.1 could not be loaded)";
  if (status == cudaSuccess || status == cudaErrorNoDevice) return "no CUDA device";
  return std::string("no CUDA device usable: ") + cudaGetErrorName(status) + " (" +
         cudaGetErrorString(status) + ")";
}

/// Compute capability, e.g. {9, 0}; as_int() gives 90.
struct compute_capability {
  int major = 0;
  int minor = 0;
  constexpr int as_int() const noexcept { return major * 10 + minor; }
  friend constexpr bool operator==(compute_capability a, compute_capability b) noexcept {
    return a.as_int() == b.as_int();
  }
  friend constexpr bool operator!=(compute_capability a, compute_capability b) noexcept {
    return !(a == b);
  }
  friend constexpr bool operator<(compute_capability a, compute_capability b) noexcept {
    return a.as_int() < b.as_int();
  }
  friend constexpr bool operator>(compute_capability a, compute_capability b) noexcept {
    return b < a;
  }
  friend constexpr bool operator<=(compute_capability a, compute_capability b) noexcept {
    return !(b < a);
  }
  friend constexpr bool operator>=(compute_capability a, compute_capability b) noexcept {
    return !(a < b);
  }
};

/// A device's 16-byte UUID; to_string() gives nvidia-smi's "GPU-xxxxxxxx-xxxx-..." form.
struct device_uuid {
  std::array<unsigned char, 16> bytes{};
  std::string to_string() const {
    char text[64];
    int n = std::snprintf(text, sizeof text, "GPU-");
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) text[n++] = '-';
      n += std::snprintf(text + n, sizeof text - n, "%02x", bytes[i]);
    }
    return std::string(text, n);
  }
  friend bool operator==(const device_uuid& a, const device_uuid& b) noexcept {
    return a.bytes == b.bytes;
  }
};

/// Free and total device memory, in bytes.
struct memory_info {
  std::size_t free = 0;
  std::size_t total = 0;
};

/// The value type of a device attribute: bool for the "is supported" kind, int otherwise.
template <cudaDeviceAttr Attribute>
struct device_attribute_type {
  using type = int;
};
#define CURT_BOOL_DEVICE_ATTRIBUTE(attribute)      \
  template <>                                      \
  struct device_attribute_type<attribute> {        \
    using type = bool;                             \
  };
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrGpuOverlap)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrKernelExecTimeout)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrIntegrated)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrCanMapHostMemory)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrConcurrentKernels)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrEccEnabled)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrTccDriver)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrUnifiedAddressing)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrStreamPrioritiesSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrGlobalL1CacheSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrLocalL1CacheSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrManagedMemory)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrIsMultiGpuBoard)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrHostNativeAtomicSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrPageableMemoryAccess)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrConcurrentManagedAccess)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrComputePreemptionSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrCanUseHostPointerForRegisteredMem)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrCooperativeLaunch)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrCanFlushRemoteWrites)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrHostRegisterSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrPageableMemoryAccessUsesHostPageTables)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrDirectManagedMemAccessFromHost)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrSparseCudaArraySupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrHostRegisterReadOnlySupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrTimelineSemaphoreInteropSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrMemoryPoolsSupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrGPUDirectRDMASupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrClusterLaunch)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrDeferredMappingCudaArraySupported)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrIpcEventSupport)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrMpsEnabled)
CURT_BOOL_DEVICE_ATTRIBUTE(cudaDevAttrHostMemoryPoolsSupported)
#undef CURT_BOOL_DEVICE_ATTRIBUTE

class device;
device current_device();

namespace detail {

// Properties are read once per device and kept for the life of the process: they do not change.
// (A mutex and a flag per device rather than std::call_once, which costs more to compile.)
inline const cudaDeviceProp& cached_properties(int ordinal) {
  struct entry {
    atomic<bool> ready{false};
    cudaDeviceProp properties{};
  };
  static const int count = device_count();
  // Never destroyed: destructors of static objects may still ask for properties at exit.
  static entry* const table = new entry[count > 0 ? count : 1];
  static std::mutex* const mutex = new std::mutex;
  if (ordinal < 0 || ordinal >= count)
    raise(cudaErrorInvalidDevice, "cudaGetDeviceProperties(device " + std::to_string(ordinal) + ")",
          std::to_string(count) + " CUDA device(s) visible", __FILE__, __LINE__);
  entry& e = table[ordinal];
  if (!e.ready.load(order::acquire)) {
    std::lock_guard<std::mutex> lock(*mutex);
    if (!e.ready.load(order::relaxed)) {
      check_call(cudaGetDeviceProperties(&e.properties, ordinal), "cudaGetDeviceProperties",
                 {{"device", ordinal}}, __FILE__, __LINE__);
      e.ready.store(true, order::release);
    }
  }
  return e.properties;
}

}  // namespace detail

/// A CUDA device: a validated ordinal. Cheap to copy; owns nothing.
class device {
 public:
  /// Throws cuda_error(cudaErrorInvalidDevice) naming the ordinal and the device count when
  /// `ordinal` does not name a visible device.
  explicit device(int ordinal) : ordinal_(ordinal) {
    int count = device_count();
    if (ordinal < 0 || ordinal >= count)
      detail::raise(cudaErrorInvalidDevice, "curt::device(" + std::to_string(ordinal) + ")",
                    std::to_string(count) + " CUDA device(s) visible" +
                        (count == 0 ? " (" + no_device_reason() + ")" : std::string()),
                    __FILE__, __LINE__);
  }

  /// The device with this ordinal, not checked against the device count (for hot paths that
  /// already hold a valid ordinal, e.g. from the runtime).
  static device from_ordinal_unchecked(int ordinal) noexcept { return device(ordinal, unchecked); }

  int ordinal() const noexcept { return ordinal_; }
  int get() const noexcept { return ordinal_; }

  /// All properties, read once per device and cached.
  const cudaDeviceProp& properties() const { return detail::cached_properties(ordinal_); }

  /// Any attribute, read from the driver on each call.
  int attribute(cudaDeviceAttr attribute) const {
    int value = 0;
    detail::check_call(cudaDeviceGetAttribute(&value, attribute, ordinal_),
                       "cudaDeviceGetAttribute", {{"attribute", attribute}, {"device", ordinal_}},
                       __FILE__, __LINE__);
    return value;
  }
  /// A typed attribute: bool for capability flags, int otherwise.
  template <cudaDeviceAttr Attribute>
  typename device_attribute_type<Attribute>::type attribute() const {
    return static_cast<typename device_attribute_type<Attribute>::type>(attribute(Attribute));
  }

  std::string name() const { return properties().name; }
  curt::compute_capability compute_capability() const {
    return {properties().major, properties().minor};
  }
  device_uuid uuid() const {
    device_uuid id;
    for (int i = 0; i < 16; ++i) id.bytes[i] = static_cast<unsigned char>(properties().uuid.bytes[i]);
    return id;
  }
  /// "0000:8a:00.0"-style PCI address.
  std::string pci_bus_id() const {
    char text[32] = {};
    detail::check_call(cudaDeviceGetPCIBusId(text, sizeof text, ordinal_), "cudaDeviceGetPCIBusId",
                       {{"device", ordinal_}}, __FILE__, __LINE__);
    return text;
  }

  int multiprocessor_count() const { return properties().multiProcessorCount; }
  int warp_size() const { return properties().warpSize; }
  int max_threads_per_block() const { return properties().maxThreadsPerBlock; }
  int max_threads_per_multiprocessor() const { return properties().maxThreadsPerMultiProcessor; }
  int max_blocks_per_multiprocessor() const { return properties().maxBlocksPerMultiProcessor; }
  std::array<int, 3> max_block_dims() const {
    return {properties().maxThreadsDim[0], properties().maxThreadsDim[1], properties().maxThreadsDim[2]};
  }
  std::array<int, 3> max_grid_dims() const {
    return {properties().maxGridSize[0], properties().maxGridSize[1], properties().maxGridSize[2]};
  }
  std::size_t shared_memory_per_block() const { return properties().sharedMemPerBlock; }
  /// The most dynamic + static shared memory a block can get after opting in.
  std::size_t max_shared_memory_per_block_optin() const { return properties().sharedMemPerBlockOptin; }
  std::size_t shared_memory_per_multiprocessor() const {
    return properties().sharedMemPerMultiprocessor;
  }
  int registers_per_block() const { return properties().regsPerBlock; }
  std::size_t total_memory() const { return properties().totalGlobalMem; }
  int l2_cache_size() const { return properties().l2CacheSize; }
  int persisting_l2_cache_max_size() const { return properties().persistingL2CacheMaxSize; }
  int access_policy_max_window_size() const { return properties().accessPolicyMaxWindowSize; }
  int memory_bus_width() const { return properties().memoryBusWidth; }
  bool supports_cooperative_launch() const { return properties().cooperativeLaunch != 0; }
  bool supports_cluster_launch() const { return attribute<cudaDevAttrClusterLaunch>(); }
  bool supports_memory_pools() const { return properties().memoryPoolsSupported != 0; }
  bool supports_managed_memory() const { return properties().managedMemory != 0; }
  bool supports_concurrent_managed_access() const { return properties().concurrentManagedAccess != 0; }
  bool supports_stream_priorities() const { return properties().streamPrioritiesSupported != 0; }
  bool is_integrated() const { return properties().integrated != 0; }

  /// Free and total memory of this device (queried through a device_guard).
  curt::memory_info memory_info() const;

  /// A device limit (stack size, printf FIFO, malloc heap, ...) of this device.
  std::size_t limit(cudaLimit which) const;
  void set_limit(cudaLimit which, std::size_t value) const;

  /// Waits for all work on this device (then destroys finished host functions, as a stream's
  /// synchronize() does).
  void synchronize() const;

  /// Stream priority range [greatest, least]; numerically greatest <= least (lower runs first).
  std::pair<int, int> stream_priority_range() const;

  friend bool operator==(device a, device b) noexcept { return a.ordinal_ == b.ordinal_; }
  friend bool operator!=(device a, device b) noexcept { return a.ordinal_ != b.ordinal_; }

 private:
  struct unchecked_t {};
  static constexpr unchecked_t unchecked{};
  device(int ordinal, unchecked_t) noexcept : ordinal_(ordinal) {}
  int ordinal_;
};

/// The calling thread's current device.
inline device current_device() {
  int ordinal = 0;
  CURT_CHECK(cudaGetDevice(&ordinal));
  return device::from_ordinal_unchecked(ordinal);
}

/// Makes `d` the calling thread's current device (cudaSetDevice): the one place where curt
/// changes it, and only when asked to. To target a device for a scope, use device_guard.
inline void set_current_device(device d) {
  detail::check_call(cudaSetDevice(d.ordinal()), "cudaSetDevice", {{"device", d.ordinal()}},
                     __FILE__, __LINE__);
}

namespace detail {

// How many curt::device_guard a thread made that still live. Inside one a context is current
// (the guard made sure of it), so the context check before each call on a stream is skipped
// there. The thread and each of its live guards hold a reference: a guard destroyed on another
// thread (in an object that dies there) still brings its maker's count down, also after the
// maker ended.
struct guard_count {
  atomic<int> held{0};
  atomic<int> references{1};  // the thread's own
  void release() noexcept {
    if (references.fetch_sub(1) == 1) delete this;
  }
};
// The calling thread's count, made by its first guard. A plain pointer, with no destructor of
// its own: the thread's thread_local objects made before its first guard are destroyed after
// the thread gave its reference back, and a curt call in their destructors reads null here (and
// makes its check) instead of a freed count.
inline thread_local guard_count* thread_guards = nullptr;
struct thread_guards_release {
  ~thread_guards_release() {
    if (guard_count* count = std::exchange(thread_guards, nullptr)) count->release();
  }
};

// A guard's part: counts it for the calling thread; the guard hands the result to uncount_guard
// when it dies, on whichever thread. (A guard made in a thread_local destructor after the thread
// gave its reference back leaves its small count behind when the thread ends.)
inline guard_count* count_guard() {
  if (thread_guards == nullptr) {
    thread_guards = new guard_count;
    static thread_local thread_guards_release release_at_thread_exit;
    (void)release_at_thread_exit;
  }
  thread_guards->references.fetch_add(1, order::relaxed);
  thread_guards->held.fetch_add(1, order::relaxed);
  return thread_guards;
}
inline void uncount_guard(guard_count* count) noexcept {
  count->held.fetch_sub(1, order::relaxed);
  count->release();
}

inline bool thread_holds_device_guard() noexcept {
  const guard_count* count = thread_guards;
  return count != nullptr && count->held.load(order::relaxed) > 0;
}

// The calling thread's current driver context; null when it has none.
inline CUcontext current_context() {
  CUcontext context = nullptr;
  CURT_DETAIL_DRIVER_CALL(cuCtxGetCurrent, 4000, &context);
  return context;
}

/// Pops, at the end of its scope, the context it pushed (if it pushed one).
class pushed_context {
 public:
  pushed_context() = default;
  void push(CUcontext context) {
    CURT_DETAIL_DRIVER_CALL(cuCtxPushCurrent, 4000, context);
    pushed_ = true;
  }
  ~pushed_context() {
    if (!pushed_) return;
    CUcontext popped = nullptr;
    check_driver_noexcept(CURT_DETAIL_DRIVER_FUNCTION(cuCtxPopCurrent, 4000)(&popped),
                          "cuCtxPopCurrent", __FILE__, __LINE__);
  }
  pushed_context(const pushed_context&) = delete;
  pushed_context& operator=(const pushed_context&) = delete;

 private:
  bool pushed_ = false;
};

/// Whether `context` still has the process-unique id `id`: false once it was destroyed or reset
/// (a reset primary context keeps its handle, not its id).
inline bool context_has_id(CUcontext context, unsigned long long id) {
  unsigned long long now = 0;
  return context != nullptr && CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetId, 12000)(context, &now) == 0 &&
         now == id;
}

/// Makes `context` current for a scope unless it already is, and restores exactly what was
/// current before (also nothing) with a pop: never cudaSetDevice, which would make a context on
/// a device the program may never use and replace a context the user made current.
class context_scope {
 public:
  explicit context_scope(CUcontext context) {
    if (context != current_context()) pushed_.push(context);
  }

 private:
  pushed_context pushed_;
};

/// Whether `stream` is a default-stream handle (0, legacy, per-thread): it names the stream of
/// whatever context is current, not a stream of its own.
inline bool is_default_stream_handle(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

// The contexts of the streams curt is capturing on, from begin to end, and of the streams that
// joined those captures through stream.wait(stream) (forks). The driver cannot tell the context
// of a stream whose capture was invalidated (cuStreamGetCtx fails), which a thread with no
// context needs in order to end that capture, to join its forks, or to ask about it:
// stream_context() consults this table then, and only then.
class capturing_streams {
 public:
  /// False when the stream had an entry already (a capture of its own, which a refused second
  /// begin must not remove).
  bool add(cudaStream_t stream, CUcontext context) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& e : entries_)
      if (e.stream == stream) {
        e.context = context;
        return false;
      }
    entries_.push_back({stream, context, stream});
    size_.store(entries_.size(), order::relaxed);
    return true;
  }
  /// After `waiting` waited on `source`: if source is in a capture kept here, `waiting` joined it.
  /// One relaxed load while no capture is kept (a capture the caller's fork is about was
  /// registered before the fork, in the caller's own order).
  void note_wait(cudaStream_t waiting, cudaStream_t source) {
    if (CURT_LIKELY(size_.load(order::relaxed) == 0)) return;
    note_fork(waiting, source);
  }
  /// Removes the stream's entry and, when it began a capture, those of the streams that joined
  /// it (the capture is over). Also when the stream is destroyed (one relaxed load when no
  /// capture is kept): its handle may name another stream later.
  void remove(cudaStream_t stream) noexcept {
    if (CURT_LIKELY(size_.load(order::relaxed) == 0)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t i = 0; i < entries_.size();) {
      if (entries_[i].stream == stream || entries_[i].origin == stream) {
        entries_[i] = entries_.back();
        entries_.pop_back();
      } else {
        ++i;
      }
    }
    size_.store(entries_.size(), order::relaxed);
  }
  CUcontext find(cudaStream_t stream) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& e : entries_)
      if (e.stream == stream) return e.context;
    return nullptr;
  }

 private:
  struct entry {
    cudaStream_t stream;
    CUcontext context;
    cudaStream_t origin;  // the stream that began the capture (itself, for that one)
  };
  CURT_COLD void note_fork(cudaStream_t waiting, cudaStream_t source) {
    if (is_default_stream_handle(waiting)) return;  // it names another stream on each thread
    CUcontext context = nullptr;  // the capture is active: the driver tells it
    if (CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetCtx, 9020)(waiting, &context) != 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    cudaStream_t origin = nullptr;
    for (const auto& e : entries_) {
      if (e.stream == waiting) return;  // its own capture, or a fork known already
      if (e.stream == source) origin = e.origin;
    }
    if (origin == nullptr) return;
    entries_.push_back({waiting, context, origin});
    size_.store(entries_.size(), order::relaxed);
  }

  mutable std::mutex mutex_;
  std::vector<entry> entries_;
  atomic<std::size_t> size_{0};
};

inline capturing_streams& capture_contexts() {
  static capturing_streams* table = new capturing_streams;  // never destroyed: used at exit
  return *table;
}

// The driver context a stream belongs to, also in a capture curt began and that was invalidated
// since; null when it cannot be told (a default stream on a thread with no context, another
// stream in an invalidated capture), with the driver's code in *status.
inline CUcontext stream_context(cudaStream_t stream, int* status = nullptr) {
  CUcontext context = nullptr;
  int result = CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetCtx, 9020)(stream, &context);
  if (CURT_LIKELY(result == 0)) return context;
  if (status) *status = result;
  return capture_contexts().find(stream);
}

// A reference to a device's primary context, released at the end of its scope.
class retained_primary_context {
 public:
  retained_primary_context() = default;
  CUcontext retain(CUdevice device) {
    CURT_DETAIL_DRIVER_CALL(cuDevicePrimaryCtxRetain, 7000, &context_, device);
    device_ = device;
    retained_ = true;
    return context_;
  }
  // The runtime holds its own reference once it has used the context, so releasing ours never
  // destroys a context that streams or events live in.
  ~retained_primary_context() {
    if (!retained_) return;
    check_driver_noexcept(CURT_DETAIL_DRIVER_FUNCTION(cuDevicePrimaryCtxRelease, 11000)(device_),
                          "cuDevicePrimaryCtxRelease", __FILE__, __LINE__);
  }
  retained_primary_context(const retained_primary_context&) = delete;
  retained_primary_context& operator=(const retained_primary_context&) = delete;

 private:
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  bool retained_ = false;
};

inline bool primary_context_active(CUdevice device) {
  unsigned flags = 0;
  int active = 0;
  CURT_DETAIL_DRIVER_CALL(cuDevicePrimaryCtxGetState, 7000, device, &flags, &active);
  return active != 0;
}

/// Device `ordinal`'s CUdevice, its primary context initialized through the runtime (which keeps
/// it, as its first call on the device would; nothing is made current) unless it is active
/// already: a context curt retains and releases, or state put into it (peer access, a green
/// context that retains it), must not die with curt's reference, nor be made anew each time.
inline CUdevice keep_primary_context(int ordinal) {
  CUdevice device = 0;
  CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  if (!primary_context_active(device))
    check_call(cudaInitDevice(ordinal, 0, 0), "cudaInitDevice", {{"device", ordinal}}, __FILE__,
               __LINE__);
  return device;
}

// Asks the driver for `attribute` (a CU_POINTER_ATTRIBUTE_*) of `memory` into `data`, on any
// thread (no context needed); returns the driver's status, CUDA_ERROR_INVALID_VALUE for an
// address it does not know. Throws when the driver function cannot be looked up (at exit, the
// runtime unloading): not noexcept, nor are its callers.
inline int query_pointer_attribute(void* data, int attribute, const void* memory) {
  const auto address = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(memory));
  return CURT_DETAIL_DRIVER_FUNCTION(cuPointerGetAttribute, 4000)(data, attribute, address);
}

// The context `memory` was allocated in; null for memory that names none (pool memory, memory
// CUDA does not know).
inline CUcontext memory_context(const void* memory) {
  CUcontext context = nullptr;
  return query_pointer_attribute(&context, driver_fn::pointer_attribute_context, memory) == 0
             ? context
             : nullptr;
}

/// Asks for current_device_scope's form for calls whose answer does not depend on the context.
struct any_context_t {
  explicit any_context_t() = default;
};
inline constexpr any_context_t any_context{};

/// On a thread with no current context, makes the primary context of device `ordinal` current
/// for the scope (-1: of the runtime's current device, cudaGetDevice) and pops it at the end: the
/// context a runtime call would make current on such a thread, without leaving it current. Some
/// runtime calls (cudaMemRangeGetAttribute, on CUDA 13.0) do not make one current at all and fail
/// with cudaErrorDeviceUninitialized instead. One cuCtxGetCurrent when a context is current.
/// A primary context it finds inactive is initialized by the runtime (keep_primary_context):
/// releasing curt's own reference at the end must not destroy it again, or every such call would
/// pay for a context creation.
/// With any_context (calls that only need some context), a primary context that is active
/// already serves, the runtime device's first, then any other: a process that works on device 1
/// only never gets one on device 0 from them. Given the memory the call is about (pointer and
/// range queries, advice), the memory's own context serves first, else its device's primary
/// context: the driver tells both on a thread with no context, so memory of a user's context
/// never makes one on another device either.
class current_device_scope {
 public:
  explicit current_device_scope(int ordinal = -1) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    enter(ordinal);
  }
  explicit current_device_scope(any_context_t) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    enter_any();
  }
  current_device_scope(any_context_t, const void* memory) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    enter_for(memory);
  }

 private:
  friend class stream_context_scope;
  friend class pool_context_scope;
  struct deferred {};
  explicit current_device_scope(deferred) noexcept {}  // enter() later, when needed
  CURT_COLD void enter(int ordinal) {
    if (ordinal < 0) check(cudaGetDevice(&ordinal), "cudaGetDevice", __FILE__, __LINE__);
    pushed_.push(primary_.retain(keep_primary_context(ordinal)));
  }
  CURT_COLD void enter_any() {
    int ordinal = 0;
    check(cudaGetDevice(&ordinal), "cudaGetDevice", __FILE__, __LINE__);
    int count = 0;
    CURT_DETAIL_DRIVER_CALL(cuDeviceGetCount, 2000, &count);
    for (int step = 0; step < count; ++step) {  // the runtime's device first
      int candidate = (ordinal + step) % count;
      CUdevice device = 0;
      CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &device, candidate);
      if (primary_context_active(device)) {
        pushed_.push(primary_.retain(device));
        return;
      }
    }
    enter(ordinal);
  }
  CURT_COLD void enter_for(const void* memory) {
    if (CUcontext context = memory_context(memory)) {
      pushed_.push(context);
      return;
    }
    int ordinal = -1;
    if (query_pointer_attribute(&ordinal, driver_fn::pointer_attribute_device_ordinal, memory) ==
            0 &&
        ordinal >= 0)
      enter(ordinal);  // pool memory names no context
    else
      enter_any();  // memory CUDA does not know
  }

  retained_primary_context primary_;  // declared first: popped before it is released
  pushed_context pushed_;
};

/// On a thread with no current context, a runtime call on a stream would first make the current
/// device's (device 0's) primary context current and leave it so: this makes the stream's own
/// context current for the scope instead (for a default stream, which names no context, the
/// runtime's current device's primary context, as the runtime would). One cuCtxGetCurrent when a
/// context is current (none inside a device_guard): that check is inline and the rest out of line,
/// because it runs before every copy and memset, where the driver's own work is a microsecond or
/// two.
/// A created stream whose context cannot be told (stream_context(): its capture was invalidated,
/// and curt did not begin it; its context is lost), and for which the caller learnt none earlier
/// (`known`), is refused here with the driver's code: any context curt could pick instead might
/// be another device's, which the failing call would then wake.
class stream_context_scope {
 public:
  explicit stream_context_scope(cudaStream_t stream, CUcontext known = nullptr) {
    if (CURT_LIKELY(thread_holds_device_guard() || current_context() != nullptr)) return;
    enter(stream, known);
  }
  stream_context_scope(const stream_context_scope&) = delete;
  stream_context_scope& operator=(const stream_context_scope&) = delete;

 private:
  CURT_COLD void enter(cudaStream_t stream, CUcontext known) {
    if (known != nullptr) {
      pushed_.push(known);
      return;
    }
    if (is_default_stream_handle(stream)) {
      default_stream_.enter(-1);  // the runtime's current device
      return;
    }
    int status = 0;
    CUcontext context = stream_context(stream, &status);
    if (CURT_UNLIKELY(context == nullptr)) throw_unknown_stream_context(status);
    pushed_.push(context);
  }
  // The code in the runtime's category (the same numbers): the user called a runtime operation.
  [[noreturn]] CURT_COLD static void throw_unknown_stream_context(int status) {
    throw_error(make_error_code(static_cast<cudaError_t>(status)), "cuStreamGetCtx(stream)",
                location(__FILE__, __LINE__),
                "this thread has no current context, so curt runs the call in the stream's own "
                "context, which the driver could not tell; nothing was done on the stream (one "
                "whose capture was invalidated must end its capture, on a thread with its "
                "context current, before it is used again)");
  }
  pushed_context pushed_;
  current_device_scope default_stream_{current_device_scope::deferred{}};
};

}  // namespace detail

/// Makes device `d` the target of runtime calls for a scope, through the driver: a context of
/// `d` that is current already (the user's own, a green context's) stays current; otherwise d's
/// primary context is pushed, and popped at the end. The thread is left exactly as it was: with
/// no context when it had none, with the user's context when it had one. Every curt call that
/// needs a device's context (creating streams and events, limits, kernel attributes, occupancy)
/// goes through it.
/// While a guard lives, curt's calls on streams (launches, copies, synchronize, ...) skip their
/// check for a current context: hold one around a hot loop to pay only what the raw calls cost.
/// Making no context current inside its scope (cuCtxPopCurrent, cuCtxSetCurrent(nullptr)) breaks
/// that promise, and the guard's own pop at the end.
class device_guard {
 public:
  explicit device_guard(device d) {
    CUdevice target = 0;
    CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &target, d.ordinal());
    if (detail::current_context() != nullptr) {
      CUdevice current = -1;
      if (CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetDevice, 2000)(&current) == 0 && current == target) {
        count_ = detail::count_guard();
        return;
      }
    }
    pushed_.push(primary_.retain(target));
    count_ = detail::count_guard();
  }
  ~device_guard() { detail::uncount_guard(count_); }  // before the members pop and release
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  // Declared in this order so that the pop comes before the release.
  detail::retained_primary_context primary_;
  detail::pushed_context pushed_;
  detail::guard_count* count_ = nullptr;  // the count of the thread that made the guard
};

inline curt::memory_info device::memory_info() const {
  device_guard guard(*this);
  curt::memory_info info;
  detail::check_call(cudaMemGetInfo(&info.free, &info.total), "cudaMemGetInfo",
                     {{"device", ordinal_}}, __FILE__, __LINE__);
  return info;
}

inline std::size_t device::limit(cudaLimit which) const {
  device_guard guard(*this);
  std::size_t value = 0;
  detail::check_call(cudaDeviceGetLimit(&value, which), "cudaDeviceGetLimit",
                     {{"limit", which}, {"device", ordinal_}}, __FILE__, __LINE__);
  return value;
}

inline void device::set_limit(cudaLimit which, std::size_t value) const {
  device_guard guard(*this);
  detail::check_call(cudaDeviceSetLimit(which, value), "cudaDeviceSetLimit",
                     {{"limit", which}, {"value", static_cast<long long>(value)}, {"device", ordinal_}},
                     __FILE__, __LINE__);
}

inline void device::synchronize() const {
  device_guard guard(*this);
  detail::check_call(cudaDeviceSynchronize(), "cudaDeviceSynchronize", {{"device", ordinal_}},
                     __FILE__, __LINE__);
  detail::deferred().drain();  // host functions that finished: destroy them on this thread
}

inline std::pair<int, int> device::stream_priority_range() const {
  device_guard guard(*this);
  int least = 0, greatest = 0;
  CURT_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return {greatest, least};
}

/// All visible devices, as a range: `for (curt::device d : curt::devices())`.
class device_range {
 public:
  class iterator {
   public:
    // An input iterator: operator* returns a device by value, which forward iterators may not.
    using iterator_category = std::input_iterator_tag;
    using value_type = device;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = device;
    explicit iterator(int ordinal) noexcept : ordinal_(ordinal) {}
    device operator*() const noexcept { return device::from_ordinal_unchecked(ordinal_); }
    iterator& operator++() noexcept { ++ordinal_; return *this; }
    iterator operator++(int) noexcept { iterator old = *this; ++ordinal_; return old; }
    friend bool operator==(iterator a, iterator b) noexcept { return a.ordinal_ == b.ordinal_; }
    friend bool operator!=(iterator a, iterator b) noexcept { return a.ordinal_ != b.ordinal_; }

   private:
    int ordinal_;
  };
  device_range() noexcept : count_(device_count()) {}
  iterator begin() const noexcept { return iterator(0); }
  iterator end() const noexcept { return iterator(count_); }
  int size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  device operator[](int i) const { return device(i); }

 private:
  int count_;
};

inline device_range devices() noexcept { return device_range(); }

}  // namespace curt
