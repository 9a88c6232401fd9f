// curt/core/config.hpp: compiler portability macros; the library version and the toolkit check.
#pragma once

#include <curt/core/version.hpp>

// Branch hints and cold paths keep error handling out of the hot instruction stream.
#if defined(__GNUC__) || defined(__clang__)
#  define CURT_LIKELY(x) __builtin_expect(!!(x), 1)
#  define CURT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define CURT_COLD __attribute__((cold, noinline))
#  define CURT_HOT_INLINE __attribute__((always_inline)) inline
#define CURT_PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#  define CURT_LIKELY(x) (x)
#  define CURT_UNLIKELY(x) (x)
#  define CURT_COLD __declspec(noinline)
#  define CURT_HOT_INLINE __forceinline
#define CURT_PRINTF_LIKE(f, a)
#endif

// Functions callable from both host and device code when compiled by a CUDA compiler.
#if defined(__CUDACC__)
#  define CURT_HOST_DEVICE __host__ __device__
#else
#  define CURT_HOST_DEVICE
#endif

// Which default stream a cudaStream_t of 0 means in this translation unit (per-thread under
// nvcc --default-stream per-thread). Used only as a default template argument, so translation
// units compiled either way instantiate different functions instead of disagreeing about one.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#  define CURT_DETAIL_PER_THREAD_DEFAULT_STREAM true
#else
#  define CURT_DETAIL_PER_THREAD_DEFAULT_STREAM false
#endif
