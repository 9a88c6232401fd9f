// curt/copy.hpp: typed copies, fills and memsets between contiguous ranges, host or device.
//
//   curt::copy(dst, src);           // cudaMemcpy: returns when the copy is done (see below)
//   curt::copy(dst, src, stream);   // cudaMemcpyAsync on the stream
//   curt::fill(dst, value, stream); // every element = value
//   curt::memset(dst, byte, stream);
//
// A range is anything with data() and size(): curt's buffers, cuda::std::span, std::span,
// std::vector, std::array. Both ranges hold the same trivially copyable element type (const on
// the source side is fine) and exactly as many elements, or the copy throws a cuda_error naming
// both sizes before CUDA is called: copy part of a range through a subspan (curt::span(range,
// offset, count) in <curt/span.hpp>). Where the memory lives is found by unified addressing
// (cudaMemcpyDefault): host to device, device to host, device to device, host to host, pinned,
// pageable, managed, any device.
//
// A copy costs what the raw call costs and synchronizes exactly as much, no more:
// - copy(dst, src, stream) is cudaMemcpyAsync. It returns before the copy is done, except that
//   a copy from pageable host memory may return only once the data has been staged, one to
//   pageable memory only once it is done, and a host to host copy is done when it returns (the
//   runtime's rules for pageable memory).
// - copy(dst, src) is cudaMemcpy, on the legacy default stream (the per-thread one under
//   --default-stream per-thread). It returns once the copy is done, except where cudaMemcpy
//   returns earlier: a device to device copy (managed memory counts as device memory) may still
//   be running, and one from pageable host memory to the device may return once the data is
//   staged. Later work on that stream is ordered after it; other streams are not.
// A copy of 0 elements calls nothing.
//
// Contexts: copy(dst, src, stream), fill and memset run in the stream's context on a thread
// with none current. copy(dst, src) is passed to the runtime unchanged (it has no stream to take
// a context from): on a thread with no current context the runtime first makes the current
// device's primary context current, as a raw cudaMemcpy would.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/driver_result.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

// The driver's typed memsets, declared exactly as <cudaTypedefs.h> declares them.
typedef CUresult(CUDAAPI* PFN_cuMemsetD16Async_v3020)(CUdeviceptr_v2 dstDevice, unsigned short us,
                                                      size_t N, CUstream hStream);
typedef CUresult(CUDAAPI* PFN_cuMemsetD32Async_v3020)(CUdeviceptr_v2 dstDevice, unsigned int ui,
                                                      size_t N, CUstream hStream);

// Whether fill() may use its own kernel in this translation unit (a CUDA compiler's). Used as a
// default template argument, so translation units of either kind instantiate different
// functions instead of disagreeing about one.
#if defined(__CUDACC__)
#  define CURT_DETAIL_HAS_FILL_KERNEL true
#else
#  define CURT_DETAIL_HAS_FILL_KERNEL false
#endif

namespace curt {
namespace detail {

/// Checks, at compile time, that `Dst` can be written with `Src`'s elements; the element type.
template <class Dst, class Src>
constexpr bool copyable_ranges() {
  static_assert(is_range_v<Dst>,
                "curt::copy: the destination must be a contiguous range with data() and size() "
                "(a curt buffer, a span, std::vector, std::array)");
  static_assert(is_range_v<Src>,
                "curt::copy: the source must be a contiguous range with data() and size() "
                "(a curt buffer, a span, std::vector, std::array)");
  if constexpr (is_range_v<Dst> && is_range_v<Src>) {
    using D = range_element_t<std::remove_reference_t<Dst>>;
    using S = range_element_t<std::remove_reference_t<Src>>;
    static_assert(!std::is_const_v<D>, "curt::copy: the destination's elements are const");
    static_assert(std::is_same_v<std::remove_cv_t<D>, std::remove_cv_t<S>>,
                  "curt::copy: the two ranges hold different element types; CUDA copies bytes, "
                  "so curt copies only between ranges of one type");
    static_assert(std::is_trivially_copyable_v<std::remove_cv_t<D>>,
                  "curt::copy: the elements must be trivially copyable (CUDA copies bytes)");
    return !std::is_const_v<D> && std::is_same_v<std::remove_cv_t<D>, std::remove_cv_t<S>> &&
           std::is_trivially_copyable_v<std::remove_cv_t<D>>;
  }
  return false;
}

// Throws for a failed cudaMemcpyAsync of curt::copy, out of line: the call site stays small
// enough to be inlined into a caller's loop.
CURT_COLD inline void copy_failed(cudaError_t status, std::size_t bytes) {
  check_call(status, "cudaMemcpyAsync",
             {{"bytes", static_cast<long long>(bytes)}, "cudaMemcpyDefault", "stream"}, __FILE__,
             __LINE__);
}

[[noreturn]] CURT_COLD inline void throw_size_mismatch(const char* operation,
                                                       std::size_t destination,
                                                       std::size_t source,
                                                       std::size_t element_size) {
  raise(cudaErrorInvalidValue,
        std::string("curt::") + operation + "(destination of " + std::to_string(destination) +
            " elements, source of " + std::to_string(source) + " elements)",
        "the sizes differ: the destination holds " + std::to_string(destination) +
            " elements (" + std::to_string(destination * element_size) + " bytes), the source " +
            std::to_string(source) + " (" + std::to_string(source * element_size) +
            " bytes); copy equal sizes, e.g. through a subspan (curt::span(range, offset, count))",
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

template <class T>
cudaError_t launch_fill_kernel(T* data, std::size_t count, const T& value, cudaStream_t stream) {
  constexpr unsigned threads = 256;
  std::size_t wanted = (count + threads - 1) / threads;
  unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  T copy_of_value = value;
  void* arguments[] = {&data, &count, &copy_of_value};
  return cudaLaunchKernel(reinterpret_cast<const void*>(&fill_kernel<T>), dim3(blocks),
                          dim3(threads), arguments, 0, stream);
}
#endif

[[noreturn]] CURT_COLD inline void throw_no_fill(std::size_t element_size, bool aligned) {
  raise(cudaErrorInvalidValue,
        "curt::fill(" + std::to_string(element_size) + "-byte value)",
        aligned ? "the value's bytes differ and it is neither 2 nor 4 bytes, so no memset can "
                  "write it; that takes curt's fill kernel, which exists only in translation "
                  "units compiled by a CUDA compiler (nvcc): fill from one of those"
                : "the range is not aligned to its 2- or 4-byte elements, which the driver's "
                  "memsets need; that takes curt's fill kernel, which exists only in "
                  "translation units compiled by a CUDA compiler (nvcc): fill from one of those",
        __FILE__, __LINE__);
}

}  // namespace detail

/// Copies src into dst (cudaMemcpy, cudaMemcpyDefault); sizes must match. Returns once the
/// copy is done, except where cudaMemcpy itself returns earlier (see the file comment: device to
/// device copies, and pageable host memory to the device).
template <class Dst, class Src, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(Dst&& dst, const Src& src) {
  if constexpr (detail::copyable_ranges<Dst, Src>()) {
    using T = detail::range_value_t<Dst>;
    T* d = dst.data();
    const T* s = src.data();
    std::size_t n = dst.size();
    if (CURT_UNLIKELY(n != static_cast<std::size_t>(src.size())))
      detail::throw_size_mismatch("copy", n, static_cast<std::size_t>(src.size()), sizeof(T));
    if (n == 0) return;
    // The template argument keeps the per-thread flavour (cudaMemcpy_ptds) apart.
    detail::check_call(cudaMemcpy(d, s, n * sizeof(T), cudaMemcpyDefault), "cudaMemcpy",
                       {{"bytes", static_cast<long long>(n * sizeof(T))}, "cudaMemcpyDefault"},
                       __FILE__, __LINE__);
  }
}

/// Copies src into dst on `stream` (cudaMemcpyAsync, cudaMemcpyDefault); sizes must match.
/// Both ranges must stay alive, and the source unchanged, until the stream reaches the copy: a
/// temporary that owns its elements (a std::vector, a curt buffer) does not compile, and one
/// that holds them inside itself (a cuda::std::array) throws cuda_error(cudaErrorInvalidValue).
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
    detail::stream_context_scope in_context(h);
    cudaError_t status = cudaMemcpyAsync(d, s, n * sizeof(T), cudaMemcpyDefault, h);
    if (CURT_UNLIKELY(status != cudaSuccess)) detail::copy_failed(status, n * sizeof(T));
  }
}

/// A temporary source: refused when it owns its elements (see copy(dst, src, stream)), else
/// copied from as a view.
template <class Dst, class Src, std::enable_if_t<!std::is_lvalue_reference_v<Src>, int> = 0>
void copy(Dst&& dst, Src&& src, stream_ref stream) {
  detail::check_kept_range<Src>(src, "curt::copy(dst, src, stream): the source");
  copy(std::forward<Dst>(dst), static_cast<const std::remove_reference_t<Src>&>(src), stream);
}

/// Sets every byte of dst's elements to `byte` on `stream` (cudaMemsetAsync). dst must be
/// memory the device can address (device, managed, or pinned memory).
template <class Dst>
void memset(Dst&& dst, unsigned char byte, stream_ref stream) {
  static_assert(detail::is_range_v<Dst>,
                "curt::memset: the destination must be a contiguous range with data() and "
                "size()");
  if constexpr (detail::is_range_v<Dst>) {
    using E = detail::range_element_t<std::remove_reference_t<Dst>>;
    static_assert(!std::is_const_v<E>, "curt::memset: the destination's elements are const");
    static_assert(std::is_trivially_copyable_v<std::remove_cv_t<E>>,
                  "curt::memset: the elements must be trivially copyable");
    E* d = dst.data();
    cudaStream_t h = stream.get();
    std::size_t bytes = static_cast<std::size_t>(dst.size()) * sizeof(E);
    if (bytes == 0) return;
    detail::stream_context_scope in_context(h);
    detail::check_call(cudaMemsetAsync(d, byte, bytes, h), "cudaMemsetAsync",
                       {{"bytes", static_cast<long long>(bytes)}, {"value", byte}, "stream"},
                       __FILE__, __LINE__);
  }
}

/// Sets every element of dst to `value` on `stream`. dst must be memory the device can address.
/// How: a value whose bytes are all equal (0, -1, 0x7f7f7f7f, ...) is a cudaMemsetAsync; other
/// 2- and 4-byte values are the driver's cuMemsetD16Async / cuMemsetD32Async (when the range is
/// aligned to its elements); anything else is a small grid-stride kernel of curt's, which
/// exists only in translation units compiled by a CUDA compiler. From a host compiler's
/// translation unit such a fill throws a cuda_error that says so, before CUDA is called.
template <class Dst, bool HasKernel = CURT_DETAIL_HAS_FILL_KERNEL,
          bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void fill(Dst&& dst, const detail::range_value_t<Dst>& value, stream_ref stream) {
  static_assert(detail::is_range_v<Dst>,
                "curt::fill: the destination must be a contiguous range with data() and size()");
  static_assert(!HasKernel || CURT_DETAIL_HAS_FILL_KERNEL,
                "curt::fill: the fill kernel exists only where a CUDA compiler compiles");
  if constexpr (detail::is_range_v<Dst>) {
    using E = detail::range_element_t<std::remove_reference_t<Dst>>;
    using T = std::remove_cv_t<E>;
    static_assert(!std::is_const_v<E>, "curt::fill: the destination's elements are const");
    static_assert(std::is_trivially_copyable_v<T>,
                  "curt::fill: the elements must be trivially copyable");
    T* d = dst.data();
    cudaStream_t h = stream.get();
    std::size_t n = static_cast<std::size_t>(dst.size());
    if (n == 0) return;
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    bool uniform = true;
    for (std::size_t i = 1; i < sizeof(T); ++i) uniform = uniform && bytes[i] == bytes[0];
    bool aligned = reinterpret_cast<std::uintptr_t>(d) % sizeof(T) == 0;
    if (!uniform && !HasKernel && !((sizeof(T) == 2 || sizeof(T) == 4) && aligned))
      detail::throw_no_fill(sizeof(T), aligned || (sizeof(T) != 2 && sizeof(T) != 4));
    detail::stream_context_scope in_context(h);
    if (uniform) {
      detail::check_call(cudaMemsetAsync(d, bytes[0], n * sizeof(T), h), "cudaMemsetAsync",
                         {{"bytes", static_cast<long long>(n * sizeof(T))},
                          {"value", bytes[0]}, "stream (curt::fill)"},
                         __FILE__, __LINE__);
      return;
    }
    auto target = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(d));
    // The driver's legacy-stream flavour (the only one at ABI 3.2) reads 0 as the legacy stream:
    // name the default stream this translation unit means.
    auto driver_stream = reinterpret_cast<CUstream>(
        h != nullptr ? h : PerThreadDefault ? cudaStreamPerThread : cudaStreamLegacy);
    if constexpr (sizeof(T) == 2) {
      if (aligned) {
        unsigned short pattern = 0;
        std::memcpy(&pattern, bytes, 2);
        detail::check(CURT_DETAIL_DRIVER_LOOKUP(PFN_cuMemsetD16Async_v3020,
                                                "cuMemsetD16Async", 3020)(
                          target, pattern, n, driver_stream),
                      "cuMemsetD16Async", __FILE__, __LINE__);
        return;
      }
    } else if constexpr (sizeof(T) == 4) {
      if (aligned) {
        unsigned int pattern = 0;
        std::memcpy(&pattern, bytes, 4);
        detail::check(CURT_DETAIL_DRIVER_LOOKUP(PFN_cuMemsetD32Async_v3020,
                                                "cuMemsetD32Async", 3020)(
                          target, pattern, n, driver_stream),
                      "cuMemsetD32Async", __FILE__, __LINE__);
        return;
      }
    }
    (void)target;
    (void)driver_stream;
#if defined(__CUDACC__)
    if constexpr (HasKernel) {
      detail::check_call(detail::launch_fill_kernel<T>(d, n, value, h), "cudaLaunchKernel",
                         {"curt::detail::fill_kernel", {"elements", static_cast<long long>(n)},
                          {"element bytes", static_cast<long long>(sizeof(T))}, "stream"},
                         __FILE__, __LINE__);
    }
#endif
  }
}

}  // namespace curt
