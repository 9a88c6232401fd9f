// curt/memory/array.hpp: CUDA arrays (cudaMalloc3DArray), the memory textures and surfaces read
// and write (memory/texture.hpp), and their copies.
//
//   auto image = curt::cuda_array<float>::two_d(device, width, height);
//   curt::copy(image, host_pixels, stream);  // width * height elements, row-major
//
// An array keeps the device's own layout (no pointer, no pitch). Its channel format comes from T
// (cudaCreateChannelDesc<T>(): char, short, int, float, their unsigned kinds and 2- and
// 4-vectors: uchar4, float2, ...). Copies name their stream (cudaMemcpy3DAsync) and check the
// extents before CUDA is called: a dense range (any memory) holds width x height x depth elements
// row by row, layer after layer; a pitched buffer or another array has the array's width, height
// and, as depth, its depth or layer count (1 where it has neither).
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/error.hpp>
#include <curt/core/flags.hpp>
#include <curt/core/handle.hpp>
#include <curt/memory/buffer.hpp>
#include <curt/memory/pitched.hpp>

#include <channel_descriptor.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>

namespace curt {

/// How cudaMalloc3DArray makes an array; combine with |.
enum class array_flags : unsigned {
  none = cudaArrayDefault,
  surface_load_store = cudaArraySurfaceLoadStore,  ///< surface_object may read and write it
  texture_gather = cudaArrayTextureGather,         ///< 2D only: textures may gather (tex2Dgather)
};
CURT_DETAIL_FLAGS(array_flags);

namespace detail {

template <class T>  // T's channel format; refused, naming `call` and T, where CUDA knows none
cudaChannelFormatDesc channel_of(const std::string& call) {
  const cudaChannelFormatDesc channel = cudaCreateChannelDesc<T>();
  if (CURT_UNLIKELY(channel.f == cudaChannelFormatKindNone))
    raise(cudaErrorInvalidValue, call,
          type_name<T>() +
              " has no channel format (cudaCreateChannelDesc<T>() knows char, short, "
              "int, float, their unsigned kinds and their 2- and 4-vectors)",
          __FILE__, __LINE__);
  return channel;
}

// Where an array was made (context null: adopted), its extent as cudaMalloc3DArray took it
// (height 0 in 1D, depth 0 in 1D and 2D, the layer count when layered) and its flags.
struct array_place {
  allocation where;
  cudaExtent extent{0, 0, 0};
  unsigned flags = 0;
};

template <class T>  // the non-owning half of cuda_array
class array_handle {
 public:
  array_handle(cudaArray_t array, array_place place) noexcept : handle_(array), place_(place) {}
  cudaArray_t get() const { return native("get()"); }
  bool valid() const noexcept { return !is_state_handle(handle_); }

 protected:
  cudaArray_t native(const char* operation) const {
    if (CURT_UNLIKELY(is_state_handle(handle_)))
      throw_no_handle(handle_, owner_name<T>("cuda_array"), operation, "array");
    return handle_;
  }
  friend struct array_traits;
  cudaArray_t handle_;
  array_place place_;
};

struct array_traits {  // freed where it was made; an adopted one in a context of its device
  template <class Handle>
  static void destroy(Handle& array, no_state&) {
    if (array.handle_ == nullptr) return;  // a constructor that threw made none
    const allocation& at = array.place_.where;
    context_scope in;
    if (at.context ? at.context != current_context() : !device_context_current(at.ordinal))
      in.push(at.context ? at.context : primary_context(at.ordinal));
    check(cudaFreeArray(array.handle_), "cudaFreeArray", __FILE__, __LINE__);
  }
};

}  // namespace detail

/// A CUDA array of T on one device (cudaMalloc3DArray): 1D, 2D, 3D, or layers of 1D or 2D arrays,
/// in the device's own layout, read through texture_object and, made with
/// array_flags::surface_load_store, through surface_object. Made in a context of its device
/// current already, else the device's primary context, and freed there. Move-only.
template <class T>
class cuda_array : public detail::unique_handle<detail::array_handle<T>, detail::array_traits> {
  using ref = detail::array_handle<T>;
  using base = detail::unique_handle<ref, detail::array_traits>;
  using size = std::size_t;

 public:
  using value_type = T;  ///< T

  /// An array of `w` elements; w x h; w x h x depth; `layers` layers of w or of w x h elements
  /// (cudaArrayLayered). Throws before CUDA for an extent of 0, an overflowing size, or a T
  /// without channel format; no_handle: an empty owner, every use throws. @{
  static cuda_array one_d(curt::device d, size w, array_flags flags = array_flags::none) {
    return cuda_array(d, "one_d", {w, 0, 0}, 1, flags);
  }
  static cuda_array two_d(curt::device d, size w, size h, array_flags flags = array_flags::none) {
    return cuda_array(d, "two_d", {w, h, 0}, 3, flags);
  }
  static cuda_array three_d(curt::device d, size w, size h, size depth,
                            array_flags flags = array_flags::none) {
    return cuda_array(d, "three_d", {w, h, depth}, 7, flags);
  }
  static cuda_array layered_1d(curt::device d, size w, size layers,
                               array_flags flags = array_flags::none) {
    return cuda_array(d, "layered_1d", {w, 0, layers}, 5, flags, cudaArrayLayered);
  }
  static cuda_array layered_2d(curt::device d, size w, size h, size layers,
                               array_flags flags = array_flags::none) {
    return cuda_array(d, "layered_2d", {w, h, layers}, 7, flags, cudaArrayLayered);
  }
  explicit cuda_array(no_handle_t) noexcept
      : base(ref(detail::state_handle<cudaArray_t>(detail::handle_state::empty), {})) {}  ///@}

  /// Owns an array of T the caller made on device d with cudaMalloc3DArray(`extent`, `flags`), as
  /// the caller says (CUDA is not asked); freed in a context of d current then, else d's primary.
  static cuda_array adopt(curt::device d, cudaArray_t array, cudaExtent extent, unsigned flags) {
    if (array == nullptr || detail::is_state_handle(array))
      detail::raise(cudaErrorInvalidResourceHandle, detail::owner_name<T>("cuda_array") + "::adopt",
                    "only a created array can be owned, not null", __FILE__, __LINE__);
    return cuda_array(ref(array, {{nullptr, d.ordinal()}, extent, flags}));
  }

  using base::release;  ///< Gives up ownership (the caller frees it); the owner is "released".
  using ref::get;       ///< The native array; throws when the owner holds none.
  using ref::valid;     ///< Holds an array: false when empty, moved-from or released.
  /// Elements per row; rows (1 in 1D); slices (1 unless 3D); layers (0 unless layered); all of
  /// them multiplied (layers counted). 0 for an owner that holds none. @{
  size width() const noexcept { return valid() ? extent().width : 0; }
  size height() const noexcept { return valid() ? at_least_1(extent().height) : 0; }
  size depth() const noexcept { return valid() ? (layered() ? 1 : at_least_1(extent().depth)) : 0; }
  size layers() const noexcept { return layered() ? extent().depth : 0; }
  size element_count() const noexcept {
    return width() * height() * depth() * at_least_1(layers());
  }
  ///@}
  /// Made with cudaArrayLayered (layered_1d, layered_2d); false for an owner that holds none.
  bool layered() const noexcept { return valid() && (this->place_.flags & cudaArrayLayered) != 0; }
  /// The flags it was made with, but cudaArrayLayered.
  array_flags flags() const noexcept {
    return array_flags(valid() ? this->place_.flags & ~unsigned(cudaArrayLayered) : 0);
  }
  /// The device it was made on; throws when the owner holds none.
  curt::device device() const {
    (void)this->native("device()");
    return curt::device::from_ordinal_unchecked(this->place_.where.ordinal);
  }

 private:
  static size at_least_1(size n) noexcept { return n == 0 ? 1 : n; }
  const cudaExtent& extent() const noexcept { return this->place_.extent; }
  explicit cuda_array(ref r) noexcept : base(r) {}
  // `used`: the extents the shape has (bits 0, 1, 2: width, height, depth).
  cuda_array(curt::device d, const char* shape, cudaExtent e, unsigned used, array_flags flags,
             unsigned layered = 0)
      : base(ref(nullptr, {{nullptr, d.ordinal()}, e, unsigned(flags) | layered})) {
    const size extents[3] = {e.width, e.height, e.depth};
    std::string call = detail::owner_name<T>("cuda_array") + "::" + shape;
    bool zero = false;
    for (unsigned i = 0; i < 3; ++i)
      if (used & (1u << i)) {
        call += detail::fmt(i == 0 ? "(%zu" : ", %zu", extents[i]);
        zero = zero || extents[i] == 0;
      }
    call += ')';
    const cudaChannelFormatDesc channel = detail::channel_of<T>(call);
    if (zero)
      detail::raise(cudaErrorInvalidValue, call, "every extent of an array must be at least 1",
                    __FILE__, __LINE__);
    (void)detail::checked_product(
        detail::checked_product(detail::checked_product(e.width, at_least_1(e.height), call),
                                at_least_1(e.depth), call),
        sizeof(T), call);
    cudaArray_t made = nullptr;
    this->place_.where = detail::allocate_on(d, [&] {
      detail::check(cudaMalloc3DArray(&made, &channel, e, this->place_.flags), "cudaMalloc3DArray",
                    {{"width", static_cast<long long>(e.width)},
                     {"height", static_cast<long long>(e.height)},
                     {"depth", static_cast<long long>(e.depth)},
                     {"flags", this->place_.flags},
                     {"device", d.ordinal()}},
                    __FILE__, __LINE__);
    });
    this->handle_ = made;
  }
};

namespace detail {

template <class T>  // what a copy of every element moves, in elements
cudaExtent extent_of(const cuda_array<T>& a) noexcept {
  return {a.width(), a.height(), a.depth() * (a.layered() ? a.layers() : 1)};
}

struct array_side {  // one side of a copy with an array: an array, or memory (pointer, pitch)
  cudaArray_t array;
  cudaPitchedPtr memory;
  cudaExtent extent;  // elements; a dense range's: its count, then 0 x 0
  const char* what;
};
template <class T>
array_side side_of(const cuda_array<T>& a) {
  return {a.get(), {}, extent_of(a), "array"};
}
template <class T, int D>
array_side side_of(const basic_pitched_buffer<T, D>& p) {
  return {nullptr, p.native(), {p.width(), p.height(), extent_of(p).depth}, "pitched buffer"};
}
template <class T, class E>  // a dense range of `count` elements of the array's extent
array_side side_of(const cuda_array<T>& a, E* dense, std::size_t count) {
  static_assert(std::is_same_v<std::remove_cv_t<E>, T>,
                "curt::copy: the dense range and the array hold different element types");
  const cudaExtent e = extent_of(a);
  const std::size_t row = e.width * sizeof(T);
  return {nullptr,
          {const_cast<T*>(dense), row, row, e.height},
          count == a.element_count() ? e : cudaExtent{count, 0, 0},
          "dense range"};
}

// dst = src on `stream` (cudaMemcpy3DAsync), once the extents are found equal.
inline void copy_array(const array_side& dst, const array_side& src, cudaStream_t stream) {
  const cudaExtent d = dst.extent, s = src.extent;
  if (CURT_UNLIKELY(d.width != s.width || d.height != s.height || d.depth != s.depth)) {
    const auto text = [](cudaExtent e) {
      return e.height == 0 ? fmt("holds %zu elements", e.width)
                           : "is " + extent_text(e.width, e.height, e.depth, true) + " elements";
    };
    raise(cudaErrorInvalidValue, fmt("curt::copy(%s, %s, stream)", dst.what, src.what),
          fmt("the extents differ (width x height x depth or layers): the destination %s, the "
              "source %s",
              text(d).c_str(), text(s).c_str()),
          __FILE__, __LINE__);
  }
  cudaMemcpy3DParms p{src.array, {}, src.memory, dst.array, {}, dst.memory, d, cudaMemcpyDefault};
  context_scope in(for_stream, stream);
  check(cudaMemcpy3DAsync(&p, stream), "cudaMemcpy3DAsync",
        {{"width", static_cast<long long>(d.width)},
         {"height", static_cast<long long>(d.height)},
         {"depth", static_cast<long long>(d.depth)},
         "stream"},
        __FILE__, __LINE__);
}

}  // namespace detail

/// Copies with an array on one side or both, on `stream` (cudaMemcpy3DAsync): the other side is
/// a dense range, a pitched buffer or an array of its extents (see the file comment). @{
template <class T, class Range>
void copy(cuda_array<T>& dst, const Range& src, stream_ref stream) {
  if constexpr (detail::dense_range<Range>())
    detail::copy_array(detail::side_of(dst), detail::side_of(dst, src.data(), src.size()),
                       stream.get());
}
template <class Range, class T>
void copy(Range&& dst, const cuda_array<T>& src, stream_ref stream) {
  detail::check_kept_range<Range>(dst, "curt::copy(dst, array, stream): the destination");
  static_assert(!std::is_const_v<detail::element_of_t<Range>>,
                "curt::copy: the destination's elements are const");
  if constexpr (detail::dense_range<Range>())
    detail::copy_array(detail::side_of(src, dst.data(), dst.size()), detail::side_of(src),
                       stream.get());
}
template <class T, int D>
void copy(cuda_array<T>& dst, const basic_pitched_buffer<T, D>& src, stream_ref stream) {
  detail::copy_array(detail::side_of(dst), detail::side_of(src), stream.get());
}
template <class T, int D>
void copy(basic_pitched_buffer<T, D>& dst, const cuda_array<T>& src, stream_ref stream) {
  detail::copy_array(detail::side_of(dst), detail::side_of(src), stream.get());
}
template <class T>
void copy(cuda_array<T>& dst, const cuda_array<T>& src, stream_ref stream) {
  detail::copy_array(detail::side_of(dst), detail::side_of(src), stream.get());
}  ///@}

}  // namespace curt
