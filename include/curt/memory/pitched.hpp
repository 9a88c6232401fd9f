// curt/memory/pitched.hpp: 2D and 3D device memory with padded rows (cudaMalloc3D), and its copies.
//
//   curt::pitched_buffer<float> image(device, width, height);      // elements, rows
//   curt::copy(image, host_pixels, stream);   // host_pixels.size() == width * height, row-major
//   curt::pitched_buffer_3d<float> volume(device, width, height, depth);
//
// Rows start pitch() bytes apart, slices height() * pitch() bytes: a kernel finds element (x, y)
// at reinterpret_cast<char*>(data()) + y * pitch() + x * sizeof(T). Copies check the extents
// before CUDA is called; the dense side may be any memory (cudaMemcpyDefault). An extent of 0
// allocates nothing. Owners that hold nothing throw on use and report no extent.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/buffer.hpp>
#include <curt/memory/copy.hpp>
#include <curt/memory/range.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>

namespace curt {
namespace detail {

/// Where pitched memory was allocated, and its extents (width in elements; depth 1 in 2D).
struct pitched_place {
  allocation where;
  std::size_t width = 0, height = 0, depth = 0, pitch = 0;
};

template <int Dimensions>
struct pitched_kind {
  using place = pitched_place;
  static constexpr const char* name = Dimensions == 2 ? "pitched_buffer" : "pitched_buffer_3d";
  static constexpr bool host_iterable = false;
  static void free(void* p, const pitched_place& at) {
    free_in(at.where, &cudaFree, p, "cudaFree(pitched buffer)");
  }
};

// "width x height" (" x depth" in 3D), for messages.
CURT_COLD inline std::string extent_text(std::size_t width, std::size_t height, std::size_t depth,
                                         bool three_d) {
  return fmt("%zu x %zu%s", width, height, three_d ? fmt(" x %zu", depth).c_str() : "");
}

// a * b, refusing overflow (the product of extents).
inline std::size_t checked_product(std::size_t a, std::size_t b, const std::string& call) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a)
    raise(cudaErrorInvalidValue, call, fmt("%zu x %zu overflows std::size_t", a, b), __FILE__,
          __LINE__);
  return a * b;
}

// One 3D copy (width in bytes): on `stream`, or synchronous where it is null (no stream_ref is).
inline void copy_3d(cudaPitchedPtr dst, cudaPitchedPtr src, cudaExtent extent,
                    cudaStream_t stream) {
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) return;
  cudaMemcpy3DParms parameters{};
  parameters.srcPtr = src;
  parameters.dstPtr = dst;
  parameters.extent = extent;
  parameters.kind = cudaMemcpyDefault;
  context_scope in(for_stream, stream);
  check(cudaMemcpy3DAsync(&parameters, stream), "cudaMemcpy3DAsync",
        {{"width bytes", static_cast<long long>(extent.width)},
         {"height", static_cast<long long>(extent.height)},
         {"depth", static_cast<long long>(extent.depth)}, "stream"},
        __FILE__, __LINE__);
}

}  // namespace detail

/// width x height (x depth) elements of T on device d, each row padded to pitch() bytes
/// (cudaMalloc3D): curt::pitched_buffer<T> (2D) and curt::pitched_buffer_3d<T>.
template <class T, int Dimensions>
class basic_pitched_buffer
    : detail::unique_handle<detail::memory_span<T, detail::pitched_kind<Dimensions>>,
                            detail::memory_traits<detail::pitched_kind<Dimensions>>> {
  using span = detail::memory_span<T, detail::pitched_kind<Dimensions>>;
  using base = detail::unique_handle<span, detail::memory_traits<detail::pitched_kind<Dimensions>>>;

 public:
  using element_type = T;  ///< T, as std::span names it
  using value_type = T;    ///< T

  /// Allocates on device d (cudaMalloc3D; throws on overflow or failure); no_handle: empty. @{
  template <int D = Dimensions, std::enable_if_t<D == 2, int> = 0>
  basic_pitched_buffer(curt::device d, std::size_t width, std::size_t height)
      : basic_pitched_buffer(d, {{nullptr, d.ordinal()}, width, height, 1, 0}) {}
  template <int D = Dimensions, std::enable_if_t<D == 3, int> = 0>
  basic_pitched_buffer(curt::device d, std::size_t width, std::size_t height, std::size_t depth)
      : basic_pitched_buffer(d, {{nullptr, d.ordinal()}, width, height, depth, 0}) {}
  explicit basic_pitched_buffer(no_handle_t) noexcept
      : base(span(detail::state_handle<T*>(detail::handle_state::empty), 0, {})) {}  ///@}

  using span::data;  ///< The first row; throws if the owner holds none; null if an extent is 0.
  using span::get;
  using span::valid;
  std::size_t width() const noexcept { return extent(this->place_.width); }  ///< Elements per row.
  std::size_t height() const noexcept { return extent(this->place_.height); }  ///< Rows of a slice.
  template <int D = Dimensions, std::enable_if_t<D == 3, int> = 0>
  std::size_t depth() const noexcept { return extent(this->place_.depth); }  ///< Slices (3D only).
  /// Bytes from one row to the next (at least width() * sizeof(T)).
  std::size_t pitch() const noexcept { return extent(this->place_.pitch); }
  /// width() * height() (* depth()): the elements a dense copy moves.
  std::size_t element_count() const noexcept {
    return width() * height() * extent(this->place_.depth);
  }
  /// The device it was allocated on; throws when the owner holds none.
  curt::device device() const {
    (void)span::native("device()");
    return curt::device::from_ordinal_unchecked(this->place_.where.ordinal);
  }
  /// The runtime's description: pointer, pitch, width in bytes, height.
  cudaPitchedPtr native() const {
    T* p = const_cast<T*>(span::native("native()"));
    return {p, this->place_.pitch, this->place_.width * sizeof(T), this->place_.height};
  }
  /// Gives up ownership (the caller frees with cudaFree); the owner is then "released".
  T* release() { return base::release(); }

 private:
  std::size_t extent(std::size_t value) const noexcept { return valid() ? value : 0; }

  basic_pitched_buffer(curt::device d, detail::pitched_place at) : base(span(nullptr, 0, at)) {
    const std::string call = detail::fmt(
        "%s(%s)", detail::owner_name<T>(detail::pitched_kind<Dimensions>::name).c_str(),
        detail::extent_text(at.width, at.height, at.depth, Dimensions == 3).c_str());
    const std::size_t row = detail::checked_product(at.width, sizeof(T), call);
    (void)detail::checked_product(detail::checked_product(row, at.height, call), at.depth, call);
    if (row == 0 || at.height == 0 || at.depth == 0) return;
    cudaPitchedPtr allocated{};
    this->place_.where = detail::allocate_on(d, [&] {
      detail::check(cudaMalloc3D(&allocated, cudaExtent{row, at.height, at.depth}), "cudaMalloc3D",
                    {{"width bytes", static_cast<long long>(row)},
                     {"height", static_cast<long long>(at.height)},
                     {"depth", static_cast<long long>(at.depth)}, {"device", d.ordinal()}},
                    __FILE__, __LINE__);
    });
    this->place_.pitch = allocated.pitch;
    this->handle_ = static_cast<T*>(allocated.ptr);
  }
};

template <class T>
using pitched_buffer = basic_pitched_buffer<T, 2>;
template <class T>
using pitched_buffer_3d = basic_pitched_buffer<T, 3>;

namespace detail {

template <class T, int D>  // the extent of a copy of all elements (width in bytes), and its text
cudaExtent extent_of(const basic_pitched_buffer<T, D>& p) noexcept {
  std::size_t depth = p.valid() ? 1 : 0;
  if constexpr (D == 3) depth = p.depth();
  return {p.width() * sizeof(T), p.height(), depth};
}
template <class T, int D>
CURT_COLD std::string extent_text(const basic_pitched_buffer<T, D>& p) {
  return extent_text(p.width(), p.height(), extent_of(p).depth, D == 3);
}

// Copies a pitched buffer to or from (`to_pitched`) a dense range of its extents, on `stream`.
template <class E, class T, int D>
void copy_dense(const basic_pitched_buffer<T, D>& pitched, E* dense, std::size_t count,
                bool to_pitched, cudaStream_t stream) {
  static_assert(std::is_same_v<std::remove_cv_t<E>, T>,
                "curt::copy: the dense range and the pitched buffer hold different element types");
  const cudaPitchedPtr p = pitched.native();
  const cudaExtent e = extent_of(pitched);
  if (CURT_UNLIKELY(count != pitched.element_count()))
    raise(cudaErrorInvalidValue,
          to_pitched ? "curt::copy(pitched destination, dense source)"
                     : "curt::copy(dense destination, pitched source)",
          fmt("the sizes differ: the pitched buffer is %s elements, so the dense %s must hold "
              "exactly that many (%zu) in row-major order; it holds %zu",
              extent_text(pitched).c_str(), to_pitched ? "source" : "destination",
              pitched.element_count(), count),
          __FILE__, __LINE__);
  const cudaPitchedPtr d{const_cast<T*>(dense), e.width, e.width, e.height};
  copy_3d(to_pitched ? p : d, to_pitched ? d : p, e, stream);
}

template <class T, int D>
void copy_between(basic_pitched_buffer<T, D>& dst, const basic_pitched_buffer<T, D>& src,
                  cudaStream_t stream) {
  const cudaPitchedPtr d = dst.native(), s = src.native();
  const cudaExtent de = extent_of(dst), se = extent_of(src);
  if (CURT_UNLIKELY(de.width != se.width || de.height != se.height || de.depth != se.depth))
    raise(cudaErrorInvalidValue, "curt::copy(pitched destination, pitched source)",
          fmt("the extents differ: the destination is %s elements, the source %s",
              extent_text(dst).c_str(), extent_text(src).c_str()),
          __FILE__, __LINE__);
  copy_3d(d, s, de, stream);
}

template <class Range>
constexpr bool dense_range() {
  static_assert(is_range_v<Range>, "curt::copy: the dense side must be a contiguous range with "
                                   "data() and size(), or a pitched buffer");
  return is_range_v<Range>;
}

}  // namespace detail

// Copies with a pitched buffer on one side or both, on a stream (cudaMemcpy3DAsync): the dense
// side is width x height (x depth) elements in row-major order.
template <class T, int D, class Range>
void copy(basic_pitched_buffer<T, D>& dst, const Range& src, stream_ref stream) {
  if constexpr (detail::dense_range<Range>())
    detail::copy_dense(dst, src.data(), src.size(), true, stream.get());
}
template <class Range, class T, int D>
void copy(Range&& dst, const basic_pitched_buffer<T, D>& src, stream_ref stream) {
  detail::check_kept_range<Range>(dst, "curt::copy(dst, pitched, stream): the destination");
  if constexpr (detail::dense_range<Range>())
    detail::copy_dense(src, dst.data(), dst.size(), false, stream.get());
}
template <class T, int D>
void copy(basic_pitched_buffer<T, D>& dst, const basic_pitched_buffer<T, D>& src,
          stream_ref stream) {
  detail::copy_between(dst, src, stream.get());
}

/// Sets every byte of the buffer's rows (not the padding) to `byte` on `stream`.
template <class T, int D>
void memset(basic_pitched_buffer<T, D>& dst, unsigned char byte, stream_ref stream) {
  const cudaPitchedPtr d = dst.native();
  const cudaExtent e = detail::extent_of(dst);
  cudaStream_t h = stream.get();
  if (e.width == 0 || e.height == 0 || e.depth == 0) return;
  detail::context_scope in(detail::for_stream, h);
  detail::check(cudaMemset3DAsync(d, byte, e, h), "cudaMemset3DAsync",
                {{"width bytes", static_cast<long long>(e.width)},
                 {"height", static_cast<long long>(e.height)},
                 {"depth", static_cast<long long>(e.depth)}, {"value", byte}, "stream"},
                __FILE__, __LINE__);
}

}  // namespace curt
