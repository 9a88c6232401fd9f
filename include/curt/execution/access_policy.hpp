// curt/execution/access_policy.hpp: an L2 access-policy window, for streams and kernel launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace curt {

/// Hints how accesses to [base, base + bytes) use the L2 cache: hit_ratio of them get the `hit`
/// property (persisting by default), the rest `miss` (streaming by default).
struct access_policy_window {
  void* base = nullptr;    ///< The window's first byte, a device address (base_ptr).
  std::size_t bytes = 0;   ///< Bytes (num_bytes), at most device::access_policy_max_window_size().
  float hit_ratio = 1.0f;  ///< The fraction of accesses, 0 to 1, that get `hit` (hitRatio).
  cudaAccessProperty hit = cudaAccessPropertyPersisting;  ///< For hit_ratio of them (hitProp).
  cudaAccessProperty miss = cudaAccessPropertyStreaming;  ///< For the rest (missProp).

  /// The runtime's cudaAccessPolicyWindow of the same values.
  cudaAccessPolicyWindow native() const noexcept {
    cudaAccessPolicyWindow window{};
    window.base_ptr = base;
    window.num_bytes = bytes;
    window.hitRatio = hit_ratio;
    window.hitProp = hit;
    window.missProp = miss;
    return window;
  }
  /// The same values from the runtime's form.
  static access_policy_window from_native(const cudaAccessPolicyWindow& window) noexcept {
    return {window.base_ptr, window.num_bytes, window.hitRatio, window.hitProp, window.missProp};
  }
};

}  // namespace curt
