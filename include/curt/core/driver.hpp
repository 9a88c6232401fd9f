// curt/core/driver.hpp: driver API functions without linking libcuda.
//
// Driver functions are looked up through cudaGetDriverEntryPointByVersion, once per call site,
// so a binary that uses them still starts (and reports "no CUDA driver" cleanly) where no driver
// is installed. Users call any of them with (from <curt/detail/driver.hpp>, which adds the
// PFN_<name>_v<version> typedefs of <cudaTypedefs.h>):
//   CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, dev);   // checked call, throws cuda_error
//   auto fn = CURT_DRIVER_FUNCTION(cuDeviceGetUuid, 11040);  // the typed function pointer
//
// This header does not include <cuda.h> (a tenth of a g++ translation unit): curt's own driver
// calls use function types of their own (detail::driver_fn, with an int result: the CUresult's
// value) over the handle types the runtime declares (cudaStream_t is the driver's CUstream, and
// so on) and the few below, declared exactly as <cuda.h> declares them.
#pragma once

#include <curt/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#  include <pthread.h>  // pthread_self(): the thread id in the driver's log lines
#endif

typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUgreenCtx_st* CUgreenCtx;

#if defined(_WIN32)
#  define CURT_DETAIL_DRIVER_API __stdcall
#else
#  define CURT_DETAIL_DRIVER_API
#endif

// Driver functions of curt's core (rooms add theirs here) return the CUresult's value (0: success).
namespace curt::detail::driver_fn {
#define CURT_DETAIL_DRIVER_TYPE(name, ...) \
  struct name { using type = int(CURT_DETAIL_DRIVER_API*)(__VA_ARGS__); }
CURT_DETAIL_DRIVER_TYPE(cuGetErrorName_v6000, int error, const char** text);
CURT_DETAIL_DRIVER_TYPE(cuGetErrorString_v6000, int error, const char** text);
CURT_DETAIL_DRIVER_TYPE(cuCtxGetCurrent_v4000, CUcontext* context);
CURT_DETAIL_DRIVER_TYPE(cuCtxPushCurrent_v4000, CUcontext context);
CURT_DETAIL_DRIVER_TYPE(cuCtxPopCurrent_v4000, CUcontext* context);
CURT_DETAIL_DRIVER_TYPE(cuCtxGetDevice_v2000, CUdevice* device);
CURT_DETAIL_DRIVER_TYPE(cuDeviceGet_v2000, CUdevice* device, int ordinal);
CURT_DETAIL_DRIVER_TYPE(cuDeviceGetCount_v2000, int* count);
CURT_DETAIL_DRIVER_TYPE(cuDevicePrimaryCtxRetain_v7000, CUcontext* context, CUdevice device);
CURT_DETAIL_DRIVER_TYPE(cuDevicePrimaryCtxGetState_v7000, CUdevice device, unsigned* flags,
                        int* active);
CURT_DETAIL_DRIVER_TYPE(cuStreamGetCtx_v9020, CUstream stream, CUcontext* context);
CURT_DETAIL_DRIVER_TYPE(cuStreamGetGreenCtx_v12040, CUstream stream, CUgreenCtx* green);
CURT_DETAIL_DRIVER_TYPE(cuStreamSynchronize_v2000, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuStreamQuery_v2000, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuStreamWaitEvent_v3020, CUstream stream, cudaEvent_t event,
                        unsigned flags);
CURT_DETAIL_DRIVER_TYPE(cuStreamDestroy_v4000, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuStreamGetId_v12000, CUstream stream, unsigned long long* id);
CURT_DETAIL_DRIVER_TYPE(cuEventRecord_v2000, cudaEvent_t event, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuEventSynchronize_v2000, cudaEvent_t event);
CURT_DETAIL_DRIVER_TYPE(cuEventQuery_v2000, cudaEvent_t event);
CURT_DETAIL_DRIVER_TYPE(cuEventElapsedTime_v12080, float* ms, cudaEvent_t start, cudaEvent_t stop);
CURT_DETAIL_DRIVER_TYPE(cuEventDestroy_v4000, cudaEvent_t event);
// attribute: a CUpointer_attribute (an enum, passed as an int); pointer: a CUdeviceptr.
CURT_DETAIL_DRIVER_TYPE(cuPointerGetAttribute_v4000, void* data, int attribute,
                        unsigned long long pointer);
// attribute: a CUgraphMem_attribute (the values of cudaGraphMemAttributeType, 0 to 3).
CURT_DETAIL_DRIVER_TYPE(cuDeviceGetGraphMemAttribute_v11040, CUdevice device, int attribute,
                        void* value);
CURT_DETAIL_DRIVER_TYPE(cuDeviceSetGraphMemAttribute_v11040, CUdevice device, int attribute,
                        void* value);
CURT_DETAIL_DRIVER_TYPE(cuDeviceGraphMemTrim_v11040, CUdevice device);
CURT_DETAIL_DRIVER_TYPE(cuLogsCurrent_v12090, unsigned* iterator, unsigned flags);
CURT_DETAIL_DRIVER_TYPE(cuLogsDumpToMemory_v12090, unsigned* iterator, char* buffer,
                        std::size_t* size, unsigned flags);
inline constexpr int pointer_attribute_context = 1;         // CU_POINTER_ATTRIBUTE_CONTEXT
inline constexpr int pointer_attribute_device_ordinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
}  // namespace curt::detail::driver_fn

// The runtime's lookup under one name in every unit: in units built with --default-stream
// per-thread, <cuda_runtime_api.h> renames cudaGetDriverEntryPointByVersion to this, its per-thread
// flavour, so an inline function calling it by its usual name would differ between units (the
// linker keeping one). The two differ only in what cudaEnableDefault means; curt never passes it.
extern "C" __host__ cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** function, unsigned int cuda_version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status);

namespace curt::detail {

inline std::string version_text(int encoded) {
  return fmt("%d.%d", encoded / 1000, encoded % 1000 / 10);
}

// The driver function, or null where the driver lacks it: no exception, and no error left behind.
inline void* driver_function_or_null(const char* symbol, int cuda_version,
                                     unsigned long long flavour = cudaEnableLegacyStream) noexcept {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion_ptsz(symbol, &function, static_cast<unsigned>(cuda_version),
                                            flavour, &found) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return found == cudaDriverEntryPointSuccess ? function : nullptr;
}

/// Looks a driver function up by name and ABI version; throws a cuda_error that names the function
/// and the versions when the driver lacks it. `flavour`: cudaEnableLegacyStream (a stream handle of
/// 0 means the legacy default stream) or cudaEnablePerThreadDefaultStream. The per-thread flavours
/// of stream functions older than CUDA 7.0 exist only from the 7.0 ABI on, which serves when the
/// function did not change in between (the driver gives the same legacy function for both ABIs).
inline void* find_driver_function(const char* symbol, int cuda_version,
                                  unsigned long long flavour = cudaEnableLegacyStream) {
  const std::string call = fmt("cudaGetDriverEntryPointByVersion(\"%s\", %s)", symbol,
                               version_text(cuda_version).c_str());
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  if (driver != 0 && driver < cuda_version)  // the runtime would only say "invalid argument"
    raise(cudaErrorInsufficientDriver, call,
          fmt("%s needs a CUDA %s driver; this driver supports CUDA %s", symbol,
              version_text(cuda_version).c_str(), version_text(driver).c_str()),
          __FILE__, __LINE__);
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  check(cudaGetDriverEntryPointByVersion_ptsz(symbol, &function,
                                              static_cast<unsigned>(cuda_version), flavour, &found),
        call.c_str(), __FILE__, __LINE__);
  if (found == cudaDriverEntryPointSuccess && function) return function;
  const bool per_thread = flavour == cudaEnablePerThreadDefaultStream;
  if (found == cudaDriverEntryPointVersionNotSufficent && per_thread && cuda_version < 7000) {
    void* asked = driver_function_or_null(symbol, cuda_version);
    if (asked != nullptr && asked == driver_function_or_null(symbol, 7000))
      if (void* since_7 = driver_function_or_null(symbol, 7000, flavour)) return since_7;
  }
  raise(cudaErrorSymbolNotFound, call,
        found == cudaDriverEntryPointVersionNotSufficent
            ? fmt("%s%s exists in this driver only in an ABI newer than CUDA %s", symbol,
                  per_thread ? "'s per-thread flavour" : "", version_text(cuda_version).c_str())
            : fmt("%s is not provided by this CUDA %s driver", symbol,
                  version_text(driver).c_str()),
        __FILE__, __LINE__);
}
/// curt's own driver function `Function` (a driver_fn type), looked up once: one template per
/// function compiles cheaper than CURT_DETAIL_DRIVER_LOOKUP's lambda per call site.
template <class Function>
typename Function::type driver_function(const char* symbol, int version) {
  static const auto function = reinterpret_cast<typename Function::type>(
      find_driver_function(symbol, version, cudaEnableLegacyStream));
  return function;
}

}  // namespace curt::detail

// <cuda.h> #defines many driver symbols to versioned names (cuDeviceGetUuid -> ..._v2), so the
// macros paste and stringize `name` themselves and hand only the results on.
#define CURT_DETAIL_DRIVER_LOOKUP(type, symbol, version, flavour)                                 \
  ([]() -> type {                                                                                \
    static const auto curt_function_ =                                                           \
        reinterpret_cast<type>(::curt::detail::find_driver_function(symbol, version, flavour)); \
    return curt_function_;                                                                       \
  }())

/// The flavour of the including translation unit: a stream handle of 0 means its default stream.
#define CURT_DETAIL_UNIT_STREAM_FLAVOUR                                    \
  (CURT_DETAIL_PER_THREAD_DEFAULT_STREAM ? cudaEnablePerThreadDefaultStream \
                                         : cudaEnableLegacyStream)

/// The driver function `name` with the ABI of CUDA `version` (the suffix of its PFN_ typedef in
/// <cudaTypedefs.h>), looked up once per call site; a stream handle of 0 means the default
/// stream of the calling translation unit (per-thread under --default-stream per-thread).
#define CURT_DRIVER_FUNCTION(name, version) \
  CURT_DETAIL_DRIVER_LOOKUP(PFN_##name##_v##version, #name, version, \
                            CURT_DETAIL_UNIT_STREAM_FLAVOUR)

/// Calls a driver function and throws curt::cuda_error (driver_category) when it fails.
#define CURT_DRIVER_CALL(name, version, ...)                                                \
  ::curt::detail::check(CURT_DETAIL_DRIVER_LOOKUP(PFN_##name##_v##version, #name, version, \
                                                  CURT_DETAIL_UNIT_STREAM_FLAVOUR)(__VA_ARGS__), \
                        #name, __FILE__, __LINE__)

// curt's own calls, typed by curt::detail::driver_fn (an int result: no <cuda.h> needed), looked
// up once per function by detail::driver_function; each pastes `name` itself (as an argument of
// another macro it would be expanded first). curt never passes a stream handle of 0 (a ref holds
// cudaStreamLegacy or cudaStreamPerThread), so the legacy flavour serves every translation unit.
#define CURT_DETAIL_DRIVER_FUNCTION(name, version) \
  ::curt::detail::driver_function<::curt::detail::driver_fn::name##_v##version>(#name, version)
#define CURT_DETAIL_DRIVER_CALL(name, version, ...)                                      \
  ::curt::detail::check(::curt::detail::driver_function<                                 \
                            ::curt::detail::driver_fn::name##_v##version>(#name, version)( \
                            __VA_ARGS__),                                                \
                        #name, __FILE__, __LINE__)

namespace curt::detail {

inline std::string driver_category_impl::message(int code) const {
  std::string text = fmt("CUresult %d", code);
  const char* name = nullptr;
  const char* description = nullptr;
  try {
    if (CURT_DETAIL_DRIVER_FUNCTION(cuGetErrorName, 6000)(code, &name) == 0 && name) text = name;
    if (CURT_DETAIL_DRIVER_FUNCTION(cuGetErrorString, 6000)(code, &description) == 0 && description)
      text += fmt(" (%s)", description);
  } catch (...) {  // no driver: the number alone
  }
  return text;
}

// The thread id the driver writes into each log line ("[time][thread][CUDA][E] text").
inline std::string log_thread_tag() {
#if defined(__unix__) || defined(__APPLE__)
  return fmt("][%llu]", static_cast<unsigned long long>(pthread_self()));
#else
  return {};
#endif
}

// The driver keeps a ring buffer of log lines (CUDA 12.9+). curt reads it only when a call fails,
// from a process-wide cursor (set at the first failure), and keeps only the calling thread's
// lines of the failure at hand: from its last-but-one "Returning" line on. Earlier lines with the
// thread's id belong to failures curt never read (a raw call's, one curt handled itself, or an
// exited thread's whose id was reused). Through the driver's cuLogs functions: the runtime's
// cudaLogs* make the current device's primary context current on a thread that had none.
inline std::string take_driver_log() {
  static std::mutex mutex;
  static unsigned cursor = 0;
  static bool has_cursor = false;
  // Looked up without throwing: this runs on the throw path, also of a failed lookup.
  static const auto dump = reinterpret_cast<driver_fn::cuLogsDumpToMemory_v12090::type>(
      driver_function_or_null("cuLogsDumpToMemory", 12090));
  static const auto current = reinterpret_cast<driver_fn::cuLogsCurrent_v12090::type>(
      driver_function_or_null("cuLogsCurrent", 12090));
  if (dump == nullptr || current == nullptr) return {};  // no driver, or one older than 12.9
  std::string text(25600, '\0');                         // the driver's documented maximum
  std::size_t size = text.size();
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (dump(has_cursor ? &cursor : nullptr, text.data(), &size, 0) != 0) return {};
    if (!has_cursor) has_cursor = current(&cursor, 0) == 0;
  }
  text.resize(size < text.size() ? size : text.size());
  const std::string tag = log_thread_tag();
  std::string mine;
  for (std::size_t start = 0, end = 0; start < text.size(); start = end + 1) {
    end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\0' || line.back() == '\r')) line.pop_back();
    if (line.empty() || (!tag.empty() && line.find(tag) == std::string::npos)) continue;
    if (line.find("Returning ") != std::string::npos) {  // it closes a failure: keep the latest
      std::size_t previous = mine.rfind("Returning ");
      if (previous != std::string::npos) mine.erase(0, mine.find('\n', previous) + 1);
    }
    mine += line + '\n';
  }
  while (!mine.empty() && mine.back() == '\n') mine.pop_back();
  return mine;
}

}  // namespace curt::detail
