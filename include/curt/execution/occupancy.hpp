// curt/execution/occupancy.hpp: kernel attributes and occupancy, per device.
//
// Kernel attributes live in each device's context, so every function here takes the device.
// For functors and device lambdas, pass curt::kernel_for(function, args...) as the kernel.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/execution/launch.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace curt {

namespace detail {
template <class... Params>
const void* kernel_address(void (*kernel)(Params...)) noexcept {
  return reinterpret_cast<const void*>(kernel);
}
inline void set_kernel_attribute(device d, const void* kernel, cudaFuncAttribute attribute,
                                 int value, const char* what) {
  device_guard guard(d);
  check(cudaFuncSetAttribute(kernel, attribute, value), "cudaFuncSetAttribute",
        {"kernel", {what, value}, {"device", d.ordinal()}}, __FILE__, __LINE__);
}
}  // namespace detail

/// Registers, shared/local/constant memory and limits the compiler gave `kernel`.
template <class... Params>
cudaFuncAttributes kernel_attributes(device d, void (*kernel)(Params...)) {
  device_guard guard(d);
  cudaFuncAttributes attributes{};
  CURT_CHECK(cudaFuncGetAttributes(&attributes, detail::kernel_address(kernel)));
  return attributes;
}

/// Lets `kernel` use up to `bytes` of dynamic shared memory (above 48 KiB needs this opt-in).
template <class... Params>
void set_max_dynamic_shared_memory(device d, void (*kernel)(Params...), std::size_t bytes) {
  std::size_t limit = d.max_shared_memory_per_block_optin();
  std::size_t static_bytes = kernel_attributes(d, kernel).sharedSizeBytes;
  if (bytes > limit || static_bytes > limit - bytes)  // (no overflow for bytes near SIZE_MAX)
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::set_max_dynamic_shared_memory(%zu B)", bytes),
                  detail::fmt("%zu B + %zu B static exceeds the device's limit of %zu B per block",
                              bytes, static_bytes, limit),
                  __FILE__, __LINE__);
  detail::set_kernel_attribute(d, detail::kernel_address(kernel),
                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes),
                               "max dynamic shared memory");
}

/// Preferred percentage of L1/shared memory to use as shared memory (-1: no preference).
template <class... Params>
void set_preferred_shared_memory_carveout(device d, void (*kernel)(Params...), int percent) {
  detail::set_kernel_attribute(d, detail::kernel_address(kernel),
                               cudaFuncAttributePreferredSharedMemoryCarveout, percent,
                               "preferred shared memory carveout");
}

/// Allows clusters of more than the portable 8 blocks (16 on Hopper) for `kernel`.
template <class... Params>
void allow_non_portable_cluster_size(device d, void (*kernel)(Params...), bool allow = true) {
  detail::set_kernel_attribute(d, detail::kernel_address(kernel),
                               cudaFuncAttributeNonPortableClusterSizeAllowed, allow ? 1 : 0,
                               "non-portable cluster size allowed");
}

/// How many blocks of `block_threads` threads fit on one multiprocessor at once.
template <class... Params>
int max_active_blocks_per_multiprocessor(device d, void (*kernel)(Params...), int block_threads,
                                         std::size_t dynamic_shared_memory = 0) {
  device_guard guard(d);
  int blocks = 0;
  detail::check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                    &blocks, detail::kernel_address(kernel), block_threads, dynamic_shared_memory),
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
template <class... Params>
block_size_suggestion max_potential_block_size(device d, void (*kernel)(Params...),
                                               std::size_t dynamic_shared_memory = 0,
                                               int block_size_limit = 0) {
  device_guard guard(d);
  block_size_suggestion s;
  CURT_CHECK(cudaOccupancyMaxPotentialBlockSize(&s.min_grid_size, &s.block_size, kernel,
                                                dynamic_shared_memory, block_size_limit));
  return s;
}

/// How many clusters of config's cluster shape can be resident at once.
template <class... Params>
int max_active_clusters(device d, void (*kernel)(Params...), const launch_config& config) {
  device_guard guard(d);
  int clusters = 0;
  cudaLaunchConfig_t native = config.native(nullptr);
  detail::check(cudaOccupancyMaxActiveClusters(&clusters, detail::kernel_address(kernel), &native),
                "cudaOccupancyMaxActiveClusters",
                {"kernel",
                 {"block threads", static_cast<long long>(detail::volume(config.block_dims()))},
                 {"device", d.ordinal()}},
                __FILE__, __LINE__);
  return clusters;
}

/// The number of blocks that fills the device exactly once (for persistent or cooperative grids).
template <class... Params>
unsigned grid_to_fill_device(device d, void (*kernel)(Params...), int block_threads,
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
