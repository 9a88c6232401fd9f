// curt/event.hpp: CUDA events (owning curt::event, non-owning curt::event_ref), elapsed time as
// std::chrono durations. (curt::stream_timer, in stream.hpp, times a region of a stream.)
#pragma once

#include <curt/detail/handle_state.hpp>
#include <curt/detail/host_function.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>

namespace curt {

/// Named event flags; combine with |. The default (none) is the cheapest event: no timing.
enum class event_flags : unsigned {
  none = 0,
  timing = 1u << 0,         ///< can be timed with curt::elapsed (costs more per record)
  blocking_sync = 1u << 1,  ///< synchronize() blocks the thread instead of spinning
  interprocess = 1u << 2,   ///< can be shared with other processes (needs timing off)
};
constexpr event_flags operator|(event_flags a, event_flags b) noexcept {
  return static_cast<event_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has_flag(event_flags set, event_flags flag) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0;
}

/// Milliseconds as the runtime measures them (about half a microsecond resolution).
using event_duration = std::chrono::duration<float, std::milli>;

/// A non-owning event handle.
class event_ref {
 public:
  event_ref(cudaEvent_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit by design
  event_ref(int) = delete;             ///< 0 is not an event
  event_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The native handle; throws when this refers to an empty, moved-from or released owner.
  cudaEvent_t get() const { return native("get()"); }
  /// False for a ref to an empty, moved-from or released owner.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }

  /// Captures the work submitted to `stream` so far. The stream must belong to the device (and
  /// context) the event was created in. A `stream` of 0 is the default stream it means in the
  /// calling translation unit, as for stream_ref.
  template <bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
  void record(cudaStream_t stream) const {
    cudaStream_t target = detail::explicit_stream<PerThreadDefault>(stream);
    cudaError_t status = cudaEventRecord(native("record()"), target);
    if (CURT_UNLIKELY(status != cudaSuccess)) explain_record_failure(status, target);
  }
  /// Blocks until the captured work is done.
  void synchronize() const {
    detail::check(cudaEventSynchronize(native("synchronize()")), "cudaEventSynchronize(event)",
                  __FILE__, __LINE__);
    detail::deferred().drain();
  }
  /// True when the captured work is done (or nothing was recorded).
  bool ready() const {
    cudaError_t status = cudaEventQuery(native("ready()"));
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    detail::check(status, "cudaEventQuery(event)", __FILE__, __LINE__);
    return true;
  }
  /// Handle another process can open with event::from_ipc_handle (event_flags::interprocess).
  cudaIpcEventHandle_t ipc_handle() const {
    cudaIpcEventHandle_t handle{};
    detail::check(cudaIpcGetEventHandle(&handle, native("ipc_handle()")),
                  "cudaIpcGetEventHandle(event)", __FILE__, __LINE__);
    return handle;
  }

  friend bool operator==(event_ref a, event_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(event_ref a, event_ref b) noexcept { return a.handle_ != b.handle_; }

 protected:
  struct from_state_t {};
  event_ref(cudaEvent_t handle, from_state_t) noexcept : handle_(handle) {}

  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaEvent_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::event", operation);
  }

  cudaEvent_t handle_;

 private:
  [[noreturn]] CURT_COLD static void explain_record_failure(cudaError_t status,
                                                            cudaStream_t stream) {
    std::string log = detail::take_driver_log();  // before the diagnosis, which may log
    std::string why;
    int ordinal = -1;
    if (status == cudaErrorInvalidResourceHandle) {
      why = "an event can be recorded only on a stream of the device and context it was created "
            "in";
      if (cudaStreamGetDevice(stream, &ordinal) == cudaSuccess)
        why += "; this stream is on device " + std::to_string(ordinal);
      (void)cudaGetLastError();
    }
    detail::throw_error_with_log(make_error_code(status), "cudaEventRecord(event, stream)",
                                 detail::location(__FILE__, __LINE__), std::move(why),
                                 std::move(log));
  }
};

/// Time between two recorded, completed events created with event_flags::timing.
inline event_duration elapsed(event_ref start, event_ref stop) {
  float ms = 0.0f;
  cudaEvent_t from = start.get(), to = stop.get();
  cudaError_t status = cudaEventElapsedTime(&ms, from, to);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    const char* why =
        status == cudaErrorInvalidResourceHandle
            ? "both events must be created with curt::event_flags::timing and be recorded"
        : status == cudaErrorNotReady ? "the events' work has not finished: synchronize first"
                                      : "";
    detail::throw_error(make_error_code(status), "cudaEventElapsedTime(start, stop)",
                        detail::location(__FILE__, __LINE__), why);
  }
  return event_duration(ms);
}

/// An owning event. Move-only; destroyed with its owner.
class event : public event_ref {
 public:
  /// Creates an event on device `d` (in the context current for d, else d's primary context).
  explicit event(device d, event_flags flags = event_flags::none)
      : event_ref(detail::state_handle<cudaEvent_t>(detail::handle_state::empty), from_state_t{}) {
    unsigned native_flags = to_native(flags);
    device_guard guard(d);
    cudaEvent_t created = nullptr;
    detail::check_call(cudaEventCreateWithFlags(&created, native_flags), "cudaEventCreateWithFlags",
                       {{"flags", native_flags}, {"device", d.ordinal()}}, __FILE__, __LINE__);
    handle_ = created;
  }
  /// An empty owner: every use throws until an event is assigned.
  explicit event(no_handle_t) noexcept
      : event_ref(detail::state_handle<cudaEvent_t>(detail::handle_state::empty), from_state_t{}) {}

  /// Takes ownership of a native event (not null).
  static event from_native_handle(cudaEvent_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::event::from_native_handle",
                    "only a created event can be owned, not null", __FILE__, __LINE__);
    return event(handle);
  }
  /// Opens an event another process shared (the runtime gives it interprocess flags).
  static event from_ipc_handle(cudaIpcEventHandle_t handle) {
    cudaEvent_t opened = nullptr;
    detail::check(cudaIpcOpenEventHandle(&opened, handle), "cudaIpcOpenEventHandle(handle)",
                  __FILE__, __LINE__);
    return event(opened);
  }

  event(event&& other) noexcept
      : event_ref(other.take(detail::handle_state::moved_from), from_state_t{}) {}
  event& operator=(event&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = other.take(detail::handle_state::moved_from);
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { destroy(); }

  /// Gives up ownership; the caller destroys the returned handle. The owner is then "released".
  cudaEvent_t release() {
    cudaEvent_t h = native("release()");
    handle_ = detail::state_handle<cudaEvent_t>(detail::handle_state::released);
    return h;
  }

  static unsigned to_native(event_flags flags) {
    if (has_flag(flags, event_flags::interprocess) && has_flag(flags, event_flags::timing))
      detail::raise(cudaErrorInvalidValue, "curt::event(interprocess | timing)",
                    "an interprocess event cannot have timing (CUDA requires it off)", __FILE__,
                    __LINE__);
    unsigned native = has_flag(flags, event_flags::timing) ? 0u : unsigned(cudaEventDisableTiming);
    if (has_flag(flags, event_flags::blocking_sync)) native |= cudaEventBlockingSync;
    if (has_flag(flags, event_flags::interprocess)) native |= cudaEventInterprocess;
    return native;
  }

 private:
  explicit event(cudaEvent_t handle) noexcept : event_ref(handle, from_state_t{}) {}
  cudaEvent_t take(detail::handle_state left) noexcept {
    return std::exchange(handle_, detail::state_handle<cudaEvent_t>(left));
  }
  void destroy() noexcept {
    if (detail::is_state_handle(handle_)) return;
    detail::check_noexcept(cudaEventDestroy(handle_), "cudaEventDestroy(event)", __FILE__,
                           __LINE__);
    handle_ = detail::state_handle<cudaEvent_t>(detail::handle_state::empty);
  }
};

}  // namespace curt
