// curt/core/version.hpp: curt's version, the CUDA toolkits it supports, and the version type.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#define CURT_VERSION_MAJOR 0
#define CURT_VERSION_MINOR 1
#define CURT_VERSION_PATCH 0
/// curt's version as one number for `#if`: major * 10000 + minor * 100 + patch.
#define CURT_VERSION (CURT_VERSION_MAJOR * 10000 + CURT_VERSION_MINOR * 100 + CURT_VERSION_PATCH)
/// The oldest CUDA toolkit curt compiles with, and the newest its headers and tests were checked
/// with on a GPU, in CUDART_VERSION's form (13000 is 13.0).
#define CURT_CUDA_OLDEST_SUPPORTED 13000
#define CURT_CUDA_NEWEST_CHECKED 13000

#if !defined(CUDART_VERSION) || CUDART_VERSION < CURT_CUDA_OLDEST_SUPPORTED
#  error "curt needs the CUDA 13.0 toolkit or newer: this toolkit's CUDART_VERSION is older"
#endif

namespace curt {

/// A version such as CUDA 13.0 (the runtime's 1000 * major + 10 * minor) or curt 0.1.0.
struct version {
  int major = 0;  ///< e.g. 12 for CUDA 12.4.
  int minor = 0;  ///< e.g. 4 for CUDA 12.4.
  int patch = 0;  ///< curt's patch number; 0 for a CUDA version (the runtime reports none).

  /// From the runtime's form (cudaRuntimeGetVersion, cudaDriverGetVersion): 12040 is 12.4.
  static constexpr version from_encoded(int encoded) noexcept {
    return {encoded / 1000, encoded % 1000 / 10};
  }
  /// CUDA's form, 12.4 is 12040 (patch left out; not CURT_VERSION's form).
  constexpr int encoded() const noexcept { return major * 1000 + minor * 10; }
  /// "12.4"; "0.1.2" when the patch number is not 0.
  std::string to_string() const {
    std::string text = std::to_string(major) + '.' + std::to_string(minor);
    return patch == 0 ? text : text + '.' + std::to_string(patch);
  }

  /// Equal when major, minor and patch are; ordered by major, then minor, then patch. @{
  friend constexpr bool operator==(version a, version b) noexcept {
    return a.major == b.major && a.minor == b.minor && a.patch == b.patch;
  }
  friend constexpr bool operator!=(version a, version b) noexcept { return !(a == b); }
  friend constexpr bool operator<(version a, version b) noexcept {
    return a.major != b.major ? a.major < b.major
                              : a.minor != b.minor ? a.minor < b.minor : a.patch < b.patch;
  }
  friend constexpr bool operator>(version a, version b) noexcept { return b < a; }
  friend constexpr bool operator<=(version a, version b) noexcept { return !(b < a); }
  friend constexpr bool operator>=(version a, version b) noexcept { return !(a < b); }  ///@}
};

/// curt's own version (CURT_VERSION_MAJOR.MINOR.PATCH) in the headers this unit compiled with.
constexpr version library_version() noexcept {
  return {CURT_VERSION_MAJOR, CURT_VERSION_MINOR, CURT_VERSION_PATCH};
}

}  // namespace curt
