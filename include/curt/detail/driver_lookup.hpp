// curt/detail/driver_lookup.hpp: typed access to driver API functions without linking libcuda.
//
// Driver functions are looked up through cudaGetDriverEntryPointByVersion, once per call site,
// so a binary that uses them still starts (and reports "no CUDA driver" cleanly) where no driver
// is installed. Use:
//   CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, dev);   // checked call, throws cuda_error
//   auto fn = CURT_DRIVER_FUNCTION(cuDeviceGetUuid, 11040);  // the typed function pointer
// The PFN_<name>_v<version> typedef must be declared: <curt/detail/driver.hpp> brings all of
// them (<cudaTypedefs.h>); this header declares only the few curt itself calls, so that every
// translation unit does not compile all of <cudaTypedefs.h>.
#pragma once

#include <curt/error.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

// The driver functions curt calls, declared exactly as <cudaTypedefs.h> declares them (a typedef
// may be declared twice when both agree).
typedef CUresult(CUDAAPI* PFN_cuGetErrorName_v6000)(CUresult error, const char** pStr);
typedef CUresult(CUDAAPI* PFN_cuGetErrorString_v6000)(CUresult error, const char** pStr);
typedef CUresult(CUDAAPI* PFN_cuCtxGetCurrent_v4000)(CUcontext* pctx);
typedef CUresult(CUDAAPI* PFN_cuCtxPushCurrent_v4000)(CUcontext ctx);
typedef CUresult(CUDAAPI* PFN_cuCtxPopCurrent_v4000)(CUcontext* pctx);
typedef CUresult(CUDAAPI* PFN_cuDeviceGet_v2000)(CUdevice_v1* device, int ordinal);
typedef CUresult(CUDAAPI* PFN_cuCtxGetDevice_v2000)(CUdevice_v1* device);
typedef CUresult(CUDAAPI* PFN_cuDevicePrimaryCtxRetain_v7000)(CUcontext* pctx, CUdevice_v1 dev);
typedef CUresult(CUDAAPI* PFN_cuDevicePrimaryCtxRelease_v11000)(CUdevice_v1 dev);
typedef CUresult(CUDAAPI* PFN_cuStreamGetCtx_v9020)(CUstream hStream, CUcontext* pctx);
typedef CUresult(CUDAAPI* PFN_cuCtxGetId_v12000)(CUcontext ctx, unsigned long long* ctxId);

namespace curt::detail {

inline std::string version_text(int encoded) {
  return std::to_string(encoded / 1000) + "." + std::to_string(encoded % 1000 / 10);
}

/// Looks a driver function up by name and ABI version; throws a cuda_error that names the
/// function and the version when the driver lacks it. (Not a template, so its body is compiled
/// once per translation unit, not once per function type.)
inline void* find_driver_function(const char* symbol, int cuda_version) {
  std::string call = std::string("cudaGetDriverEntryPointByVersion(\"") + symbol + "\", " +
                     version_text(cuda_version) + ")";
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  if (driver != 0 && driver < cuda_version)  // the runtime would only say "invalid argument"
    throw cuda_error(cudaErrorInsufficientDriver, call,
                     std::string(symbol) + " needs a CUDA " + version_text(cuda_version) +
                         " driver; this driver supports CUDA " + version_text(driver),
                     location(__FILE__, __LINE__));
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  cudaError_t status = cudaGetDriverEntryPointByVersion(
      symbol, &function, static_cast<unsigned>(cuda_version), cudaEnableDefault, &found);
  if (status != cudaSuccess) throw_error(status, call, __FILE__, __LINE__);
  if (found == cudaDriverEntryPointSuccess && function) return function;
  if (found == cudaDriverEntryPointVersionNotSufficent)
    throw cuda_error(cudaErrorSymbolNotFound, call,
                     std::string(symbol) + " exists in this driver only in an ABI newer than CUDA " +
                         version_text(cuda_version),
                     location(__FILE__, __LINE__));
  throw cuda_error(cudaErrorSymbolNotFound, call,
                   std::string(symbol) + " is not provided by this CUDA " + version_text(driver) +
                       " driver",
                   location(__FILE__, __LINE__));
}

inline const char* driver_error_name(CUresult status) noexcept {
  try {
    static const auto get_name = reinterpret_cast<PFN_cuGetErrorName_v6000>(
        find_driver_function("cuGetErrorName", 6000));
    const char* name = nullptr;
    if (get_name(status, &name) == CUDA_SUCCESS && name) return name;
  } catch (...) {
    // No driver: the caller falls back to the number.
  }
  return nullptr;
}

inline std::string driver_category_impl::message(int code) const {
  const char* name = driver_error_name(static_cast<CUresult>(code));
  std::string text = name ? name : "CUresult " + std::to_string(code);
  try {
    static const auto get_string = reinterpret_cast<PFN_cuGetErrorString_v6000>(
        find_driver_function("cuGetErrorString", 6000));
    const char* description = nullptr;
    if (get_string(static_cast<CUresult>(code), &description) == CUDA_SUCCESS && description)
      text += std::string(" (") + description + ")";
  } catch (...) {
  }
  return text;
}

}  // namespace curt::detail

// <cuda.h> #defines many driver symbols to versioned names (cuDeviceGetUuid -> ..._v2), so the
// public macros paste and stringize `name` themselves and hand only the results on.
#define CURT_DETAIL_DRIVER_LOOKUP(type, symbol, version)                           \
  ([]() -> type {                                                                 \
    static const auto curt_function_ =                                            \
        reinterpret_cast<type>(::curt::detail::find_driver_function(symbol, version)); \
    return curt_function_;                                                        \
  }())

/// The driver function `name` with the ABI of CUDA `version` (the suffix of its PFN_ typedef in
/// <cudaTypedefs.h>), looked up once per call site.
#define CURT_DRIVER_FUNCTION(name, version) \
  CURT_DETAIL_DRIVER_LOOKUP(PFN_##name##_v##version, #name, version)

/// Calls a driver function and throws curt::cuda_error (driver_category) when it fails.
#define CURT_DRIVER_CALL(name, version, ...)                                              \
  ::curt::detail::check(                                                                \
      CURT_DETAIL_DRIVER_LOOKUP(PFN_##name##_v##version, #name, version)(__VA_ARGS__),  \
      #name, __FILE__, __LINE__)
