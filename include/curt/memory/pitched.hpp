// curt/memory/pitched.hpp: 2D and 3D device memory with padded rows (cudaMalloc3D), and its copies.
//
//   curt::pitched_buffer<float> image(device, width, height);      // elements, rows
//   curt::copy(image, host_pixels, stream);   // host_pixels.size() == width * height, row-major
//   curt::pitched_buffer_3d<float> volume(device, width, height, depth);
//
//   curt::launch(stream, config, kernel, image);  // kernel(curt::pitched_view<float, 2> v)
//   curt::copy(image.sub({x, y, width, height}), host_tile, stream);  // a box of elements
//
// Rows start pitch() bytes apart, slices height() * pitch() bytes; pitched_view does that
// arithmetic. Copies check the extents, and sub() its box, before CUDA is called; the dense side
// may be any memory (cudaMemcpyDefault). An extent of 0 allocates nothing. Owners that hold
// nothing throw on use and report no extent.
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

/// What a kernel indexes pitched memory through: `v(x, y)`, `v(x, y, z)` (x the fastest), with
/// the pitch in bytes, so any pitch and element size work. A view: the memory must outlive it.
/// A buffer gives it by view(), or converts to it when given to curt::launch or <<<>>>.
template <class T, int Dimensions>
class pitched_view {
  static_assert(Dimensions == 2 || Dimensions == 3, "curt::pitched_view: 2 or 3 dimensions");
  template <int D>
  using only = std::enable_if_t<D == Dimensions, int>;

 public:
  using element_type = T;  ///< T, const T for a const buffer's view
  template <class U>
  using rebind = pitched_view<U, Dimensions>;  ///< The view of U (curt::launch's kernel_view).
  pitched_view() = default;  ///< Views nothing.
  /// `data`, rows `pitch` bytes apart, extents in elements (a slice is height rows). @{
  template <int D = 2, only<D> = 0>
  CURT_HOST_DEVICE constexpr pitched_view(T* data, std::size_t pitch, std::size_t width,
                                          std::size_t height) noexcept
      : data_(data), pitch_(pitch), extents_{width, height} {}
  template <int D = 3, only<D> = 0>
  CURT_HOST_DEVICE constexpr pitched_view(T* data, std::size_t pitch, std::size_t width,
                                          std::size_t height, std::size_t depth) noexcept
      : data_(data), pitch_(pitch), extents_{width, height, depth} {}  ///@}
  /// A view of T is a view of const T.
  template <class U, std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>, int> = 0>
  CURT_HOST_DEVICE constexpr pitched_view(const pitched_view<U, Dimensions>& v) noexcept
      : data_(v.data_), pitch_(v.pitch_) {
    for (std::size_t i = 0; i < std::size_t{Dimensions}; ++i) extents_[i] = v.extents_[i];
  }

  CURT_HOST_DEVICE constexpr T* data() const noexcept { return data_; }  ///< Element (0, 0, 0).
  CURT_HOST_DEVICE constexpr std::size_t pitch() const noexcept { return pitch_; }  ///< Row bytes.
  CURT_HOST_DEVICE constexpr std::size_t width() const noexcept { return extents_[0]; }  ///< x.
  CURT_HOST_DEVICE constexpr std::size_t height() const noexcept { return extents_[1]; }  ///< y.
  template <int D = 3, only<D> = 0>
  CURT_HOST_DEVICE constexpr std::size_t depth() const noexcept { return extents_[2]; }  ///< z.
  /// Row y of slice z (0 in 2D): its first element. Unchecked, as a span's operator[].
  CURT_HOST_DEVICE T* row(std::size_t y, std::size_t z = 0) const noexcept {
    using byte = std::conditional_t<std::is_const_v<T>, const char, char>;
    return reinterpret_cast<T*>(reinterpret_cast<byte*>(data_) + (z * extents_[1] + y) * pitch_);
  }
  /// Element (x, y) or (x, y, z); unchecked. @{
  template <int D = 2, only<D> = 0>
  CURT_HOST_DEVICE T& operator()(std::size_t x, std::size_t y) const noexcept { return row(y)[x]; }
  template <int D = 3, only<D> = 0>
  CURT_HOST_DEVICE T& operator()(std::size_t x, std::size_t y, std::size_t z) const noexcept {
    return row(y, z)[x];
  }  ///@}

 private:
  template <class, int>
  friend class pitched_view;
  T* data_ = nullptr;
  std::size_t pitch_ = 0;
  std::size_t extents_[std::size_t{Dimensions}] = {};
};

/// A box of elements: the origin (x, y, z) and the extent (width, height, depth), in elements.
struct region {
  /// The first element (x, y, z), and the extent: elements per row, rows, slices. @{
  std::size_t x = 0, y = 0, z = 0;
  std::size_t width = 0, height = 0, depth = 1;  ///@}
  /// 2D: `curt::region{x, y, width, height}` (z 0, depth 1).
  constexpr region(std::size_t at_x, std::size_t at_y, std::size_t w, std::size_t h) noexcept
      : x(at_x), y(at_y), width(w), height(h) {}
  /// 3D: `curt::region{x, y, z, width, height, depth}`.
  constexpr region(std::size_t at_x, std::size_t at_y, std::size_t at_z, std::size_t w,
                   std::size_t h, std::size_t d) noexcept
      : x(at_x), y(at_y), z(at_z), width(w), height(h), depth(d) {}
};

/// A region of a pitched buffer, from its sub(): what copies take on either side (T const for a
/// const buffer's). A view: the buffer must outlive the copies.
template <class T>
struct pitched_region {
  pitched_view<T, 3> memory;  ///< The whole buffer (depth 1 in 2D).
  region box;                 ///< The part, inside the buffer (sub() checked it).
};

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

// "w x h at (x, y)" (3D: "w x h x d at (x, y, z)"), for messages.
CURT_COLD inline std::string region_text(const region& r, bool three_d) {
  three_d = three_d || r.z != 0 || r.depth != 1;
  return extent_text(r.width, r.height, r.depth, three_d) +
         fmt(" at (%zu, %zu%s)", r.x, r.y, three_d ? fmt(", %zu", r.z).c_str() : "");
}

// Refuses a region that passes the extents `size` (width, height, depth) of a buffer.
template <class T, int D>
void check_region(const region& r, const std::size_t (&size)[3]) {
  const std::size_t at[3] = {r.x, r.y, r.z}, count[3] = {r.width, r.height, r.depth};
  for (int i = 0; i < 3; ++i)
    if (CURT_UNLIKELY(at[i] > size[i] || count[i] > size[i] - at[i]))
      raise(cudaErrorInvalidValue,
            fmt("%s(%s).sub(%s)", owner_name<T>(pitched_kind<D>::name).c_str(),
                extent_text(size[0], size[1], size[2], D == 3).c_str(),
                region_text(r, D == 3).c_str()),
            fmt("the region passes the buffer's %s: %c %zu + %s %zu > %zu",
                i == 0 ? "width" : i == 1 ? "height" : "depth", "xyz"[i], at[i],
                i == 0 ? "width" : i == 1 ? "height" : "depth", count[i], size[i]),
            __FILE__, __LINE__);
}

// One 3D copy (width in bytes) from src_at to dst_at (x in bytes): on `stream`, or synchronous
// where it is null (no stream_ref is).
inline void copy_3d(cudaPitchedPtr dst, cudaPitchedPtr src, cudaExtent extent,
                    cudaStream_t stream, cudaPos dst_at = {}, cudaPos src_at = {}) {
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) return;
  cudaMemcpy3DParms parameters{};
  parameters.srcPtr = src;
  parameters.srcPos = src_at;
  parameters.dstPtr = dst;
  parameters.dstPos = dst_at;
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
  using kernel_view = pitched_view<T, Dimensions>;  ///< What curt::launch gives a functor.

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

  /// The kernel's view (of const T for a const buffer), also by conversion (curt::launch, <<<>>>);
  /// throws when the owner holds none. A temporary gives none: it would dangle. @{
  pitched_view<T, Dimensions> view() & { return view_of<T, Dimensions>("view()"); }
  pitched_view<const T, Dimensions> view() const& { return view_of<const T, Dimensions>("view()"); }
  void view() && = delete;
  void view() const&& = delete;
  operator pitched_view<T, Dimensions>() & { return view(); }  // NOLINT: implicit by design
  operator pitched_view<const T, Dimensions>() const& { return view(); }  // NOLINT: as well
  operator pitched_view<T, Dimensions>() && = delete;
  operator pitched_view<const T, Dimensions>() const&& = delete;  ///@}
  /// The region `r` of the buffer, for copies; throws, naming the numbers, when it passes the
  /// buffer's extents (a 2D buffer's depth is 1). A temporary gives none. @{
  pitched_region<T> sub(const region& r) & { return {checked(r), r}; }
  pitched_region<const T> sub(const region& r) const& { return {checked(r), r}; }
  void sub(const region&) && = delete;
  void sub(const region&) const&& = delete;  ///@}

 private:
  std::size_t extent(std::size_t value) const noexcept { return valid() ? value : 0; }
  template <class E, int D>
  pitched_view<E, D> view_of(const char* operation) const {
    E* p = span::native(operation);
    if constexpr (D == 2) return {p, pitch(), width(), height()};
    else return {p, pitch(), width(), height(), extent(this->place_.depth)};
  }
  pitched_view<T, 3> checked(const region& r) const {  // (T: the const overload makes it const)
    const pitched_view<T, 3> all = view_of<T, 3>("sub()");
    detail::check_region<T, Dimensions>(r, {all.width(), all.height(), all.depth()});
    return all;
  }

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

template <class T, int D>  // the extent of a copy of all elements (width in bytes)
cudaExtent extent_of(const basic_pitched_buffer<T, D>& p) noexcept {
  std::size_t depth = p.valid() ? 1 : 0;
  if constexpr (D == 3) depth = p.depth();
  return {p.width() * sizeof(T), p.height(), depth};
}
template <class T, int D>  // all of a buffer, as a region
region whole(const basic_pitched_buffer<T, D>& p) noexcept {
  return {0, 0, 0, p.width(), p.height(), extent_of(p).depth};
}

// Copies region src into region dst (of equal extents) on `stream`.
template <class T, class U>
void copy_boxes(const pitched_region<T>& dst, const pitched_region<U>& src, cudaStream_t stream) {
  static_assert(!std::is_const_v<T>, "curt::copy: the destination region is of a const buffer");
  static_assert(std::is_same_v<std::remove_cv_t<U>, std::remove_cv_t<T>>,
                "curt::copy: the two sides hold different element types");
  auto native = [](const auto& m) -> cudaPitchedPtr {
    return {const_cast<T*>(m.data()), m.pitch(), m.width() * sizeof(T), m.height()};
  };
  const region &d = dst.box, &s = src.box;
  check_region<T, 3>(d, {dst.memory.width(), dst.memory.height(), dst.memory.depth()});
  check_region<T, 3>(s, {src.memory.width(), src.memory.height(), src.memory.depth()});
  if (CURT_UNLIKELY(static_cast<const void*>(dst.memory.data()) == src.memory.data() &&
                    dst.memory.pitch() == src.memory.pitch() &&  // one buffer, not a dense alias
                    (dst.memory.height() == src.memory.height() ||  // slices line up
                     (d.z + d.depth <= 1 && s.z + s.depth <= 1)) &&  // or only slice 0
                    d.x < s.x + s.width && s.x < d.x + d.width && d.y < s.y + s.height &&
                    s.y < d.y + d.height && d.z < s.z + s.depth && s.z < d.z + d.depth))
    raise(cudaErrorInvalidValue, "curt::copy(pitched destination, pitched source)",
          fmt("the regions overlap in one buffer (%s and %s), which cudaMemcpy3DAsync leaves "
              "undefined", region_text(d, false).c_str(), region_text(s, false).c_str()),
          __FILE__, __LINE__);
  copy_3d(native(dst.memory), native(src.memory), {d.width * sizeof(T), d.height, d.depth},
          stream, {d.x * sizeof(T), d.y, d.z}, {s.x * sizeof(T), s.y, s.z});
}

// `count` dense elements at `data`, which must be those of a box of r's extent, as a region.
template <class E>
pitched_region<E> dense_region(E* data, std::size_t count, const region& r, bool to_region) {
  if (CURT_UNLIKELY(count != r.width * r.height * r.depth))
    raise(cudaErrorInvalidValue,
          to_region ? "curt::copy(pitched destination, dense source)"
                    : "curt::copy(dense destination, pitched source)",
          fmt("the sizes differ: the pitched side is %s, so the dense %s must hold exactly that "
              "many (%zu) in row-major order; it holds %zu", region_text(r, false).c_str(),
              to_region ? "source" : "destination", r.width * r.height * r.depth, count),
          __FILE__, __LINE__);
  return {{data, r.width * sizeof(E), r.width, r.height, r.depth},
          {0, 0, 0, r.width, r.height, r.depth}};
}

template <class Range>
constexpr bool dense_range() {
  static_assert(is_range_v<Range>, "curt::copy: the dense side must be a contiguous range with "
                                   "data() and size(), a pitched buffer or a region of one");
  return is_range_v<Range>;
}

}  // namespace detail

/// Copies on `stream` (cudaMemcpy3DAsync) between pitched buffers, their regions (sub()) and dense
/// ranges (a region's elements in row-major order), checked before CUDA: equal extents, one
/// element type. The sides may differ in dimensions (a 2D region of a 3D buffer). @{
template <class T, class Range>
void copy(pitched_region<T> dst, const Range& src, stream_ref stream) {
  if constexpr (detail::dense_range<Range>())
    detail::copy_boxes(dst, detail::dense_region(src.data(), src.size(), dst.box, true),
                       stream.get());
}
template <class Range, class T>
void copy(Range&& dst, pitched_region<T> src, stream_ref stream) {
  detail::check_kept_range<Range>(dst, "curt::copy(dst, pitched, stream): the destination");
  if constexpr (detail::dense_range<Range>())
    detail::copy_boxes(detail::dense_region(dst.data(), dst.size(), src.box, false), src,
                       stream.get());
}
template <class T, class U>
void copy(pitched_region<T> dst, pitched_region<U> src, stream_ref stream) {
  const region &d = dst.box, &s = src.box;
  if (CURT_UNLIKELY(d.width != s.width || d.height != s.height || d.depth != s.depth))
    detail::raise(cudaErrorInvalidValue, "curt::copy(pitched destination, pitched source)",
                  detail::fmt("the extents differ: the destination is %s, the source %s",
                              detail::region_text(d, false).c_str(),
                              detail::region_text(s, false).c_str()),
                  __FILE__, __LINE__);
  detail::copy_boxes(dst, src, stream.get());
}
template <class T, int D, class Src>  // (below: whole buffers, as regions)
void copy(basic_pitched_buffer<T, D>& dst, const Src& src, stream_ref stream) {
  curt::copy(dst.sub(detail::whole(dst)), src, stream);
}
template <class Dst, class T, int D>
void copy(Dst&& dst, const basic_pitched_buffer<T, D>& src, stream_ref stream) {
  curt::copy(std::forward<Dst>(dst), src.sub(detail::whole(src)), stream);
}
template <class T, int D, class U, int E>
void copy(basic_pitched_buffer<T, D>& dst, const basic_pitched_buffer<U, E>& src,
          stream_ref stream) {
  curt::copy(dst.sub(detail::whole(dst)), src.sub(detail::whole(src)), stream);
}
template <class T, int D, class U>
void copy(basic_pitched_buffer<T, D>& dst, pitched_region<U> src, stream_ref stream) {
  curt::copy(dst.sub(detail::whole(dst)), src, stream);
}
template <class T, class U, int D>
void copy(pitched_region<T> dst, const basic_pitched_buffer<U, D>& src, stream_ref stream) {
  curt::copy(dst, src.sub(detail::whole(src)), stream);
}  ///@}
/// A temporary buffer is freed at the end of the statement, before the copy reads it.
template <class Dst, class T, int D>
void copy(Dst&&, basic_pitched_buffer<T, D>&&, stream_ref) = delete;

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
