// curt/core/device.hpp: devices, their properties and limits, the current device, versions.
#pragma once

#include <curt/core/atomic.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/error.hpp>
#include <curt/core/version.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
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

namespace curt {

/// The CUDA runtime curt runs on (cudaRuntimeGetVersion).
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
  return detail::fmt("no CUDA device usable: %s (%s)", cudaGetErrorName(status),
                     cudaGetErrorString(status));
}

/// Compute capability, e.g. {9, 0}; as_int() gives 90.
struct compute_capability {
  int major = 0;  ///< e.g. 9 for 9.0 (cudaDeviceProp::major).
  int minor = 0;  ///< e.g. 0 for 9.0 (cudaDeviceProp::minor).
  constexpr int as_int() const noexcept { return major * 10 + minor; }  ///< 90 for 9.0.
  /// Compare as_int(): equal when major and minor are; ordered by major, then minor. @{
  constexpr bool operator==(compute_capability b) const noexcept { return as_int() == b.as_int(); }
  constexpr bool operator!=(compute_capability b) const noexcept { return !(*this == b); }
  constexpr bool operator<(compute_capability b) const noexcept { return as_int() < b.as_int(); }
  constexpr bool operator>(compute_capability b) const noexcept { return b < *this; }
  constexpr bool operator<=(compute_capability b) const noexcept { return !(b < *this); }
  constexpr bool operator>=(compute_capability b) const noexcept { return !(*this < b); }  ///@}
};

/// A device's 16-byte UUID; to_string() gives nvidia-smi's "GPU-xxxxxxxx-xxxx-..." form.
struct device_uuid {
  std::array<unsigned char, 16> bytes{};  ///< The raw bytes, as cudaDeviceProp::uuid holds them.
  /// "GPU-" and the bytes in lower-case hex, grouped 8-4-4-4-12, as nvidia-smi -L prints.
  std::string to_string() const {
    char text[64] = "GPU-";
    std::size_t n = 4;
    for (std::size_t i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) text[n++] = '-';
      n += static_cast<std::size_t>(std::snprintf(text + n, sizeof text - n, "%02x", bytes[i]));
    }
    return std::string(text, n);
  }
  /// Same 16 bytes. (There is no operator!=.)
  friend bool operator==(device_uuid a, device_uuid b) noexcept { return a.bytes == b.bytes; }
};

/// Free and total device memory, in bytes.
struct memory_info {
  std::size_t free = 0;   ///< Free now (cudaMemGetInfo); other processes' memory is not free.
  std::size_t total = 0;  ///< All of the device's memory.
};

namespace detail {
// The attributes that say whether something is supported: their value is a bool.
constexpr bool is_capability_attribute(cudaDeviceAttr attribute) noexcept {
  switch (attribute) {
    case cudaDevAttrGpuOverlap: case cudaDevAttrKernelExecTimeout: case cudaDevAttrIntegrated:
    case cudaDevAttrCanMapHostMemory: case cudaDevAttrConcurrentKernels:
    case cudaDevAttrEccEnabled: case cudaDevAttrTccDriver: case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrStreamPrioritiesSupported: case cudaDevAttrGlobalL1CacheSupported:
    case cudaDevAttrLocalL1CacheSupported: case cudaDevAttrManagedMemory:
    case cudaDevAttrIsMultiGpuBoard: case cudaDevAttrHostNativeAtomicSupported:
    case cudaDevAttrPageableMemoryAccess: case cudaDevAttrConcurrentManagedAccess:
    case cudaDevAttrComputePreemptionSupported:
    case cudaDevAttrCanUseHostPointerForRegisteredMem: case cudaDevAttrCooperativeLaunch:
    case cudaDevAttrCanFlushRemoteWrites: case cudaDevAttrHostRegisterSupported:
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables:
    case cudaDevAttrDirectManagedMemAccessFromHost: case cudaDevAttrSparseCudaArraySupported:
    case cudaDevAttrHostRegisterReadOnlySupported:
    case cudaDevAttrTimelineSemaphoreInteropSupported: case cudaDevAttrMemoryPoolsSupported:
    case cudaDevAttrGPUDirectRDMASupported: case cudaDevAttrClusterLaunch:
    case cudaDevAttrDeferredMappingCudaArraySupported: case cudaDevAttrIpcEventSupport:
    case cudaDevAttrMpsEnabled: case cudaDevAttrHostMemoryPoolsSupported:
      return true;
    default:
      return false;
  }
}

// What curt keeps per device for the life of the process (never destroyed: static owners may
// still use it at exit): its properties, read once (they do not change), and its primary
// context, retained once when curt first needs it (as CCCL does), never released.
struct device_entry {
  atomic<bool> has_properties{false};
  cudaDeviceProp properties{};
  atomic<CUcontext> primary{nullptr};
};
// The entry of device `ordinal`, for `call` (named when the ordinal is out of range).
inline device_entry& device_table(int ordinal, const char* call) {
  static const int count = device_count();
  static device_entry* const table = new device_entry[count > 0 ? count : 1];
  if (ordinal < 0 || ordinal >= count)
    raise(cudaErrorInvalidDevice, fmt("%s(device %d)", call, ordinal),
          fmt("%d CUDA device(s) visible", count), __FILE__, __LINE__);
  return table[ordinal];
}
inline std::mutex& device_table_mutex() {
  static std::mutex* const mutex = new std::mutex;
  return *mutex;
}

inline const cudaDeviceProp& cached_properties(int ordinal) {
  device_entry& e = device_table(ordinal, "cudaGetDeviceProperties");
  if (e.has_properties.load(order::acquire)) return e.properties;
  std::lock_guard<std::mutex> lock(device_table_mutex());
  if (!e.has_properties.load(order::relaxed)) {
    check(cudaGetDeviceProperties(&e.properties, ordinal), "cudaGetDeviceProperties",
          {{"device", ordinal}}, __FILE__, __LINE__);
    e.has_properties.store(true, order::release);
  }
  return e.properties;
}

}  // namespace detail

/// The value type of a device attribute: bool for the "is supported" kind, int otherwise.
template <cudaDeviceAttr Attribute>
struct device_attribute_type {
  /// bool for an attribute that says whether something is supported, int for any other.
  using type = std::conditional_t<detail::is_capability_attribute(Attribute), bool, int>;
};

/// A CUDA device: a validated ordinal. Cheap to copy; owns nothing.
class device {
 public:
  /// Unless `ordinal` is a visible device's, throws cudaErrorInvalidDevice naming it and the count.
  explicit device(int ordinal) : ordinal_(ordinal) {
    int count = device_count();
    if (ordinal < 0 || ordinal >= count)
      detail::raise(cudaErrorInvalidDevice, detail::fmt("curt::device(%d)", ordinal),
                    detail::fmt("%d CUDA device(s) visible%s", count, count ? "" :
                                detail::fmt(" (%s)", no_device_reason().c_str()).c_str()),
                    __FILE__, __LINE__);
  }

  /// Unchecked against the device count: for hot paths with a valid ordinal (e.g. the runtime's).
  static device from_ordinal_unchecked(int ordinal) noexcept { return device(ordinal, unchecked); }

  int ordinal() const noexcept { return ordinal_; }  ///< The runtime's device number, from 0.
  int get() const noexcept { return ordinal_; }      ///< Same as ordinal().

  /// All properties, read once per device and cached.
  const cudaDeviceProp& properties() const { return detail::cached_properties(ordinal_); }

  /// Any attribute, read from the driver on each call (cudaDeviceGetAttribute).
  int attribute(cudaDeviceAttr attribute) const {
    int value = 0;
    detail::check(cudaDeviceGetAttribute(&value, attribute, ordinal_), "cudaDeviceGetAttribute",
                  {{"attribute", attribute}, {"device", ordinal_}}, __FILE__, __LINE__);
    return value;
  }
  /// A typed attribute: bool for capability flags, int otherwise.
  template <cudaDeviceAttr Attribute>
  typename device_attribute_type<Attribute>::type attribute() const {
    return static_cast<typename device_attribute_type<Attribute>::type>(attribute(Attribute));
  }

  std::string name() const { return properties().name; }  ///< The product name, e.g. "NVIDIA H200".
  /// cudaDeviceProp::major and minor, e.g. {9, 0} on an H100 or H200.
  curt::compute_capability compute_capability() const {
    return {properties().major, properties().minor};
  }
  /// The UUID nvidia-smi shows (cudaDeviceProp::uuid); stable across ordinal changes.
  device_uuid uuid() const {
    device_uuid id;
    for (std::size_t i = 0; i < 16; ++i)
      id.bytes[i] = static_cast<unsigned char>(properties().uuid.bytes[i]);
    return id;
  }
  /// "0000:8a:00.0"-style PCI address (cudaDeviceGetPCIBusId, on each call).
  std::string pci_bus_id() const {
    char text[32] = {};
    detail::check(cudaDeviceGetPCIBusId(text, sizeof text, ordinal_), "cudaDeviceGetPCIBusId",
                       {{"device", ordinal_}}, __FILE__, __LINE__);
    return text;
  }

  /// From the cached properties(): the cudaDeviceProp field of the same meaning; sizes in bytes. @{
  int multiprocessor_count() const { return properties().multiProcessorCount; }
  int warp_size() const { return properties().warpSize; }  ///< Threads per warp (warpSize).
  int max_threads_per_block() const { return properties().maxThreadsPerBlock; }
  int max_threads_per_multiprocessor() const { return properties().maxThreadsPerMultiProcessor; }
  int max_blocks_per_multiprocessor() const { return properties().maxBlocksPerMultiProcessor; }
  /// The most threads of a block in x, y and z (cudaDeviceProp::maxThreadsDim).
  std::array<int, 3> max_block_dims() const {
    const cudaDeviceProp& p = properties();
    return {p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]};
  }
  /// The most blocks of a grid in x, y and z (cudaDeviceProp::maxGridSize).
  std::array<int, 3> max_grid_dims() const {
    return {properties().maxGridSize[0], properties().maxGridSize[1], properties().maxGridSize[2]};
  }
  std::size_t shared_memory_per_block() const { return properties().sharedMemPerBlock; }
  /// The most bytes of dynamic + static shared memory a block can get after opting in.
  std::size_t max_shared_memory_per_block_optin() const {
    return properties().sharedMemPerBlockOptin;
  }
  /// Bytes of shared memory of one SM, for all its resident blocks together.
  std::size_t shared_memory_per_multiprocessor() const {
    return properties().sharedMemPerMultiprocessor;
  }
  int registers_per_block() const { return properties().regsPerBlock; }  ///< 32-bit registers.
  std::size_t total_memory() const { return properties().totalGlobalMem; }
  int l2_cache_size() const { return properties().l2CacheSize; }  ///< L2 bytes (l2CacheSize).
  int persisting_l2_cache_max_size() const { return properties().persistingL2CacheMaxSize; }
  int access_policy_max_window_size() const { return properties().accessPolicyMaxWindowSize; }
  int memory_bus_width() const { return properties().memoryBusWidth; }  ///< In bits, not bytes.
  bool supports_cooperative_launch() const { return properties().cooperativeLaunch != 0; }
  /// Thread block clusters (9.0+): cudaDevAttrClusterLaunch, asked of the driver on each call.
  bool supports_cluster_launch() const { return attribute<cudaDevAttrClusterLaunch>(); }
  bool supports_memory_pools() const { return properties().memoryPoolsSupported != 0; }
  bool supports_managed_memory() const { return properties().managedMemory != 0; }
  /// Host and device may use managed memory at once (concurrentManagedAccess).
  bool supports_concurrent_managed_access() const {
    return properties().concurrentManagedAccess != 0;
  }
  bool supports_stream_priorities() const { return properties().streamPrioritiesSupported != 0; }
  bool is_integrated() const { return properties().integrated != 0; }  ///@}

  /// Free and total memory of this device (queried in its context, core/context.hpp).
  curt::memory_info memory_info() const;

  std::size_t limit(cudaLimit which) const;  ///< A limit: stack size, printf FIFO, malloc heap, ...
  void set_limit(cudaLimit which, std::size_t value) const;  ///< Sets one (cudaDeviceSetLimit).

  /// Waits for all work on the device, then destroys finished host functions, as stream_ref's does.
  void synchronize() const;

  /// Stream priority range [greatest, least]; numerically greatest <= least (lower runs first).
  std::pair<int, int> stream_priority_range() const;

  /// Same ordinal. @{
  friend bool operator==(device a, device b) noexcept { return a.ordinal_ == b.ordinal_; }
  friend bool operator!=(device a, device b) noexcept { return a.ordinal_ != b.ordinal_; }  ///@}

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
  detail::check(cudaSetDevice(d.ordinal()), "cudaSetDevice", {{"device", d.ordinal()}}, __FILE__,
                __LINE__);
}

/// All visible devices, as a range: `for (curt::device d : curt::devices())`.
class device_range {
 public:
  /// Walks the ordinals from 0 up, giving each as a curt::device (unchecked: the range counted).
  class iterator {
   public:
    /// An input iterator: operator* returns a device by value, which forward iterators may not. @{
    using iterator_category = std::input_iterator_tag;
    using value_type = device;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = device;
    explicit iterator(int ordinal) noexcept : ordinal_(ordinal) {}  ///< At device `ordinal`.
    device operator*() const noexcept { return device::from_ordinal_unchecked(ordinal_); }
    iterator& operator++() noexcept { ++ordinal_; return *this; }  ///< On to the next ordinal.
    iterator operator++(int) noexcept { iterator old = *this; ++ordinal_; return old; }
    friend bool operator==(iterator a, iterator b) noexcept { return a.ordinal_ == b.ordinal_; }
    friend bool operator!=(iterator a, iterator b) noexcept { return a.ordinal_ != b.ordinal_; }
    ///@}
   private:
    int ordinal_;
  };
  device_range() noexcept : count_(device_count()) {}
  iterator begin() const noexcept { return iterator(0); }  ///< At device 0.
  iterator end() const noexcept { return iterator(count_); }  ///< Past the last device.
  int size() const noexcept { return count_; }  ///< device_count() when the range was made.
  bool empty() const noexcept { return count_ == 0; }  ///< No visible device (or no driver).
  device operator[](int i) const { return device(i); }  ///< device(i): `i` is checked (may throw).

 private:
  int count_;
};

inline device_range devices() noexcept { return device_range(); }

}  // namespace curt

#include <curt/core/context.hpp>  // device_guard, and the members that need a context
