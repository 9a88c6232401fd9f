// curt/execution/occupancy.hpp: kernel attributes and occupancy, per device.
//
// Kernel attributes live in each device's context, so every function here takes the device.
// For functors and device lambdas, pass curt::kernel_for(function, args...) as the kernel; a
// curt::library_kernel (<curt/library.hpp>) is taken too. Its attributes go through the driver
// per device (cuKernelGetAttribute, cuKernelSetAttribute: no context needed); occupancy goes
// through the same runtime calls as for a __global__ function, which accept its handle.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/execution/launch.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <type_traits>

namespace curt::detail::driver_fn {
// attribute: a CUfunction_attribute; its settable values have cudaFuncAttribute's numbers.
CURT_DETAIL_DRIVER_TYPE(cuKernelGetAttribute_v12000, int* value, int attribute,
                        cudaKernel_t kernel, CUdevice device);
CURT_DETAIL_DRIVER_TYPE(cuKernelSetAttribute_v12000, int attribute, int value,
                        cudaKernel_t kernel, CUdevice device);
}  // namespace curt::detail::driver_fn

namespace curt {

namespace detail {
/// A kernel as the functions below take it: a __global__ function, or anything whose get()
/// is a context-independent kernel handle (curt::library_kernel). The runtime's functions take
/// such a handle cast to const void* ("assumed to be a cudaKernel_t", CUDA 12.0+).
struct kernel_arg {
  template <class... Params>
  kernel_arg(void (*kernel)(Params...)) noexcept  // NOLINT: implicit by design
      : address(reinterpret_cast<const void*>(kernel)) {}
  template <class K, std::enable_if_t<std::is_same_v<decltype(std::declval<const K&>().get()),
                                                     cudaKernel_t>, int> = 0>
  kernel_arg(const K& kernel)  // NOLINT: implicit by design
      : handle(kernel.get()), address(handle) {}
  cudaKernel_t handle = nullptr;  // a library kernel's; null for a __global__ function
  const void* address = nullptr;
};

inline void set_kernel_attribute(device d, kernel_arg kernel, cudaFuncAttribute attribute,
                                 int value, const char* what) {
  int result = 0;
  if (kernel.handle) {  // per device through the driver, in no context
    result = CURT_DETAIL_DRIVER_FUNCTION(cuKernelSetAttribute, 12000)(
        attribute, value, kernel.handle, driver_device(d.ordinal()));
  } else {
    device_guard guard(d);
    result = cudaFuncSetAttribute(kernel.address, attribute, value);
  }
  check(static_cast<cudaError_t>(result),
        kernel.handle ? "cuKernelSetAttribute" : "cudaFuncSetAttribute",
        {"kernel", {what, value}, {"device", d.ordinal()}}, __FILE__, __LINE__);
}

// A library kernel's attributes on device d, as cudaFuncGetAttributes gives them, from the
// driver's CUfunction_attribute values 0 to 15 (their order in cudaFuncAttributes differs).
inline cudaFuncAttributes library_kernel_attributes(device d, cudaKernel_t kernel) {
  const auto get = CURT_DETAIL_DRIVER_FUNCTION(cuKernelGetAttribute, 12000);
  const CUdevice dev = driver_device(d.ordinal());
  int values[16] = {};
  for (int attribute = 0; attribute < 16; ++attribute)
    check_runtime(get(&values[attribute], attribute, kernel, dev),
                  fmt("cuKernelGetAttribute(attribute %d, kernel, device %d)", attribute,
                      d.ordinal()).c_str(), __FILE__, __LINE__);
  cudaFuncAttributes a{};
  a.maxThreadsPerBlock = values[0];
  a.sharedSizeBytes = static_cast<std::size_t>(values[1]);
  a.constSizeBytes = static_cast<std::size_t>(values[2]);
  a.localSizeBytes = static_cast<std::size_t>(values[3]);
  a.numRegs = values[4];
  a.ptxVersion = values[5];
  a.binaryVersion = values[6];
  a.cacheModeCA = values[7];
  a.maxDynamicSharedSizeBytes = values[8];
  a.preferredShmemCarveout = values[9];
  a.clusterDimMustBeSet = values[10];
  a.requiredClusterWidth = values[11];
  a.requiredClusterHeight = values[12];
  a.requiredClusterDepth = values[13];
  a.nonPortableClusterSizeAllowed = values[14];
  a.clusterSchedulingPolicyPreference = values[15];
  return a;
}
}  // namespace detail

/// Registers, shared/local/constant memory and limits the compiler gave `kernel`.
template <class Kernel>
cudaFuncAttributes kernel_attributes(device d, const Kernel& kernel) {
  const detail::kernel_arg k(kernel);
  if (k.handle) return detail::library_kernel_attributes(d, k.handle);
  device_guard guard(d);
  cudaFuncAttributes attributes{};
  CURT_CHECK(cudaFuncGetAttributes(&attributes, k.address));
  return attributes;
}

/// Lets `kernel` use up to `bytes` of dynamic shared memory (above 48 KiB needs this opt-in).
template <class Kernel>
void set_max_dynamic_shared_memory(device d, const Kernel& kernel, std::size_t bytes) {
  std::size_t limit = d.max_shared_memory_per_block_optin();
  std::size_t static_bytes = kernel_attributes(d, kernel).sharedSizeBytes;
  if (bytes > limit || static_bytes > limit - bytes)  // (no overflow for bytes near SIZE_MAX)
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::set_max_dynamic_shared_memory(%zu B)", bytes),
                  detail::fmt("%zu B + %zu B static exceeds the device's limit of %zu B per block",
                              bytes, static_bytes, limit),
                  __FILE__, __LINE__);
  detail::set_kernel_attribute(d, kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes), "max dynamic shared memory");
}

/// Preferred percentage of L1/shared memory to use as shared memory (-1: no preference).
template <class Kernel>
void set_preferred_shared_memory_carveout(device d, const Kernel& kernel, int percent) {
  detail::set_kernel_attribute(d, kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent,
                               "preferred shared memory carveout");
}

/// Allows clusters of more than the portable 8 blocks (16 on Hopper) for `kernel`.
template <class Kernel>
void allow_non_portable_cluster_size(device d, const Kernel& kernel, bool allow = true) {
  detail::set_kernel_attribute(d, kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                               allow ? 1 : 0, "non-portable cluster size allowed");
}

/// How many blocks of `block_threads` threads fit on one multiprocessor at once.
template <class Kernel>
int max_active_blocks_per_multiprocessor(device d, const Kernel& kernel, int block_threads,
                                         std::size_t dynamic_shared_memory = 0) {
  device_guard guard(d);
  int blocks = 0;
  detail::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks,
                                                             detail::kernel_arg(kernel).address,
                                                             block_threads, dynamic_shared_memory),
                "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                {"kernel",
                 {"threads", block_threads},
                 {"bytes of dynamic shared memory", static_cast<long long>(dynamic_shared_memory)},
                 {"device", d.ordinal()}},
                __FILE__, __LINE__);
  return blocks;
}

/// The block size with the highest occupancy, and the smallest grid that reaches it.
struct block_size_suggestion {
  int min_grid_size = 0;  ///< The smallest grid, in blocks, that reaches it (minGridSize).
  int block_size = 0;     ///< Threads per block (blockSize).
};
template <class Kernel>
block_size_suggestion max_potential_block_size(device d, const Kernel& kernel,
                                               std::size_t dynamic_shared_memory = 0,
                                               int block_size_limit = 0) {
  device_guard guard(d);
  block_size_suggestion s;
  CURT_CHECK(cudaOccupancyMaxPotentialBlockSize(&s.min_grid_size, &s.block_size,
                                                detail::kernel_arg(kernel).address,
                                                dynamic_shared_memory, block_size_limit));
  return s;
}

/// How many clusters of config's cluster shape can be resident at once.
template <class Kernel>
int max_active_clusters(device d, const Kernel& kernel, const launch_config& config) {
  device_guard guard(d);
  int clusters = 0;
  cudaLaunchConfig_t native = config.native(nullptr);
  detail::check(cudaOccupancyMaxActiveClusters(&clusters, detail::kernel_arg(kernel).address,
                                               &native),
                "cudaOccupancyMaxActiveClusters",
                {"kernel",
                 {"block threads", static_cast<long long>(detail::volume(config.block_dims()))},
                 {"device", d.ordinal()}},
                __FILE__, __LINE__);
  return clusters;
}

/// The number of blocks that fills the device exactly once (for persistent or cooperative grids).
template <class Kernel>
unsigned grid_to_fill_device(device d, const Kernel& kernel, int block_threads,
                             std::size_t dynamic_shared_memory = 0) {
  int per_sm =
      max_active_blocks_per_multiprocessor(d, kernel, block_threads, dynamic_shared_memory);
  if (per_sm == 0)
    detail::raise(cudaErrorInvalidConfiguration,
                  detail::fmt("curt::grid_to_fill_device(%d threads, %zu B)", block_threads,
                              dynamic_shared_memory),
                  "no block of this size fits on a multiprocessor", __FILE__, __LINE__);
  return static_cast<unsigned>(per_sm) * static_cast<unsigned>(d.multiprocessor_count());
}

}  // namespace curt
