// curt/pitched.hpp: 2D and 3D device memory with padded rows (cudaMallocPitch, cudaMalloc3D),
// and copies between it and dense ranges or other pitched buffers of the same extents.
//
//   curt::pitched_buffer<float> image(device, width, height);      // elements, rows
//   curt::copy(image, host_pixels, stream);   // host_pixels.size() == width * height, row-major
//   curt::copy(host_pixels, image, stream);
//   curt::pitched_buffer_3d<float> volume(device, width, height, depth);
//
// Rows start pitch() bytes apart (the driver pads them for aligned access); a kernel addresses
// element (x, y) at reinterpret_cast<char*>(data()) + y * pitch() + x * sizeof(T). Copies check
// the extents before CUDA is called and throw a cuda_error naming both; the dense side may be
// host or device memory of any kind (cudaMemcpyDefault). An extent of 0 allocates nothing.
// Empty, moved-from and released owners throw on use, as every curt owner does.
#pragma once

#include <curt/copy.hpp>
#include <curt/detail/config.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace curt {
namespace detail {

// width x height (x depth) elements as text, for messages.
inline std::string extent_text(std::size_t width, std::size_t height, std::size_t depth,
                               bool three_d) {
  std::string text = std::to_string(width) + " x " + std::to_string(height);
  if (three_d) text += " x " + std::to_string(depth);
  return text;
}

// make_cudaExtent and make_cudaPitchedPtr, which <cuda_runtime_api.h> does not declare.
inline cudaExtent extent_of(std::size_t width_bytes, std::size_t height, std::size_t depth) {
  cudaExtent e{};
  e.width = width_bytes;
  e.height = height;
  e.depth = depth;
  return e;
}
inline cudaPitchedPtr pitched_pointer(void* p, std::size_t pitch, std::size_t width_bytes,
                                      std::size_t height) {
  cudaPitchedPtr result{};
  result.ptr = p;
  result.pitch = pitch;
  result.xsize = width_bytes;
  result.ysize = height;
  return result;
}

// a * b, refusing overflow (the product of extents).
inline std::size_t checked_product(std::size_t a, std::size_t b, const std::string& call) {
  if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a)
    raise(cudaErrorInvalidValue, call,
          std::to_string(a) + " x " + std::to_string(b) + " overflows std::size_t", __FILE__,
          __LINE__);
  return a * b;
}

/// The extents of pitched memory, as owners of both dimensions share them.
template <class T, int Dimensions>
class pitched_owner {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T>,
                "curt pitched buffers hold trivially copyable, non-const element types");

 public:
  using element_type = T;
  using value_type = T;

  pitched_owner(const pitched_owner&) = delete;
  pitched_owner& operator=(const pitched_owner&) = delete;

  /// The first row; throws when the owner holds no memory. Null when an extent is 0.
  T* data() { return usable("data()"); }
  const T* data() const { return usable("data()"); }
  T* get() { return usable("get()"); }
  const T* get() const { return usable("get()"); }
  /// Elements per row.
  std::size_t width() const noexcept { return width_; }
  /// Rows (per slice, in 3D).
  std::size_t height() const noexcept { return height_; }
  /// Bytes from one row to the next (at least width() * sizeof(T)).
  std::size_t pitch() const noexcept { return pitch_; }
  /// width() * height() (* depth()): the elements a dense copy moves.
  std::size_t element_count() const noexcept { return width_ * height_ * depth_; }
  bool valid() const noexcept { return !is_state_handle(pointer_); }
  curt::device device() const {
    (void)usable("device()");
    return curt::device::from_ordinal_unchecked(where_.ordinal);
  }
  /// The runtime's description: pointer, pitch, width in bytes, height.
  cudaPitchedPtr native() const {
    return detail::pitched_pointer(const_cast<T*>(usable("native()")), pitch_, width_ * sizeof(T),
                               height_);
  }
  /// Gives up ownership; the caller frees the returned pointer with cudaFree. The owner is then
  /// "released".
  T* release() {
    T* p = usable("release()");
    pointer_ = state_handle<T*>(handle_state::released);
    width_ = height_ = pitch_ = 0;
    depth_ = Dimensions == 2 ? 1 : 0;  // as a moved-from owner: no extent is left behind
    return p;
  }

 protected:
  pitched_owner(int ordinal, std::size_t width, std::size_t height, std::size_t depth) noexcept
      : pointer_(nullptr), width_(width), height_(height), depth_(depth), where_{ordinal, 0} {}
  explicit pitched_owner(handle_state state) noexcept : pointer_(state_handle<T*>(state)) {}
  pitched_owner(pitched_owner&& other) noexcept
      : pointer_(std::exchange(other.pointer_, state_handle<T*>(handle_state::moved_from))),
        width_(std::exchange(other.width_, 0)),
        height_(std::exchange(other.height_, 0)),
        depth_(std::exchange(other.depth_, Dimensions == 2 ? 1 : 0)),
        pitch_(std::exchange(other.pitch_, 0)),
        where_(other.where_) {}
  pitched_owner& operator=(pitched_owner&& other) noexcept {
    if (this != &other) {
      free();
      pointer_ = std::exchange(other.pointer_, state_handle<T*>(handle_state::moved_from));
      width_ = std::exchange(other.width_, 0);
      height_ = std::exchange(other.height_, 0);
      depth_ = std::exchange(other.depth_, Dimensions == 2 ? 1 : 0);
      pitch_ = std::exchange(other.pitch_, 0);
      where_ = other.where_;
    }
    return *this;
  }
  ~pitched_owner() { free(); }

  void own(T* memory, std::size_t pitch_bytes) noexcept {
    pointer_ = memory;
    pitch_ = pitch_bytes;
    where_ = allocated_on(where_.ordinal, memory);
  }
  std::size_t depth_value() const noexcept { return depth_; }
  T* usable(const char* operation) const {
    if (CURT_UNLIKELY(is_state_handle(pointer_)))
      throw_no_memory(pointer_,
                      owner_name<T>(Dimensions == 2 ? "pitched_buffer" : "pitched_buffer_3d"),
                      operation);
    return pointer_;
  }

 private:
  void free() noexcept {
    if (!is_state_handle(pointer_) && pointer_ != nullptr) {
      T* p = pointer_;
      free_on_device(p, where_, [p] { return cudaFree(p); }, "cudaFree(pitched buffer)");
    }
    pointer_ = state_handle<T*>(handle_state::empty);
  }

  T* pointer_;
  std::size_t width_ = 0;
  std::size_t height_ = 0;
  std::size_t depth_ = Dimensions == 2 ? 1 : 0;
  std::size_t pitch_ = 0;
  device_allocation where_{-1, 0};
};

}  // namespace detail

/// width x height elements of T on device d, each row padded to pitch() bytes (cudaMallocPitch).
template <class T>
class pitched_buffer : public detail::pitched_owner<T, 2> {
  using base = detail::pitched_owner<T, 2>;

 public:
  pitched_buffer(curt::device d, std::size_t width, std::size_t height)
      : base(d.ordinal(), width, height, 1) {
    std::string call = "curt::" + detail::owner_name<T>("pitched_buffer") + "(" +
                       detail::extent_text(width, height, 1, false) + ")";
    std::size_t row_bytes = detail::checked_product(width, sizeof(T), call);
    (void)detail::checked_product(row_bytes, height, call);
    if (row_bytes == 0 || height == 0) return;
    void* p = nullptr;
    std::size_t pitch_bytes = 0;
    device_guard guard(d);
    detail::check_call(cudaMallocPitch(&p, &pitch_bytes, row_bytes, height), "cudaMallocPitch",
                       {{"width bytes", static_cast<long long>(row_bytes)},
                        {"height", static_cast<long long>(height)},
                        {"device", d.ordinal()}},
                       __FILE__, __LINE__);
    this->own(static_cast<T*>(p), pitch_bytes);
  }
  explicit pitched_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}
  pitched_buffer(pitched_buffer&&) noexcept = default;
  pitched_buffer& operator=(pitched_buffer&&) noexcept = default;
};

/// width x height x depth elements of T on device d (cudaMalloc3D): depth slices of height rows,
/// each row padded to pitch() bytes; slices are height() * pitch() bytes apart.
template <class T>
class pitched_buffer_3d : public detail::pitched_owner<T, 3> {
  using base = detail::pitched_owner<T, 3>;

 public:
  pitched_buffer_3d(curt::device d, std::size_t width, std::size_t height, std::size_t depth)
      : base(d.ordinal(), width, height, depth) {
    std::string call = "curt::" + detail::owner_name<T>("pitched_buffer_3d") + "(" +
                       detail::extent_text(width, height, depth, true) + ")";
    std::size_t row_bytes = detail::checked_product(width, sizeof(T), call);
    (void)detail::checked_product(detail::checked_product(row_bytes, height, call), depth, call);
    if (row_bytes == 0 || height == 0 || depth == 0) return;
    cudaPitchedPtr allocated{};
    device_guard guard(d);
    detail::check_call(cudaMalloc3D(&allocated, detail::extent_of(row_bytes, height, depth)),
                       "cudaMalloc3D",
                       {{"width bytes", static_cast<long long>(row_bytes)},
                        {"height", static_cast<long long>(height)},
                        {"depth", static_cast<long long>(depth)},
                        {"device", d.ordinal()}},
                       __FILE__, __LINE__);
    this->own(static_cast<T*>(allocated.ptr), allocated.pitch);
  }
  explicit pitched_buffer_3d(no_handle_t) noexcept : base(detail::handle_state::empty) {}
  pitched_buffer_3d(pitched_buffer_3d&&) noexcept = default;
  pitched_buffer_3d& operator=(pitched_buffer_3d&&) noexcept = default;

  /// Slices.
  std::size_t depth() const noexcept { return this->depth_value(); }
};

namespace detail {

// The extents of a copy's two sides, for the check and the message.
struct copy_extents {
  std::size_t width, height, depth;
  bool three_d;
  std::string text() const { return extent_text(width, height, depth, three_d); }
};

[[noreturn]] CURT_COLD inline void throw_extent_mismatch(const char* what, copy_extents dst,
                                                         copy_extents src) {
  raise(cudaErrorInvalidValue,
        std::string("curt::copy(") + what + ")",
        "the extents differ: the destination is " + dst.text() + " elements, the source " +
            src.text(),
        __FILE__, __LINE__);
}
[[noreturn]] CURT_COLD inline void throw_dense_mismatch(const char* what, copy_extents pitched,
                                                        std::size_t dense, bool to_pitched) {
  std::string extents = pitched.text();
  raise(cudaErrorInvalidValue,
        std::string("curt::copy(") + what + ")",
        "the sizes differ: the pitched buffer is " + extents + " elements, so the dense " +
            (to_pitched ? "source" : "destination") + " must hold exactly that many (" +
            std::to_string(pitched.width * pitched.height * pitched.depth) + ") in row-major "
            "order; it holds " + std::to_string(dense),
        __FILE__, __LINE__);
}

// One 3D copy of the parameters' extent (width in bytes), synchronous or on a stream.
template <bool PerThreadDefault>
void copy_3d(const cudaMemcpy3DParms& parameters, cudaStream_t stream, bool on_stream) {
  if (on_stream) {
    stream_context_scope in_context(stream);
    check_call(cudaMemcpy3DAsync(&parameters, stream), "cudaMemcpy3DAsync",
               {{"width bytes", static_cast<long long>(parameters.extent.width)},
                {"height", static_cast<long long>(parameters.extent.height)},
                {"depth", static_cast<long long>(parameters.extent.depth)}, "stream"},
               __FILE__, __LINE__);
  } else {
    check_call(cudaMemcpy3D(&parameters), "cudaMemcpy3D",
               {{"width bytes", static_cast<long long>(parameters.extent.width)},
                {"height", static_cast<long long>(parameters.extent.height)},
                {"depth", static_cast<long long>(parameters.extent.depth)}},
               __FILE__, __LINE__);
  }
}

template <class T>
copy_extents extents_of(const pitched_owner<T, 2>& p) {
  return {p.width(), p.height(), 1, false};
}
template <class T>
copy_extents extents_of(const pitched_owner<T, 3>& p) {
  return {p.width(), p.height(), static_cast<const pitched_buffer_3d<T>&>(p).depth(), true};
}

template <class T>
cudaPitchedPtr dense_side(const T* data, std::size_t width, std::size_t height) {
  return detail::pitched_pointer(const_cast<T*>(data), width * sizeof(T), width * sizeof(T), height);
}

template <bool PerThreadDefault, class T, int D>
void copy_pitched(cudaPitchedPtr dst, cudaPitchedPtr src, copy_extents e, cudaStream_t stream,
                  bool on_stream) {
  if (e.width == 0 || e.height == 0 || e.depth == 0) return;
  cudaMemcpy3DParms parameters{};
  parameters.srcPtr = src;
  parameters.dstPtr = dst;
  parameters.extent = detail::extent_of(e.width * sizeof(T), e.height, e.depth);
  parameters.kind = cudaMemcpyDefault;
  copy_3d<PerThreadDefault>(parameters, stream, on_stream);
}

template <bool PerThreadDefault, class T, int D, class Range>
void copy_to_pitched(pitched_owner<T, D>& dst, const Range& src, cudaStream_t stream,
                     bool on_stream) {
  static_assert(is_range_v<Range>,
                "curt::copy: the source must be a contiguous range with data() and size(), or a "
                "pitched buffer");
  using S = range_element_t<const Range>;
  static_assert(std::is_same_v<std::remove_cv_t<S>, T>,
                "curt::copy: the dense range and the pitched buffer hold different element types");
  cudaPitchedPtr d = dst.native();
  const T* s = src.data();
  copy_extents e = extents_of(dst);
  if (CURT_UNLIKELY(static_cast<std::size_t>(src.size()) != dst.element_count()))
    throw_dense_mismatch("pitched destination, dense source", e,
                         static_cast<std::size_t>(src.size()), true);
  copy_pitched<PerThreadDefault, T, D>(d, dense_side(s, e.width, e.height), e, stream, on_stream);
}

template <bool PerThreadDefault, class T, int D, class Range>
void copy_from_pitched(Range&& dst, const pitched_owner<T, D>& src, cudaStream_t stream,
                       bool on_stream) {
  static_assert(is_range_v<Range>,
                "curt::copy: the destination must be a contiguous range with data() and size(), "
                "or a pitched buffer");
  using E = range_element_t<std::remove_reference_t<Range>>;
  static_assert(!std::is_const_v<E>, "curt::copy: the destination's elements are const");
  static_assert(std::is_same_v<std::remove_cv_t<E>, T>,
                "curt::copy: the dense range and the pitched buffer hold different element types");
  cudaPitchedPtr s = src.native();
  T* d = dst.data();
  copy_extents e = extents_of(src);
  if (CURT_UNLIKELY(static_cast<std::size_t>(dst.size()) != src.element_count()))
    throw_dense_mismatch("dense destination, pitched source", e,
                         static_cast<std::size_t>(dst.size()), false);
  copy_pitched<PerThreadDefault, T, D>(dense_side<T>(d, e.width, e.height), s, e, stream,
                                       on_stream);
}

template <bool PerThreadDefault, class T, int D>
void copy_between_pitched(pitched_owner<T, D>& dst, const pitched_owner<T, D>& src,
                          cudaStream_t stream, bool on_stream) {
  cudaPitchedPtr d = dst.native();
  cudaPitchedPtr s = src.native();
  copy_extents de = extents_of(dst), se = extents_of(src);
  if (CURT_UNLIKELY(de.width != se.width || de.height != se.height || de.depth != se.depth))
    throw_extent_mismatch("pitched destination, pitched source", de, se);
  copy_pitched<PerThreadDefault, T, D>(d, s, de, stream, on_stream);
}

}  // namespace detail

// Copies with a pitched buffer on one side or both: the dense side is width x height (x depth)
// elements in row-major order. Synchronous (cudaMemcpy3D) or on a stream (cudaMemcpy3DAsync).
// Every overload carries PerThreadDefault: detail::copy_3d<P> calls cudaMemcpy3D, which names
// cudaMemcpy3D_ptds in a --default-stream per-thread translation unit, so one instantiation
// must never be made by translation units of both kinds.

template <class T, class Range, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer<T>& dst, const Range& src) {
  detail::copy_to_pitched<PerThreadDefault>(dst, src, nullptr, false);
}
template <class T, class Range, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer<T>& dst, const Range& src, stream_ref stream) {
  detail::copy_to_pitched<PerThreadDefault>(dst, src, stream.get(), true);
}
template <class Range, class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(Range&& dst, const pitched_buffer<T>& src) {
  detail::copy_from_pitched<PerThreadDefault>(std::forward<Range>(dst), src, nullptr, false);
}
template <class Range, class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(Range&& dst, const pitched_buffer<T>& src, stream_ref stream) {
  detail::check_kept_range<Range>(dst, "curt::copy(dst, pitched, stream): the destination");
  detail::copy_from_pitched<PerThreadDefault>(std::forward<Range>(dst), src, stream.get(), true);
}
template <class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer<T>& dst, const pitched_buffer<T>& src) {
  detail::copy_between_pitched<PerThreadDefault>(dst, src, nullptr, false);
}
template <class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer<T>& dst, const pitched_buffer<T>& src, stream_ref stream) {
  detail::copy_between_pitched<PerThreadDefault>(dst, src, stream.get(), true);
}

template <class T, class Range, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer_3d<T>& dst, const Range& src) {
  detail::copy_to_pitched<PerThreadDefault>(dst, src, nullptr, false);
}
template <class T, class Range, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer_3d<T>& dst, const Range& src, stream_ref stream) {
  detail::copy_to_pitched<PerThreadDefault>(dst, src, stream.get(), true);
}
template <class Range, class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(Range&& dst, const pitched_buffer_3d<T>& src) {
  detail::copy_from_pitched<PerThreadDefault>(std::forward<Range>(dst), src, nullptr, false);
}
template <class Range, class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(Range&& dst, const pitched_buffer_3d<T>& src, stream_ref stream) {
  detail::check_kept_range<Range>(dst, "curt::copy(dst, pitched, stream): the destination");
  detail::copy_from_pitched<PerThreadDefault>(std::forward<Range>(dst), src, stream.get(), true);
}
template <class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer_3d<T>& dst, const pitched_buffer_3d<T>& src) {
  detail::copy_between_pitched<PerThreadDefault>(dst, src, nullptr, false);
}
template <class T, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
void copy(pitched_buffer_3d<T>& dst, const pitched_buffer_3d<T>& src, stream_ref stream) {
  detail::copy_between_pitched<PerThreadDefault>(dst, src, stream.get(), true);
}

/// Sets every byte of the buffer's rows (not the padding) to `byte` on `stream`
/// (cudaMemset2DAsync / cudaMemset3DAsync).
template <class T>
void memset(pitched_buffer<T>& dst, unsigned char byte, stream_ref stream) {
  cudaPitchedPtr d = dst.native();
  cudaStream_t h = stream.get();
  if (d.xsize == 0 || d.ysize == 0) return;
  detail::stream_context_scope in_context(h);
  detail::check_call(cudaMemset2DAsync(d.ptr, d.pitch, byte, d.xsize, d.ysize, h),
                     "cudaMemset2DAsync",
                     {{"width bytes", static_cast<long long>(d.xsize)},
                      {"height", static_cast<long long>(d.ysize)}, {"value", byte}, "stream"},
                     __FILE__, __LINE__);
}
template <class T>
void memset(pitched_buffer_3d<T>& dst, unsigned char byte, stream_ref stream) {
  cudaPitchedPtr d = dst.native();
  cudaStream_t h = stream.get();
  if (d.xsize == 0 || d.ysize == 0 || dst.depth() == 0) return;
  detail::stream_context_scope in_context(h);
  detail::check_call(
      cudaMemset3DAsync(d, byte, detail::extent_of(d.xsize, d.ysize, dst.depth()), h),
      "cudaMemset3DAsync",
      {{"width bytes", static_cast<long long>(d.xsize)}, {"height", static_cast<long long>(d.ysize)},
       {"depth", static_cast<long long>(dst.depth())}, {"value", byte}, "stream"},
      __FILE__, __LINE__);
}

}  // namespace curt
