// curt/detail/driver_result.hpp: CUresult, the driver's result type, for curt's error handling
// (CURT_CHECK and CURT_DRIVER_CALL of a CUresult, make_error_code). <curt/error.hpp> does not
// include <cuda.h>; this header does, and tells curt which enum CUresult is. Included by
// <curt/detail/driver.hpp> and by every curt header that includes <cuda.h>.
#pragma once

#include <curt/detail/driver_lookup.hpp>
#include <curt/error.hpp>

#include <cuda.h>

#include <type_traits>

namespace curt::detail {
template <>
struct is_driver_status<CUresult> : std::true_type {};
}  // namespace curt::detail

// The runtime and driver enums share their numbers for the conditions both know: status() and
// curt's out-of-memory check rely on it.
static_assert(int(CUDA_ERROR_INVALID_VALUE) == int(cudaErrorInvalidValue));
static_assert(int(CUDA_ERROR_OUT_OF_MEMORY) == int(cudaErrorMemoryAllocation));
static_assert(int(CUDA_ERROR_INVALID_DEVICE) == int(cudaErrorInvalidDevice));
static_assert(int(CUDA_ERROR_NOT_SUPPORTED) == int(cudaErrorNotSupported));
static_assert(int(CUDA_ERROR_NO_DEVICE) == int(cudaErrorNoDevice));
static_assert(int(CUDA_ERROR_ILLEGAL_ADDRESS) == int(cudaErrorIllegalAddress));
static_assert(int(CUDA_ERROR_LAUNCH_FAILED) == int(cudaErrorLaunchFailure));
static_assert(CUDA_SUCCESS == 0, "curt's driver_fn results take 0 for success");
