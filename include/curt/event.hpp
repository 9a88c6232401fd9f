// curt/event.hpp: CUDA events (owning curt::event, non-owning curt::event_ref), elapsed time as
// std::chrono durations. (curt::stream_timer, in stream.hpp, times a region of a stream.)
#pragma once

#include <curt/device.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
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
  constexpr event_ref(cudaEvent_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit by design

  cudaEvent_t get() const noexcept { return handle_; }

  /// Captures the work submitted to `stream` so far.
  void record(cudaStream_t stream) const {
    detail::check(cudaEventRecord(handle_, stream), "cudaEventRecord(event, stream)", __FILE__,
                  __LINE__);
  }
  /// Blocks until the captured work is done.
  void synchronize() const {
    detail::check(cudaEventSynchronize(handle_), "cudaEventSynchronize(event)", __FILE__, __LINE__);
  }
  /// True when the captured work is done (or nothing was recorded).
  bool ready() const {
    cudaError_t status = cudaEventQuery(handle_);
    if (status == cudaErrorNotReady) return false;
    detail::check(status, "cudaEventQuery(event)", __FILE__, __LINE__);
    return true;
  }
  /// Handle another process can open with event::from_ipc_handle (event_flags::interprocess).
  cudaIpcEventHandle_t ipc_handle() const {
    cudaIpcEventHandle_t handle{};
    detail::check(cudaIpcGetEventHandle(&handle, handle_), "cudaIpcGetEventHandle(event)", __FILE__,
                  __LINE__);
    return handle;
  }

  friend bool operator==(event_ref a, event_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(event_ref a, event_ref b) noexcept { return a.handle_ != b.handle_; }

 protected:
  cudaEvent_t handle_;
};

/// Time between two recorded, completed events created with event_flags::timing.
inline event_duration elapsed(event_ref start, event_ref stop) {
  float ms = 0.0f;
  cudaError_t status = cudaEventElapsedTime(&ms, start.get(), stop.get());
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
  /// Creates an event on device `d`.
  explicit event(device d, event_flags flags = event_flags::none) : event_ref(nullptr) {
    unsigned native = to_native(flags);
    device_guard guard(d);
    detail::check_with(cudaEventCreateWithFlags(&handle_, native),
                       [&] {
                         return "cudaEventCreateWithFlags(flags " + std::to_string(native) +
                                ", device " + std::to_string(d.ordinal()) + ")";
                       },
                       __FILE__, __LINE__);
  }

  /// Takes ownership of a native event.
  static event from_native_handle(cudaEvent_t handle) noexcept { return event(handle); }
  /// Opens an event another process shared (the runtime gives it interprocess flags).
  static event from_ipc_handle(cudaIpcEventHandle_t handle) {
    cudaEvent_t opened = nullptr;
    detail::check(cudaIpcOpenEventHandle(&opened, handle), "cudaIpcOpenEventHandle(handle)",
                  __FILE__, __LINE__);
    return event(opened);
  }

  event(event&& other) noexcept : event_ref(std::exchange(other.handle_, nullptr)) {}
  event& operator=(event&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() { destroy(); }

  /// Gives up ownership; the caller destroys the returned handle.
  cudaEvent_t release() noexcept { return std::exchange(handle_, nullptr); }

  static unsigned to_native(event_flags flags) {
    if (has_flag(flags, event_flags::interprocess) && has_flag(flags, event_flags::timing))
      throw cuda_error(cudaErrorInvalidValue, "curt::event(interprocess | timing)",
                       "an interprocess event cannot have timing (CUDA requires it off)");
    unsigned native = has_flag(flags, event_flags::timing) ? 0u : unsigned(cudaEventDisableTiming);
    if (has_flag(flags, event_flags::blocking_sync)) native |= cudaEventBlockingSync;
    if (has_flag(flags, event_flags::interprocess)) native |= cudaEventInterprocess;
    return native;
  }

 private:
  explicit event(cudaEvent_t handle) noexcept : event_ref(handle) {}
  void destroy() noexcept {
    if (handle_)
      detail::check_noexcept(cudaEventDestroy(handle_), "cudaEventDestroy(event)", __FILE__,
                             __LINE__);
    handle_ = nullptr;
  }
};

}  // namespace curt
