// curt/detail/driver_lookup.hpp: typed access to driver API functions without linking libcuda.
//
// Driver functions are looked up through cudaGetDriverEntryPointByVersion, once per call site,
// so a binary that uses them still starts (and reports "no CUDA driver" cleanly) where no driver
// is installed. Use:
//   CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, dev);   // checked call, throws cuda_error
//   auto fn = CURT_DRIVER_FUNCTION(cuDeviceGetUuid, 11040);  // the typed function pointer
// The PFN_<name>_v<version> typedef must be declared: <curt/detail/driver.hpp> brings all of
// them (<cudaTypedefs.h>, and <cuda.h>).
//
// This header does not include <cuda.h> (about a tenth of a g++ translation unit): curt's own
// driver calls, from the headers of <curt/curt.hpp>, use the few handle types declared below
// exactly as <cuda.h> declares them (a typedef may be declared twice when both agree) and
// function types of their own with an int result, the value of the CUresult
// (CURT_DETAIL_DRIVER_CALL / CURT_DETAIL_DRIVER_FUNCTION).
#pragma once

#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <string>

typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;

#if defined(_WIN32)
#  define CURT_DETAIL_DRIVER_API __stdcall
#else
#  define CURT_DETAIL_DRIVER_API
#endif

// The driver functions curt's core headers call. The result is CUresult's value (0: success).
namespace curt::detail::driver_fn {
using cuGetErrorName_v6000 = int(CURT_DETAIL_DRIVER_API*)(int error, const char** text);
using cuGetErrorString_v6000 = int(CURT_DETAIL_DRIVER_API*)(int error, const char** text);
using cuCtxGetCurrent_v4000 = int(CURT_DETAIL_DRIVER_API*)(CUcontext* context);
using cuCtxPushCurrent_v4000 = int(CURT_DETAIL_DRIVER_API*)(CUcontext context);
using cuCtxPopCurrent_v4000 = int(CURT_DETAIL_DRIVER_API*)(CUcontext* context);
using cuCtxSetCurrent_v4000 = int(CURT_DETAIL_DRIVER_API*)(CUcontext context);
using cuDeviceGet_v2000 = int(CURT_DETAIL_DRIVER_API*)(CUdevice_v1* device, int ordinal);
using cuCtxGetDevice_v2000 = int(CURT_DETAIL_DRIVER_API*)(CUdevice_v1* device);
using cuDevicePrimaryCtxRetain_v7000 = int(CURT_DETAIL_DRIVER_API*)(CUcontext* context,
                                                                     CUdevice_v1 device);
using cuDevicePrimaryCtxRelease_v11000 = int(CURT_DETAIL_DRIVER_API*)(CUdevice_v1 device);
using cuDevicePrimaryCtxGetState_v7000 = int(CURT_DETAIL_DRIVER_API*)(CUdevice_v1 device,
                                                                       unsigned* flags,
                                                                       int* active);
using cuDeviceGetCount_v2000 = int(CURT_DETAIL_DRIVER_API*)(int* count);
using cuStreamGetCtx_v9020 = int(CURT_DETAIL_DRIVER_API*)(CUstream stream, CUcontext* context);
using cuCtxGetId_v12000 = int(CURT_DETAIL_DRIVER_API*)(CUcontext context,
                                                        unsigned long long* id);
using cuEventRecord_v2000 = int(CURT_DETAIL_DRIVER_API*)(cudaEvent_t event, CUstream stream);
using cuStreamWaitEvent_v3020 = int(CURT_DETAIL_DRIVER_API*)(CUstream stream, cudaEvent_t event,
                                                              unsigned flags);
// attribute: a CUpointer_attribute (an enum, passed as an int); pointer: a CUdeviceptr.
using cuPointerGetAttribute_v4000 = int(CURT_DETAIL_DRIVER_API*)(void* data, int attribute,
                                                                  unsigned long long pointer);
inline constexpr int pointer_attribute_context = 1;         // CU_POINTER_ATTRIBUTE_CONTEXT
inline constexpr int pointer_attribute_buffer_id = 7;       // CU_POINTER_ATTRIBUTE_BUFFER_ID
inline constexpr int pointer_attribute_device_ordinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
using cuGraphDestroy_v10000 = int(CURT_DETAIL_DRIVER_API*)(cudaGraph_t graph);
using cuGraphExecDestroy_v10000 = int(CURT_DETAIL_DRIVER_API*)(cudaGraphExec_t exec);
using cuMemPoolDestroy_v11020 = int(CURT_DETAIL_DRIVER_API*)(cudaMemPool_t pool);
using cuLogsCurrent_v12090 = int(CURT_DETAIL_DRIVER_API*)(unsigned* iterator, unsigned flags);
using cuLogsDumpToMemory_v12090 = int(CURT_DETAIL_DRIVER_API*)(unsigned* iterator, char* buffer,
                                                                std::size_t* size, unsigned flags);
}  // namespace curt::detail::driver_fn

// The runtime's lookup, under one name in every translation unit. <cuda_runtime_api.h> renames
// cudaGetDriverEntryPointByVersion to this, its per-thread flavour, in units built with
// --default-stream per-thread, so an inline function calling it by its usual name would differ
// between units (and the linker keep one of them). The two differ only in what cudaEnableDefault
// means; curt never passes that, but names the flavour it wants.
extern "C" __host__ cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** function, unsigned int cuda_version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status);

/// The stream flavour a handle of 0 means in the including translation unit, for the public
/// lookups (CURT_DRIVER_FUNCTION, CURT_DRIVER_CALL), which expand in the user's code.
#define CURT_DETAIL_UNIT_STREAM_FLAVOUR                                    \
  (CURT_DETAIL_PER_THREAD_DEFAULT_STREAM ? cudaEnablePerThreadDefaultStream \
                                         : cudaEnableLegacyStream)

namespace curt::detail {

inline cudaError_t driver_entry_point(const char* symbol, void** function, int cuda_version,
                                      unsigned long long flavour,
                                      cudaDriverEntryPointQueryResult* found) noexcept {
  return cudaGetDriverEntryPointByVersion_ptsz(symbol, function,
                                               static_cast<unsigned>(cuda_version), flavour, found);
}

inline std::string version_text(int encoded) {
  return std::to_string(encoded / 1000) + "." + std::to_string(encoded % 1000 / 10);
}

// The driver function, or null where the driver lacks it: no exception, and no error left behind.
inline void* driver_function_or_null(
    const char* symbol, int cuda_version,
    unsigned long long flavour = cudaEnableLegacyStream) noexcept {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (driver_entry_point(symbol, &function, cuda_version, flavour, &found) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return found == cudaDriverEntryPointSuccess ? function : nullptr;
}

// The per-thread flavours of the stream functions older than CUDA 7.0 start at the 7.0 ABI, which
// <cudaTypedefs.h> names only as PFN_..._v7000_ptsz: a per-thread unit asking for the function at
// its older ABI gets the 7.0 per-thread one where the function did not change in between (the
// driver gives the same legacy function for both ABIs), else null.
inline void* per_thread_flavour_since_7(const char* symbol, int cuda_version) noexcept {
  constexpr int first_per_thread_abi = 7000;
  if (cuda_version >= first_per_thread_abi) return nullptr;
  void* asked = driver_function_or_null(symbol, cuda_version);
  if (asked == nullptr || asked != driver_function_or_null(symbol, first_per_thread_abi))
    return nullptr;
  return driver_function_or_null(symbol, first_per_thread_abi, cudaEnablePerThreadDefaultStream);
}

/// Looks a driver function up by name and ABI version; throws a cuda_error that names the
/// function and the version when the driver lacks it. (Not a template, so its body is compiled
/// once per translation unit, not once per function type.) `flavour`: cudaEnableLegacyStream
/// (a stream handle of 0 means the legacy default stream; every function at any ABI version) or
/// cudaEnablePerThreadDefaultStream (0 means the per-thread stream; older ABIs lack those).
inline void* find_driver_function(const char* symbol, int cuda_version,
                                  unsigned long long flavour = cudaEnableLegacyStream) {
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
  cudaError_t status = driver_entry_point(symbol, &function, cuda_version, flavour, &found);
  if (status != cudaSuccess) throw_error(status, call, __FILE__, __LINE__);
  if (found == cudaDriverEntryPointSuccess && function) return function;
  if (found == cudaDriverEntryPointVersionNotSufficent) {
    const bool per_thread = flavour == cudaEnablePerThreadDefaultStream;
    if (per_thread)
      if (void* since_7 = per_thread_flavour_since_7(symbol, cuda_version)) return since_7;
    throw cuda_error(cudaErrorSymbolNotFound, call,
                     std::string(symbol) + (per_thread ? "'s per-thread flavour" : "") +
                         " exists in this driver only in an ABI newer than CUDA " +
                         version_text(cuda_version),
                     location(__FILE__, __LINE__));
  }
  throw cuda_error(cudaErrorSymbolNotFound, call,
                   std::string(symbol) + " is not provided by this CUDA " + version_text(driver) +
                       " driver",
                   location(__FILE__, __LINE__));
}

inline const char* driver_error_name(int status) noexcept {
  try {
    static const auto get_name = reinterpret_cast<driver_fn::cuGetErrorName_v6000>(
        find_driver_function("cuGetErrorName", 6000));
    const char* name = nullptr;
    if (get_name(status, &name) == 0 && name) return name;
  } catch (...) {
    // No driver: the caller falls back to the number.
  }
  return nullptr;
}

inline std::string driver_category_impl::message(int code) const {
  const char* name = driver_error_name(code);
  std::string text = name ? name : "CUresult " + std::to_string(code);
  try {
    static const auto get_string = reinterpret_cast<driver_fn::cuGetErrorString_v6000>(
        find_driver_function("cuGetErrorString", 6000));
    const char* description = nullptr;
    if (get_string(code, &description) == 0 && description)
      text += std::string(" (") + description + ")";
  } catch (...) {
  }
  return text;
}

}  // namespace curt::detail

// <cuda.h> #defines many driver symbols to versioned names (cuDeviceGetUuid -> ..._v2), so the
// public macros paste and stringize `name` themselves and hand only the results on.
// curt's own lookups take the legacy-stream flavour: curt never passes a stream handle of 0 (it
// passes cudaStreamLegacy or cudaStreamPerThread explicitly), so one function serves every
// translation unit, built per-thread or not, and is found at any ABI version.
#define CURT_DETAIL_DRIVER_LOOKUP_FLAVOUR(type, symbol, version, flavour) \
  ([]() -> type {                                                        \
    static const auto curt_function_ = reinterpret_cast<type>(           \
        ::curt::detail::find_driver_function(symbol, version, flavour)); \
    return curt_function_;                                               \
  }())
#define CURT_DETAIL_DRIVER_LOOKUP(type, symbol, version) \
  CURT_DETAIL_DRIVER_LOOKUP_FLAVOUR(type, symbol, version, cudaEnableLegacyStream)

/// The driver function `name` with the ABI of CUDA `version` (the suffix of its PFN_ typedef in
/// <cudaTypedefs.h>), looked up once per call site; a stream handle of 0 means the default
/// stream of the calling translation unit (per-thread under --default-stream per-thread).
#define CURT_DRIVER_FUNCTION(name, version)                                  \
  CURT_DETAIL_DRIVER_LOOKUP_FLAVOUR(PFN_##name##_v##version, #name, version, \
                                    CURT_DETAIL_UNIT_STREAM_FLAVOUR)

/// Calls a driver function and throws curt::cuda_error (driver_category) when it fails. (`name`
/// is pasted here, not handed to CURT_DRIVER_FUNCTION: <cuda.h> #defines many driver names.)
#define CURT_DRIVER_CALL(name, version, ...)                                                \
  ::curt::detail::check(                                                                    \
      CURT_DETAIL_DRIVER_LOOKUP_FLAVOUR(PFN_##name##_v##version, #name, version,            \
                                        CURT_DETAIL_UNIT_STREAM_FLAVOUR)(__VA_ARGS__),      \
      #name, __FILE__, __LINE__)

// curt's own calls, typed by curt::detail::driver_fn (an int result): no <cuda.h> needed.
#define CURT_DETAIL_DRIVER_FUNCTION(name, version) \
  CURT_DETAIL_DRIVER_LOOKUP(::curt::detail::driver_fn::name##_v##version, #name, version)
#define CURT_DETAIL_DRIVER_CALL(name, version, ...)                                       \
  ::curt::detail::check_driver(                                                           \
      CURT_DETAIL_DRIVER_LOOKUP(::curt::detail::driver_fn::name##_v##version, #name,      \
                                version)(__VA_ARGS__),                                    \
      #name, __FILE__, __LINE__)

namespace curt::detail {

// The driver keeps a ring buffer of log lines (CUDA 12.9+). curt reads it only when a call fails,
// from a process-wide cursor (set at the first failure), so the hot path never touches it, and
// keeps only the calling thread's lines since its last-but-one "Returning" line: those of the
// failure at hand. Earlier lines with the thread's id belong to failures curt never read: a raw
// call's, one curt handled itself, or a thread that has exited and whose id was reused.
// Through the driver's cuLogs functions: the runtime's cudaLogs* first make the current device's
// primary context current, and leave it so, on a thread that had none (seen on the H200), which a
// failure thrown on such a thread must not do.
inline std::string take_driver_log() {
  static std::mutex mutex;
  static unsigned cursor = 0;
  static bool has_cursor = false;
  // Looked up without throwing: this runs on the throw path, also of a failed lookup.
  static const auto dump = reinterpret_cast<driver_fn::cuLogsDumpToMemory_v12090>(
      driver_function_or_null("cuLogsDumpToMemory", 12090));
  static const auto current = reinterpret_cast<driver_fn::cuLogsCurrent_v12090>(
      driver_function_or_null("cuLogsCurrent", 12090));
  if (dump == nullptr || current == nullptr) return {};  // no driver, or one older than 12.9
  std::string text(25600, '\0');  // the driver's documented maximum
  std::size_t size = text.size();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (dump(has_cursor ? &cursor : nullptr, text.data(), &size, 0) != 0) return {};
    if (!has_cursor) has_cursor = current(&cursor, 0) == 0;
  }
  text.resize(size < text.size() ? size : text.size());
  const std::string tag = log_thread_tag();
  std::string mine;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\0' || line.back() == '\r')) line.pop_back();
    if (line.empty() || (!tag.empty() && line.find(tag) == std::string::npos)) continue;
    if (line.find("Returning ") != std::string::npos) {
      // A "Returning" line closes a failure: keep only the latest one's lines.
      std::size_t previous = mine.rfind("Returning ");
      if (previous != std::string::npos) mine.erase(0, mine.find('\n', previous) + 1);
    }
    mine += line + '\n';
  }
  while (!mine.empty() && mine.back() == '\n') mine.pop_back();
  return mine;
}

}  // namespace curt::detail
