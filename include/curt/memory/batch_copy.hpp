// curt/memory/batch_copy.hpp: many copies in one CUDA call.
//
//   curt::copy_batch batch;                       // reusable: clear() keeps its storage
//   batch.add(device_span, host_vector);          // typed: element counts must match
//   batch.add(out, staging, curt::source_access::during_api_call);
//   batch.submit(stream);                         // one cuMemcpyBatchAsync
//
// copy_batch and copy_3d_batch call the driver's cuMemcpyBatchAsync / cuMemcpy3DBatchAsync of the
// 12.8 ABI, which still says which copy failed: "copy #37 of 64 (dst ..., src ..., 4096 bytes)".
// add() checks without calling CUDA; a refused copy leaves the batch as it was; a copy of zero
// bytes is left out of the call but keeps its number. CUDA refuses the legacy default stream (curt
// says so first) and cannot capture a batch (the runtime fails, leaving the capture valid and
// empty), so on a capturing stream submit() adds one memcpy node per copy, after refusing a
// during_api_call source (a graph reads its sources at every launch).
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/batch.hpp>
#include <curt/memory/location.hpp>
#include <curt/memory/managed_batch.hpp>  // prefetch_batch, ..., as curt/batch_copy.hpp gave
#include <curt/memory/range.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

// As <cuda.h> declares it (64-bit only, as CUDA 13): copy_batch::native() hands out CUdeviceptrs.
typedef unsigned long long CUdeviceptr_v2;
typedef CUdeviceptr_v2 CUdeviceptr;

// The 12.8 ABI, with its failIdx output (the 13.0 driver still exports it). The runtime's structs
// have the driver's layout (CUmemcpyAttributes_v1, CUDA_MEMCPY3D_BATCH_OP_v1).
namespace curt::detail::driver_fn {
CURT_DETAIL_DRIVER_TYPE(cuMemcpyBatchAsync_v12080, CUdeviceptr* destinations, CUdeviceptr* sources,
                        std::size_t* sizes, std::size_t count, cudaMemcpyAttributes* attributes,
                        std::size_t* attribute_starts, std::size_t attribute_count,
                        std::size_t* failed, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuMemcpy3DBatchAsync_v12080, std::size_t count,
                        cudaMemcpy3DBatchOp* operations, std::size_t* failed,
                        unsigned long long flags, CUstream stream);
}  // namespace curt::detail::driver_fn

namespace curt {

/// When a batched copy may read its source. `stream` (the default) is right for every source: in
/// stream order. The others promise that no earlier work on the stream touches the source.
enum class source_access : int {
  stream = cudaMemcpySrcAccessOrderStream,
  /// Before submit() returns: the source may be reused at once. CUDA 13.0 reads some pageable
  /// sources later (measured), so submit() waits for a batch that holds such a copy.
  during_api_call = cudaMemcpySrcAccessOrderDuringApiCall,
  /// At any time until the copy is done.
  any = cudaMemcpySrcAccessOrderAny,
};

/// "stream", "during_api_call", "any" (or the number, for a value that is none of them).
inline std::string to_string(source_access order) {
  switch (order) {
    case source_access::stream: return "stream";
    case source_access::during_api_call: return "during_api_call";
    case source_access::any: return "any";
  }
  return detail::fmt("invalid (%d)", static_cast<int>(order));
}

/// How a batch copy runs: access order, location hints (for managed memory only), overlap hint.
class copy_attributes {
 public:
  /// `order`, no hints, no flags; implicit: `batch.add(dst, src, curt::source_access::any)`.
  constexpr copy_attributes(source_access order = source_access::stream) noexcept  // NOLINT
      : native_{static_cast<cudaMemcpySrcAccessOrder>(order), memory_location::none().native(),
                memory_location::none().native(), 0u} {}

  /// Set (chainable) and read: location hints (default none()), the overlap flag; order(). @{
  constexpr copy_attributes& source_hint(memory_location where) noexcept {
    native_.srcLocHint = where.native();
    return *this;
  }
  constexpr copy_attributes& destination_hint(memory_location where) noexcept {
    native_.dstLocHint = where.native();
    return *this;
  }
  constexpr copy_attributes& prefer_overlap_with_compute(bool prefer = true) noexcept {
    constexpr unsigned flag = cudaMemcpyFlagPreferOverlapWithCompute;
    native_.flags = prefer ? native_.flags | flag : native_.flags & ~flag;
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
  }  ///@}
  constexpr cudaMemcpyAttributes native() const noexcept { return native_; }  ///< As CUDA takes it.

  /// Same order, flags and hints (type and id, as CUDA reads them). @{
  friend constexpr bool operator==(const copy_attributes& a, const copy_attributes& b) noexcept {
    return detail::batch_same(a.native_, b.native_);
  }
  friend constexpr bool operator!=(const copy_attributes& a, const copy_attributes& b) noexcept {
    return !(a == b);
  }  ///@}

 private:
  cudaMemcpyAttributes native_;
};

namespace detail {

/// What copy_batch and copy_3d_batch share: submit(), its capture fallback, the messages. Batch
/// supplies count(), order(i), destination(i), source(i), describe(i), add_node(i, stream) (one
/// memcpy node), run(stream, &failed) (the driver's batch call) and the names of its calls.
template <class Batch>
class copy_batch_base : public batch_entries {
 public:
  /// Enqueues all copies on `stream` in one call (none if nothing to copy); a capturing stream gets
  /// one memcpy node per copy. A failure names the copy the driver blames; only failures allocate.
  void submit(stream_ref stream) const {
    const Batch& self = static_cast<const Batch&>(*this);
    cudaStream_t h = checked_stream(stream, Batch::submit_call);
    if (self.count() == 0) return;
    context_scope in(for_stream, h);
    if (capturing(h, Batch::submit_call)) return submit_captured(h);
    std::size_t failed = SIZE_MAX;
    const int status = self.run(h, &failed);
    if (CURT_UNLIKELY(status != 0)) {
      const std::error_code code(status, driver_category());
      if (failed >= self.count())
        throw_error(code, fmt("%s(%zu copies, stream)", Batch::driver_call, self.count()),
                    __FILE__, __LINE__, "the driver names no copy: the failure concerns the batch");
      throw_error(code, fmt("%s: %s", Batch::driver_call, describe_copy(failed).c_str()), __FILE__,
                  __LINE__,
                  self.destination(failed) == nullptr ? "the destination is null"
                  : self.source(failed) == nullptr    ? "the source is null"
                                                      : "");
    }
    if (waits_for_sources_) wait_for_sources(h);
  }

 protected:
  void check_order(const char* call, source_access order) const {
    if (CURT_UNLIKELY(order != source_access::stream && order != source_access::during_api_call &&
                      order != source_access::any))
      refuse(call, "copy",
             fmt("source access order %s is not one of curt::source_access::stream, "
                 "during_api_call, any (CUDA requires one for every copy)",
                 to_string(order).c_str()));
  }
  void added(source_access order) noexcept {
    waits_for_sources_ = waits_for_sources_ || order == source_access::during_api_call;
    ++added_;
  }
  void clear_copies() noexcept {
    clear_entries();
    waits_for_sources_ = false;
  }

 private:
  CURT_COLD std::string describe_copy(std::size_t i) const {
    const Batch& self = static_cast<const Batch&>(*this);
    return fmt("copy #%zu of %zu (dst %s, source access %s)", number(i), added_,
               self.describe(i).c_str(), to_string(self.order(i)).c_str());
  }

  void submit_captured(cudaStream_t stream) const {
    const Batch& self = static_cast<const Batch&>(*this);
    for (std::size_t i = 0; waits_for_sources_ && i < self.count(); ++i)
      if (self.order(i) == source_access::during_api_call)
        raise(cudaErrorStreamCaptureUnsupported,
              fmt("%s(capturing stream): %s", Batch::submit_call, describe_copy(i).c_str()),
              "a graph reads a copy's source each time it runs, but a source read with "
              "source_access::during_api_call may be gone once submit() returns; use "
              "source_access::stream (or any) and keep the source alive while the graph is "
              "used. Nothing was added to the graph",
              __FILE__, __LINE__);
    for (std::size_t i = 0; i < self.count(); ++i) {
      const cudaError_t status = self.add_node(i, stream);
      if (CURT_UNLIKELY(status != cudaSuccess))
        throw_error(make_error_code(status),
                    fmt("%s(capturing stream) for %s", Batch::node_call, describe_copy(i).c_str()),
                    __FILE__, __LINE__,
                    "the nodes of the copies before it are in the graph, unless the failure "
                    "invalidated the capture (then end it, cudaStreamEndCapture, and discard it)");
    }
  }

  // CUDA 13.0 (driver 580, H200) reads some during_api_call sources after the batch call
  // returned (pageable ones over 64 KiB, measured), so the stream's work is waited for. In
  // relaxed capture mode: a capture in global mode elsewhere must not be invalidated by it.
  static void wait_for_sources(cudaStream_t stream) {
    const cudaError_t status = [&] {
      relaxed_capture relaxed;
      return cudaStreamSynchronize(stream);
    }();
    if (CURT_UNLIKELY(status != cudaSuccess))
      throw_error(make_error_code(status),
                  fmt("%s: cudaStreamSynchronize(stream)", Batch::submit_call), __FILE__, __LINE__,
                  "the wait for the during_api_call copies' sources to be read (CUDA 13.0 reads "
                  "some after the call returns) found an error of the stream's work");
  }

  bool waits_for_sources_ = false;  // holds a during_api_call copy
};

}  // namespace detail

/// A batch of 1D copies between any memory (device, pinned, pageable, managed), submitted with
/// one cuMemcpyBatchAsync. Copies within a batch run in no particular order: no copy may read what
/// another writes. Build once and submit often, or clear() and refill. Copyable and movable.
class copy_batch : public detail::copy_batch_base<copy_batch> {
 public:
  copy_batch() = default;
  explicit copy_batch(std::size_t copies) { reserve(copies); }  ///< Room for `copies` copies.

  /// Copies `source` into `destination`, contiguous ranges (data(), size()) of one trivially
  /// copyable element type and as many elements (refused otherwise, and for a null pointer).
  template <class Destination, class Source>
  copy_batch& add(Destination&& destination, Source&& source, copy_attributes attributes = {}) {
    static_assert(detail::is_range_v<Destination> && detail::is_range_v<Source>,
                  "curt::copy_batch::add(destination, source): both need data() and size(); "
                  "for pointers use add(destination, source, count) or add_bytes()");
    using D = detail::element_of_t<Destination>;
    static_assert(!std::is_const_v<D>, "curt::copy_batch::add: the destination is read-only");
    static_assert(std::is_same_v<D, std::remove_cv_t<detail::element_of_t<Source>>>,
                  "curt::copy_batch::add: destination and source element types differ");
    const auto count = static_cast<std::size_t>(destination.size());
    if (CURT_UNLIKELY(count != static_cast<std::size_t>(source.size())))
      refuse(add_call, "copy",
             detail::fmt("the destination holds %zu elements and the source %s (of %zu bytes "
                         "each): the counts must match", count,
                         std::to_string(source.size()).c_str(), sizeof(D)));
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
                     entry_bytes(add_call, "copy", count, sizeof(T), "elements"), attributes);
  }

  /// Copies `bytes` bytes from `source` to `destination`.
  copy_batch& add_bytes(void* destination, const void* source, std::size_t bytes,
                        copy_attributes attributes = {}) {
    check_order(add_call, attributes.order());
    if (bytes == 0) {
      skip();
      return *this;
    }
    if (CURT_UNLIKELY(destination == nullptr || source == nullptr))
      refuse(add_call, "copy",
             detail::fmt("%s of a copy of %zu bytes is null",
                         destination == nullptr ? "the destination" : "the source", bytes));
    const bool new_run = runs_.reserve_for(attributes.native());
    destinations_.reserve_one_more();
    sources_.reserve_one_more();
    sizes_.reserve_one_more();
    if (new_run) runs_.push(attributes.native(), sizes_.size());
    destinations_.push_back(address(destination));
    sources_.push_back(address(source));
    sizes_.push_back(bytes);
    added(attributes.order());
    return *this;
  }

  /// Forgets every copy; keeps the storage.
  void clear() noexcept {
    destinations_.clear();
    sources_.clear();
    sizes_.clear();
    runs_.clear();
    clear_copies();
  }
  /// Room for `copies` copies (and as many attribute runs): adding them allocates nothing.
  void reserve(std::size_t copies) {
    destinations_.reserve(copies);
    sources_.reserve(copies);
    sizes_.reserve(copies);
    runs_.reserve(copies);
  }

  /// The arrays submit() hands to CUDA: `count` copies (the empty ones left out) and
  /// `attribute_count` runs, run k applying to the copies from attribute_indices[k] on.
  struct native_arrays {
    const CUdeviceptr* destinations;         ///< `count` destination addresses
    const CUdeviceptr* sources;              ///< `count` source addresses
    const std::size_t* sizes;                ///< `count` sizes, in bytes
    std::size_t count;                       ///< copies, the empty ones left out
    const cudaMemcpyAttributes* attributes;  ///< `attribute_count` attributes, one per run
    const std::size_t* attribute_indices;    ///< the first copy of each run
    std::size_t attribute_count;             ///< runs of copies with equal attributes
  };
  /// These arrays: pointers into the batch, valid until it changes.
  native_arrays native() const noexcept {
    return {destinations_.data(), sources_.data(),      sizes_.data(),       sizes_.size(),
            runs_.values.data(),  runs_.starts.data(), runs_.values.size()};
  }

 private:
  friend class detail::copy_batch_base<copy_batch>;
  static constexpr const char* add_call = "curt::copy_batch::add";
  static constexpr const char* submit_call = "curt::copy_batch::submit";
  static constexpr const char* driver_call = "cuMemcpyBatchAsync";
  static constexpr const char* node_call = "cudaMemcpyAsync";

  static CUdeviceptr address(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }
  static void* pointer(CUdeviceptr a) noexcept { return reinterpret_cast<void*>(a); }
  std::size_t count() const noexcept { return sizes_.size(); }
  void* destination(std::size_t i) const noexcept { return pointer(destinations_[i]); }
  void* source(std::size_t i) const noexcept { return pointer(sources_[i]); }
  source_access order(std::size_t i) const noexcept {  // the order of the attribute run covering i
    std::size_t run = 0;
    while (run + 1 < runs_.starts.size() && runs_.starts[run + 1] <= i) ++run;
    return static_cast<source_access>(runs_.values[run].srcAccessOrder);
  }
  CURT_COLD std::string describe(std::size_t i) const {
    return detail::fmt("%s, src %s, %zu bytes", detail::batch_pointer_text(destination(i)).c_str(),
                       detail::batch_pointer_text(source(i)).c_str(), sizes_[i]);
  }
  cudaError_t add_node(std::size_t i, cudaStream_t stream) const {
    return cudaMemcpyAsync(destination(i), source(i), sizes_[i], cudaMemcpyDefault, stream);
  }
  int run(cudaStream_t stream, std::size_t* failed) const {  // inputs: the prototype lacks const
    return CURT_DETAIL_DRIVER_FUNCTION(cuMemcpyBatchAsync, 12080)(
        const_cast<CUdeviceptr*>(destinations_.data()), const_cast<CUdeviceptr*>(sources_.data()),
        const_cast<std::size_t*>(sizes_.data()), sizes_.size(),
        const_cast<cudaMemcpyAttributes*>(runs_.values.data()),
        const_cast<std::size_t*>(runs_.starts.data()), runs_.values.size(), failed, stream);
  }

  detail::entries<CUdeviceptr> destinations_;
  detail::entries<CUdeviceptr> sources_;
  detail::entries<std::size_t> sizes_;
  detail::batch_runs<cudaMemcpyAttributes> runs_;
};

/// A box of T in memory for copy_3d_batch: rows of elements, layers of rows. The row pitch is
/// kept in bytes, so a pitched allocation whose pitch is not a multiple of sizeof(T) fits too.
template <class T>
class strided_volume {
 public:
  /// Rows `row_length` elements, layers `layer_height` rows apart; 0: packed for the copy's extent.
  constexpr strided_volume(T* data, std::size_t row_length, std::size_t layer_height) noexcept
      : data_(data), row_pitch_(row_length * sizeof(T)), layer_height_(layer_height) {}
  /// Rows `row_pitch_bytes` apart (cudaMalloc3D's pitch), layers `layer_height` rows apart.
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

  constexpr T* data() const noexcept { return data_; }  ///< The box's first element.
  /// Bytes from one row to the next, and rows from one layer to the next; 0: packed. @{
  constexpr std::size_t row_pitch() const noexcept { return row_pitch_; }
  constexpr std::size_t layer_height() const noexcept { return layer_height_; }  ///@}

 private:
  T* data_;
  std::size_t row_pitch_;
  std::size_t layer_height_;
};

/// A batch of 3D copies between pointer operands (device, pinned, pageable or managed memory),
/// submitted with one cuMemcpy3DBatchAsync. Extents are in elements of T (curt converts widths
/// and row lengths to the bytes CUDA counts). Reusable like copy_batch.
class copy_3d_batch : public detail::copy_batch_base<copy_3d_batch> {
 public:
  /// A copy's size: `width` elements per row, `height` rows per layer, `depth` layers.
  struct extent {
    std::size_t width = 0;   ///< elements per row
    std::size_t height = 0;  ///< rows per layer
    std::size_t depth = 0;   ///< layers
  };

  copy_3d_batch() = default;
  explicit copy_3d_batch(std::size_t copies) { reserve(copies); }  ///< Room for `copies` copies.

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
    check_order(add_call, attributes.order());
    if (size.width == 0 || size.height == 0 || size.depth == 0) {
      skip();
      return *this;
    }
    const std::size_t row =
        entry_bytes(add_call, "copy", size.width, sizeof(T), "elements per row");
    cudaMemcpy3DBatchOp op{};
    op.dst = operand("destination", destination.data(), destination.row_pitch(),
                     destination.layer_height(), row, size, attributes.destination_hint());
    op.src = operand("source", source.data(), source.row_pitch(), source.layer_height(), row,
                     size, attributes.source_hint());
    op.extent = cudaExtent{row, size.height, size.depth};
    op.srcAccessOrder = attributes.native().srcAccessOrder;
    op.flags = attributes.native().flags;
    operations_.push_back(op);
    added(attributes.order());
    return *this;
  }

  /// Forgets every copy; keeps the storage.
  void clear() noexcept {
    operations_.clear();
    clear_copies();
  }
  void reserve(std::size_t copies) { operations_.reserve(copies); }  ///< Room for `copies` copies.

  /// The operations submit() hands to CUDA (widths and row pitches in bytes; no empty ones).
  struct native_arrays {
    const cudaMemcpy3DBatchOp* operations;  ///< `count` operations
    std::size_t count;                      ///< copies, the empty ones left out
  };
  /// These arrays: pointers into the batch, valid until it changes.
  native_arrays native() const noexcept { return {operations_.data(), operations_.size()}; }

 private:
  friend class detail::copy_batch_base<copy_3d_batch>;
  static constexpr const char* add_call = "curt::copy_3d_batch::add";
  static constexpr const char* submit_call = "curt::copy_3d_batch::submit";
  static constexpr const char* driver_call = "cuMemcpy3DBatchAsync";
  static constexpr const char* node_call = "cudaMemcpy3DAsync";

  // A pointer operand (row pitch in bytes: the element size of pointers is 1), checked first.
  cudaMemcpy3DOperand operand(const char* which, const void* data, std::size_t row_pitch,
                              std::size_t layer_height, std::size_t row, extent size,
                              memory_location hint) const {
    const std::string side = detail::fmt("the %s", which);
    if (CURT_UNLIKELY(data == nullptr))
      refuse(add_call, "copy", detail::fmt("%s is null", side.c_str()));
    if (CURT_UNLIKELY(row_pitch != 0 && row_pitch < row))
      refuse(add_call, "copy",
             detail::fmt("%s's rows are %zu bytes apart, shorter than the %zu bytes of a row of "
                         "the copy (%zu elements)",
                         side.c_str(), row_pitch, row, size.width));
    if (CURT_UNLIKELY(layer_height != 0 && layer_height < size.height))
      refuse(add_call, "copy",
             detail::fmt("%s's layers are %zu rows high, fewer than the %zu rows of the copy",
                         side.c_str(), layer_height, size.height));
    cudaMemcpy3DOperand result{};
    result.type = cudaMemcpyOperandTypePointer;
    result.op.ptr = {const_cast<void*>(data), row_pitch, layer_height, hint.native()};
    return result;
  }

  std::size_t count() const noexcept { return operations_.size(); }
  const void* destination(std::size_t i) const noexcept { return operations_[i].dst.op.ptr.ptr; }
  const void* source(std::size_t i) const noexcept { return operations_[i].src.op.ptr.ptr; }
  source_access order(std::size_t i) const noexcept {
    return static_cast<source_access>(operations_[i].srcAccessOrder);
  }
  CURT_COLD std::string describe(std::size_t i) const {
    auto side = [](const cudaMemcpy3DOperand& o) {
      return detail::fmt("%s (rows %zu bytes apart, layers %zu rows high)",
                         detail::batch_pointer_text(o.op.ptr.ptr).c_str(), o.op.ptr.rowLength,
                         o.op.ptr.layerHeight);
    };
    const cudaMemcpy3DBatchOp& op = operations_[i];
    return detail::fmt("%s, src %s, %zu bytes x %zu x %zu", side(op.dst).c_str(),
                       side(op.src).c_str(), op.extent.width, op.extent.height, op.extent.depth);
  }
  cudaError_t add_node(std::size_t i, cudaStream_t stream) const {
    const cudaMemcpy3DBatchOp& op = operations_[i];
    auto pitched = [&](const cudaMemcpy3DOperand& side) {  // 0 meant packed
      const auto& p = side.op.ptr;
      return cudaPitchedPtr{p.ptr, p.rowLength ? p.rowLength : op.extent.width, op.extent.width,
                            p.layerHeight ? p.layerHeight : op.extent.height};
    };
    cudaMemcpy3DParms parameters{};
    parameters.srcPtr = pitched(op.src);
    parameters.dstPtr = pitched(op.dst);
    parameters.extent = op.extent;  // width in bytes, as for pitched pointers
    parameters.kind = cudaMemcpyDefault;
    return cudaMemcpy3DAsync(&parameters, stream);
  }
  int run(cudaStream_t stream, std::size_t* failed) const {
    return CURT_DETAIL_DRIVER_FUNCTION(cuMemcpy3DBatchAsync, 12080)(
        operations_.size(), const_cast<cudaMemcpy3DBatchOp*>(operations_.data()), failed, 0,
        stream);
  }

  detail::entries<cudaMemcpy3DBatchOp> operations_;
};

}  // namespace curt
