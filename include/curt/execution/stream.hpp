// curt/execution/stream.hpp: streams (owning curt::stream, non-owning stream_ref), stream_timer.
//
// stream_ref converts implicitly to cudaStream_t (straight into Thrust, CUB and any raw API) and
// from a cudaStream_t or CCCL's cuda::stream_ref; to cuda::stream_ref only explicitly (cccl(), with
// <curt/cccl.hpp>), as implicit conversions to both would make calls accepting either ambiguous.
//
// Default streams: only stream_ref::legacy_default() and per_thread_default(); a literal 0 or
// nullptr is no stream_ref. A cudaStream_t that is 0 at run time becomes the default stream it
// means in the translation unit building the ref (per-thread under --default-stream per-thread), so
// a ref never holds 0 and means the same everywhere. An owner holding no stream (empty, moved-from,
// released) is never the default stream: using it or a ref to it throws a cuda_error saying which.
//
// Synchronize, query, waits, records and destruction go through the driver, which runs them in
// the stream's own context: on a thread with no current context they make none current.
//
// Host functions: host_call(f) runs f on a runtime thread after the work before it. f must not call
// CUDA (cudaLaunchHostFunc's rule); it is destroyed later on a user thread (core/deferred.hpp), so
// its captures may own CUDA resources. The stream's next synchronize() through curt rethrows f's
// first exception (later ones are dropped); if the owner destroys the stream first, or f ran in a
// captured graph (at every launch), it goes to the error handler as a curt::host_function_error.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/deferred.hpp>
#include <curt/core/device.hpp>
#include <curt/core/handle.hpp>
#include <curt/execution/access_policy.hpp>
#include <curt/execution/event.hpp>
#include <curt/execution/host_function.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace curt {

/// How a stream orders itself against the legacy default stream.
enum class stream_flags : unsigned {
  non_blocking = cudaStreamNonBlocking,  ///< runs concurrently with the legacy default stream
  blocking = cudaStreamDefault,          ///< synchronizes with the legacy default stream
};

class stream;

namespace detail {
struct stream_traits;

// CCCL's cuda::stream_ref, recognised by its shape so that this header need not include CCCL.
template <class R, class = void>
struct is_cccl_stream_ref : std::false_type {};
template <class R>
struct is_cccl_stream_ref<R, std::void_t<decltype(std::declval<const R&>().wait()),
                                         decltype(std::declval<const R&>().ready())>>
    : std::is_same<decltype(std::declval<const R&>().get()), cudaStream_t> {};

// A wait (synchronize, query) that CUDA refused because a capture is in progress: says so.
inline void check_wait(int result, const char* call, const char* file, int line) {
  if (CURT_LIKELY(result == 0)) return;
  const bool capturing =
      result == cudaErrorStreamCaptureUnsupported || result == cudaErrorStreamCaptureImplicit;
  check_runtime(result, call, file, line,
                capturing ? "the stream is being captured (or a capture in global mode is in "
                            "progress elsewhere): CUDA refuses to wait during a capture and "
                            "invalidates that capture; end it (cudaStreamEndCapture, "
                            "curt::capture_scope::end) before waiting"
                          : "");
}

// The context a stream's own objects must be made in: a created stream's (the driver tells; refused
// if it cannot), for a default-stream handle the current one (else the runtime device's primary).
inline CUcontext context_of(cudaStream_t stream, const char* call = "cuStreamGetCtx(stream)") {
  if (is_default_stream_handle(stream)) {
    if (CUcontext current = current_context()) return current;
    int ordinal = 0;
    check(cudaGetDevice(&ordinal), "cudaGetDevice", __FILE__, __LINE__);
    return primary_context(ordinal);
  }
  int status = 0;
  CUcontext context = stream_context(stream, &status);
  check_runtime(status, call, __FILE__, __LINE__);
  return context;
}

// A timing-free event in `stream`'s context (for waits on it).
inline cudaEvent_t make_wait_event(cudaStream_t stream) {
  context_scope in(context_of(stream, "cuStreamGetCtx(the stream waited on)"));
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
        "cudaEventCreateWithFlags(wait event)", __FILE__, __LINE__);
  return e;
}

// Refuses a priority outside d's range, naming `call`. 0 is the least priority of every device
// (both ends are 0 where priorities are not supported): the default needs no query.
inline void check_stream_priority(curt::device d, int priority, explainer call) {
  if (priority == 0) return;
  const auto [greatest, least] = d.stream_priority_range();
  if (CURT_UNLIKELY(priority < greatest || priority > least))
    raise(cudaErrorInvalidValue, call(),
          fmt("priority %d is outside the device's range [%d, %d] (lower numbers run first)",
              priority, greatest, least),
          __FILE__, __LINE__);
}

}  // namespace detail

/// A non-owning stream handle. Implicitly constructible from cudaStream_t and cuda::stream_ref,
/// and convertible to cudaStream_t; as small as a cudaStream_t.
class stream_ref {
 public:
  /// A raw stream; 0 becomes the default stream it means here (see the file comment).
  template <bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
  stream_ref(cudaStream_t handle) noexcept  // NOLINT: implicit by design
      : handle_(explicit_handle<PerThreadDefault>(handle)) {}
  /// CCCL's cuda::stream_ref (what Thrust, CUB and libcu++ hand around).
  template <class CcclStreamRef, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM,
            std::enable_if_t<detail::is_cccl_stream_ref<CcclStreamRef>::value &&
                                 !std::is_base_of_v<stream_ref, CcclStreamRef>,
                             int> = 0>
  stream_ref(const CcclStreamRef& cccl) noexcept  // NOLINT: implicit by design
      : handle_(explicit_handle<PerThreadDefault>(cccl.get())) {}
  stream_ref(int) = delete;             ///< 0 is not a stream: say legacy_default()
  stream_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// Default streams: legacy (synchronizes with its device's blocking streams), the thread's. @{
  static stream_ref legacy_default() noexcept { return stream_ref(cudaStreamLegacy); }
  static stream_ref per_thread_default() noexcept { return stream_ref(cudaStreamPerThread); }  ///@}

  /// The native handle; throws when this refers to an empty, moved-from or released owner. @{
  cudaStream_t get() const { return native("get()"); }
  operator cudaStream_t() const { return native("conversion to cudaStream_t"); }  // NOLINT
  /// False for a ref to an empty, moved-from or released owner.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///@}

  /// The same stream as CCCL's cuda::stream_ref. Needs <curt/cccl.hpp> (CCCL only where asked for).
  template <class Self = stream_ref>
  auto cccl() const {
    return to_cccl(static_cast<const Self&>(*this));  // found by ADL in <curt/cccl.hpp>
  }

  /// Waits for all work on the stream, then rethrows an exception a host function on it threw.
  void synchronize() const {
    cudaStream_t h = native("synchronize()");
    detail::check_wait(
        detail::on_stream(
            h, [h] { return CURT_DETAIL_DRIVER_FUNCTION(cuStreamSynchronize, 2000)(h); }),
        "cuStreamSynchronize(stream)", __FILE__, __LINE__);
    std::exception_ptr error =
        detail::deferred().has_errors() ? detail::deferred().take(id()) : nullptr;
    detail::deferred().drain();
    if (error) std::rethrow_exception(error);
  }
  /// True when all work on the stream is done.
  bool ready() const {
    cudaStream_t h = native("ready()");
    int result =
        detail::on_stream(h, [h] { return CURT_DETAIL_DRIVER_FUNCTION(cuStreamQuery, 2000)(h); });
    detail::deferred().drain();
    if (result == cudaErrorNotReady) return false;
    detail::check_wait(result, "cuStreamQuery(stream)", __FILE__, __LINE__);
    return true;
  }

  /// Later work on this stream waits for the work `e` captured.
  void wait(event_ref e) const {
    cudaStream_t h = native("wait(event)");
    cudaEvent_t event = e.get();
    detail::check_runtime(
        detail::on_stream(
            h, [&] { return CURT_DETAIL_DRIVER_FUNCTION(cuStreamWaitEvent, 3020)(h, event, 0); }),
        "cuStreamWaitEvent(stream, event)", __FILE__, __LINE__);
  }
  /// Later work on this stream waits for all work submitted to `other` so far (an event recorded on
  /// `other`). A curt::stream owner keeps one for that: as cheap as the raw record-and-wait pair;
  /// for a stream_ref (a raw handle, a default stream) curt makes a temporary event in other's @{
  /// context, destroyed after the wait (about a microsecond more). Waiting on itself does nothing.
  inline void wait(const stream& other) const;
  void wait(stream_ref other) const { wait(other, nullptr); }  ///@}
  void record(event_ref e) const { e.record(*this); }  ///< Records `e` on this stream.

  /// Runs `function()` on a runtime thread once the work before it is done; under capture, on
  /// every launch of the graph. See the file comment for its exceptions and its lifetime.
  template <class F>
  void host_call(F&& function) const {
    using task = detail::host_task<std::decay_t<F>>;
    cudaStream_t h = native("host_call()");
    detail::context_scope in(detail::for_stream, h);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    detail::check(cudaStreamGetCaptureInfo(h, &capture, nullptr, &graph),
                  "cudaStreamGetCaptureInfo(stream)", __FILE__, __LINE__);
    if (capture == cudaStreamCaptureStatusActive)
      return host_call_in_graph(std::make_unique<task>(std::forward<F>(function), 0), graph);
    if (CURT_UNLIKELY(capture == cudaStreamCaptureStatusInvalidated))
      detail::raise(cudaErrorStreamCaptureInvalidated, "curt::stream::host_call()",
                    "the stream's capture was invalidated by an earlier error; end the capture "
                    "(cudaStreamEndCapture) before using the stream again",
                    __FILE__, __LINE__);
    const unsigned long long stream_id = id();
    auto t = std::make_unique<task>(std::forward<F>(function), stream_id);
    if (h == cudaStreamPerThread)  // before begin(): it may throw
      detail::thread_state::current().watch_per_thread_stream(stream_id);
    detail::deferred().begin(stream_id);
    cudaError_t status = cudaLaunchHostFunc(h, &task::run_once, t.get());
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      detail::deferred().finish(stream_id, nullptr);
      detail::check(status, "cudaLaunchHostFunc(stream, function)", __FILE__, __LINE__);
    }
    t.release();  // the runtime runs it, and run_once frees it
  }

  /// The stream's device (cudaStreamGetDevice); throws for a ref to an owner with no stream.
  curt::device device() const {
    cudaStream_t h = native("device()");
    int ordinal = 0;
    detail::context_scope in(detail::for_stream, h);
    detail::check(cudaStreamGetDevice(h, &ordinal), "cudaStreamGetDevice(stream)", __FILE__,
                  __LINE__);
    return device::from_ordinal_unchecked(ordinal);
  }
  /// Whether it synchronizes with the legacy default stream (cudaStreamGetFlags).
  stream_flags flags() const {
    unsigned native_flags = 0;
    query(cudaStreamGetFlags, native_flags, "flags()", "cudaStreamGetFlags(stream)");
    return (native_flags & cudaStreamNonBlocking) ? stream_flags::non_blocking
                                                  : stream_flags::blocking;
  }
  /// Its priority (cudaStreamGetPriority): lower numbers run first; 0 is the default.
  int priority() const {
    int value = 0;
    return query(cudaStreamGetPriority, value, "priority()", "cudaStreamGetPriority(stream)");
  }
  /// The stream's process-unique id.
  unsigned long long id() const {
    unsigned long long value = 0;
    return query(cudaStreamGetId, value, "id()", "cudaStreamGetId(stream)");
  }
  /// True while the stream is being captured into a graph; false also in a capture that was
  /// invalidated and not yet ended (curt::capture_info(stream).status tells the three apart).
  bool is_capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return query(cudaStreamIsCapturing, status, "is_capturing()",
                 "cudaStreamIsCapturing(stream)") == cudaStreamCaptureStatusActive;
  }

  /// Sets or returns how a thread waits in synchronize(): spin, yield or block. @{
  void set_synchronization_policy(cudaSynchronizationPolicy policy) const {
    set_attribute(cudaStreamAttributeSynchronizationPolicy, &cudaStreamAttrValue::syncPolicy,
                  policy, "synchronization policy");
  }
  cudaSynchronizationPolicy synchronization_policy() const {
    return attribute(cudaStreamAttributeSynchronizationPolicy, "synchronization policy").syncPolicy;
  }  ///@}
  /// Sets or returns the L2 access-policy window of kernels on this stream (0 bytes: none). @{
  void set_access_policy_window(const access_policy_window& window) const {
    set_attribute(cudaStreamAttributeAccessPolicyWindow, &cudaStreamAttrValue::accessPolicyWindow,
                  window.native(), "access policy window");
  }
  access_policy_window get_access_policy_window() const {
    return access_policy_window::from_native(
        attribute(cudaStreamAttributeAccessPolicyWindow, "access policy window")
            .accessPolicyWindow);
  }  ///@}
  /// Removes the access-policy window (an empty window).
  void reset_access_policy_window() const { set_access_policy_window(access_policy_window{}); }
  /// Sets or returns the memory synchronization domain of work on this stream (Default, Remote). @{
  void set_memory_sync_domain(cudaLaunchMemSyncDomain domain) const {
    set_attribute(cudaStreamAttributeMemSyncDomain, &cudaStreamAttrValue::memSyncDomain, domain,
                  "memory sync domain");
  }
  cudaLaunchMemSyncDomain memory_sync_domain() const {
    return attribute(cudaStreamAttributeMemSyncDomain, "memory sync domain").memSyncDomain;
  }  ///@}
  /// Sets or returns the map of the logical default/remote domains to hardware domains. @{
  void set_memory_sync_domain_map(unsigned char default_domain, unsigned char remote_domain) const {
    set_attribute(cudaStreamAttributeMemSyncDomainMap, &cudaStreamAttrValue::memSyncDomainMap,
                  cudaLaunchMemSyncDomainMap{default_domain, remote_domain},
                  "memory sync domain map");
  }
  cudaLaunchMemSyncDomainMap memory_sync_domain_map() const {
    return attribute(cudaStreamAttributeMemSyncDomainMap, "memory sync domain map")
        .memSyncDomainMap;
  }  ///@}

  /// Same stream handle. Refs of owners that hold no stream compare by their state. @{
  friend bool operator==(stream_ref a, stream_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(stream_ref a, stream_ref b) noexcept { return a.handle_ != b.handle_; }
  friend bool operator==(stream_ref a, cudaStream_t b) noexcept { return a.handle_ == b; }
  friend bool operator!=(stream_ref a, cudaStream_t b) noexcept { return a.handle_ != b; }
  friend bool operator==(cudaStream_t a, stream_ref b) noexcept { return a == b.handle_; }
  friend bool operator!=(cudaStream_t a, stream_ref b) noexcept { return a != b.handle_; }  ///@}

 protected:
  /// 0 as the default stream it means in the calling translation unit.
  template <bool PerThreadDefault>
  static cudaStream_t explicit_handle(cudaStream_t handle) noexcept {
    return handle ? handle : PerThreadDefault ? cudaStreamPerThread : cudaStreamLegacy;
  }

  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaStream_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::stream", operation);
  }

  cudaStream_t handle_;  ///< Never 0; a state (see handle.hpp) for an owner that holds no stream.

 private:
  friend class stream;
  friend struct detail::stream_traits;
  template <class Query, class Value>  // a runtime query in the stream's context if none is current
  Value query(Query function, Value& value, const char* operation, const char* call) const {
    cudaStream_t h = native(operation);
    detail::context_scope in(detail::for_stream, h);
    detail::check(function(h, &value), call, __FILE__, __LINE__);
    return value;
  }
  template <class Field>  // sets value.*field of attribute `id`, the rest zero
  void set_attribute(cudaStreamAttrID id, Field cudaStreamAttrValue::*field, const Field& to,
                     const char* what) const {
    cudaStreamAttrValue value{};
    value.*field = to;
    cudaStream_t h = native("set_attribute()");
    detail::context_scope in(detail::for_stream, h);
    detail::check(cudaStreamSetAttribute(h, id, &value), "cudaStreamSetAttribute", {"stream", what},
                  __FILE__, __LINE__);
  }
  cudaStreamAttrValue attribute(cudaStreamAttrID id, const char* what) const {
    cudaStreamAttrValue value{};
    cudaStream_t h = native("attribute()");
    detail::context_scope in(detail::for_stream, h);
    detail::check(cudaStreamGetAttribute(h, id, &value), "cudaStreamGetAttribute", {"stream", what},
                  __FILE__, __LINE__);
    return value;
  }

  template <class Task>
  void host_call_in_graph(std::unique_ptr<Task> owned, cudaGraph_t graph) const {
    Task& t = detail::retain_in_graph(graph, std::move(owned));  // also if no node is added
    detail::check(cudaLaunchHostFunc(handle_, &Task::run_in_graph, &t),
                  "cudaLaunchHostFunc(capturing stream, function)", __FILE__, __LINE__);
  }

  // Records `kept` (the other owner's event), or a temporary event, on `other`, and waits.
  void wait(stream_ref other, cudaEvent_t kept) const {
    cudaStream_t self = native("wait(stream)");
    cudaStream_t source = other.native("wait(stream) (the stream waited on)");
    if (source == self) return;
    cudaEvent_t e = kept ? kept : detail::make_wait_event(source);
    int result = detail::on_stream(
        source, [&] { return CURT_DETAIL_DRIVER_FUNCTION(cuEventRecord, 2000)(e, source); });
    if (result == 0)
      result = detail::on_stream(
          self, [&] { return CURT_DETAIL_DRIVER_FUNCTION(cuStreamWaitEvent, 3020)(self, e, 0); });
    if (!kept)
      detail::report(CURT_DETAIL_DRIVER_FUNCTION(cuEventDestroy, 4000)(e),
                     "cuEventDestroy(wait event)", __FILE__, __LINE__);
    detail::check_runtime(result, "cuStreamWaitEvent(stream, other stream)", __FILE__, __LINE__);
  }
};

/// Without <curt/cccl.hpp>, stream_ref::cccl() lands here and says which header it needs.
template <class Stream>
auto to_cccl(const Stream& stream) {  // deduced: its body is compiled, and the assertion with it
  static_assert(sizeof(Stream) == 0,
                "curt::stream_ref::cccl() needs #include <curt/cccl.hpp> (which includes CCCL's "
                "<cuda/stream_ref>)");
  return stream;
}

namespace detail {
// The id of a stream about to be destroyed when host functions may keep an exception for it (0
// when none may): after the destruction, deferred().stream_gone(id) hands it to the handler.
inline unsigned long long id_for_stream_gone(cudaStream_t handle) noexcept {
  unsigned long long id = 0;  // the driver's query needs no context, and a failure is no throw
  if (deferred().has_entries() && CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetId, 12000)(handle, &id))
    id = 0;
  return id;
}
// A curt::stream's handle once its owner is gone while buffers (async_buffer) still free on it:
// the last of them destroys it, then releases what the stream held (its green context).
struct stream_end {
  cudaStream_t handle = nullptr;
  shared_state* hold = nullptr;
  stream_end() = default;
  stream_end(const stream_end&) = delete;
  stream_end& operator=(const stream_end&) = delete;
  ~stream_end() {
    if (handle) {
      const unsigned long long id = id_for_stream_gone(handle);
      report(CURT_DETAIL_DRIVER_FUNCTION(cuStreamDestroy, 4000)(handle),
             "cuStreamDestroy(stream, after its last buffer)", __FILE__, __LINE__);
      if (id) deferred().stream_gone(id);
    }
    if (hold) hold->release();
  }
};
struct stream_state {
  cudaEvent_t wait_event = nullptr;  // for waits on this stream, made in its context
  shared_state* hold = nullptr;      // what it keeps alive (the green context it was made in)
  std::shared_ptr<stream_end> end;   // shared with its buffers, which may outlive it
};
struct stream_traits {
  static void destroy(stream_ref& s, stream_state& state);
  static void release(stream_state& state);
};
/// A `handle` owner releasing `hold` after destroying it (a green context's streams keep it alive).
inline stream adopt_stream(cudaStream_t handle, shared_state* hold);
struct async_memory_kind;
}  // namespace detail

/// An owning stream. Move-only; destroying it does not wait for its work (CUDA frees it once done),
/// and while async_buffers allocated on it live, the last of them destroys it instead.
class stream
    : public detail::unique_handle<stream_ref, detail::stream_traits, detail::stream_state> {
  using base = detail::unique_handle<stream_ref, detail::stream_traits, detail::stream_state>;

 public:
  /// Creates a stream on `d` (in the context current for d, else d's primary). `priority` must lie
  /// in d.stream_priority_range() (lower numbers run first); out of range is an error, not clamped.
  explicit stream(curt::device d, stream_flags flags = stream_flags::non_blocking, int priority = 0)
      : base(no_handle) {
    detail::check_stream_priority(d, priority, [&] {
      return detail::fmt("curt::stream(device %d, priority %d)", d.ordinal(), priority);
    });
    device_guard guard(d);
    cudaStream_t created = nullptr;
    detail::check(
        cudaStreamCreateWithPriority(&created, static_cast<unsigned>(flags), priority),
        "cudaStreamCreateWithPriority",
        {{"flags", static_cast<unsigned>(flags)}, {"priority", priority}, {"device", d.ordinal()}},
        __FILE__, __LINE__);
    own(created);
  }
  /// A stream of `d` with `priority` and the default flags (non-blocking).
  stream(curt::device d, int priority) : stream(d, stream_flags::non_blocking, priority) {}
  explicit stream(no_handle_t) noexcept : base(no_handle) {}  ///< An empty owner: every use throws.

  /// Takes ownership of a native stream (not a default stream, not null).
  static stream from_native_handle(cudaStream_t handle) { return adopt(handle, nullptr); }

 private:
  friend stream detail::adopt_stream(cudaStream_t, detail::shared_state*);
  static stream adopt(cudaStream_t handle, detail::shared_state* hold) {
    if (detail::is_default_stream_handle(handle) || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::stream::from_native_handle",
                    "only a created stream can be owned, not a default stream or null", __FILE__,
                    __LINE__);
    stream s(no_handle);
    s.state_.hold = hold;  // released with the stream, also if own() fails
    s.own(handle);
    return s;
  }
  void own(cudaStream_t handle) {
    handle_ = handle;
    state_.wait_event = detail::make_wait_event(handle);  // on failure the destructor frees it
    state_.end = std::make_shared<detail::stream_end>();
  }
  friend class stream_ref;  // wait(const stream&) takes the wait event
  friend struct detail::async_memory_kind;  // its buffers share `end`
};

inline void stream_ref::wait(const stream& other) const { wait(other, other.state_.wait_event); }

inline void detail::stream_traits::destroy(stream_ref& s, stream_state& state) {
  deferred().drain();
  unsigned long long id = 0;
  if (state.end.use_count() > 1) {  // buffers still free on it: the last one destroys it
    state.end->handle = s.handle_;
    state.end->hold = std::exchange(state.hold, nullptr);
  } else {
    id = id_for_stream_gone(s.handle_);
    report(CURT_DETAIL_DRIVER_FUNCTION(cuStreamDestroy, 4000)(s.handle_),
           "cuStreamDestroy(stream)", __FILE__, __LINE__);
  }
  release(state);
  if (id) deferred().stream_gone(id);
  if (state.hold) state.hold->release();  // after the stream: its context may go with it
}
inline stream detail::adopt_stream(cudaStream_t handle, shared_state* hold) {
  return stream::adopt(handle, hold);
}
// A released stream keeps its hold (green context) for good; its wait event was only the owner's.
inline void detail::stream_traits::release(stream_state& state) {
  if (state.wait_event)
    report(CURT_DETAIL_DRIVER_FUNCTION(cuEventDestroy, 4000)(state.wait_event),
           "cuEventDestroy(wait event)", __FILE__, __LINE__);
}

/// Times a region of work on a stream: start event now, stop event at stop(); restart(): a new one.
///   curt::stream_timer timer(stream);  ... enqueue work ...;  auto ms = timer.stop();
/// Without blocking: timer.record_stop(); ... poll timer.ready() ...; auto ms = timer.elapsed();
class stream_timer {
 public:
  explicit stream_timer(stream&&) = delete;  ///< A temporary owner's stream would die first.
  /// Makes two timing events in s's context and records the start on `s` now.
  explicit stream_timer(stream_ref s)
      : stream_(s), start_(timing_event(s)), stop_(timing_event(s)) {
    start_.record(stream_);
  }
  /// Records a new start now; the previous region's stop is forgotten.
  void restart() {
    start_.record(stream_);
    stopped_ = false;
  }
  /// Records the stop event now (once; later calls keep the first) and returns at once.
  void record_stop() {
    if (stopped_) return;
    stop_.record(stream_);
    stopped_ = true;
  }
  /// True once the region's work is done (record_stop() first).
  bool ready() const {
    require_stopped("ready()");
    return stop_.ready();
  }
  /// The region's GPU time; waits for the region's work if it is not done yet.
  event_duration elapsed() const {
    require_stopped("elapsed()");
    stop_.synchronize();
    return curt::elapsed(start_, stop_);
  }
  /// record_stop(), then elapsed(): waits and returns the region's GPU time.
  event_duration stop() {
    record_stop();
    return elapsed();
  }

 private:
  // An event of the stream's own context (a user's or a green context as well as a primary).
  static event timing_event(stream_ref s) {
    detail::context_scope in(detail::context_of(s.get()));
    cudaEvent_t e = nullptr;
    detail::check(cudaEventCreate(&e), "cudaEventCreate(timer)", __FILE__, __LINE__);
    return event::from_native_handle(e);
  }
  void require_stopped(const char* operation) const {
    if (!stopped_)
      detail::raise(cudaErrorNotReady, detail::fmt("curt::stream_timer::%s", operation),
                    "the region has no end yet: call record_stop() (or stop()) first", __FILE__,
                    __LINE__);
  }
  stream_ref stream_;
  event start_;
  event stop_;
  bool stopped_ = false;
};

}  // namespace curt
