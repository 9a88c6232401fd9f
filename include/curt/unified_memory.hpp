// curt/unified_memory.hpp: hints for managed memory: prefetch, advice, and what the driver
// reports about a range. Locations are curt::memory_location (CUDA 13.0's cudaMemLocation:
// a device, the host, a host NUMA node, the NUMA node nearest the calling thread).
//
//   curt::prefetch(buffer, curt::memory_location::device(gpu), stream);
//   curt::advise(buffer, curt::memory_advice::set_read_mostly);
//   curt::advise(buffer, curt::memory_advice::set_preferred_location, memory_location::host());
//   bool rm = curt::is_read_mostly(buffer);
//   curt::memory_location where = curt::last_prefetch_location(buffer);
//
// A range is a contiguous range with data() and size() (a curt::managed_buffer, a span of one)
// or a pointer and a byte count. These work on managed memory (and, where the device has
// pageable memory access, on system memory; the H200 has none); anything else is refused by the
// runtime with cudaErrorInvalidValue, which curt's message explains.
//
// Capture: CUDA 13.0 cannot capture a prefetch: the call invalidates the stream's capture. curt
// asks the stream first (one cudaStreamIsCapturing) and, while it captures, throws a cuda_error
// (cudaErrorStreamCaptureUnsupported) without touching the capture. Prefetch before capturing,
// or prefetch on a stream that is not being captured.
//
// Contexts: prefetch runs in the stream's context on a thread with none current. advise() and
// the queries have no stream: on a thread with no current context they run in a primary context
// that is active already (the runtime's current device's first), or else in the runtime's
// current device's, which the runtime then keeps; it is popped afterwards. (CUDA 13.0's range
// queries do not make one current themselves: on such a thread they fail with
// cudaErrorDeviceUninitialized.)
//
// Read-mostly advice and unset_preferred_location ignore their location, but CUDA 13.0 refuses
// one that is none() (cudaErrorInvalidValue, seen for read-mostly): curt passes host() for them
// when given none().
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/memory_location.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

namespace curt {

/// cudaMemAdvise's advice. The location matters for preferred location and accessed-by (and
/// their unset forms); read-mostly ignores it.
enum class memory_advice {
  set_read_mostly = cudaMemAdviseSetReadMostly,          ///< read copies on each processor
  unset_read_mostly = cudaMemAdviseUnsetReadMostly,
  set_preferred_location = cudaMemAdviseSetPreferredLocation,  ///< pages live there by preference
  unset_preferred_location = cudaMemAdviseUnsetPreferredLocation,
  set_accessed_by = cudaMemAdviseSetAccessedBy,  ///< keep it mapped for that processor
  unset_accessed_by = cudaMemAdviseUnsetAccessedBy,
};

/// The locations a range has accessed-by advice for (devices, and the host as host()).
class location_list {
 public:
  location_list() = default;
  const memory_location* begin() const noexcept { return items_.get(); }
  const memory_location* end() const noexcept { return items_.get() + size_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const memory_location& operator[](std::size_t i) const noexcept { return items_[i]; }
  /// True when `location` is in the list.
  bool contains(memory_location location) const noexcept {
    for (const memory_location& l : *this)
      if (l == location) return true;
    return false;
  }

 private:
  friend location_list accessed_by(const void*, std::size_t);
  std::unique_ptr<memory_location[]> items_;
  std::size_t size_ = 0;
};

namespace detail {

// A range's bytes: data() and size() * sizeof(element).
template <class Range>
const void* range_bytes(const Range& range, std::size_t& bytes) {
  static_assert(has_data_and_size<const Range>::value,
                "curt: a memory range is a contiguous range with data() and size() (a "
                "curt::managed_buffer, a span), or a pointer and a byte count");
  const void* p = range.data();
  bytes = static_cast<std::size_t>(range.size()) * sizeof(*range.data());
  return p;
}

[[noreturn]] CURT_COLD inline void throw_unified(cudaError_t status, std::string call) {
  std::string explanation;
  if (status == cudaErrorInvalidValue)
    explanation = "the range must be managed memory (curt::managed_buffer, cudaMallocManaged), or "
                  "system memory on a device with pageable memory access; a location must name a "
                  "visible device or a host NUMA node that exists";
  throw_error(make_error_code(status), std::move(call), location(__FILE__, __LINE__),
              std::move(explanation));
}

template <class... Parts>
CURT_COLD std::string range_call(const char* function, std::size_t bytes, const Parts&... parts) {
  std::string text = std::string(function) + "(" + std::to_string(bytes) + " bytes";
  ((text += ", ", text += parts), ...);
  return text + ")";
}

inline const char* advice_name(memory_advice advice) noexcept {
  switch (advice) {
    case memory_advice::set_read_mostly: return "cudaMemAdviseSetReadMostly";
    case memory_advice::unset_read_mostly: return "cudaMemAdviseUnsetReadMostly";
    case memory_advice::set_preferred_location: return "cudaMemAdviseSetPreferredLocation";
    case memory_advice::unset_preferred_location: return "cudaMemAdviseUnsetPreferredLocation";
    case memory_advice::set_accessed_by: return "cudaMemAdviseSetAccessedBy";
    case memory_advice::unset_accessed_by: return "cudaMemAdviseUnsetAccessedBy";
  }
  return "unknown advice";
}

// A location reported as a (type, id) pair of range attributes.
inline memory_location range_location(const void* pointer, std::size_t bytes,
                                      cudaMemRangeAttribute type_attribute,
                                      cudaMemRangeAttribute id_attribute, const char* what) {
  int type = 0, id = 0;
  void* data[2] = {&type, &id};
  std::size_t sizes[2] = {sizeof type, sizeof id};
  cudaMemRangeAttribute attributes[2] = {type_attribute, id_attribute};
  current_device_scope in_context(any_context, pointer);
  cudaError_t status =
      cudaMemRangeGetAttributes(data, sizes, attributes, 2, pointer, bytes);
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_unified(status, range_call("cudaMemRangeGetAttributes", bytes, what));
  cudaMemLocation location{};
  location.type = static_cast<cudaMemLocationType>(type);
  location.id = id;
  return memory_location::from_native(location);
}

}  // namespace detail

/// Migrates `bytes` from `pointer` to `location` on `stream` (cudaMemPrefetchAsync). Refused,
/// without touching the capture, while the stream is being captured (see the file comment).
inline void prefetch(const void* pointer, std::size_t bytes, memory_location location,
                     stream_ref stream) {
  cudaStream_t h = stream.get();
  if (bytes == 0) return;
  detail::stream_context_scope in_context(h);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  detail::check(cudaStreamIsCapturing(h, &capture), "cudaStreamIsCapturing(stream)", __FILE__,
                __LINE__);
  if (CURT_UNLIKELY(capture != cudaStreamCaptureStatusNone))
    detail::raise(cudaErrorStreamCaptureUnsupported,
                  "curt::prefetch(" + std::to_string(bytes) + " bytes, " + location.describe() +
                      ", stream)",
                  capture == cudaStreamCaptureStatusActive
                      ? "the stream is being captured, and CUDA 13.0 cannot capture a prefetch "
                        "(the call would invalidate the capture); nothing was done and the "
                        "capture is intact: prefetch before capturing, or on a stream that is "
                        "not captured"
                      : "the stream's capture was invalidated by an earlier error; end it "
                        "(cudaStreamEndCapture) first",
                  __FILE__, __LINE__);
  cudaError_t status = cudaMemPrefetchAsync(pointer, bytes, location.native(), 0, h);
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_unified(status, detail::range_call("cudaMemPrefetchAsync", bytes,
                                                     location.describe(), "stream"));
}
/// Migrates a range's elements to `location` on `stream`.
template <class Range>
void prefetch(const Range& range, memory_location location, stream_ref stream) {
  std::size_t bytes = 0;
  const void* p = detail::range_bytes(range, bytes);
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
  if (location_ignored && location.is_none())
    native = memory_location::host().native();  // ignored, but must be valid
  detail::current_device_scope in_context(detail::any_context, pointer);
  cudaError_t status =
      cudaMemAdvise(pointer, bytes, static_cast<cudaMemoryAdvise>(advice), native);
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_unified(status, detail::range_call("cudaMemAdvise", bytes,
                                                     detail::advice_name(advice),
                                                     location.describe()));
}
/// Advises the driver about a range's elements. `location` may be left out for read-mostly
/// advice and for unset_preferred_location.
template <class Range>
void advise(const Range& range, memory_advice advice, memory_location location = {}) {
  std::size_t bytes = 0;
  const void* p = detail::range_bytes(range, bytes);
  advise(p, bytes, advice, location);
}

/// Whether the whole range has read-mostly advice.
inline bool is_read_mostly(const void* pointer, std::size_t bytes) {
  int value = 0;
  detail::current_device_scope in_context(detail::any_context, pointer);
  cudaError_t status = cudaMemRangeGetAttribute(&value, sizeof value,
                                                cudaMemRangeAttributeReadMostly, pointer, bytes);
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_unified(status, detail::range_call("cudaMemRangeGetAttribute", bytes,
                                                     "cudaMemRangeAttributeReadMostly"));
  return value != 0;
}
template <class Range>
bool is_read_mostly(const Range& range) {
  std::size_t bytes = 0;
  const void* p = detail::range_bytes(range, bytes);
  return is_read_mostly(p, bytes);
}

/// The preferred location the whole range was advised; none() when it has none (or parts
/// differ).
inline memory_location preferred_location(const void* pointer, std::size_t bytes) {
  return detail::range_location(pointer, bytes, cudaMemRangeAttributePreferredLocationType,
                                cudaMemRangeAttributePreferredLocationId,
                                "PreferredLocationType/Id");
}
template <class Range>
memory_location preferred_location(const Range& range) {
  std::size_t bytes = 0;
  const void* p = detail::range_bytes(range, bytes);
  return preferred_location(p, bytes);
}

/// Where the whole range was last prefetched to; none() when it never was (or parts differ).
inline memory_location last_prefetch_location(const void* pointer, std::size_t bytes) {
  return detail::range_location(pointer, bytes, cudaMemRangeAttributeLastPrefetchLocationType,
                                cudaMemRangeAttributeLastPrefetchLocationId,
                                "LastPrefetchLocationType/Id");
}
template <class Range>
memory_location last_prefetch_location(const Range& range) {
  std::size_t bytes = 0;
  const void* p = detail::range_bytes(range, bytes);
  return last_prefetch_location(p, bytes);
}

/// The processors with accessed-by advice for the whole range: devices, and the host as
/// memory_location::host() (the runtime reports processors as legacy ids, so a host NUMA node
/// is reported as host()).
inline location_list accessed_by(const void* pointer, std::size_t bytes) {
  std::size_t capacity = static_cast<std::size_t>(device_count()) + 1;  // every device and the host
  std::unique_ptr<int[]> ids(new int[capacity]);
  detail::current_device_scope in_context(detail::any_context, pointer);
  cudaError_t status = cudaMemRangeGetAttribute(ids.get(), capacity * sizeof(int),
                                                cudaMemRangeAttributeAccessedBy, pointer, bytes);
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_unified(status, detail::range_call("cudaMemRangeGetAttribute", bytes,
                                                     "cudaMemRangeAttributeAccessedBy"));
  location_list list;
  list.items_.reset(new memory_location[capacity]);
  for (std::size_t i = 0; i < capacity; ++i) {
    if (ids[i] == cudaInvalidDeviceId) continue;  // the padding after the last one
    cudaMemLocation native{};
    native.type = ids[i] == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    native.id = ids[i] == cudaCpuDeviceId ? 0 : ids[i];
    list.items_[list.size_++] = memory_location::from_native(native);
  }
  return list;
}
template <class Range>
location_list accessed_by(const Range& range) {
  std::size_t bytes = 0;
  const void* p = detail::range_bytes(range, bytes);
  return accessed_by(p, bytes);
}

}  // namespace curt
