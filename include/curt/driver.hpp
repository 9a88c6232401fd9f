// curt/driver.hpp: any driver API function, without linking libcuda:
//   CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, dev);   // checked call, throws cuda_error
//   auto fn = CURT_DRIVER_FUNCTION(cuDeviceGetUuid, 11040);  // the typed function pointer
//   CURT_CHECK(cuSomething(...));                            // a CUresult, like a cudaError_t
// `version` is the suffix of the function's PFN_ typedef in <cudaTypedefs.h>, which this brings
// (with <cuda.h>). A stream handle of 0 is the default stream of your translation unit
// (per-thread under --default-stream per-thread).
#pragma once

#include <curt/core/driver.hpp>
#include <curt/core/error.hpp>

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace curt::detail {
template <>
struct status_traits<CUresult> {
  static const std::error_category& category() noexcept { return driver_category(); }
  using error = cuda_error;
  static std::string explain() { return {}; }
};
}  // namespace curt::detail

// status() and curt's out-of-memory check rely on runtime and driver codes of a condition matching:
static_assert(int(CUDA_ERROR_INVALID_VALUE) == int(cudaErrorInvalidValue));
static_assert(int(CUDA_ERROR_OUT_OF_MEMORY) == int(cudaErrorMemoryAllocation));
static_assert(int(CUDA_ERROR_INVALID_HANDLE) == int(cudaErrorInvalidResourceHandle));
static_assert(int(CUDA_ERROR_NOT_READY) == int(cudaErrorNotReady));
static_assert(int(CUDA_ERROR_NOT_SUPPORTED) == int(cudaErrorNotSupported));
static_assert(int(CUDA_ERROR_ILLEGAL_ADDRESS) == int(cudaErrorIllegalAddress));
static_assert(CUDA_SUCCESS == 0, "curt's own driver calls take 0 for success");
