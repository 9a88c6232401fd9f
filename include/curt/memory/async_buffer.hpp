// curt/memory/async_buffer.hpp: curt::async_buffer<T>, one stream-ordered allocation, made by
// memory_pool_ref::allocate<T> (memory/pool.hpp), allocate_async<T> (the current pool of the
// stream's device) or adopt(). Under stream capture its allocation and free are graph nodes.
#pragma once

#include <curt/core/driver.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/owner.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>

namespace curt {
class memory_pool_ref;

namespace detail {
/// Where a stream-ordered allocation is freed: its stream and, for a default stream (which names
/// whatever context is current), the context it was allocated in.
struct free_place {
  stream_ref stream{state_handle<cudaStream_t>(handle_state::empty)};
  CUcontext context = nullptr;
  std::shared_ptr<stream_end> end;  // a curt::stream's: it is destroyed after its buffers
};

/// Whether the host addresses a buffer's memory, which its pool's ref tells at the allocation
/// (pinned host or managed) without asking CUDA. The owner's State: no byte more per buffer.
struct async_owner_state {
  bool host_accessible = false;
};

/// Where to free what this thread allocates on `stream`. Refuses a default stream while a green
/// context is current: the free would run in it, and it may be destroyed first.
inline free_place place_for(stream_ref stream, const char* operation) {
  const cudaStream_t s = stream.get();
  if (CURT_LIKELY(!is_default_stream_handle(s))) return {stream, nullptr, {}};
  if (green_context_current())
    raise(cudaErrorNotSupported, fmt("%s on a default stream", operation),
          "a green context is current: the buffer would be freed in it, and a green context may "
          "be destroyed before the buffer (a curt::green_context goes with its owner and "
          "streams); allocate on a stream of the green context (green_context::make_stream()), "
          "which keeps it alive",
          __FILE__, __LINE__);
  return {stream, context_of(s), {}};
}

/// Frees a stream-ordered allocation (null: nothing) at `place`; throws on failure.
inline void free_async(void* p, const free_place& place) {
  if (p == nullptr) return;
  const cudaStream_t s = place.stream.get();
  auto free = [&] {
    cudaError_t result = cudaFreeAsync(p, s);
    if (CURT_UNLIKELY(result != cudaSuccess))  // the mistake that most often lands here
      throw_error(make_error_code(result), "cudaFreeAsync(memory, stream)", __FILE__, __LINE__,
                  result != cudaErrorInvalidValue ? "" : "if the buffer was allocated during a "
                  "stream capture and was alive at capture_scope::end(), its memory is the graph's "
                  "and can be freed only after a launch; destroy such a buffer inside the capture");
  };
  if (CURT_UNLIKELY(place.context != nullptr)) {
    context_scope in(place.context);
    return free();
  }
  context_scope in(for_stream, s);
  free();
}

[[noreturn]] CURT_COLD inline void refuse_host_access(const std::string& owner) {
  raise(cudaErrorInvalidValue, fmt("%s::host_view()", owner.c_str()),
        "the host cannot address this buffer's memory: its pool is not of pinned host or managed "
        "memory (or its ref did not know the pool's kind, nor does adopt()); copy it to the host "
        "(curt::copy), or allocate from a host or managed pool",
        __FILE__, __LINE__);
}

struct async_memory_kind {
  static constexpr const char* name = "async_buffer";
  // No begin()/end()/operator[]: most pools hold device memory, and host access to those stays
  // a compile error. host_view() checks the pool's kind, a run-time fact of memory_pool_ref.
  static constexpr bool host_iterable = false;
  using place = free_place;
  using owner_state = async_owner_state;
  static void free(void* p, const free_place& where) { free_async(p, where); }
  template <class Buffer>  // a buffer freeing on a curt::stream owner keeps that stream until freed
  static Buffer watching(Buffer buffer, const curt::stream& s) {
    buffer.place_.end = s.state_.end;
    return buffer;
  }
};
}  // namespace detail

/// The elements of a host-addressable async_buffer for the host (async_buffer::host_view()):
/// unchecked operator[], begin(), end() over the buffer's memory, which it does not own. A
/// contiguous range (copies, span's range constructor). No element_type: a buffer must not
/// convert to it as to a view, which would skip host_view()'s check.
template <class T>
class host_view {
 public:
  using value_type = std::remove_cv_t<T>;  ///< The element type, without const.
  using iterator = T*;                     ///< A plain pointer.
  /// `size` elements at `data`, which the host addresses (not checked here).
  constexpr host_view(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  /// The elements as a contiguous range; operator[] is unchecked, like a span's. @{
  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }  ///@}

 private:
  T* data_;
  std::size_t size_;
};

/// `size()` elements of T (not initialized), freed on its stream when destroyed (cudaFreeAsync,
/// after the work queued there before and other streams' work given to free_after). A curt::stream
/// owner destroyed first lives on until its buffers are freed; a raw stream (stream_ref) must
/// outlive them. From a pinned-host or managed pool, the host reads and writes the elements
/// through host_view() once the stream has reached the allocation (a synchronize); for other
/// pools host_view() throws. Move-only; an empty, moved-from, released or freed buffer holds
/// nothing and says which. A default stream's buffer frees on that default stream of the context
/// it was allocated in (the per-thread one is the destroying thread's: free(stream) one made on
/// another thread). While a green context is current, a default stream is refused: use
/// green_context::make_stream().
template <class T>
class async_buffer : public detail::memory_owner<T, detail::async_memory_kind> {
  using base = detail::memory_owner<T, detail::async_memory_kind>;

 public:
  /// An empty owner: every use throws until a buffer is assigned.
  explicit async_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

  /// Takes ownership of `count` elements the caller allocated with cudaMallocAsync or
  /// cudaMallocFromPoolAsync; freed on `stream`. A null pointer only with a count of 0.
  static async_buffer adopt(T* data, std::size_t count, stream_ref stream) {
    (void)detail::checked_bytes<T>(count, "async_buffer", "adopt");
    if (data == nullptr && count != 0)
      detail::raise(cudaErrorInvalidValue,
                    detail::fmt("curt::async_buffer::adopt(null, %zu, stream)", count),
                    "a null pointer can only be adopted with a count of 0", __FILE__, __LINE__);
    return async_buffer(data, count, detail::place_for(stream, "curt::async_buffer::adopt"));
  }
  /// The same on a curt::stream owner, which then lives until the buffer is freed.
  static async_buffer adopt(T* data, std::size_t count, const curt::stream& stream) {
    return detail::async_memory_kind::watching(adopt(data, count, stream_ref(stream)), stream);
  }

  /// Whether the host addresses the elements (a pinned-host or managed pool's buffer).
  bool host_accessible() const noexcept { return this->valid() && this->state_.host_accessible; }
  /// The elements for the host, from a pinned-host or managed pool's buffer (one check here,
  /// none per element); throws for other pools (adopt() and allocate_async give such buffers
  /// too) and when the buffer holds no memory. Deleted for a temporary, freed at the statement's
  /// end. @{
  curt::host_view<T> host_view() & { return {host_elements(), this->count_}; }
  curt::host_view<const T> host_view() const& { return {host_elements(), this->count_}; }  ///@}
  curt::host_view<const T> host_view() && = delete;
  curt::host_view<const T> host_view() const&& = delete;
  /// The stream the buffer frees on.
  stream_ref stream() const {
    (void)this->native("stream()");
    return this->place_.stream;
  }
  /// Orders the free after the work queued on `other` so far (a kernel there that uses the
  /// memory): from now on the buffer's stream waits for that work (an event recorded on
  /// `other`). Call it after the last use on each other stream; the free then cannot hand the
  /// memory on while such a use runs. Not for a capturing `other` (the buffer's stream would join).
  void free_after(stream_ref other) {
    (void)this->native("free_after(stream)");
    detail::context_scope in;
    if (this->place_.context != nullptr) in.push(this->place_.context);  // a default stream's
    this->place_.stream.wait(other);
  }
  /// Frees now, on the buffer's stream (after the work submitted to it so far).
  void free() {
    const auto stream_kept = std::move(this->place_.end);  // a dead owner's stream goes after it
    detail::free_async(this->take_for_free("free()"), this->place_);  // take_for_free keeps it
  }
  /// Frees now on `other`, which the caller has ordered after every use of the memory.
  void free(stream_ref other) {
    (void)other.get();  // a stream that holds none throws before the buffer lets go
    const auto stream_kept = std::move(this->place_.end);
    detail::free_async(this->take_for_free("free(stream)"), detail::free_place{other, nullptr, {}});
  }

 private:
  friend class memory_pool_ref;
  template <class U>
  friend async_buffer<U> import_pointer(memory_pool_ref, const cudaMemPoolPtrExportData&,
                                        std::size_t, stream_ref);
  template <class U>
  friend async_buffer<U> allocate_async(std::size_t count, stream_ref stream);

  async_buffer(T* data, std::size_t count, detail::free_place where,
               detail::async_owner_state state = {}) noexcept
      : base(data, count, where, state) {}
  T* host_elements() const {
    T* p = this->native("host_view()");
    if (CURT_UNLIKELY(!this->state_.host_accessible))
      detail::refuse_host_access(detail::owner_name<T>(detail::async_memory_kind::name));
    return p;
  }
};

/// `count` T elements from the stream's device's current pool (cudaMallocAsync), freed on `stream`.
template <class T>
async_buffer<T> allocate_async(std::size_t count, stream_ref stream) {
  const std::size_t bytes =
      detail::checked_bytes<T>(count, "async_buffer", "curt::allocate_async<T>");
  const detail::free_place where = detail::place_for(stream, "curt::allocate_async<T>");
  void* p = nullptr;
  if (bytes != 0) {
    const cudaStream_t s = where.stream.get();
    detail::context_scope in(detail::for_stream, s);
    detail::check(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync",
                  {{"bytes", static_cast<long long>(bytes)}, "stream (its device's current pool)"},
                  __FILE__, __LINE__);
  }
  return async_buffer<T>(static_cast<T*>(p), count, where);
}
template <class T>
async_buffer<T> allocate_async(std::size_t count, const stream& s) {
  return detail::async_memory_kind::watching(allocate_async<T>(count, stream_ref(s)), s);
}
}  // namespace curt
