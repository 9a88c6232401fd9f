// curt/memory/unified.hpp: managed memory prefetch, advice, range attributes, at a memory_location.
//
//   curt::prefetch(buffer, curt::memory_location::device(gpu), stream);
//   curt::advise(buffer, curt::memory_advice::set_read_mostly);
//   curt::memory_location where = curt::last_prefetch_location(buffer);
//
// A range is a contiguous range with data() and size() (a managed_buffer, a span of one), or a
// pointer and a byte count, of managed memory (or system memory where the device has pageable
// memory access). CUDA 13.0 cannot capture a prefetch (the capture is invalidated): curt refuses
// one on a capturing stream first. Where no context is current, prefetch runs in the stream's
// context, advice and queries in the memory's own (CUDA's range queries make none current).
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/location.hpp>
#include <curt/memory/range.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace curt {

/// cudaMemAdvise's advice; read-mostly ignores the location.
enum class memory_advice {
  set_read_mostly = cudaMemAdviseSetReadMostly,  ///< read copies on each processor
  unset_read_mostly = cudaMemAdviseUnsetReadMostly,
  set_preferred_location = cudaMemAdviseSetPreferredLocation,  ///< pages live there by preference
  unset_preferred_location = cudaMemAdviseUnsetPreferredLocation,
  set_accessed_by = cudaMemAdviseSetAccessedBy,  ///< keep it mapped for that processor
  unset_accessed_by = cudaMemAdviseUnsetAccessedBy,
};

/// The locations a range has accessed-by advice for (devices, and the host as host()).
class location_list {
 public:
  /// Iteration and size, as a read-only container; operator[] is unchecked. @{
  const memory_location* begin() const noexcept { return items_.begin(); }
  const memory_location* end() const noexcept { return items_.end(); }
  std::size_t size() const noexcept { return items_.size(); }
  bool empty() const noexcept { return items_.empty(); }
  const memory_location& operator[](std::size_t i) const noexcept { return items_[i]; }  ///@}
  /// True when `location` is in the list.
  bool contains(memory_location location) const noexcept {
    for (const memory_location& l : *this)
      if (l == location) return true;
    return false;
  }

 private:
  friend location_list accessed_by(const void*, std::size_t);
  detail::entries<memory_location> items_;
};

namespace detail {

template <class Range>  // a range's address and bytes: data() and size() * sizeof(element)
std::pair<const void*, std::size_t> range_bytes(const Range& range) {
  static_assert(has_data_and_size<const Range>::value,
                "curt: a memory range is a contiguous range with data() and size() (a "
                "curt::managed_buffer, a span), or a pointer and a byte count");
  return {range.data(), static_cast<std::size_t>(range.size()) * sizeof(*range.data())};
}

// Throws for a failed call on a range, "function(N bytes, parts...)", explaining the usual cause.
template <class... Parts>
void check_range(cudaError_t status, const char* function, std::size_t bytes,
                 const Parts&... parts) {
  if (CURT_LIKELY(status == cudaSuccess)) return;
  std::string call = fmt("%s(%zu bytes", function, bytes);
  ((call += ", ", call += parts), ...);
  throw_error(make_error_code(status), call + ")", __FILE__, __LINE__,
              status != cudaErrorInvalidValue
                  ? ""
                  : "the range must be managed memory (curt::managed_buffer, cudaMallocManaged), "
                    "or system memory on a device with pageable memory access; a location must "
                    "name a visible device or a host NUMA node that exists");
}

inline const char* advice_name(memory_advice advice) noexcept {
  static const char* const names[] = {
      "unknown advice", "cudaMemAdviseSetReadMostly", "cudaMemAdviseUnsetReadMostly",
      "cudaMemAdviseSetPreferredLocation", "cudaMemAdviseUnsetPreferredLocation",
      "cudaMemAdviseSetAccessedBy", "cudaMemAdviseUnsetAccessedBy"};
  const auto i = static_cast<unsigned>(advice);  // cudaMemoryAdvise counts from 1
  return names[i < 7 ? i : 0];
}

// A location reported as a (type, id) pair of range attributes.
inline memory_location range_location(const void* pointer, std::size_t bytes,
                                      cudaMemRangeAttribute type_attribute,
                                      cudaMemRangeAttribute id_attribute, const char* what) {
  int type = 0, id = 0;
  void* data[2] = {&type, &id};
  std::size_t sizes[2] = {sizeof type, sizeof id};
  cudaMemRangeAttribute attributes[2] = {type_attribute, id_attribute};
  context_scope in(for_memory, pointer);
  check_range(cudaMemRangeGetAttributes(data, sizes, attributes, 2, pointer, bytes),
              "cudaMemRangeGetAttributes", bytes, what);
  return memory_location::from_native(cudaMemLocation{static_cast<cudaMemLocationType>(type), id});
}

}  // namespace detail

// The same for a range's elements (data(), size()).
#define CURT_DETAIL_RANGE_FORM(function)        \
  template <class Range>                        \
  auto function(const Range& range) {           \
    auto [p, bytes] = detail::range_bytes(range); \
    return function(p, bytes);                  \
  }

/// Migrates `bytes` from `pointer` to `location` on `stream` (cudaMemPrefetchAsync); refused on
/// a capturing stream, whose capture stays intact.
inline void prefetch(const void* pointer, std::size_t bytes, memory_location location,
                     stream_ref stream) {
  cudaStream_t h = stream.get();
  if (bytes == 0) return;
  detail::context_scope in(detail::for_stream, h);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  detail::check(cudaStreamIsCapturing(h, &capture), "cudaStreamIsCapturing(stream)", __FILE__,
                __LINE__);
  if (CURT_UNLIKELY(capture != cudaStreamCaptureStatusNone))
    detail::raise(cudaErrorStreamCaptureUnsupported,
                  detail::fmt("curt::prefetch(%zu bytes, %s, stream)", bytes,
                              location.describe().c_str()),
                  capture == cudaStreamCaptureStatusActive
                      ? "the stream is being captured, and CUDA 13.0 cannot capture a prefetch "
                        "(the call would invalidate the capture); nothing was done and the "
                        "capture is intact: prefetch before capturing, or on a stream that is "
                        "not captured"
                      : "the stream's capture was invalidated by an earlier error; end it "
                        "(cudaStreamEndCapture) first",
                  __FILE__, __LINE__);
  detail::check_range(cudaMemPrefetchAsync(pointer, bytes, location.native(), 0, h),
                      "cudaMemPrefetchAsync", bytes, location.describe(), "stream");
}
template <class Range>
void prefetch(const Range& range, memory_location location, stream_ref stream) {
  auto [p, bytes] = detail::range_bytes(range);
  prefetch(p, bytes, location, stream);
}

/// Advises the driver about `bytes` from `pointer` (cudaMemAdvise).
inline void advise(const void* pointer, std::size_t bytes, memory_advice advice,
                   memory_location location) {
  if (bytes == 0) return;
  cudaMemLocation native = location.native();
  const bool location_ignored = advice == memory_advice::set_read_mostly ||
                                advice == memory_advice::unset_read_mostly ||
                                advice == memory_advice::unset_preferred_location;
  if (location_ignored && location.is_none())  // ignored, but CUDA 13.0 refuses none()
    native = memory_location::host().native();
  detail::context_scope in(detail::for_memory, pointer);
  detail::check_range(cudaMemAdvise(pointer, bytes, static_cast<cudaMemoryAdvise>(advice), native),
                      "cudaMemAdvise", bytes, detail::advice_name(advice), location.describe());
}
/// `location` may be left out for read-mostly advice and unset_preferred_location.
template <class Range>
void advise(const Range& range, memory_advice advice, memory_location location = {}) {
  auto [p, bytes] = detail::range_bytes(range);
  advise(p, bytes, advice, location);
}

/// Whether the whole range has read-mostly advice.
inline bool is_read_mostly(const void* pointer, std::size_t bytes) {
  int value = 0;
  detail::context_scope in(detail::for_memory, pointer);
  detail::check_range(cudaMemRangeGetAttribute(&value, sizeof value,
                                               cudaMemRangeAttributeReadMostly, pointer, bytes),
                      "cudaMemRangeGetAttribute", bytes, "cudaMemRangeAttributeReadMostly");
  return value != 0;
}

/// The preferred location the whole range was advised; none() when none (or parts differ).
inline memory_location preferred_location(const void* pointer, std::size_t bytes) {
  return detail::range_location(pointer, bytes, cudaMemRangeAttributePreferredLocationType,
                                cudaMemRangeAttributePreferredLocationId,
                                "PreferredLocationType/Id");
}

/// Where the whole range was last prefetched to; none() when it never was (or parts differ).
inline memory_location last_prefetch_location(const void* pointer, std::size_t bytes) {
  return detail::range_location(pointer, bytes, cudaMemRangeAttributeLastPrefetchLocationType,
                                cudaMemRangeAttributeLastPrefetchLocationId,
                                "LastPrefetchLocationType/Id");
}

/// The processors with accessed-by advice for the whole range: devices, and the host as host()
/// (the runtime reports legacy ids, so a host NUMA node is reported as host()).
inline location_list accessed_by(const void* pointer, std::size_t bytes) {
  const std::size_t capacity = static_cast<std::size_t>(device_count()) + 1;  // devices, host
  detail::entries<int> ids(capacity);
  for (int& id : ids) id = cudaInvalidDeviceId;
  {
    detail::context_scope in(detail::for_memory, pointer);
    detail::check_range(cudaMemRangeGetAttribute(ids.data(), capacity * sizeof(int),
                                                 cudaMemRangeAttributeAccessedBy, pointer, bytes),
                        "cudaMemRangeGetAttribute", bytes, "cudaMemRangeAttributeAccessedBy");
  }
  location_list list;
  for (int id : ids) {
    if (id == cudaInvalidDeviceId) continue;  // the padding after the last one
    const bool host = id == cudaCpuDeviceId;
    list.items_.push_back(memory_location::from_native(cudaMemLocation{
        host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice, host ? 0 : id}));
  }
  return list;
}

CURT_DETAIL_RANGE_FORM(is_read_mostly)
CURT_DETAIL_RANGE_FORM(preferred_location)
CURT_DETAIL_RANGE_FORM(last_prefetch_location)
CURT_DETAIL_RANGE_FORM(accessed_by)
#undef CURT_DETAIL_RANGE_FORM

}  // namespace curt
