// curt/memory/copy.hpp: typed copies, fills and memsets between contiguous ranges, host or device.
//
//   curt::copy(dst, src, stream);          // cudaMemcpyAsync on the stream
//   curt::copy_and_wait(dst, src, stream); // the same, and waits for the stream
//   curt::fill(dst, value, stream);        // every element = value
//   curt::memset(dst, byte, stream);
//   curt::copy_n(dst, src, n, stream);     // raw pointers; fill_n and memset_n as well
//
// A range has data() and size() (curt's buffers, spans, std::vector, std::array). Both hold one
// trivially copyable type and as many elements, else the copy throws before calling CUDA (to copy
// part of a range: curt::span, <curt/span.hpp>); cudaMemcpyDefault finds where memory lives. Every
// copy names its stream (copy(dst, src) does not compile; see it for why). cudaMemcpyAsync follows
// the runtime's rules for pageable memory. With no current context, calls run in the stream's.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/launch.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/range.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

// Whether fill() may use its own kernel in this translation unit (a CUDA compiler's); a default
// template argument, so units of either kind instantiate different functions.
#if defined(__CUDACC__)
#  define CURT_DETAIL_HAS_FILL_KERNEL true
#else
#  define CURT_DETAIL_HAS_FILL_KERNEL false
#endif

namespace curt::detail::driver_fn {
// target: a CUdeviceptr.
CURT_DETAIL_DRIVER_TYPE(cuMemsetD16Async_v3020, unsigned long long target, unsigned short value,
                        std::size_t count, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuMemsetD32Async_v3020, unsigned long long target, unsigned value,
                        std::size_t count, CUstream stream);
}  // namespace curt::detail::driver_fn

namespace curt {
namespace detail {

/// Whether `Dst`'s elements may be written with `Src`'s (fill, memset: Src = Dst); else fails.
template <class Dst, class Src>
constexpr bool copyable_ranges() {
  static_assert(is_range_v<Dst> && is_range_v<Src>,
                "curt: a copy, fill or memset takes contiguous ranges with data() and size() (a "
                "curt buffer, a span, std::vector, std::array)");
  if constexpr (is_range_v<Dst> && is_range_v<Src>) {
    using D = element_of_t<Dst>;
    constexpr bool same = std::is_same_v<std::remove_cv_t<D>, range_value_t<Src>>;
    constexpr bool bytes = std::is_trivially_copyable_v<std::remove_cv_t<D>>;
    static_assert(!std::is_const_v<D>, "curt: the destination's elements are const");
    static_assert(same, "curt::copy: the two ranges hold different element types; CUDA copies "
                        "bytes, so curt copies only between ranges of one type");
    static_assert(bytes, "curt: the elements must be trivially copyable (CUDA copies bytes)");
    return !std::is_const_v<D> && same && bytes;
  }
  return false;
}

// Out of line, so that copy(dst, src, stream) stays small enough to inline into a caller's loop.
CURT_COLD inline void copy_failed(cudaError_t status, std::size_t bytes) {
  check(status, "cudaMemcpyAsync",
        {{"bytes", static_cast<long long>(bytes)}, "cudaMemcpyDefault", "stream"}, __FILE__,
        __LINE__);
}

[[noreturn]] CURT_COLD inline void throw_size_mismatch(const char* operation,
                                                       std::size_t destination, std::size_t source,
                                                       std::size_t element_size) {
  raise(cudaErrorInvalidValue,
        fmt("curt::%s(destination of %zu elements, source of %zu elements)", operation,
            destination, source),
        fmt("the sizes differ: the destination holds %zu elements (%zu bytes), the source %zu "
            "(%zu bytes); copy equal sizes, e.g. through a subspan (curt::span(range, offset, "
            "count))", destination, destination * element_size, source, source * element_size),
        __FILE__, __LINE__);
}

#if defined(__CUDACC__)
/// data[i] = value for i < count; a grid-stride loop, so any grid covers any count.
template <class T>
__global__ void fill_kernel(T* data, std::size_t count, T value) {
  std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    data[i] = value;
}
#endif

[[noreturn]] CURT_COLD inline void throw_no_fill(std::size_t element_size, bool aligned) {
  raise(cudaErrorInvalidValue, fmt("curt::fill(%zu-byte value)", element_size),
        fmt("%s; that takes curt's fill kernel, which exists only in translation units compiled "
            "by a CUDA compiler (nvcc): fill from one of those",
            aligned ? "the value's bytes differ and it is neither 2 nor 4 bytes, so no memset can "
                      "write it"
                    : "the range is not aligned to its 2- or 4-byte elements, which the driver's "
                      "memsets need"),
        __FILE__, __LINE__);
}

}  // namespace detail

/// Copies src into dst on `stream` (cudaMemcpyAsync); sizes must match. Both must live on until
/// the stream reaches the copy: a temporary that owns its elements (a std::vector, a buffer) does
/// not compile, one that holds them inside itself (a cuda::std::array) throws.
template <class Dst, class Src>
CURT_HOT_INLINE void copy(Dst&& dst, const Src& src, stream_ref stream) {
  if constexpr (detail::copyable_ranges<Dst, Src>()) {
    detail::check_kept_range<Dst>(dst, "curt::copy(dst, src, stream): the destination");
    using T = detail::range_value_t<Dst>;
    T* d = dst.data();
    const T* s = src.data();
    cudaStream_t h = stream.get();
    std::size_t n = dst.size();
    if (CURT_UNLIKELY(n != static_cast<std::size_t>(src.size())))
      detail::throw_size_mismatch("copy", n, static_cast<std::size_t>(src.size()), sizeof(T));
    if (n == 0) return;
    detail::context_scope in(detail::for_stream, h);
    cudaError_t status = cudaMemcpyAsync(d, s, n * sizeof(T), cudaMemcpyDefault, h);
    if (CURT_UNLIKELY(status != cudaSuccess)) detail::copy_failed(status, n * sizeof(T));
  }
}

/// A temporary source: refused when it owns its elements (see above), else copied as a view.
template <class Dst, class Src, std::enable_if_t<!std::is_lvalue_reference_v<Src>, int> = 0>
void copy(Dst&& dst, Src&& src, stream_ref stream) {
  detail::check_kept_range<Src>(src, "curt::copy(dst, src, stream): the source");
  copy(std::forward<Dst>(dst), static_cast<const std::remove_reference_t<Src>&>(src), stream);
}

/// Copies src into dst on `stream` and waits: the copy follows the work queued there before it (a
/// kernel writing src), and dst holds the data on return. Either range may be a temporary. A
/// capturing stream is refused before anything is queued (a wait would invalidate the capture).
template <class Dst, class Src>
void copy_and_wait(Dst&& dst, const Src& src, stream_ref stream) {
  if (CURT_UNLIKELY(stream.is_capturing()))
    detail::raise(cudaErrorStreamCaptureUnsupported, "curt::copy_and_wait(dst, src, stream)",
                  "the stream is being captured, and CUDA cannot wait during a capture (it would "
                  "invalidate it); nothing was queued: copy(dst, src, stream) captures the copy",
                  __FILE__, __LINE__);
  // Unqualified, so that ADL finds the overloads of later headers (pitched.hpp); a braced stream
  // keeps std::copy, which ADL finds for std ranges, out: it cannot deduce its iterator from it.
  copy(dst, src, {stream});
  stream.synchronize();
}

/// Refused: a copy with no stream would be ordered after no work on curt's streams (they do not
/// block on the legacy default stream), so it could read memory a kernel is still writing.
template <class Dst, class Src>
void copy(Dst&&, const Src&) {
  static_assert(detail::dependent_false<Dst>,
                "curt::copy(dst, src) needs the stream it comes after: copy_and_wait(dst, src, "
                "stream) copies and waits; copy(dst, src, stream) only queues the copy");
}

/// Copies n elements from src to dst on `stream` (raw pointers; see copy(dst, src, stream)).
template <class T>
void copy_n(T* dst, const T* src, std::size_t n, stream_ref stream) {
  curt::copy(detail::pointer_range<T>{dst, n}, detail::pointer_range<const T>{src, n}, stream);
}

/// Sets dst's bytes to `byte` on `stream` (cudaMemsetAsync); dst must be device-addressable.
template <class Dst>
void memset(Dst&& dst, unsigned char byte, stream_ref stream) {
  if constexpr (detail::copyable_ranges<Dst, Dst>()) {
    auto* d = dst.data();
    cudaStream_t h = stream.get();
    std::size_t bytes = static_cast<std::size_t>(dst.size()) * sizeof(*d);
    if (bytes == 0) return;
    detail::context_scope in(detail::for_stream, h);
    detail::check(cudaMemsetAsync(d, byte, bytes, h), "cudaMemsetAsync",
                  {{"bytes", static_cast<long long>(bytes)}, {"value", byte}, "stream"},
                  __FILE__, __LINE__);
  }
}

/// Sets every element of dst to `value` on `stream`; dst must be memory the device can address.
/// A value of equal bytes (0, -1, ...) is a cudaMemsetAsync; other 2- and 4-byte values are the
/// driver's cuMemsetD16Async / cuMemsetD32Async (on a range aligned to its elements); anything
/// else is a small kernel of curt's, which exists only in translation units a CUDA compiler
/// compiles: elsewhere such a fill throws a cuda_error that says so, before CUDA is called.
template <class Dst, bool HasKernel = CURT_DETAIL_HAS_FILL_KERNEL,
          bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void fill(Dst&& dst, const detail::range_value_t<Dst>& value, stream_ref stream) {
  static_assert(!HasKernel || CURT_DETAIL_HAS_FILL_KERNEL,
                "curt::fill: the fill kernel exists only where a CUDA compiler compiles");
  if constexpr (detail::copyable_ranges<Dst, Dst>()) {
    using T = detail::range_value_t<Dst>;
    T* d = dst.data();
    cudaStream_t h = stream.get();
    std::size_t n = static_cast<std::size_t>(dst.size());
    if (n == 0) return;
    unsigned char bytes[sizeof(T)];
    detail::copy_bytes(bytes, &value, sizeof(T));
    bool uniform = true;
    for (std::size_t i = 1; i < sizeof(T); ++i) uniform = uniform && bytes[i] == bytes[0];
    constexpr bool patterned = sizeof(T) == 2 || sizeof(T) == 4;
    const bool aligned = reinterpret_cast<std::uintptr_t>(d) % sizeof(T) == 0;
    if (!uniform && !HasKernel && !(patterned && aligned))
      detail::throw_no_fill(sizeof(T), aligned || !patterned);
    detail::context_scope in(detail::for_stream, h);
    if (uniform)
      return detail::check(cudaMemsetAsync(d, bytes[0], n * sizeof(T), h), "cudaMemsetAsync",
                           {{"bytes", static_cast<long long>(n * sizeof(T))}, {"value", bytes[0]},
                            "stream (curt::fill)"},
                           __FILE__, __LINE__);
    if constexpr (patterned) {
      if (aligned) {  // the legacy flavour serves: h is never 0 (stream_ref names the stream)
        const auto target = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(d));
        std::conditional_t<sizeof(T) == 2, unsigned short, unsigned> pattern = 0;
        detail::copy_bytes(&pattern, bytes, sizeof(T));
        if constexpr (sizeof(T) == 2)
          return detail::check(
              CURT_DETAIL_DRIVER_FUNCTION(cuMemsetD16Async, 3020)(target, pattern, n, h),
              "cuMemsetD16Async", __FILE__, __LINE__);
        else
          return detail::check(
              CURT_DETAIL_DRIVER_FUNCTION(cuMemsetD32Async, 3020)(target, pattern, n, h),
              "cuMemsetD32Async", __FILE__, __LINE__);
      }
    }
#if defined(__CUDACC__)
    if constexpr (HasKernel) {  // in the stream's own context, as every curt::launch
      const std::size_t blocks = (n + 255) / 256;
      launch(stream, launch_config(static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256),
             detail::fill_kernel<T>, d, n, value);
    }
#endif
  }
}

/// Sets the bytes of `count` elements from `first` to `byte` on `stream` (a raw pointer).
template <class T>
void memset_n(T* first, std::size_t count, unsigned char byte, stream_ref stream) {
  curt::memset(detail::pointer_range<T>{first, count}, byte, stream);
}

/// Sets `count` elements from `first` to `value` on `stream` (a raw pointer; see fill).
template <class T>
void fill_n(T* first, std::size_t count, const std::remove_cv_t<T>& value, stream_ref stream) {
  curt::fill(detail::pointer_range<T>{first, count}, value, stream);
}

}  // namespace curt
