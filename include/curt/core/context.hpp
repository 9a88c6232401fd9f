// curt/core/context.hpp: which driver context a call runs in.
//
// Runtime calls run in the thread's current context; on a thread with none the runtime first makes
// the current device's (device 0's) primary context current and leaves it so. curt never lets that
// happen behind the user's back, and never calls cudaSetDevice (that would make a context on a
// device the program may never use, and replace a context the user made current). Two types do it
// via the driver's push and pop, so a thread is left as it was (no context, or the user's own):
// - curt::device_guard(d): d's context for a scope (a current context of d stays, else d's primary
//   is pushed); creations, limits, kernel attributes and occupancy go through it.
// - detail::context_scope: a given context; or, only where no context is current, the one a
//   stream, a piece of memory or a graph call needs. Calls on streams that the driver runs in
//   the stream's own context (launch, record, waits, queries, synchronize, destroy) need none.
// Primary contexts are retained when first needed and kept for good (device_table), as CCCL does.
#pragma once

#include <curt/core/deferred.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <utility>

namespace curt {
namespace detail {

inline CUcontext current_context() {  // the calling thread's current driver context; null when none
  CUcontext context = nullptr;
  CURT_DETAIL_DRIVER_CALL(cuCtxGetCurrent, 4000, &context);
  return context;
}

inline CUdevice driver_device(int ordinal) {
  CUdevice device = 0;
  CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  return device;
}

/// Device `ordinal`'s primary context, retained the first time curt needs it and kept.
inline CUcontext primary_context(int ordinal) {
  device_entry& e = device_table(ordinal, "cuDevicePrimaryCtxRetain");
  if (CUcontext context = e.primary.load(order::acquire)) return context;
  std::lock_guard<std::mutex> lock(device_table_mutex());
  CUcontext context = e.primary.load(order::relaxed);
  if (context == nullptr) {
    CURT_DETAIL_DRIVER_CALL(cuDevicePrimaryCtxRetain, 7000, &context, driver_device(ordinal));
    e.primary.store(context, order::release);
  }
  return context;
}

inline bool primary_context_active(int ordinal) {
  unsigned flags = 0;
  int active = 0;
  CURT_DETAIL_DRIVER_CALL(cuDevicePrimaryCtxGetState, 7000, driver_device(ordinal), &flags,
                          &active);
  return active != 0;
}

/// True for a default-stream handle (0, legacy, per-thread): it names the current context's stream.
inline bool is_default_stream_handle(cudaStream_t stream) noexcept {
  return stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
}

/// The driver context `stream` belongs to; null (with the driver's code in `status`) when the
/// driver cannot tell (a default stream on a thread with none, an invalidated capture).
inline CUcontext stream_context(cudaStream_t stream, int* status = nullptr) {
  CUcontext context = nullptr;
  int result = CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetCtx, 9020)(stream, &context);
  if (status) *status = result;
  return result == 0 ? context : nullptr;
}

/// Whether a green context is current (cuStreamGetGreenCtx, legacy stream); false before 12.4.
inline bool green_context_current() {
  static const auto get = reinterpret_cast<driver_fn::cuStreamGetGreenCtx_v12040::type>(
      driver_function_or_null("cuStreamGetGreenCtx", 12040));
  CUgreenCtx green = nullptr;
  return get != nullptr && current_context() != nullptr && get(cudaStreamLegacy, &green) == 0 &&
         green != nullptr;
}

/// Whether a context of device `ordinal` is current (one device_guard keeps).
inline bool device_context_current(int ordinal) {
  CUdevice device = -1;
  return current_context() != nullptr &&
         CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetDevice, 2000)(&device) == 0 &&
         device == driver_device(ordinal);
}

// Tags for the context a call needs where no context is current (see context_scope).
struct for_stream_t {
  explicit for_stream_t() = default;
};
struct for_memory_t {
  explicit for_memory_t() = default;
};
struct any_context_t {
  explicit any_context_t() = default;
};
inline constexpr for_stream_t for_stream{};
inline constexpr for_memory_t for_memory{};
inline constexpr any_context_t any_context{};

/// Makes a context current for its scope and pops it at the end, unless it is current already:
///   context_scope in(context);                // exactly this context
/// and, on a thread with no current context only (one cuCtxGetCurrent otherwise):
///   context_scope in(for_stream, stream);     // the stream's own; for a default-stream handle,
///                                             // the runtime device's primary, as the runtime
///   context_scope in(for_memory, pointer);    // the memory's own, else its device's primary
///   context_scope in(any_context);            // an active primary context, the runtime
///                                             // device's first, else the runtime device's
class context_scope {
 public:
  context_scope() noexcept = default;
  explicit context_scope(CUcontext context) {
    if (context != current_context()) push(context);
  }
  context_scope(for_stream_t, cudaStream_t stream) { enter(for_stream, stream); }
  explicit context_scope(any_context_t) { enter(any_context); }
  // The same for a scope made empty first (entered on a condition).
  void enter(for_stream_t, cudaStream_t stream) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    int status = 0;
    CUcontext context = is_default_stream_handle(stream) ? primary_context(runtime_device())
                                                         : stream_context(stream, &status);
    if (CURT_UNLIKELY(context == nullptr))  // the stream's (a primary context is never null)
      throw_error(make_error_code(static_cast<cudaError_t>(status)), "cuStreamGetCtx(stream)",
                  __FILE__, __LINE__,
                  "this thread has no current context, so curt runs the call in the stream's own "
                  "context, which the driver could not tell; nothing was done on the stream (one "
                  "whose capture was invalidated must end its capture, on a thread with its "
                  "context current, before it is used again)");
    push(context);
  }
  context_scope(for_memory_t, const void* memory) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    CUcontext own = nullptr;
    int ordinal = -1;
    if (query_pointer(&own, driver_fn::pointer_attribute_context, memory) == 0 && own)
      push(own);
    else if (query_pointer(&ordinal, driver_fn::pointer_attribute_device_ordinal, memory) == 0 &&
             ordinal >= 0)
      push(primary_context(ordinal));  // pool memory names no context
    else
      push(active_primary_context());  // memory CUDA does not know
  }
  void enter(any_context_t) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    push(active_primary_context());
  }
  ~context_scope() {
    if (!pushed_) return;
    CUcontext popped = nullptr;
    report(CURT_DETAIL_DRIVER_FUNCTION(cuCtxPopCurrent, 4000)(&popped), "cuCtxPopCurrent",
           __FILE__, __LINE__);
  }
  context_scope(const context_scope&) = delete;
  context_scope& operator=(const context_scope&) = delete;

  void push(CUcontext context) {
    CURT_DETAIL_DRIVER_CALL(cuCtxPushCurrent, 4000, context);
    pushed_ = true;
  }
  /// Asks the driver for `attribute` (a CU_POINTER_ATTRIBUTE_*) of `memory`, on any thread;
  /// returns the driver's status (CUDA_ERROR_INVALID_VALUE for an address it does not know).
  static int query_pointer(void* data, int attribute, const void* memory) {
    const auto address = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(memory));
    return CURT_DETAIL_DRIVER_FUNCTION(cuPointerGetAttribute, 4000)(data, attribute, address);
  }

 private:
  static int runtime_device() {
    int ordinal = 0;
    check(cudaGetDevice(&ordinal), "cudaGetDevice", __FILE__, __LINE__);
    return ordinal;
  }
  // A primary context that is active already, the runtime device's first (so a process working
  // on device 1 only never gets one on device 0); else the runtime device's.
  CURT_COLD static CUcontext active_primary_context() {
    const int first = runtime_device();
    int count = 0;
    CURT_DETAIL_DRIVER_CALL(cuDeviceGetCount, 2000, &count);
    for (int step = 0; step < count; ++step)
      if (primary_context_active((first + step) % count))
        return primary_context((first + step) % count);
    return primary_context(first);
  }
  bool pushed_ = false;
};

}  // namespace detail

/// Makes device `d` the target of runtime calls for a scope, through the driver: a context of `d`
/// current already (the user's own, a green context's) stays; otherwise d's primary context is
/// pushed, and popped at the end. The thread is left exactly as it was (no context, or the user's).
class device_guard {
 public:
  /// Pushes d's primary context unless a context of d is current; throws if the driver fails.
  explicit device_guard(device d) {
    if (!detail::device_context_current(d.ordinal()))
      scope_.push(detail::primary_context(d.ordinal()));
  }

 private:
  detail::context_scope scope_;
};

inline curt::memory_info device::memory_info() const {
  device_guard guard(*this);
  curt::memory_info info;
  detail::check(cudaMemGetInfo(&info.free, &info.total), "cudaMemGetInfo",
                {{"device", ordinal_}}, __FILE__, __LINE__);
  return info;
}

inline std::size_t device::limit(cudaLimit which) const {
  device_guard guard(*this);
  std::size_t value = 0;
  detail::check(cudaDeviceGetLimit(&value, which), "cudaDeviceGetLimit",
                {{"limit", which}, {"device", ordinal_}}, __FILE__, __LINE__);
  return value;
}

inline void device::set_limit(cudaLimit which, std::size_t value) const {
  device_guard guard(*this);
  detail::check(cudaDeviceSetLimit(which, value), "cudaDeviceSetLimit",
                {{"limit", which}, {"value", static_cast<long long>(value)}, {"device", ordinal_}},
                __FILE__, __LINE__);
}

inline void device::synchronize() const {
  {
    device_guard guard(*this);
    detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize", {{"device", ordinal_}},
                  __FILE__, __LINE__);
  }
  detail::deferred().drain();  // host functions that finished: destroy them on this thread
}

inline std::pair<int, int> device::stream_priority_range() const {
  device_guard guard(*this);
  int least = 0, greatest = 0;
  CURT_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return {greatest, least};
}

}  // namespace curt
