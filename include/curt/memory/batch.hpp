// curt/memory/batch.hpp: what the batches (memory/batch_copy.hpp, memory/managed_batch.hpp) share:
// growable arrays, runs of equal entries, entry numbering, the checks of add() and submit().
#pragma once

#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace curt::detail {

// Equal as CUDA reads them: consecutive equal entries share one attribute (location) entry.
constexpr bool batch_same(cudaMemLocation a, cudaMemLocation b) noexcept {
  return a.type == b.type && a.id == b.id;
}
constexpr bool batch_same(const cudaMemcpyAttributes& a, const cudaMemcpyAttributes& b) noexcept {
  return a.srcAccessOrder == b.srcAccessOrder && a.flags == b.flags &&
         batch_same(a.srcLocHint, b.srcLocHint) && batch_same(a.dstLocHint, b.dstLocHint);
}

template <class T>  // runs of equal values, each with its first call index (attributes, locations)
struct batch_runs {
  entries<T> values;
  entries<std::size_t> starts;
  // Reserves room for `value` where it starts a new run; false where it continues one.
  bool reserve_for(const T& value) {
    if (values.size() != 0 && batch_same(values[values.size() - 1], value)) return false;
    values.reserve_one_more();
    starts.reserve_one_more();
    return true;
  }
  void push(const T& value, std::size_t index) noexcept {
    values.push_back(value);  // after reserve_one_more(): allocates nothing
    starts.push_back(index);
  }
  void reserve(std::size_t count) {
    values.reserve(count);
    starts.reserve(count);
  }
  void clear() noexcept {
    values.clear();
    starts.clear();
  }
};

CURT_COLD inline std::string batch_pointer_text(const void* pointer) {
  return pointer == nullptr ? std::string("null") : fmt("%p", pointer);
}

// Entries numbered as added, also the empty ones left out of the call (`skipped_`, ascending).
class batch_entries {
 public:
  /// Entries added, empty ones included (the numbering of error messages).
  std::size_t size() const noexcept { return added_; }
  bool empty() const noexcept { return added_ == 0; }

 protected:
  // The number, as added, of the entry at `index` of the call.
  std::size_t number(std::size_t index) const noexcept {
    for (std::size_t i = 0; i < skipped_.size() && skipped_[i] <= index; ++i) ++index;
    return index;
  }
  void skip() {
    skipped_.reserve_one_more();
    skipped_.push_back(added_++);
  }
  void clear_entries() noexcept {
    skipped_.clear();
    added_ = 0;
  }
  // Refuses the entry being added, "call(copy #3)"; no CUDA call.
  [[noreturn]] CURT_COLD void refuse(const char* call, const char* entry,
                                     std::string explanation) const {
    raise(cudaErrorInvalidValue, fmt("%s(%s #%zu)", call, entry, added_), std::move(explanation),
          __FILE__, __LINE__);
  }
  // count * size, refused when it does not fit in size_t.
  std::size_t entry_bytes(const char* call, const char* entry, std::size_t count,
                          std::size_t size, const char* what) const {
    if (CURT_UNLIKELY(size != 0 && count > SIZE_MAX / size))
      refuse(call, entry, fmt("%zu %s of %zu bytes overflow size_t", count, what, size));
    return count * size;
  }
  // submit()'s stream: not the legacy default one, which CUDA refuses without saying why.
  static cudaStream_t checked_stream(stream_ref stream, const char* call) {
    cudaStream_t handle = stream.get();  // throws for an empty, moved-from or released owner
    if (CURT_UNLIKELY(handle == cudaStreamLegacy))
      raise(cudaErrorInvalidValue, fmt("%s(legacy default stream)", call),
            "CUDA refuses batched operations on the legacy default stream; use a created stream "
            "or curt::stream_ref::per_thread_default()",
            __FILE__, __LINE__);
    return handle;
  }
  // Whether `stream` captures; refused when its capture was invalidated (in its context).
  static bool capturing(cudaStream_t stream, const char* call) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check(cudaStreamGetCaptureInfo(stream, &status), "cudaStreamGetCaptureInfo(stream)", __FILE__,
          __LINE__);
    if (CURT_UNLIKELY(status == cudaStreamCaptureStatusInvalidated))
      raise(cudaErrorStreamCaptureInvalidated, fmt("%s(capturing stream)", call),
            "the stream's capture was invalidated by an earlier error; end the capture "
            "(cudaStreamEndCapture) before using the stream again",
            __FILE__, __LINE__);
    return status != cudaStreamCaptureStatusNone;
  }

  entries<std::size_t> skipped_;
  std::size_t added_ = 0;
};

}  // namespace curt::detail
