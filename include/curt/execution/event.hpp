// curt/execution/event.hpp: CUDA events (owning curt::event and timed_event, non-owning event_ref),
// elapsed time as std::chrono durations (stream.hpp's stream_timer times a region).
//
// Recording, waiting, queries, timing and destruction go through the driver, which runs them in
// the event's own context: they need no current context and make none current. A failure keeps
// the runtime's code of the same number (the two enums share them), as the runtime reported it.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/deferred.hpp>
#include <curt/core/device.hpp>
#include <curt/core/flags.hpp>
#include <curt/core/handle.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>

namespace curt {

/// Named event flags; combine with |. The default (none) is the cheapest event: no timing.
enum class event_flags : unsigned {
  none = 0,
  timing = 1u << 0,         ///< can be timed with curt::elapsed (costs more per record)
  blocking_sync = 1u << 1,  ///< synchronize() blocks the thread instead of spinning
  interprocess = 1u << 2,   ///< can be shared with other processes (needs timing off)
};
CURT_DETAIL_FLAGS(event_flags);

/// Milliseconds as the runtime measures them (about half a microsecond resolution).
using event_duration = std::chrono::duration<float, std::milli>;

namespace detail {

/// Runs `call`, a driver call on `stream`, in the stream's own context: a created stream needs no
/// current context; a default-stream handle names the current context's stream, so on a thread
/// with none the runtime device's primary context is current for the call, as the runtime would.
template <class Call>
int on_stream(cudaStream_t stream, Call&& call) {
  if (CURT_LIKELY(!is_default_stream_handle(stream))) return call();
  context_scope in(for_stream, stream);
  return call();
}

/// Throws for a driver call that failed with `result`, in the runtime's category (same number).
inline void check_runtime(int result, const char* call, const char* file, int line,
                          explainer explain = "") {
  if (CURT_UNLIKELY(result != 0))
    throw_error(make_error_code(static_cast<cudaError_t>(result)), call, file, line, explain);
}

}  // namespace detail

/// What another process opens an interprocess event with (event::from_ipc_handle): CUDA's 64
/// bytes, as raw CUDA programs exchange them too; bytes() and from_bytes() carry them. Converts
/// from and to cudaIpcEventHandle_t: `curt::ipc_event_handle h = e.ipc_handle();`.
class ipc_event_handle {
 public:
  static constexpr std::size_t serialized_size = sizeof(cudaIpcEventHandle_t);  ///< 64 bytes
  using bytes_type = std::array<unsigned char, serialized_size>;  ///< What bytes() gives.

  /// Zero bytes (to be filled by a receive, or a member assigned later); no event's handle.
  ipc_event_handle() noexcept : native_{} {}
  /// CUDA's handle, as it is (NOLINT: implicit, a raw handle is one).
  ipc_event_handle(const cudaIpcEventHandle_t& native) noexcept  // NOLINT
      : native_(native) {}
  /// CUDA's handle (NOLINT: implicit, it is one). @{
  const cudaIpcEventHandle_t& native() const noexcept { return native_; }
  operator const cudaIpcEventHandle_t&() const noexcept { return native_; }  // NOLINT
  ///@}

  /// The 64 bytes for another process (from_bytes() there).
  bytes_type bytes() const noexcept {
    bytes_type out{};
    detail::copy_bytes(out.data(), &native_, serialized_size);
    return out;
  }
  /// The handle bytes() gave in the exporting process; refuses any other size.
  static ipc_event_handle from_bytes(const void* data, std::size_t size) {
    if (CURT_UNLIKELY(data == nullptr || size != serialized_size))
      detail::raise(cudaErrorInvalidValue,
                    detail::fmt("curt::ipc_event_handle::from_bytes(%zu bytes)", size),
                    detail::fmt("an event's IPC handle has %zu bytes (ipc_event_handle::bytes())",
                                serialized_size),
                    __FILE__, __LINE__);
    ipc_event_handle handle;
    detail::copy_bytes(&handle.native_, data, serialized_size);
    return handle;
  }

 private:
  cudaIpcEventHandle_t native_;
};

/// A non-owning event handle.
class event_ref {
 public:
  /// A raw event, neither owned nor checked (implicit, like stream_ref's from cudaStream_t).
  event_ref(cudaEvent_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit by design
  event_ref(int) = delete;                                     ///< 0 is not an event
  event_ref(std::nullptr_t) = delete;                          ///< nor is nullptr

  /// The native handle; get() throws and valid() is false for a ref of an owner holding none. @{
  cudaEvent_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///@}

  /// Captures the work submitted so far to `stream`, which must be of the event's device and
  /// context. 0 means the calling translation unit's default stream, as for stream_ref.
  template <bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
  void record(cudaStream_t stream) const {
    cudaStream_t target = stream             ? stream
                          : PerThreadDefault ? cudaStreamPerThread
                                             : cudaStreamLegacy;
    cudaEvent_t e = native("record()");
    int result = detail::on_stream(
        target, [&] { return CURT_DETAIL_DRIVER_FUNCTION(cuEventRecord, 2000)(e, target); });
    if (CURT_UNLIKELY(result != 0)) explain_record_failure(result, target);
  }
  /// Blocks until the captured work is done (cuEventSynchronize).
  void synchronize() const {
    detail::check_runtime(
        CURT_DETAIL_DRIVER_FUNCTION(cuEventSynchronize, 2000)(native("synchronize()")),
        "cuEventSynchronize(event)", __FILE__, __LINE__);
    detail::deferred().drain();
  }
  /// True when the captured work is done (or nothing was recorded).
  bool ready() const {
    int result = CURT_DETAIL_DRIVER_FUNCTION(cuEventQuery, 2000)(native("ready()"));
    detail::deferred().drain();
    if (result == cudaErrorNotReady) return false;
    detail::check_runtime(result, "cuEventQuery(event)", __FILE__, __LINE__);
    return true;
  }
  /// Handle another process opens with event::from_ipc_handle; only an event made with
  /// event_flags::interprocess has one (CUDA cannot be asked an event's flags: it refuses others).
  /// CUDA's type, as before ipc_event_handle: it converts to one for bytes().
  cudaIpcEventHandle_t ipc_handle() const {
    cudaIpcEventHandle_t handle{};
    cudaEvent_t e = native("ipc_handle()");
    const cudaError_t status = [&] {
      detail::context_scope in(detail::any_context);
      return cudaIpcGetEventHandle(&handle, e);
    }();
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(make_error_code(status), "cudaIpcGetEventHandle(event)", __FILE__,
                          __LINE__,
                          status == cudaErrorNotSupported
                              ? "the device does not support IPC (cudaDevAttrIpcEventSupport)"
                          : status == cudaErrorInvalidResourceHandle ||
                                  status == cudaErrorInvalidValue
                              ? "only an event made with curt::event_flags::interprocess "
                                "(cudaEventInterprocess | cudaEventDisableTiming) can be shared"
                              : "");
    return handle;
  }

  /// Same event handle. Refs of owners that hold no event compare by their state. @{
  friend bool operator==(event_ref a, event_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(event_ref a, event_ref b) noexcept { return a.handle_ != b.handle_; }
  ///@}
 protected:
  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaEvent_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::event", operation);
  }
  cudaEvent_t handle_;  ///< The event; a state (see handle.hpp) for an owner that holds none.

 private:
  [[noreturn]] CURT_COLD static void explain_record_failure(int result, cudaStream_t stream) {
    detail::throw_error(make_error_code(static_cast<cudaError_t>(result)),
                        "cuEventRecord(event, stream)", __FILE__, __LINE__, [&] {
                          if (result != cudaErrorInvalidResourceHandle) return std::string();
                          std::string why =
                              "an event can be recorded only on a stream of the device and context "
                              "it was created in";
                          int ordinal = -1;
                          detail::context_scope in(detail::for_stream, stream);
                          if (cudaStreamGetDevice(stream, &ordinal) == cudaSuccess)
                            why += detail::fmt("; this stream is on device %d", ordinal);
                          (void)cudaGetLastError();
                          return why;
                        });
  }
};

/// Time between two recorded, completed events created with event_flags::timing.
inline event_duration elapsed(event_ref start, event_ref stop) {
  float ms = 0.0f;
  cudaEvent_t from = start.get(), to = stop.get();
  int result = CURT_DETAIL_DRIVER_FUNCTION(cuEventElapsedTime, 12080)(&ms, from, to);
  detail::check_runtime(result, "cuEventElapsedTime(start, stop)", __FILE__, __LINE__,
                        result == cudaErrorInvalidResourceHandle
                            ? "both events must be created with curt::event_flags::timing and "
                              "be recorded"
                        : result == cudaErrorNotReady
                            ? "the events' work has not finished: synchronize first"
                            : "");
  return event_duration(ms);
}

namespace detail {
struct event_traits {
  static void destroy(event_ref&, no_state&);
};
}  // namespace detail

/// An owning event. Move-only; destroyed with its owner.
class event : public detail::unique_handle<event_ref, detail::event_traits> {
  using base = detail::unique_handle<event_ref, detail::event_traits>;

 public:
  /// Creates an event on device `d` (in the context current for d, else d's primary context).
  explicit event(device d, event_flags flags = event_flags::none) : base(no_handle) {
    unsigned native_flags = to_native(flags);
    device_guard guard(d);
    cudaEvent_t created = nullptr;
    detail::check(cudaEventCreateWithFlags(&created, native_flags), "cudaEventCreateWithFlags",
                  {{"flags", native_flags}, {"device", d.ordinal()}}, __FILE__, __LINE__);
    handle_ = created;
  }
  explicit event(no_handle_t) noexcept : base(no_handle) {}  ///< An empty owner: every use throws.

  /// Takes ownership of a native event (not null).
  static event from_native_handle(cudaEvent_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::event::from_native_handle",
                    "only a created event can be owned, not null", __FILE__, __LINE__);
    return event(handle);
  }
  /// Opens, on device `d`, an event another process shared (event_ref::ipc_handle()): an untimed
  /// event to record, wait for and query; destroyed with its owner. Using it after the exporter
  /// destroyed its event is undefined (CUDA's rule).
  static event from_ipc_handle(const ipc_event_handle& handle, device d) {
    device_guard guard(d);
    cudaEvent_t opened = nullptr;
    detail::check(cudaIpcOpenEventHandle(&opened, handle.native()),
                  "cudaIpcOpenEventHandle(handle)", {{"device", d.ordinal()}}, __FILE__, __LINE__);
    return event(opened);
  }

  /// cudaEventCreateWithFlags's flags; interprocess | timing throws cudaErrorInvalidValue.
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
  explicit event(cudaEvent_t handle) noexcept : base(handle) {}
};

/// An event always made with event_flags::timing (plus `flags`: blocking_sync): curt::elapsed of
/// two never fails for want of it, as it does at run time for the cheaper, untimed curt::event.
class timed_event : public event {
 public:
  explicit timed_event(device d, event_flags flags = event_flags::none)
      : event(d, flags | event_flags::timing) {}  ///< event(d, flags | event_flags::timing).
  explicit timed_event(no_handle_t) noexcept : event(no_handle) {}  ///< An empty owner; uses throw.
};

inline void detail::event_traits::destroy(event_ref& e, no_state&) {
  report(CURT_DETAIL_DRIVER_FUNCTION(cuEventDestroy, 4000)(e.get()), "cuEventDestroy(event)",
         __FILE__, __LINE__);
}

}  // namespace curt
