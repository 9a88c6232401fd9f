// curt/batch_copy.hpp: many copies, prefetches or discards in one CUDA call.
//
//   curt::copy_batch batch;                       // reusable: clear() keeps its storage
//   batch.add(device_span, host_vector);          // typed: element counts must match
//   batch.add(out, staging, curt::source_access::during_api_call);
//   batch.submit(stream);                         // one cuMemcpyBatchAsync
//
// - copy_batch: cudaMemcpyBatchAsync behind a typed builder. Every copy has a source access order
//   (CUDA refuses a copy without one); curt's default is source_access::stream, the only order that
//   is right for every source (see source_access). Location hints and the prefer-overlap flag are
//   optional. Copies with equal attributes next to each other share one cudaMemcpyAttributes entry
//   (the attrs/attrsIdxs runs CUDA asks for). submit() calls the driver's cuMemcpyBatchAsync of the
//   CUDA 12.8 ABI, the one that still reports which copy failed (the 13.0 runtime call lost that
//   output), so an error says "copy #37 of 64 (dst ..., src ..., 4096 bytes)".
// - copy_3d_batch: cudaMemcpy3DBatchAsync for pointer operands, in elements of T (CUDA counts bytes
//   for pointer-to-pointer copies: curt converts).
// - prefetch_batch, discard_batch, discard_and_prefetch_batch: the managed-memory batches
//   (cudaMemPrefetchBatchAsync and friends), with one curt::memory_location per range.
//
// What curt checks when a copy is added (no CUDA call: a builder works without a device): element
// counts match, pointers are not null, the access order is one of the three. A copy of zero bytes
// is left out of the call (an empty vector's data() is often null; a zero-byte copy is a no-op),
// but it keeps its number, so error messages count copies as they were added. A non-null pointer
// that is not memory at all cannot be checked cheaply: CUDA takes it for pageable host memory and
// the process crashes.
//
// Streams. CUDA refuses these batches on the legacy default stream; curt says so before calling
// (stream_ref::per_thread_default() and created streams are fine).
//
// Capture. CUDA cannot capture these calls, and worse, for a copy batch the runtime returns an
// error yet leaves the capture valid with no node in it: the copy would silently vanish. So
// submit() asks whether the stream is capturing (cudaStreamGetCaptureInfo) and then:
// - copy_batch / copy_3d_batch: adds one memcpy node per copy (cudaMemcpyAsync /
//   cudaMemcpy3DAsync, in the order the copies were added); location hints and the overlap flag
//   are dropped (they are hints). A copy whose source access is during_api_call is refused, before
//   any node is added: a graph reads its sources each time it runs, long after submit() returned,
//   when such a source may be gone. What CUDA allows in a captured copy applies to each node.
// - prefetch / discard batches: refused with cudaErrorStreamCaptureUnsupported before anything is
//   called, so the capture stays valid (no node can do what they do).
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/driver_result.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/error.hpp>
#include <curt/memory_location.hpp>
#include <curt/stream.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>

// The driver entry points with a failIdx output, declared exactly as <cudaTypedefs.h> declares
// them (CUDA 12.8 ABI; the 13.0 ABI dropped failIdx). The 13.0 driver still exports them.
typedef CUresult(CUDAAPI* PFN_cuMemcpyBatchAsync_v12080)(
    CUdeviceptr_v2* dsts, CUdeviceptr_v2* srcs, size_t* sizes, size_t count,
    CUmemcpyAttributes_v1* attrs, size_t* attrIdxs, size_t numAttrs, size_t* failIdx,
    CUstream hStream);
typedef CUresult(CUDAAPI* PFN_cuMemcpy3DBatchAsync_v12080)(size_t numParams,
                                                          CUDA_MEMCPY3D_BATCH_OP_v1* opList,
                                                          size_t* failIdx,
                                                          unsigned long long flags,
                                                          CUstream hStream);

// curt builds the runtime's structs (they hold cudaMemLocation, what curt::memory_location gives)
// and hands them to the driver, whose structs have the same layout.
static_assert(sizeof(cudaMemcpyAttributes) == sizeof(CUmemcpyAttributes_v1) &&
              offsetof(cudaMemcpyAttributes, srcLocHint) == offsetof(CUmemcpyAttributes_v1, srcLocHint) &&
              offsetof(cudaMemcpyAttributes, dstLocHint) == offsetof(CUmemcpyAttributes_v1, dstLocHint) &&
              offsetof(cudaMemcpyAttributes, flags) == offsetof(CUmemcpyAttributes_v1, flags));
static_assert(sizeof(cudaMemcpy3DBatchOp) == sizeof(CUDA_MEMCPY3D_BATCH_OP_v1) &&
              offsetof(cudaMemcpy3DBatchOp, dst) == offsetof(CUDA_MEMCPY3D_BATCH_OP_v1, dst) &&
              offsetof(cudaMemcpy3DBatchOp, extent) == offsetof(CUDA_MEMCPY3D_BATCH_OP_v1, extent) &&
              offsetof(cudaMemcpy3DBatchOp, srcAccessOrder) ==
                  offsetof(CUDA_MEMCPY3D_BATCH_OP_v1, srcAccessOrder) &&
              offsetof(cudaMemcpy3DBatchOp, flags) == offsetof(CUDA_MEMCPY3D_BATCH_OP_v1, flags));
static_assert(sizeof(cudaMemLocation) == sizeof(CUmemLocation) && sizeof(CUdeviceptr) == sizeof(void*));

namespace curt {

/// When a batched copy may read its source (cudaMemcpySrcAccessOrder). CUDA requires one for
/// every copy. curt's default is `stream`: it is right for every source, because the copy reads
/// the source only after the work before it on the stream (a kernel or copy that writes the
/// source). The other two are promises that no earlier work on the stream touches the source;
/// they let the driver read it earlier, and are wrong (stale data) when that promise is broken.
enum class source_access : int {
  /// In stream order, after the work before the copy on the stream.
  stream = cudaMemcpySrcAccessOrderStream,
  /// Before submit() returns: the source may be overwritten or freed as soon as submit() returns
  /// (stack variables, reused staging memory). Nothing earlier on the stream may touch it. CUDA
  /// 13.0 breaks this promise (pageable copies of more than 64 KiB were read later), so submit()
  /// keeps it by waiting until the stream has done a batch that holds such a copy.
  during_api_call = cudaMemcpySrcAccessOrderDuringApiCall,
  /// At any time until the copy is done, also after submit() returns (memory from malloc that
  /// lives on). Nothing earlier on the stream may touch it.
  any = cudaMemcpySrcAccessOrderAny,
};

/// "stream", "during_api_call", "any" (or the number, for a value that is none of them).
inline std::string to_string(source_access order) {
  switch (order) {
    case source_access::stream: return "stream";
    case source_access::during_api_call: return "during_api_call";
    case source_access::any: return "any";
  }
  return "invalid (" + std::to_string(static_cast<int>(order)) + ")";
}

namespace detail {
// Equal as CUDA reads them: consecutive equal entries share one attribute (location) entry.
constexpr bool batch_same(cudaMemLocation a, cudaMemLocation b) noexcept {
  return a.type == b.type && a.id == b.id;
}
constexpr bool batch_same(const cudaMemcpyAttributes& a, const cudaMemcpyAttributes& b) noexcept {
  return a.srcAccessOrder == b.srcAccessOrder && a.flags == b.flags &&
         batch_same(a.srcLocHint, b.srcLocHint) && batch_same(a.dstLocHint, b.dstLocHint);
}
}  // namespace detail

/// How one copy of a batch runs: its source access order (required; stream by default), location
/// hints for its source and destination (used by CUDA for managed memory only; ignored for other
/// memory), and the prefer-overlap-with-compute hint. Implicit from a source_access, so
/// `batch.add(dst, src, curt::source_access::any)` reads naturally.
class copy_attributes {
 public:
  constexpr copy_attributes(source_access order = source_access::stream) noexcept  // NOLINT
      : native_{static_cast<cudaMemcpySrcAccessOrder>(order), memory_location::none().native(),
                memory_location::none().native(), 0u} {}

  /// Where the source most likely is (managed memory).
  constexpr copy_attributes& source_hint(memory_location where) noexcept {
    native_.srcLocHint = where.native();
    return *this;
  }
  /// Where the destination most likely is (managed memory).
  constexpr copy_attributes& destination_hint(memory_location where) noexcept {
    native_.dstLocHint = where.native();
    return *this;
  }
  /// Asks the driver to prefer overlapping the copy with kernels (cudaMemcpyFlagPreferOverlapWithCompute).
  constexpr copy_attributes& prefer_overlap_with_compute(bool prefer = true) noexcept {
    native_.flags = prefer ? native_.flags | cudaMemcpyFlagPreferOverlapWithCompute
                           : native_.flags & ~unsigned(cudaMemcpyFlagPreferOverlapWithCompute);
    return *this;
  }

  constexpr source_access order() const noexcept {
    return static_cast<source_access>(native_.srcAccessOrder);
  }
  constexpr memory_location source_hint() const noexcept {
    return memory_location::from_native(native_.srcLocHint);
  }
  constexpr memory_location destination_hint() const noexcept {
    return memory_location::from_native(native_.dstLocHint);
  }
  constexpr bool prefers_overlap_with_compute() const noexcept {
    return (native_.flags & cudaMemcpyFlagPreferOverlapWithCompute) != 0;
  }
  constexpr cudaMemcpyAttributes native() const noexcept { return native_; }

  /// Same order, flags and hints (type and id, as CUDA reads them).
  friend constexpr bool operator==(const copy_attributes& a, const copy_attributes& b) noexcept {
    return detail::batch_same(a.native_, b.native_);
  }
  friend constexpr bool operator!=(const copy_attributes& a, const copy_attributes& b) noexcept {
    return !detail::batch_same(a.native_, b.native_);
  }

 private:
  cudaMemcpyAttributes native_;
};

namespace detail {

/// A growable array of trivially copyable T for the builders: reserve, push_back, clear (keeps the
/// storage). Not <vector>: this header should cost little to compile.
template <class T>
class batch_array {
  static_assert(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>);

 public:
  batch_array() = default;
  batch_array(const batch_array& other) { append_all(other); }
  batch_array(batch_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)) {}
  batch_array& operator=(batch_array other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  ~batch_array() { delete[] data_; }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  const T& back() const noexcept { return data_[size_ - 1]; }

  /// Room for `count` elements; may allocate (and throw), never on a call that fits.
  void reserve(std::size_t count) {
    if (count <= capacity_) return;
    T* grown = new T[count];
    for (std::size_t i = 0; i < size_; ++i) grown[i] = data_[i];
    delete[] data_;
    data_ = grown;
    capacity_ = count;
  }
  /// Room for one more, growing geometrically.
  void reserve_one_more() {
    if (size_ == capacity_) reserve(capacity_ < 8 ? 16 : 2 * capacity_);
  }
  /// Appends; call reserve_one_more() first (this never allocates).
  void push_back_reserved(const T& value) noexcept { data_[size_++] = value; }
  void clear() noexcept { size_ = 0; }

 private:
  void append_all(const batch_array& other) {
    reserve(other.size_);
    for (std::size_t i = 0; i < other.size_; ++i) data_[i] = other.data_[i];
    size_ = other.size_;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

inline CUdeviceptr batch_deviceptr(const void* pointer) noexcept {
  return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(pointer));
}
inline void* batch_pointer(CUdeviceptr pointer) noexcept {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(pointer));
}

CURT_COLD inline std::string batch_pointer_text(const void* pointer) {
  if (pointer == nullptr) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%p", pointer);
  return text;
}

// Numbering of a batch's entries: copies are numbered as they were added, also those left out
// of the call for being empty. `skipped` lists the numbers of the left-out ones, ascending.
CURT_COLD inline std::size_t batch_added_number(std::size_t call_index,
                                          const batch_array<std::size_t>& skipped) {
  std::size_t number = call_index;
  for (std::size_t i = 0; i < skipped.size() && skipped[i] <= number; ++i) ++number;
  return number;
}

// What every batch checks before submitting: an owner with a stream, not the legacy default one
// (CUDA refuses it, with no word on why). No CUDA call.
inline cudaStream_t batch_stream(stream_ref stream, const char* call) {
  cudaStream_t handle = stream.get();  // throws for an empty, moved-from or released owner
  if (CURT_UNLIKELY(handle == cudaStreamLegacy))
    raise(cudaErrorInvalidValue, std::string(call) + "(legacy default stream)",
          "CUDA refuses batched operations on the legacy default stream; use a created stream or "
          "curt::stream_ref::per_thread_default()",
          __FILE__, __LINE__);
  return handle;
}

// cudaStreamCaptureStatusNone when the stream is not capturing; throws for a capture that an
// earlier error invalidated (nothing can be added to it).
inline cudaStreamCaptureStatus batch_capture_status(cudaStream_t stream, const char* call) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  check(cudaStreamGetCaptureInfo(stream, &status), "cudaStreamGetCaptureInfo(stream)", __FILE__,
        __LINE__);
  if (CURT_UNLIKELY(status == cudaStreamCaptureStatusInvalidated))
    raise(cudaErrorStreamCaptureInvalidated, std::string(call) + "(capturing stream)",
          "the stream's capture was invalidated by an earlier error; end the capture "
          "(cudaStreamEndCapture) before using the stream again",
          __FILE__, __LINE__);
  return status;
}

// Checks one entry before it is added; throws naming the entry. No CUDA call.
[[noreturn]] CURT_COLD inline void batch_refuse_entry(const char* call, std::size_t number,
                                                std::string explanation) {
  raise(cudaErrorInvalidValue, std::string(call) + "(copy #" + std::to_string(number) + ")",
        std::move(explanation), __FILE__, __LINE__);
}

inline void batch_check_order(const char* call, std::size_t number, source_access order) {
  if (CURT_UNLIKELY(order != source_access::stream && order != source_access::during_api_call &&
                    order != source_access::any))
    batch_refuse_entry(call, number,
                 "source access order " + to_string(order) +
                     " is not one of curt::source_access::stream, during_api_call, any (CUDA "
                     "requires one for every copy)");
}

// count * size, or a refusal when it does not fit in size_t.
inline std::size_t batch_checked_bytes(const char* call, std::size_t number, std::size_t count,
                                 std::size_t size, const char* what) {
  if (CURT_UNLIKELY(size != 0 && count > SIZE_MAX / size))
    batch_refuse_entry(call, number,
                 std::to_string(count) + " " + what + " of " + std::to_string(size) +
                     " bytes overflow size_t");
  return count * size;
}

// What a node that failed to be added leaves behind: a call CUDA cannot capture invalidates the
// capture (cudaStreamEndCapture then gives no graph); other failures leave the nodes added before.
CURT_COLD inline std::string batch_capture_note(cudaStream_t stream, std::size_t nodes_before) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status == cudaStreamCaptureStatusInvalidated)
    return "the capture is invalidated: end it (cudaStreamEndCapture) and discard it";
  if (nodes_before == 0) return std::string();
  return "the nodes of the " + std::to_string(nodes_before) + " copies before it are in the graph";
}

}  // namespace detail

namespace detail {
// CUDA 13.0 (driver 580, H200) does not keep source_access::during_api_call's promise: measured,
// a pageable source of more than 64 KiB overwritten as soon as the batch call returned was read
// after it, on an idle stream as on a busy one (smaller pageable copies read theirs in time; other
// kinds of memory were not measured, and a copy from pinned or device memory behind a busy stream
// can hardly have run by then). So submit() makes the promise true itself: a batch holding a
// during_api_call copy waits until the stream has done it (and so the work before it too). The
// wait runs in relaxed capture mode: a capture in global mode elsewhere in the process must not
// be invalidated by it (this stream itself is not capturing: such copies are refused there).
inline void wait_for_sources(cudaStream_t stream, const char* call) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  check(cudaThreadExchangeStreamCaptureMode(&mode), "cudaThreadExchangeStreamCaptureMode",
        __FILE__, __LINE__);
  const cudaError_t status = cudaStreamSynchronize(stream);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);  // the thread's own mode back
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_error(make_error_code(status),
                std::string(call) + ": cudaStreamSynchronize(stream)",
                location(__FILE__, __LINE__),
                "the wait for the during_api_call copies' sources to be read (CUDA 13.0 reads "
                "some after the call returns) found an error of the stream's work");
}
}  // namespace detail

/// A batch of 1D copies between any memory (device, pinned, pageable, managed), submitted with
/// one cuMemcpyBatchAsync. Copies within a batch run in no particular order: no copy may read what
/// another writes. Build once and submit as often as needed, or clear() and refill (the storage is
/// kept, so a loop does not allocate once it has reached its largest batch). Copyable and movable.
class copy_batch {
 public:
  copy_batch() = default;
  /// Room for `copies` copies up front.
  explicit copy_batch(std::size_t copies) { reserve(copies); }

  /// Copies `source` into `destination`, both contiguous ranges (data(), size()) of the same
  /// trivially copyable element type and the same number of elements. Throws
  /// cuda_error(cudaErrorInvalidValue) naming the copy's number and both sizes otherwise, and
  /// for a null pointer; the batch is then as it was.
  template <class Destination, class Source>
  copy_batch& add(Destination&& destination, Source&& source, copy_attributes attributes = {}) {
    static_assert(detail::is_range_v<Destination> && detail::is_range_v<Source>,
                  "curt::copy_batch::add(destination, source): both need data() and size(); "
                  "for pointers use add(destination, source, count) or add_bytes()");

    using D = detail::element_of_t<Destination>;
    using S = detail::element_of_t<Source>;
    static_assert(!std::is_const_v<D>, "curt::copy_batch::add: the destination is read-only");
    static_assert(std::is_same_v<std::remove_cv_t<D>, std::remove_cv_t<S>>,
                  "curt::copy_batch::add: destination and source element types differ");
    static_assert(std::is_trivially_copyable_v<D>,
                  "curt::copy_batch::add: elements must be trivially copyable");
    const std::size_t count = static_cast<std::size_t>(destination.size());
    const std::size_t source_count = static_cast<std::size_t>(source.size());
    if (CURT_UNLIKELY(count != source_count)) refuse_size_mismatch(count, source_count, sizeof(D));
    detail::check_kept_range<Destination>(destination, "curt::copy_batch::add: the destination");
    detail::check_kept_range<Source>(source, "curt::copy_batch::add: the source");
    return add(destination.data(), source.data(), count, attributes);
  }

  /// Copies `count` elements from `source` to `destination`.
  template <class T>
  copy_batch& add(T* destination, const T* source, std::size_t count,
                  copy_attributes attributes = {}) {
    static_assert(std::is_trivially_copyable_v<T>,
                  "curt::copy_batch::add: elements must be trivially copyable");
    return add_bytes(destination, source,
                     detail::batch_checked_bytes("curt::copy_batch::add", added_, count, sizeof(T),
                                           "elements"),
                     attributes);
  }

  /// Copies `bytes` bytes from `source` to `destination`.
  copy_batch& add_bytes(void* destination, const void* source, std::size_t bytes,
                        copy_attributes attributes = {}) {
    const char* call = "curt::copy_batch::add";
    detail::batch_check_order(call, added_, attributes.order());
    if (bytes == 0) return skip();
    if (CURT_UNLIKELY(destination == nullptr || source == nullptr))
      detail::batch_refuse_entry(call, added_,
                           std::string(destination == nullptr ? "the destination" : "the source") +
                               " of a copy of " + std::to_string(bytes) + " bytes is null");
    const cudaMemcpyAttributes native = attributes.native();
    const bool new_run = attributes_.empty() || !detail::batch_same(attributes_.back(), native);
    // Room in every array first, so that a failed allocation leaves the batch as it was...
    destinations_.reserve_one_more();
    sources_.reserve_one_more();
    sizes_.reserve_one_more();
    if (new_run) {
      attributes_.reserve_one_more();
      attribute_starts_.reserve_one_more();
      // ...then appends, which cannot fail.
      attributes_.push_back_reserved(native);
      attribute_starts_.push_back_reserved(sizes_.size());
    }
    destinations_.push_back_reserved(detail::batch_deviceptr(destination));
    sources_.push_back_reserved(detail::batch_deviceptr(source));
    sizes_.push_back_reserved(bytes);
    waits_for_sources_ = waits_for_sources_ || attributes.order() == source_access::during_api_call;
    ++added_;
    return *this;
  }

  /// Enqueues every copy on `stream` with one cuMemcpyBatchAsync; does nothing for a batch with
  /// no bytes to copy. On a capturing stream, adds one memcpy node per copy instead (see the file
  /// comment). A failure names the copy the driver reports ("copy #37 of 64 (dst ..., src ...,
  /// 4096 bytes)"). Allocates nothing but on failure.
  void submit(stream_ref stream) const {
    const char* call = "curt::copy_batch::submit";
    cudaStream_t handle = detail::batch_stream(stream, call);
    if (sizes_.empty()) return;
    detail::stream_context_scope in_context(handle);
    if (detail::batch_capture_status(handle, call) != cudaStreamCaptureStatusNone)
      return submit_captured(handle);
    std::size_t failed = SIZE_MAX;
    // The driver's arrays are inputs; its prototype lacks the const.
    CUresult status = CURT_DETAIL_DRIVER_LOOKUP(PFN_cuMemcpyBatchAsync_v12080,
                                                "cuMemcpyBatchAsync", 12080)(
        const_cast<CUdeviceptr*>(destinations_.data()), const_cast<CUdeviceptr*>(sources_.data()),
        const_cast<std::size_t*>(sizes_.data()), sizes_.size(),
        reinterpret_cast<CUmemcpyAttributes_v1*>(const_cast<cudaMemcpyAttributes*>(attributes_.data())),
        const_cast<std::size_t*>(attribute_starts_.data()), attributes_.size(), &failed, handle);
    if (CURT_UNLIKELY(status != CUDA_SUCCESS)) throw_failed(status, failed);
    if (waits_for_sources_) detail::wait_for_sources(handle, call);
  }

  /// Forgets every copy; keeps the storage.
  void clear() noexcept {
    destinations_.clear();
    sources_.clear();
    sizes_.clear();
    attributes_.clear();
    attribute_starts_.clear();
    skipped_.clear();
    added_ = 0;
    waits_for_sources_ = false;
  }
  /// Room for `copies` copies (and as many attribute runs), so that adding them allocates nothing.
  void reserve(std::size_t copies) {
    destinations_.reserve(copies);
    sources_.reserve(copies);
    sizes_.reserve(copies);
    attributes_.reserve(copies);
    attribute_starts_.reserve(copies);
  }

  /// Copies added, empty ones included (the numbering of error messages).
  std::size_t size() const noexcept { return added_; }
  bool empty() const noexcept { return added_ == 0; }

  /// The arrays submit() hands to CUDA, for inspection or a call of your own: `count` copies (the
  /// empty ones left out) and `attribute_count` attribute runs, run k applying to the copies from
  /// attribute_indices[k] up to the next run's start.
  struct native_arrays {
    const CUdeviceptr* destinations;
    const CUdeviceptr* sources;
    const std::size_t* sizes;
    std::size_t count;
    const cudaMemcpyAttributes* attributes;
    const std::size_t* attribute_indices;
    std::size_t attribute_count;
  };
  native_arrays native() const noexcept {
    return {destinations_.data(), sources_.data(), sizes_.data(), sizes_.size(),
            attributes_.data(), attribute_starts_.data(), attributes_.size()};
  }

 private:
  copy_batch& skip() {
    skipped_.reserve_one_more();
    skipped_.push_back_reserved(added_++);
    return *this;
  }

  [[noreturn]] CURT_COLD void refuse_size_mismatch(std::size_t destination, std::size_t source,
                                                   std::size_t element) const {
    detail::batch_refuse_entry("curt::copy_batch::add", added_,
                         "the destination holds " + std::to_string(destination) +
                             " elements and the source " + std::to_string(source) + " (of " +
                             std::to_string(element) + " bytes each): the counts must match");
  }

  // The source access order of the copy at call index i (the run that covers it).
  source_access order_of(std::size_t i) const noexcept {
    std::size_t run = 0;
    while (run + 1 < attribute_starts_.size() && attribute_starts_[run + 1] <= i) ++run;
    return static_cast<source_access>(attributes_[run].srcAccessOrder);
  }

  CURT_COLD std::string describe_copy(std::size_t i) const {
    return "copy #" + std::to_string(detail::batch_added_number(i, skipped_)) + " of " +
           std::to_string(added_) + " (dst " +
           detail::batch_pointer_text(detail::batch_pointer(destinations_[i])) + ", src " +
           detail::batch_pointer_text(detail::batch_pointer(sources_[i])) + ", " +
           std::to_string(sizes_[i]) + " bytes, source access " + to_string(order_of(i)) + ")";
  }

  [[noreturn]] CURT_COLD void throw_failed(CUresult status, std::size_t failed) const {
    if (failed < sizes_.size()) {
      std::string explanation;
      if (destinations_[failed] == 0) explanation = "the destination is null";
      if (sources_[failed] == 0) explanation = "the source is null";
      detail::throw_error(make_error_code(status), "cuMemcpyBatchAsync: " + describe_copy(failed),
                          detail::location(__FILE__, __LINE__), explanation);
    }
    detail::throw_error(make_error_code(status),
                        "cuMemcpyBatchAsync(" + std::to_string(sizes_.size()) + " copies, " +
                            std::to_string(attributes_.size()) + " attribute runs, stream)",
                        detail::location(__FILE__, __LINE__),
                        "the driver names no copy: the failure concerns the batch as a whole");
  }

  // One memcpy node per copy; during_api_call sources are refused before any node is added.
  void submit_captured(cudaStream_t handle) const {
    for (std::size_t run = 0; run < attributes_.size(); ++run) {
      if (CURT_UNLIKELY(static_cast<source_access>(attributes_[run].srcAccessOrder) ==
                        source_access::during_api_call))
        detail::raise(cudaErrorStreamCaptureUnsupported,
                      "curt::copy_batch::submit(capturing stream): " +
                          describe_copy(attribute_starts_[run]),
                      "a graph reads a copy's source each time it runs, but a source read with "
                      "source_access::during_api_call may be gone once submit() returns; use "
                      "source_access::stream (or any) and keep the source alive while the graph "
                      "is used. Nothing was added to the graph",
                      __FILE__, __LINE__);
    }
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
      cudaError_t status =
          cudaMemcpyAsync(detail::batch_pointer(destinations_[i]),
                          detail::batch_pointer(sources_[i]), sizes_[i], cudaMemcpyDefault, handle);
      if (CURT_UNLIKELY(status != cudaSuccess))
        detail::throw_error(make_error_code(status),
                            "cudaMemcpyAsync(capturing stream) for " + describe_copy(i),
                            detail::location(__FILE__, __LINE__),
                            detail::batch_capture_note(handle, i));
    }
  }

  detail::batch_array<CUdeviceptr> destinations_;
  detail::batch_array<CUdeviceptr> sources_;
  detail::batch_array<std::size_t> sizes_;
  detail::batch_array<cudaMemcpyAttributes> attributes_;  // the runs, with...
  detail::batch_array<std::size_t> attribute_starts_;  // ...the call index each starts at
  detail::batch_array<std::size_t> skipped_;  // numbers of the empty copies, left out of the call
  std::size_t added_ = 0;
  bool waits_for_sources_ = false;  // holds a during_api_call copy
};

/// A box of T in memory for copy_3d_batch: rows of elements, layers of rows. The row pitch is
/// kept in bytes, so a pitched allocation whose pitch is not a multiple of sizeof(T) fits too.
template <class T>
class strided_volume {
 public:
  /// Rows `row_length` elements apart, layers `layer_height` rows apart; 0 for either means
  /// tightly packed for the copy's extent.
  constexpr strided_volume(T* data, std::size_t row_length, std::size_t layer_height) noexcept
      : data_(data), row_pitch_(row_length * sizeof(T)), layer_height_(layer_height) {}
  /// Rows `row_pitch_bytes` apart (cudaMallocPitch's, cudaMalloc3D's pitch), layers
  /// `layer_height` rows apart.
  static constexpr strided_volume with_pitch(T* data, std::size_t row_pitch_bytes,
                                             std::size_t layer_height) noexcept {
    strided_volume v(data, 0, layer_height);
    v.row_pitch_ = row_pitch_bytes;
    return v;
  }
  /// A volume of a const element type from one of a mutable element type.
  template <class U, std::enable_if_t<std::is_same_v<const U, T>, int> = 0>
  constexpr strided_volume(const strided_volume<U>& other) noexcept  // NOLINT
      : data_(other.data()), row_pitch_(other.row_pitch()), layer_height_(other.layer_height()) {}

  constexpr T* data() const noexcept { return data_; }
  /// Bytes from one row to the next; 0: packed.
  constexpr std::size_t row_pitch() const noexcept { return row_pitch_; }
  /// Rows from one layer to the next; 0: packed.
  constexpr std::size_t layer_height() const noexcept { return layer_height_; }

 private:
  T* data_;
  std::size_t row_pitch_;
  std::size_t layer_height_;
};

/// A batch of 3D copies between pointer operands (device, pinned, pageable or managed memory),
/// submitted with one cuMemcpy3DBatchAsync. Extents are in elements of T: curt converts the
/// width (and row lengths) to the bytes CUDA counts for pointer-to-pointer copies. Copies within
/// a batch run in no particular order. Reusable like copy_batch.
class copy_3d_batch {
 public:
  /// A copy's size: `width` elements per row, `height` rows per layer, `depth` layers.
  struct extent {
    std::size_t width = 0;
    std::size_t height = 0;
    std::size_t depth = 0;
  };

  copy_3d_batch() = default;
  explicit copy_3d_batch(std::size_t copies) { reserve(copies); }

  /// Copies the box `size` from `source` to `destination`. Refused (naming the copy and the
  /// numbers) when a row pitch is shorter than the row or a layer height lower than the copy's
  /// height, or a pointer is null. A copy with a zero extent is left out (and keeps its number).
  template <class T, class U>
  copy_3d_batch& add(strided_volume<T> destination, strided_volume<U> source, extent size,
                     copy_attributes attributes = {}) {
    static_assert(!std::is_const_v<T>, "curt::copy_3d_batch::add: the destination is read-only");
    static_assert(std::is_same_v<T, std::remove_cv_t<U>>,
                  "curt::copy_3d_batch::add: destination and source element types differ");
    static_assert(std::is_trivially_copyable_v<T>,
                  "curt::copy_3d_batch::add: elements must be trivially copyable");
    const char* call = "curt::copy_3d_batch::add";
    detail::batch_check_order(call, added_, attributes.order());
    if (size.width == 0 || size.height == 0 || size.depth == 0) return skip();
    const std::size_t row_bytes =
        detail::batch_checked_bytes(call, added_, size.width, sizeof(T), "elements per row");
    check_operand(call, "destination", destination.data(), destination.row_pitch(),
                  destination.layer_height(), row_bytes, size);
    check_operand(call, "source", source.data(), source.row_pitch(), source.layer_height(),
                  row_bytes, size);
    cudaMemcpy3DBatchOp op{};
    op.src = pointer_operand(source.data(), source.row_pitch(), source.layer_height(),
                             attributes.source_hint());
    op.dst = pointer_operand(destination.data(), destination.row_pitch(),
                             destination.layer_height(), attributes.destination_hint());
    op.extent = cudaExtent{row_bytes, size.height, size.depth};
    op.srcAccessOrder = attributes.native().srcAccessOrder;
    op.flags = attributes.native().flags;
    operations_.reserve_one_more();
    element_sizes_.reserve_one_more();
    operations_.push_back_reserved(op);
    element_sizes_.push_back_reserved(sizeof(T));
    waits_for_sources_ = waits_for_sources_ || attributes.order() == source_access::during_api_call;
    ++added_;
    return *this;
  }

  /// Enqueues every copy on `stream` with one cuMemcpy3DBatchAsync (one cudaMemcpy3DAsync node
  /// per copy on a capturing stream); a failure names the copy the driver reports.
  void submit(stream_ref stream) const {
    const char* call = "curt::copy_3d_batch::submit";
    cudaStream_t handle = detail::batch_stream(stream, call);
    if (operations_.empty()) return;
    detail::stream_context_scope in_context(handle);
    if (detail::batch_capture_status(handle, call) != cudaStreamCaptureStatusNone)
      return submit_captured(handle);
    std::size_t failed = SIZE_MAX;
    CUresult status = CURT_DETAIL_DRIVER_LOOKUP(PFN_cuMemcpy3DBatchAsync_v12080,
                                                "cuMemcpy3DBatchAsync", 12080)(
        operations_.size(),
        const_cast<CUDA_MEMCPY3D_BATCH_OP_v1*>(
            reinterpret_cast<const CUDA_MEMCPY3D_BATCH_OP_v1*>(operations_.data())),
        &failed, 0, handle);
    if (CURT_UNLIKELY(status != CUDA_SUCCESS)) throw_failed(status, failed);
    if (waits_for_sources_) detail::wait_for_sources(handle, call);
  }

  void clear() noexcept {
    operations_.clear();
    element_sizes_.clear();
    skipped_.clear();
    added_ = 0;
    waits_for_sources_ = false;
  }
  void reserve(std::size_t copies) {
    operations_.reserve(copies);
    element_sizes_.reserve(copies);
  }
  /// Copies added, empty ones included.
  std::size_t size() const noexcept { return added_; }
  bool empty() const noexcept { return added_ == 0; }

  /// The operations submit() hands to CUDA (widths and row pitches in bytes), the empty ones left
  /// out.
  struct native_arrays {
    const cudaMemcpy3DBatchOp* operations;
    std::size_t count;
  };
  native_arrays native() const noexcept { return {operations_.data(), operations_.size()}; }

 private:
  static cudaMemcpy3DOperand pointer_operand(const void* data, std::size_t row_pitch,
                                             std::size_t layer_height,
                                             memory_location hint) noexcept {
    cudaMemcpy3DOperand operand{};
    operand.type = cudaMemcpyOperandTypePointer;
    operand.op.ptr.ptr = const_cast<void*>(data);  // an input; the struct lacks the const
    operand.op.ptr.rowLength = row_pitch;          // bytes: the element size of pointers is 1
    operand.op.ptr.layerHeight = layer_height;
    operand.op.ptr.locHint = hint.native();
    return operand;
  }

  void check_operand(const char* call, const char* which, const void* data, std::size_t row_pitch,
                     std::size_t layer_height, std::size_t row_bytes, extent size) const {
    if (CURT_UNLIKELY(data == nullptr))
      detail::batch_refuse_entry(call, added_, std::string("the ") + which + " is null");
    if (CURT_UNLIKELY(row_pitch != 0 && row_pitch < row_bytes))
      detail::batch_refuse_entry(call, added_,
                           std::string("the ") + which + "'s rows are " +
                               std::to_string(row_pitch) + " bytes apart, shorter than the " +
                               std::to_string(row_bytes) + " bytes of a row of the copy (" +
                               std::to_string(size.width) + " elements)");
    if (CURT_UNLIKELY(layer_height != 0 && layer_height < size.height))
      detail::batch_refuse_entry(call, added_,
                           std::string("the ") + which + "'s layers are " +
                               std::to_string(layer_height) + " rows high, fewer than the " +
                               std::to_string(size.height) + " rows of the copy");
  }

  copy_3d_batch& skip() {
    skipped_.reserve_one_more();
    skipped_.push_back_reserved(added_++);
    return *this;
  }

  CURT_COLD static std::string describe_operand(const cudaMemcpy3DOperand& operand) {
    return detail::batch_pointer_text(operand.op.ptr.ptr) + " (rows " +
           std::to_string(operand.op.ptr.rowLength) + " bytes apart, layers " +
           std::to_string(operand.op.ptr.layerHeight) + " rows high)";
  }
  CURT_COLD std::string describe_copy(std::size_t i) const {
    const cudaMemcpy3DBatchOp& op = operations_[i];
    const std::size_t element = element_sizes_[i];
    return "copy #" + std::to_string(detail::batch_added_number(i, skipped_)) + " of " +
           std::to_string(added_) + " (dst " + describe_operand(op.dst) + ", src " +
           describe_operand(op.src) + ", " + std::to_string(op.extent.width / element) + " x " +
           std::to_string(op.extent.height) + " x " + std::to_string(op.extent.depth) +
           " elements of " + std::to_string(element) + " bytes, source access " +
           to_string(static_cast<source_access>(op.srcAccessOrder)) + ")";
  }

  [[noreturn]] CURT_COLD void throw_failed(CUresult status, std::size_t failed) const {
    if (failed < operations_.size())
      detail::throw_error(make_error_code(status), "cuMemcpy3DBatchAsync: " + describe_copy(failed),
                          detail::location(__FILE__, __LINE__));
    detail::throw_error(make_error_code(status),
                        "cuMemcpy3DBatchAsync(" + std::to_string(operations_.size()) +
                            " copies, stream)",
                        detail::location(__FILE__, __LINE__),
                        "the driver names no copy: the failure concerns the batch as a whole");
  }

  void submit_captured(cudaStream_t handle) const {
    for (std::size_t i = 0; i < operations_.size(); ++i) {
      if (CURT_UNLIKELY(static_cast<source_access>(operations_[i].srcAccessOrder) ==
                        source_access::during_api_call))
        detail::raise(cudaErrorStreamCaptureUnsupported,
                      "curt::copy_3d_batch::submit(capturing stream): " + describe_copy(i),
                      "a graph reads a copy's source each time it runs, but a source read with "
                      "source_access::during_api_call may be gone once submit() returns; use "
                      "source_access::stream (or any) and keep the source alive while the graph "
                      "is used. Nothing was added to the graph",
                      __FILE__, __LINE__);
    }
    for (std::size_t i = 0; i < operations_.size(); ++i) {
      const cudaMemcpy3DBatchOp& op = operations_[i];
      cudaMemcpy3DParms parameters{};
      parameters.srcPtr = pitched(op.src, op.extent);
      parameters.dstPtr = pitched(op.dst, op.extent);
      parameters.extent = op.extent;  // width in bytes, as for pitched pointers
      parameters.kind = cudaMemcpyDefault;
      cudaError_t status = cudaMemcpy3DAsync(&parameters, handle);
      if (CURT_UNLIKELY(status != cudaSuccess))
        detail::throw_error(make_error_code(status),
                            "cudaMemcpy3DAsync(capturing stream) for " + describe_copy(i),
                            detail::location(__FILE__, __LINE__),
                            detail::batch_capture_note(handle, i));
    }
  }
  // The pitched pointer cudaMemcpy3DAsync wants for a batch operand (0 meant packed).
  static cudaPitchedPtr pitched(const cudaMemcpy3DOperand& operand, cudaExtent extent) noexcept {
    const std::size_t pitch = operand.op.ptr.rowLength ? operand.op.ptr.rowLength : extent.width;
    const std::size_t rows = operand.op.ptr.layerHeight ? operand.op.ptr.layerHeight : extent.height;
    return cudaPitchedPtr{operand.op.ptr.ptr, pitch, extent.width, rows};
  }

  detail::batch_array<cudaMemcpy3DBatchOp> operations_;
  detail::batch_array<std::size_t> element_sizes_;  // sizeof(T) of each, for messages
  detail::batch_array<std::size_t> skipped_;
  std::size_t added_ = 0;
  bool waits_for_sources_ = false;  // holds a during_api_call copy
};

namespace detail {

// What the managed-memory batches share: ranges, and for prefetches one location per range,
// consecutive equal locations sharing one entry (prefetchLocs / prefetchLocIdxs).
class managed_range_batch {
 public:
  void clear() noexcept {
    pointers_.clear();
    sizes_.clear();
    locations_.clear();
    location_starts_.clear();
    skipped_.clear();
    added_ = 0;
  }
  void reserve(std::size_t ranges) {
    pointers_.reserve(ranges);
    sizes_.reserve(ranges);
    locations_.reserve(ranges);
    location_starts_.reserve(ranges);
  }
  /// Ranges added, empty ones included.
  std::size_t size() const noexcept { return added_; }
  bool empty() const noexcept { return added_ == 0; }

  /// The arrays submit() hands to CUDA (the empty ranges left out); no locations for discards.
  struct native_arrays {
    void* const* pointers;
    const std::size_t* sizes;
    std::size_t count;
    const cudaMemLocation* locations;
    const std::size_t* location_indices;
    std::size_t location_count;
  };
  native_arrays native() const noexcept {
    return {pointers_.data(), sizes_.data(), sizes_.size(), locations_.data(),
            location_starts_.data(), locations_.size()};
  }

 protected:
  managed_range_batch() = default;

  void push(const char* call, const void* data, std::size_t bytes, const memory_location* where) {
    if (where != nullptr && CURT_UNLIKELY(where->is_none()))
      refuse_range(call, "the location is none(): say where the range should go");
    if (bytes == 0) {
      skipped_.reserve_one_more();
      skipped_.push_back_reserved(added_++);
      return;
    }
    if (CURT_UNLIKELY(data == nullptr))
      refuse_range(call, "the range of " + std::to_string(bytes) + " bytes starts at null");
    const bool new_run = where != nullptr && (locations_.empty() ||
                                              !detail::batch_same(locations_.back(), where->native()));
    pointers_.reserve_one_more();
    sizes_.reserve_one_more();
    if (new_run) {
      locations_.reserve_one_more();
      location_starts_.reserve_one_more();
      locations_.push_back_reserved(where->native());
      location_starts_.push_back_reserved(sizes_.size());
    }
    pointers_.push_back_reserved(const_cast<void*>(data));  // CUDA's array is void**
    sizes_.push_back_reserved(bytes);
    ++added_;
  }

  void refuse_capture(cudaStream_t handle, const char* call) const {
    if (batch_capture_status(handle, call) != cudaStreamCaptureStatusNone)
      raise(cudaErrorStreamCaptureUnsupported,
            std::string(call) + "(capturing stream, " + std::to_string(sizes_.size()) + " ranges)",
            "CUDA cannot capture batched prefetches or discards, and no graph node does what they "
            "do; submit the batch outside the capture (before it, or on a stream that is not "
            "capturing). Nothing was called: the capture is still valid",
            __FILE__, __LINE__);
  }

  void check_result(cudaError_t status, const char* function) const {
    if (CURT_LIKELY(status == cudaSuccess)) return;
    throw_failed(status, function);
  }

  batch_array<void*> pointers_;
  batch_array<std::size_t> sizes_;
  batch_array<cudaMemLocation> locations_;
  batch_array<std::size_t> location_starts_;
  batch_array<std::size_t> skipped_;
  std::size_t added_ = 0;

 private:
  [[noreturn]] CURT_COLD void refuse_range(const char* call, std::string explanation) const {
    raise(cudaErrorInvalidValue, std::string(call) + "(range #" + std::to_string(added_) + ")",
          std::move(explanation), __FILE__, __LINE__);
  }

  // The runtime names no range: curt looks for the usual cause, a range that is not managed.
  [[noreturn]] CURT_COLD void throw_failed(cudaError_t status, const char* function) const {
    std::string log = take_driver_log();  // before curt's own calls add to it
    std::string call = std::string(function) + "(" + std::to_string(sizes_.size()) + " ranges, " +
                       std::to_string(locations_.size()) + " locations, stream)";
    std::string explanation;
    for (std::size_t i = 0; i < pointers_.size() && explanation.empty(); ++i) {
      cudaPointerAttributes attributes{};
      if (cudaPointerGetAttributes(&attributes, pointers_[i]) != cudaSuccess) continue;
      if (attributes.type != cudaMemoryTypeManaged)
        explanation = "range #" + std::to_string(batch_added_number(i, skipped_)) + " (" +
                      batch_pointer_text(pointers_[i]) + ", " + std::to_string(sizes_[i]) +
                      " bytes) is not managed memory (cudaPointerGetAttributes type " +
                      std::to_string(static_cast<int>(attributes.type)) + ")";
    }
    throw_error_with_log(make_error_code(status), std::move(call), location(__FILE__, __LINE__),
                         std::move(explanation), std::move(log));
  }
};

}  // namespace detail

/// Prefetches of managed memory ranges, each to its own location, in one
/// cudaMemPrefetchBatchAsync (CUDA needs cudaDevAttrConcurrentManagedAccess on every device).
class prefetch_batch : public detail::managed_range_batch {
 public:
  prefetch_batch() = default;
  explicit prefetch_batch(std::size_t ranges) { reserve(ranges); }

  /// Prefetches the memory of `range` (data(), size()) to `where`.
  template <class Range>
  prefetch_batch& add(Range&& range, memory_location where) {
    static_assert(detail::is_range_v<Range>,
                  "curt::prefetch_batch::add: the range needs data() and size()");
    using T = detail::element_of_t<Range>;
    detail::check_kept_range<Range>(range, "curt::prefetch_batch::add: the range");
    return add_bytes(range.data(),
                     detail::batch_checked_bytes("curt::prefetch_batch::add", added_,
                                           static_cast<std::size_t>(range.size()), sizeof(T),
                                           "elements"),
                     where);
  }
  /// Prefetches `bytes` bytes from `data` to `where`.
  prefetch_batch& add_bytes(const void* data, std::size_t bytes, memory_location where) {
    push("curt::prefetch_batch::add", data, bytes, &where);
    return *this;
  }

  /// Enqueues the prefetches on `stream`. Refused on a capturing stream (see the file comment).
  void submit(stream_ref stream) const {
    const char* call = "curt::prefetch_batch::submit";
    cudaStream_t handle = detail::batch_stream(stream, call);
    if (sizes_.empty()) return;
    detail::stream_context_scope in_context(handle);
    refuse_capture(handle, call);
    check_result(cudaMemPrefetchBatchAsync(const_cast<void**>(pointers_.data()),
                                           const_cast<std::size_t*>(sizes_.data()), sizes_.size(),
                                           const_cast<cudaMemLocation*>(locations_.data()),
                                           const_cast<std::size_t*>(location_starts_.data()),
                                           locations_.size(), 0, handle),
                 "cudaMemPrefetchBatchAsync");
  }
};

/// Discards of managed memory ranges in one cudaMemDiscardBatchAsync: their contents are no
/// longer needed, so the driver may drop them instead of migrating them. Reading a discarded
/// range before writing or prefetching it gives indeterminate values.
class discard_batch : public detail::managed_range_batch {
 public:
  discard_batch() = default;
  explicit discard_batch(std::size_t ranges) { reserve(ranges); }

  /// Discards the memory of `range` (data(), size(); its elements must be writable).
  template <class Range>
  discard_batch& add(Range&& range) {
    static_assert(detail::is_range_v<Range>,
                  "curt::discard_batch::add: the range needs data() and size()");
    using T = detail::element_of_t<Range>;
    detail::check_kept_range<Range>(range, "curt::discard_batch::add: the range");
    static_assert(!std::is_const_v<T>, "curt::discard_batch::add: the range is read-only");
    return add_bytes(range.data(), detail::batch_checked_bytes("curt::discard_batch::add", added_,
                                                         static_cast<std::size_t>(range.size()),
                                                         sizeof(T), "elements"));
  }
  discard_batch& add_bytes(void* data, std::size_t bytes) {
    push("curt::discard_batch::add", data, bytes, nullptr);
    return *this;
  }

  void submit(stream_ref stream) const {
    const char* call = "curt::discard_batch::submit";
    cudaStream_t handle = detail::batch_stream(stream, call);
    if (sizes_.empty()) return;
    detail::stream_context_scope in_context(handle);
    refuse_capture(handle, call);
    check_result(cudaMemDiscardBatchAsync(const_cast<void**>(pointers_.data()),
                                          const_cast<std::size_t*>(sizes_.data()), sizes_.size(),
                                          0, handle),
                 "cudaMemDiscardBatchAsync");
  }
};

/// Discards managed memory ranges and prefetches each to its location, in one
/// cudaMemDiscardAndPrefetchBatchAsync: for memory about to be overwritten where it goes (its old
/// contents are dropped, not migrated).
class discard_and_prefetch_batch : public detail::managed_range_batch {
 public:
  discard_and_prefetch_batch() = default;
  explicit discard_and_prefetch_batch(std::size_t ranges) { reserve(ranges); }

  template <class Range>
  discard_and_prefetch_batch& add(Range&& range, memory_location where) {
    static_assert(detail::is_range_v<Range>,
                  "curt::discard_and_prefetch_batch::add: the range needs data() and size()");
    using T = detail::element_of_t<Range>;
    detail::check_kept_range<Range>(range, "curt::discard_and_prefetch_batch::add: the range");
    static_assert(!std::is_const_v<T>,
                  "curt::discard_and_prefetch_batch::add: the range is read-only");
    return add_bytes(range.data(),
                     detail::batch_checked_bytes("curt::discard_and_prefetch_batch::add", added_,
                                           static_cast<std::size_t>(range.size()), sizeof(T),
                                           "elements"),
                     where);
  }
  discard_and_prefetch_batch& add_bytes(void* data, std::size_t bytes, memory_location where) {
    push("curt::discard_and_prefetch_batch::add", data, bytes, &where);
    return *this;
  }

  void submit(stream_ref stream) const {
    const char* call = "curt::discard_and_prefetch_batch::submit";
    cudaStream_t handle = detail::batch_stream(stream, call);
    if (sizes_.empty()) return;
    detail::stream_context_scope in_context(handle);
    refuse_capture(handle, call);
    check_result(cudaMemDiscardAndPrefetchBatchAsync(
                     const_cast<void**>(pointers_.data()), const_cast<std::size_t*>(sizes_.data()),
                     sizes_.size(), const_cast<cudaMemLocation*>(locations_.data()),
                     const_cast<std::size_t*>(location_starts_.data()), locations_.size(), 0,
                     handle),
                 "cudaMemDiscardAndPrefetchBatchAsync");
  }
};

}  // namespace curt
