// curt/memory/managed_batch.hpp: prefetches and discards of many managed-memory ranges in one CUDA
// call (cudaMemPrefetchBatchAsync, ...), a curt::memory_location per range. Built like copy_batch;
// refused on a capturing stream first (no graph node does this), keeping the capture valid.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/batch.hpp>
#include <curt/memory/location.hpp>
#include <curt/memory/range.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>

namespace curt {
namespace detail {

// What the managed-memory batches share: ranges, and for prefetches one location per range,
// consecutive equal locations sharing one entry (prefetchLocs / prefetchLocIdxs).
class managed_range_batch : public batch_entries {
 public:
  managed_range_batch() = default;
  explicit managed_range_batch(std::size_t ranges) { reserve(ranges); }
  void clear() noexcept {
    pointers_.clear();
    sizes_.clear();
    locations_.clear();
    clear_entries();
  }
  void reserve(std::size_t ranges) {
    pointers_.reserve(ranges);
    sizes_.reserve(ranges);
    locations_.reserve(ranges);
  }

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
    return {pointers_.data(),        sizes_.data(),           sizes_.size(),
            locations_.values.data(), locations_.starts.data(), locations_.values.size()};
  }

 protected:
  // A range's elements (for check_kept_range, `Range` is add()'s forwarding type; `what` names
  // the range in its refusal). A discard writes its ranges.
  template <bool Writes, class Range>
  void add_range(std::remove_reference_t<Range>& range, const char* call, const char* what,
                 const memory_location* where) {
    static_assert(is_range_v<Range>, "curt: a batch's range needs data() and size()");
    using T = element_of_t<Range>;
    static_assert(!Writes || !std::is_const_v<T>, "curt: a discard batch writes its ranges: this "
                                                  "range is read-only");
    check_kept_range<Range>(range, what);
    push(call, range.data(),
         entry_bytes(call, "range", static_cast<std::size_t>(range.size()), sizeof(T), "elements"),
         where);
  }
  void push(const char* call, const void* data, std::size_t bytes, const memory_location* where) {
    if (where != nullptr && CURT_UNLIKELY(where->is_none()))
      refuse(call, "range", "the location is none(): say where the range should go");
    if (bytes == 0) return skip();
    if (CURT_UNLIKELY(data == nullptr))
      refuse(call, "range", fmt("the range of %zu bytes starts at null", bytes));
    const bool new_run = where != nullptr && locations_.reserve_for(where->native());
    pointers_.reserve_one_more();
    sizes_.reserve_one_more();
    if (new_run) locations_.push(where->native(), sizes_.size());
    pointers_.push_back(const_cast<void*>(data));  // CUDA's array is void**
    sizes_.push_back(bytes);
    ++added_;
  }

  // The runtime's batch calls, in cudaMemPrefetchBatchAsync's shape.
  using batch_call = cudaError_t (*)(void**, std::size_t*, std::size_t, cudaMemLocation*,
                                     std::size_t*, std::size_t, unsigned long long, cudaStream_t);
  void submit_with(stream_ref stream, const char* call, const char* function,
                   batch_call run) const {
    cudaStream_t h = checked_stream(stream, call);
    if (sizes_.size() == 0) return;
    context_scope in(for_stream, h);
    if (capturing(h, call))
      raise(cudaErrorStreamCaptureUnsupported,
            fmt("%s(capturing stream, %zu ranges)", call, sizes_.size()),
            "CUDA cannot capture batched prefetches or discards, and no graph node does what they "
            "do; submit the batch outside the capture (before it, or on a stream that is not "
            "capturing). Nothing was called: the capture is still valid",
            __FILE__, __LINE__);
    const cudaError_t status =
        run(const_cast<void**>(pointers_.data()), const_cast<std::size_t*>(sizes_.data()),
            sizes_.size(), const_cast<cudaMemLocation*>(locations_.values.data()),
            const_cast<std::size_t*>(locations_.starts.data()), locations_.values.size(), 0, h);
    if (CURT_UNLIKELY(status != cudaSuccess)) throw_failed(status, function);
  }

 private:
  // The runtime names no range: curt looks for the usual cause, a range that is not managed.
  [[noreturn]] CURT_COLD void throw_failed(cudaError_t status, const char* function) const {
    throw_error(make_error_code(status),
                fmt("%s(%zu ranges, %zu locations, stream)", function, sizes_.size(),
                    locations_.values.size()),
                __FILE__, __LINE__, [&]() -> std::string {
                  for (std::size_t i = 0; i < pointers_.size(); ++i) {
                    cudaPointerAttributes attributes{};
                    if (cudaPointerGetAttributes(&attributes, pointers_[i]) != cudaSuccess ||
                        attributes.type == cudaMemoryTypeManaged)
                      continue;
                    return fmt("range #%zu (%s, %zu bytes) is not managed memory "
                               "(cudaPointerGetAttributes type %d)", number(i),
                               batch_pointer_text(pointers_[i]).c_str(), sizes_[i],
                               static_cast<int>(attributes.type));
                  }
                  return {};
                });
  }

  entries<void*> pointers_;
  entries<std::size_t> sizes_;
  batch_runs<cudaMemLocation> locations_;
};

}  // namespace detail

/// Prefetches of managed memory ranges, each to its own location, in one
/// cudaMemPrefetchBatchAsync (CUDA needs cudaDevAttrConcurrentManagedAccess on every device).
class prefetch_batch : public detail::managed_range_batch {
 public:
  using managed_range_batch::managed_range_batch;
  /// Prefetches `range` (data(), size()), or `bytes` bytes from `data`, to `where`. @{
  template <class Range>
  prefetch_batch& add(Range&& range, memory_location where) {
    add_range<false, Range>(range, add_call, "curt::prefetch_batch::add: the range", &where);
    return *this;
  }
  prefetch_batch& add_bytes(const void* data, std::size_t bytes, memory_location where) {
    push(add_call, data, bytes, &where);
    return *this;
  }  ///@}
  /// Enqueues the prefetches on `stream`. Refused on a capturing stream (see the file comment).
  void submit(stream_ref stream) const {
    submit_with(stream, "curt::prefetch_batch::submit", "cudaMemPrefetchBatchAsync",
                &cudaMemPrefetchBatchAsync);
  }

 private:
  static constexpr const char* add_call = "curt::prefetch_batch::add";
};

/// Discards of managed ranges in one cudaMemDiscardBatchAsync: the driver may drop, not migrate,
/// their contents. Until written or prefetched, a discarded range reads indeterminate values.
class discard_batch : public detail::managed_range_batch {
 public:
  using managed_range_batch::managed_range_batch;
  /// Discards `range` (data(), size(); its elements must be writable) or `bytes` from `data`. @{
  template <class Range>
  discard_batch& add(Range&& range) {
    add_range<true, Range>(range, add_call, "curt::discard_batch::add: the range", nullptr);
    return *this;
  }
  discard_batch& add_bytes(void* data, std::size_t bytes) {
    push(add_call, data, bytes, nullptr);
    return *this;
  }  ///@}
  /// Enqueues the discards on `stream`: not the legacy default one, nor a capturing one.
  void submit(stream_ref stream) const {
    submit_with(stream, "curt::discard_batch::submit", "cudaMemDiscardBatchAsync",
                [](void** p, std::size_t* s, std::size_t n, cudaMemLocation*, std::size_t*,
                   std::size_t, unsigned long long flags, cudaStream_t h) {
                  return cudaMemDiscardBatchAsync(p, s, n, flags, h);
                });
  }

 private:
  static constexpr const char* add_call = "curt::discard_batch::add";
};

/// In one cudaMemDiscardAndPrefetchBatchAsync, discards managed memory ranges and prefetches each
/// to its location: for memory about to be overwritten there (old contents dropped, not migrated).
class discard_and_prefetch_batch : public detail::managed_range_batch {
 public:
  using managed_range_batch::managed_range_batch;
  /// Discards `range` (writable elements) or `bytes` from `data`, and prefetches it to `where`. @{
  template <class Range>
  discard_and_prefetch_batch& add(Range&& range, memory_location where) {
    add_range<true, Range>(range, add_call, "curt::discard_and_prefetch_batch::add: the range",
                           &where);
    return *this;
  }
  discard_and_prefetch_batch& add_bytes(void* data, std::size_t bytes, memory_location where) {
    push(add_call, data, bytes, &where);
    return *this;
  }  ///@}
  /// Enqueues them on `stream`: not the legacy default one, nor a capturing one.
  void submit(stream_ref stream) const {
    submit_with(stream, "curt::discard_and_prefetch_batch::submit",
                "cudaMemDiscardAndPrefetchBatchAsync", &cudaMemDiscardAndPrefetchBatchAsync);
  }

 private:
  static constexpr const char* add_call = "curt::discard_and_prefetch_batch::add";
};

}  // namespace curt
