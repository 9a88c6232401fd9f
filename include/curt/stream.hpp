// curt/stream.hpp: CUDA streams (owning curt::stream, non-owning curt::stream_ref) and
// curt::stream_timer.
//
// stream_ref converts implicitly to cudaStream_t, so curt streams go straight into Thrust, CUB and
// any raw API, and is built implicitly from a cudaStream_t or from CCCL's cuda::stream_ref. The
// path to cuda::stream_ref is explicit (cccl(), with <curt/cccl.hpp>), because implicit
// conversions to both would make calls that accept either ambiguous.
//
// Default streams have two spellings only: stream_ref::legacy_default() and per_thread_default().
// A stream_ref cannot be made from a literal 0 or nullptr; a cudaStream_t that is 0 at run time is
// stored as the default stream it means in the translation unit that builds the ref (per-thread
// under --default-stream per-thread), so a ref never holds 0 and means the same everywhere.
//
// An owner that holds no stream (empty, moved-from or released) is never the default stream:
// every operation on it, or on a ref made from it, throws a cuda_error that says which.
//
// Host functions: stream.host_call(f) runs f on a runtime thread once the work before it is done.
// f must not call CUDA (a rule of cudaLaunchHostFunc); f itself is destroyed later on a user
// thread (in a synchronize() of a stream, event or device, or a stream's destructor), so its
// captures may own CUDA resources. An exception f throws is rethrown by the next synchronize() of that stream through
// curt (the first one; later ones are dropped). If the owner destroys the stream first, or f ran
// as a node of a captured graph (where it runs on every launch of the graph), the exception goes
// to the error handler (curt::set_error_handler) as a curt::host_function_error.
#pragma once

#include <curt/access_policy.hpp>
#include <curt/detail/conditional_body_check.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/entries.hpp>
#include <curt/detail/green_lifetime.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/detail/host_function.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>

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

class stream_ref;
class stream;

namespace detail {

// CCCL's cuda::stream_ref, recognised by its shape so that this header need not include CCCL.
template <class R, class = void>
struct is_cccl_stream_ref : std::false_type {};
template <class R>
struct is_cccl_stream_ref<
    R, std::void_t<decltype(std::declval<const R&>().wait()), decltype(std::declval<const R&>().ready())>>
    : std::is_same<decltype(std::declval<const R&>().get()), cudaStream_t> {};

// One reusable timing-free event per context and thread, for stream-on-stream waits:
// cudaStreamWaitEvent takes the event's state when called, so recording it again is safe. An
// entry is keyed by the context's handle and checked against its id, which is unique for the life
// of the process: after cudaDeviceReset the primary context keeps its handle but not its id, and
// the old event died with it. The stream waited on last is remembered, so waiting on it again
// costs one driver call (the id check) instead of two. An event made in one of curt's green
// contexts is also kept in green_contexts(), which destroys it before curt destroys that green
// context (the driver does not); the thread destroys it at exit only through that registry, so
// the two never both destroy it.
class wait_events {
 public:
  /// The event to record on `stream`; null when its context cannot be told. `remembered` says
  /// whether it came from the last stream's entry: the handle may since name a stream of another
  /// context, which the record then refuses (call forget_last() and ask again).
  cudaEvent_t for_stream(cudaStream_t stream, bool& remembered) {
    remembered = stream == last_stream_ && alive(last_);
    if (remembered) return last_.event;
    CUcontext context = stream_context(stream);
    if (context == nullptr) return nullptr;
    const entry& e = for_context(context);
    last_stream_ = is_default_stream_handle(stream) ? nullptr : stream;  // one per context
    last_ = e;
    return e.event;
  }
  void forget_last() noexcept { last_stream_ = nullptr; }
  /// The event for a context whose id the caller knows (a curt::stream owner learnt it when it
  /// was made). One driver call checks that the id is still the context's: an owner that
  /// outlived its context (cudaDeviceReset, cuCtxDestroy) gets cudaErrorContextIsDestroyed. Its
  /// stream and the entry's event died with that context, and handing them to the driver
  /// crashes it; nor may it evict the entry of the live context that now has its handle.
  cudaEvent_t for_known_context(CUcontext context, unsigned long long id) {
    if (CURT_LIKELY(last_known_.context == context && last_known_.id == id)) {
      if (CURT_UNLIKELY(!context_has_id(context, id))) throw_context_gone();
      return last_known_.event;
    }
    last_known_ = for_context(context, id, true);
    return last_known_.event;
  }

  ~wait_events() {
    for (const entry& e : entries_) {
      if (e.green)  // unless its green context destroyed it already
        green_contexts().destroy_kept(e.id, e.event);
      else  // in its own context (never waking another device's), unless that is gone
        destroy_event(e.context, e.id, e.event);
    }
  }

 private:
  struct entry {
    CUcontext context = nullptr;
    unsigned long long id = 0;
    cudaEvent_t event = nullptr;
    bool green = false;  // kept in green_contexts() too
  };
  static bool alive(const entry& e) { return context_has_id(e.context, e.id); }
  [[noreturn]] CURT_COLD static void throw_context_gone() {
    detail::raise(cudaErrorContextIsDestroyed, "curt::stream::wait(stream)",
                  "the context of the stream waited on was destroyed after the stream was made "
                  "(cudaDeviceReset or cuCtxDestroy), and the stream with it",
                  __FILE__, __LINE__);
  }
  // green_registry's destroy_fn for a wait event (and the thread's own at exit).
  static void destroy_event(CUcontext context, unsigned long long id, void* event) noexcept {
    destroy_in_context(context, id, "cudaEventDestroy(wait event)",
                       [event] { return cudaEventDestroy(static_cast<cudaEvent_t>(event)); });
  }
  // Drops the entries of green contexts that are gone (their events went first), so that a
  // long-lived thread does not collect them. On the path that makes an entry only.
  void forget_gone_green_contexts() {
    for (entry* e = entries_.begin(); e != entries_.end();) {
      if (!e->green || alive(*e)) {
        ++e;
        continue;
      }
      green_contexts().destroy_kept(e->id, e->event);  // forgets it, if it is still kept
      if (last_known_.context == e->context && last_known_.id == e->id) last_known_ = entry{};
      entries_.remove(e);  // the last entry moves here: look at this place again
    }
  }
  const entry& for_context(CUcontext context) {
    unsigned long long id = 0;
    CURT_DETAIL_DRIVER_CALL(cuCtxGetId, 12000, context, &id);
    return for_context(context, id);
  }
  const entry& for_context(CUcontext context, unsigned long long id, bool verify_id = false) {
    entry* stale = nullptr;
    for (entry& e : entries_) {
      if (e.context != context) continue;
      if (e.id == id) return e;
      stale = &e;
      break;
    }
    if (verify_id && !context_has_id(context, id)) throw_context_gone();
    if (stale) {  // its context is gone (a reset), and its event with it
      if (last_known_.context == stale->context && last_known_.id == stale->id)
        last_known_ = entry{};  // never handed out again, not even for an owner of that id
      if (stale->green) green_contexts().destroy_kept(stale->id, stale->event);
      entries_.remove(stale);
    }
    forget_gone_green_contexts();
    entry fresh{context, id, nullptr, false};
    {
      context_scope in(context);
      check(cudaEventCreateWithFlags(&fresh.event, cudaEventDisableTiming),
            "cudaEventCreateWithFlags(wait event)", __FILE__, __LINE__);
    }
    try {
      fresh.green = green_contexts().keep(id, context, fresh.event, &destroy_event);
      return entries_.push_back(fresh);
    } catch (...) {  // no memory for an entry
      if (fresh.green)
        green_contexts().destroy_kept(id, fresh.event);
      else
        destroy_event(context, id, fresh.event);
      throw;
    }
  }

  entries<entry> entries_;
  cudaStream_t last_stream_ = nullptr;
  entry last_;
  entry last_known_;
};

// The record-and-wait pair behind stream.wait(other). Through the driver, the pair costs about
// a fifth less than the runtime's (two H200s, CUDA 13.0), which pays for the liveness check of
// a kept event; and on a thread with no context it runs in the streams' own contexts instead of
// making device 0's primary context current. A default-stream handle (0, legacy, per-thread)
// names the current context's stream, and 0 means legacy or per-thread by how the translation
// unit was compiled: those go through the runtime, which knows.
/// Records the wait event `e` on `stream`; 0 or the failure's number (a CUresult, or for a
/// default-stream handle the runtime's code; the two enums share their numbers).
inline int record_wait_event(cudaEvent_t e, cudaStream_t stream) {
  if (CURT_UNLIKELY(is_default_stream_handle(stream))) return cudaEventRecord(e, stream);
  return CURT_DETAIL_DRIVER_FUNCTION(cuEventRecord, 2000)(e, stream);
}
/// Makes `stream` wait for the wait event `e`; throws on failure.
inline void wait_for_event(cudaStream_t stream, cudaEvent_t e) {
  if (CURT_UNLIKELY(is_default_stream_handle(stream))) {
    stream_context_scope in_context(stream);  // the runtime's device, popped again (no context)
    return check(cudaStreamWaitEvent(stream, e, 0), "cudaStreamWaitEvent(stream, other stream)",
                 __FILE__, __LINE__);
  }
  // A failure keeps the runtime's code of the same number (and category), as the runtime's pair
  // reported it: code() == curt::make_error_code(cudaErrorX) holds for waits either way.
  check(static_cast<cudaError_t>(
            CURT_DETAIL_DRIVER_FUNCTION(cuStreamWaitEvent, 3020)(stream, e, 0)),
        "cuStreamWaitEvent(stream, other stream)", __FILE__, __LINE__);
}
/// Throws for a failed record_wait_event, with the runtime's code of that number.
[[noreturn]] CURT_COLD inline void throw_record_failed(int status, cudaStream_t stream) {
  throw_error(static_cast<cudaError_t>(status),
              is_default_stream_handle(stream) ? "cudaEventRecord(wait event, other stream)"
                                               : "cuEventRecord(wait event, other stream)",
              __FILE__, __LINE__);
}

inline wait_events& thread_wait_events() {
  thread_local wait_events events;
  return events;
}

// Refuses a stream priority outside the device's range (CUDA would clamp it), naming `call`.
// 0 is the least priority of every device (both ends are 0 where priorities are not supported):
// the default needs no query.
inline void check_stream_priority(device d, int priority, const char* call) {
  if (priority == 0) return;
  const auto [greatest, least] = d.stream_priority_range();
  if (CURT_UNLIKELY(priority < greatest || priority > least))
    raise(cudaErrorInvalidValue,
          std::string(call) + "(device " + std::to_string(d.ordinal()) + ", priority " +
              std::to_string(priority) + ")",
          "priority " + std::to_string(priority) + " is outside the device's range [" +
              std::to_string(greatest) + ", " + std::to_string(least) +
              "] (lower numbers run first)",
          __FILE__, __LINE__);
}

// A wait (synchronize, query) that CUDA refused because a capture is in progress: says so.
inline void check_wait(cudaError_t status, const char* call, const char* file, int line) {
  if (CURT_LIKELY(status == cudaSuccess)) return;
  if (status == cudaErrorStreamCaptureUnsupported || status == cudaErrorStreamCaptureImplicit)
    throw_error(make_error_code(status), call, location(file, line),
                "the stream is being captured (or a capture in global mode is in progress "
                "elsewhere): CUDA refuses to wait during a capture and invalidates that capture; "
                "end it (cudaStreamEndCapture, curt::capture_scope::end) before waiting");
  throw_error(status, call, file, line);
}

}  // namespace detail

/// A non-owning stream handle. Implicitly constructible from cudaStream_t and cuda::stream_ref,
/// and convertible to cudaStream_t.
class stream_ref {
 public:
  /// A raw stream; 0 becomes the default stream it means here (see the file comment).
  template <bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM>
  stream_ref(cudaStream_t handle) noexcept  // NOLINT: implicit by design
      : handle_(detail::explicit_stream<PerThreadDefault>(handle)) {}
  /// CCCL's cuda::stream_ref (what Thrust, CUB and libcu++ hand around).
  template <class CcclStreamRef, bool PerThreadDefault = CURT_DETAIL_PER_THREAD_DEFAULT_STREAM,
            std::enable_if_t<detail::is_cccl_stream_ref<CcclStreamRef>::value &&
                                 !std::is_base_of_v<stream_ref, CcclStreamRef>,
                             int> = 0>
  stream_ref(const CcclStreamRef& cccl) noexcept  // NOLINT: implicit by design
      : handle_(detail::explicit_stream<PerThreadDefault>(cccl.get())) {}
  stream_ref(int) = delete;             ///< 0 is not a stream: say legacy_default()
  stream_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The legacy default stream (synchronizes with blocking streams of its device).
  static stream_ref legacy_default() noexcept { return stream_ref(cudaStreamLegacy); }
  /// The calling thread's default stream.
  static stream_ref per_thread_default() noexcept { return stream_ref(cudaStreamPerThread); }

  /// The native handle; throws when this refers to an empty, moved-from or released owner.
  cudaStream_t get() const { return native("get()"); }
  operator cudaStream_t() const { return native("conversion to cudaStream_t"); }  // NOLINT
  /// False for a ref to an empty, moved-from or released owner.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }

  /// The same stream as CCCL's cuda::stream_ref. Needs <curt/cccl.hpp>, which keeps CCCL out of
  /// translation units that do not ask for it.
  template <class Self = stream_ref>
  auto cccl() const {
    return to_cccl(static_cast<const Self&>(*this));  // found by ADL in <curt/cccl.hpp>
  }

  /// Waits for all work on the stream, then rethrows an exception a host function on it threw.
  void synchronize() const {
    cudaStream_t h = native("synchronize()");
    std::exception_ptr error;
    {
      detail::stream_context_scope in_context(h);
      detail::check_wait(cudaStreamSynchronize(h), "cudaStreamSynchronize(stream)", __FILE__,
                         __LINE__);
      error = detail::host_errors().take(h);
    }
    detail::deferred().drain();
    if (error) std::rethrow_exception(error);
  }
  /// True when all work on the stream is done.
  bool ready() const {
    cudaStream_t h = native("ready()");
    detail::stream_context_scope in_context(h);
    cudaError_t status = cudaStreamQuery(h);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    detail::check_wait(status, "cudaStreamQuery(stream)", __FILE__, __LINE__);
    return true;
  }

  /// Later work on this stream waits for the work `e` captured.
  void wait(event_ref e) const {
    detail::check(cudaStreamWaitEvent(native("wait(event)"), e.get(), 0),
                  "cudaStreamWaitEvent(stream, event)", __FILE__, __LINE__);
  }
  /// Later work on this stream waits for all work submitted to `other` so far (through an event
  /// of other's context, kept per thread). Waiting on itself does nothing.
  /// Records an event kept for the other stream's context (one per thread and context) on it,
  /// and waits for that event: the driver's pair of calls, and one more driver call that checks
  /// that the context of the kept event is still alive (a cudaDeviceReset destroys it; an owner
  /// waited on after that throws cudaErrorContextIsDestroyed). All three cost less than the
  /// runtime's cudaEventRecord + cudaStreamWaitEvent.
  inline void wait(const stream& other) const;
  void wait(stream_ref other) const {
    cudaStream_t self = native("wait(stream)");
    cudaStream_t source = other.native("wait(stream) (the stream waited on)");
    if (source == self) return;
    detail::wait_events& events = detail::thread_wait_events();
    bool remembered = false;
    cudaEvent_t e = events.for_stream(source, remembered);
    if (CURT_UNLIKELY(e == nullptr)) return wait_through_temporary_event(source);
    int status = detail::record_wait_event(e, source);
    // Refused for a remembered handle (never a default-stream one): it names a stream of another
    // context now. The driver says CUDA_ERROR_INVALID_HANDLE or CUDA_ERROR_INVALID_CONTEXT, whose
    // numbers are the runtime's cudaErrorInvalidResourceHandle and cudaErrorDeviceUninitialized.
    if (CURT_UNLIKELY(remembered && (status == cudaErrorInvalidResourceHandle ||
                                     status == cudaErrorDeviceUninitialized))) {
      events.forget_last();
      e = events.for_stream(source, remembered);
      if (e == nullptr) return wait_through_temporary_event(source);
      status = detail::record_wait_event(e, source);
    }
    if (CURT_UNLIKELY(status != 0)) detail::throw_record_failed(status, source);
    detail::wait_for_event(self, e);
    detail::capture_contexts().note_wait(self, source);  // a fork into a capture curt began
  }
  /// Records `e` on this stream.
  void record(event_ref e) const { e.record(*this); }

  /// Runs `function()` on a runtime thread once the work before it is done; under capture, on
  /// every launch of the graph. See the file comment for its exceptions and its lifetime.
  template <class F>
  void host_call(F&& function) const {
    using task = detail::host_task<std::decay_t<F>>;
    cudaStream_t h = native("host_call()");
    detail::stream_context_scope in_context(h);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    detail::check(cudaStreamGetCaptureInfo(h, &capture, nullptr, &graph),
                  "cudaStreamGetCaptureInfo(stream)", __FILE__, __LINE__);
    if (capture == cudaStreamCaptureStatusActive) {
      if (CURT_UNLIKELY(detail::captures_into_conditional_body(graph)))
        detail::raise(cudaErrorNotSupported, "curt::stream::host_call()",
                      "the stream captures into the body of a conditional node, which holds only "
                      "kernel, empty, child-graph, memset, memcpy and conditional nodes: CUDA "
                      "allows no host function there. Nothing was captured",
                      __FILE__, __LINE__);
      return host_call_in_graph(std::make_unique<task>(std::forward<F>(function), 0), graph);
    }
    if (CURT_UNLIKELY(capture == cudaStreamCaptureStatusInvalidated))
      detail::raise(cudaErrorStreamCaptureInvalidated, "curt::stream::host_call()",
                    "the stream's capture was invalidated by an earlier error; end the capture "
                    "(cudaStreamEndCapture) before using the stream again",
                    __FILE__, __LINE__);
    unsigned long long id = 0;
    detail::check(cudaStreamGetId(h, &id), "cudaStreamGetId(stream)", __FILE__, __LINE__);
    auto t = std::make_unique<task>(std::forward<F>(function), id);
    if (h == cudaStreamPerThread) detail::watch_per_thread_stream(id);  // may throw: before begin()
    detail::host_errors().begin(id);
    cudaError_t status = cudaLaunchHostFunc(h, &task::run_once, t.get());
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      detail::host_errors().finish(id, nullptr);
      detail::throw_error(status, "cudaLaunchHostFunc(stream, function)", __FILE__, __LINE__);
    }
    t.release();  // the runtime runs it, and run_once frees it
  }

  curt::device device() const {
    int ordinal = 0;
    cudaStream_t h = native("device()");
    detail::stream_context_scope in_context(h);
    detail::check(cudaStreamGetDevice(h, &ordinal), "cudaStreamGetDevice(stream)",
                  __FILE__, __LINE__);
    return device::from_ordinal_unchecked(ordinal);
  }
  stream_flags flags() const {
    unsigned native_flags = 0;
    cudaStream_t h = native("flags()");
    detail::stream_context_scope in_context(h);
    detail::check(cudaStreamGetFlags(h, &native_flags),
                  "cudaStreamGetFlags(stream)", __FILE__, __LINE__);
    return (native_flags & cudaStreamNonBlocking) ? stream_flags::non_blocking
                                                  : stream_flags::blocking;
  }
  int priority() const {
    int value = 0;
    cudaStream_t h = native("priority()");
    detail::stream_context_scope in_context(h);
    detail::check(cudaStreamGetPriority(h, &value),
                  "cudaStreamGetPriority(stream)", __FILE__, __LINE__);
    return value;
  }
  /// The stream's process-unique id.
  unsigned long long id() const {
    unsigned long long value = 0;
    cudaStream_t h = native("id()");
    detail::stream_context_scope in_context(h);
    detail::check(cudaStreamGetId(h, &value), "cudaStreamGetId(stream)", __FILE__,
                  __LINE__);
    return value;
  }
  /// True while the stream is being captured into a graph; false also in a capture that was
  /// invalidated and not yet ended (curt::capture_info(stream).status tells the three apart).
  bool is_capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaStream_t h = native("is_capturing()");
    detail::stream_context_scope in_context(h);
    detail::check(cudaStreamIsCapturing(h, &status),
                  "cudaStreamIsCapturing(stream)", __FILE__, __LINE__);
    return status == cudaStreamCaptureStatusActive;
  }

  /// How a thread waits in synchronize(): spin, yield or block.
  void set_synchronization_policy(cudaSynchronizationPolicy policy) const {
    cudaStreamAttrValue value{};
    value.syncPolicy = policy;
    set_attribute(cudaStreamAttributeSynchronizationPolicy, value, "synchronization policy");
  }
  cudaSynchronizationPolicy synchronization_policy() const {
    return attribute(cudaStreamAttributeSynchronizationPolicy, "synchronization policy").syncPolicy;
  }
  /// L2 persistence for kernels launched on this stream.
  void set_access_policy_window(const access_policy_window& window) const {
    cudaStreamAttrValue value{};
    value.accessPolicyWindow = window.native();
    set_attribute(cudaStreamAttributeAccessPolicyWindow, value, "access policy window");
  }
  access_policy_window get_access_policy_window() const {
    return access_policy_window::from_native(
        attribute(cudaStreamAttributeAccessPolicyWindow, "access policy window").accessPolicyWindow);
  }
  /// Removes the access-policy window (an empty window).
  void reset_access_policy_window() const { set_access_policy_window(access_policy_window{}); }
  /// Memory synchronization domain of work on this stream (cudaLaunchMemSyncDomainDefault/Remote).
  void set_memory_sync_domain(cudaLaunchMemSyncDomain domain) const {
    cudaStreamAttrValue value{};
    value.memSyncDomain = domain;
    set_attribute(cudaStreamAttributeMemSyncDomain, value, "memory sync domain");
  }
  cudaLaunchMemSyncDomain memory_sync_domain() const {
    return attribute(cudaStreamAttributeMemSyncDomain, "memory sync domain").memSyncDomain;
  }
  /// Maps the logical default/remote domains to hardware domains.
  void set_memory_sync_domain_map(unsigned char default_domain, unsigned char remote_domain) const {
    cudaStreamAttrValue value{};
    value.memSyncDomainMap.default_ = default_domain;
    value.memSyncDomainMap.remote = remote_domain;
    set_attribute(cudaStreamAttributeMemSyncDomainMap, value, "memory sync domain map");
  }
  cudaLaunchMemSyncDomainMap memory_sync_domain_map() const {
    return attribute(cudaStreamAttributeMemSyncDomainMap, "memory sync domain map").memSyncDomainMap;
  }

  /// Same stream handle. Refs of owners that hold no stream compare by their state.
  friend bool operator==(stream_ref a, stream_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(stream_ref a, stream_ref b) noexcept { return a.handle_ != b.handle_; }
  friend bool operator==(stream_ref a, cudaStream_t b) noexcept { return a.handle_ == b; }
  friend bool operator!=(stream_ref a, cudaStream_t b) noexcept { return a.handle_ != b; }
  friend bool operator==(cudaStream_t a, stream_ref b) noexcept { return a == b.handle_; }
  friend bool operator!=(cudaStream_t a, stream_ref b) noexcept { return a != b.handle_; }

 protected:
  struct from_state_t {};
  stream_ref(cudaStream_t handle, from_state_t) noexcept : handle_(handle) {}

  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaStream_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::stream", operation);
  }

  void set_attribute(cudaStreamAttrID id, const cudaStreamAttrValue& value, const char* what) const {
    cudaStream_t h = native("set_attribute()");
    detail::stream_context_scope in_context(h);
    detail::check_call(cudaStreamSetAttribute(h, id, &value),
                       "cudaStreamSetAttribute", {"stream", what}, __FILE__, __LINE__);
  }
  cudaStreamAttrValue attribute(cudaStreamAttrID id, const char* what) const {
    cudaStreamAttrValue value{};
    cudaStream_t h = native("attribute()");
    detail::stream_context_scope in_context(h);
    detail::check_call(cudaStreamGetAttribute(h, id, &value),
                       "cudaStreamGetAttribute", {"stream", what}, __FILE__, __LINE__);
    return value;
  }

  cudaStream_t handle_;

 private:
  template <class Task>
  void host_call_in_graph(std::unique_ptr<Task> owned, cudaGraph_t graph) const {
    cudaUserObject_t owner = nullptr;
    cudaError_t status = cudaUserObjectCreate(&owner, owned.get(), &Task::release_from_graph, 1,
                                              cudaUserObjectNoDestructorSync);
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(status, "cudaUserObjectCreate(host function)", __FILE__, __LINE__);
    Task* t = owned.release();  // the user object owns it now
    status = cudaGraphRetainUserObject(graph, owner, 1, cudaGraphUserObjectMove);
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      (void)cudaUserObjectRelease(owner, 1);  // frees the task (through the deferred queue)
      detail::throw_error(status, "cudaGraphRetainUserObject(capturing graph, host function)",
                          __FILE__, __LINE__);
    }
    // From here the graph owns the task, also if the node cannot be added.
    detail::check(cudaLaunchHostFunc(handle_, &Task::run_in_graph, t),
                  "cudaLaunchHostFunc(capturing stream, function)", __FILE__, __LINE__);
  }

  // For a source whose context the driver cannot tell: a default-stream handle on a thread with
  // no context (the runtime's current device, as the runtime would, left as it was), or a
  // created stream whose capture was invalidated or whose context is lost (refused, with the
  // driver's code: a sticky one says so).
  CURT_COLD void wait_through_temporary_event(cudaStream_t source) const {
    detail::stream_context_scope in_context(source);
    cudaEvent_t e = nullptr;
    detail::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                  "cudaEventCreateWithFlags(wait event)", __FILE__, __LINE__);
    cudaError_t status = cudaEventRecord(e, source);
    if (status == cudaSuccess) status = cudaStreamWaitEvent(handle_, e, 0);
    detail::check_noexcept(cudaEventDestroy(e), "cudaEventDestroy(wait event)", __FILE__, __LINE__);
    detail::check(status, "cudaStreamWaitEvent(stream, other stream)", __FILE__, __LINE__);
  }
};

/// An owning stream. Move-only; destroying it does not wait for its work (CUDA frees the stream
/// once that work is done).
class stream : public stream_ref {
 public:
  /// Creates a stream on device `d` (in the context current for d, else d's primary context).
  /// `priority` must lie in d.stream_priority_range() (lower numbers run first); out of range is
  /// an error, not clamped.
  explicit stream(curt::device d, stream_flags flags = stream_flags::non_blocking, int priority = 0)
      : stream_ref(detail::state_handle<cudaStream_t>(detail::handle_state::empty), from_state_t{}) {
    detail::check_stream_priority(d, priority, "curt::stream");
    device_guard guard(d);
    cudaStream_t created = nullptr;
    detail::check_call(
        cudaStreamCreateWithPriority(&created, static_cast<unsigned>(flags), priority),
        "cudaStreamCreateWithPriority",
        {{"flags", static_cast<unsigned>(flags)}, {"priority", priority}, {"device", d.ordinal()}},
        __FILE__, __LINE__);
    handle_ = created;
    learn_context();
  }
  /// An empty owner: every use throws until a stream is assigned.
  explicit stream(no_handle_t) noexcept
      : stream_ref(detail::state_handle<cudaStream_t>(detail::handle_state::empty), from_state_t{}) {}

  /// Takes ownership of a native stream (not a default stream, not null).
  static stream from_native_handle(cudaStream_t handle) {
    if (detail::is_default_stream_handle(handle) || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::stream::from_native_handle",
                    "only a created stream can be owned, not a default stream or null", __FILE__,
                    __LINE__);
    return stream(handle);
  }

  stream(stream&& other) noexcept
      : stream_ref(other.take(detail::handle_state::moved_from), from_state_t{}),
        context_(other.context_),
        context_id_(other.context_id_) {}
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      destroy();
      context_ = other.context_;
      context_id_ = other.context_id_;
      handle_ = other.take(detail::handle_state::moved_from);
    }
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() { destroy(); }

  /// Gives up ownership; the caller destroys the returned handle. The owner is then "released".
  cudaStream_t release() {
    cudaStream_t h = native("release()");
    // A released green stream keeps its green context for good (see detail/green_lifetime.hpp).
    (void)detail::held_by_streams().take(h);
    handle_ = detail::state_handle<cudaStream_t>(detail::handle_state::released);
    return h;
  }

 private:
  friend class stream_ref;  // wait(const stream&) reads the context below

  explicit stream(cudaStream_t handle) noexcept : stream_ref(handle, from_state_t{}) {
    learn_context();
  }
  // The stream's context and its process-unique id, read once here so that waiting on this
  // stream needs no driver call (the context lives as long as the stream). Null if unknown.
  void learn_context() noexcept {
    try {
      CUcontext context = detail::stream_context(handle_);
      unsigned long long id = 0;
      if (context && CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetId, 12000)(context, &id) == 0) {
        context_ = context;
        context_id_ = id;
      }
    } catch (...) {  // noexcept: the lookup may also fail to allocate its message
      // No driver entry point: waits on this stream take the general path.
    }
  }
  cudaStream_t take(detail::handle_state left) noexcept {
    return std::exchange(handle_, detail::state_handle<cudaStream_t>(left));
  }
  void destroy() noexcept {
    if (detail::is_state_handle(handle_)) return;  // holds no stream: not a drain point either
    detail::deferred().drain();
    // What the stream keeps alive (the green context it was made in), dropped once it is gone.
    detail::stream_hold held = detail::held_by_streams().take(handle_);
    detail::capture_contexts().remove(handle_);  // a capture left unended: the handle is free
    try {
      detail::stream_context_scope in_context(handle_, context_);  // context_: null if unknown
      detail::host_errors().stream_destroyed(handle_);
      detail::check_noexcept(cudaStreamDestroy(handle_), "cudaStreamDestroy(stream)", __FILE__,
                             __LINE__);
    } catch (const cuda_error& error) {  // the context could not be made current
      detail::report_caught(error);
    }
    held.run();  // after the scope: its context is no longer current here
    handle_ = detail::state_handle<cudaStream_t>(detail::handle_state::empty);
  }

  CUcontext context_ = nullptr;
  unsigned long long context_id_ = 0;
};

inline void stream_ref::wait(const stream& other) const {
  if (CURT_UNLIKELY(other.context_ == nullptr)) return wait(static_cast<stream_ref>(other));
  cudaStream_t self = native("wait(stream)");
  cudaStream_t source = other.native("wait(stream) (the stream waited on)");
  if (source == self) return;
  cudaEvent_t e = detail::thread_wait_events().for_known_context(other.context_, other.context_id_);
  int status = detail::record_wait_event(e, source);
  if (CURT_UNLIKELY(status != 0)) detail::throw_record_failed(status, source);
  detail::wait_for_event(self, e);
  detail::capture_contexts().note_wait(self, source);
}

/// Times a region of work on a stream: records a start event now and a stop event at stop().
///   curt::stream_timer timer(stream);  ... enqueue work ...;  auto ms = timer.stop();
/// Without blocking: timer.record_stop(); ... poll timer.ready() ...; auto ms = timer.elapsed();
class stream_timer {
 public:
  /// A timer of a temporary owner would outlive its stream.
  explicit stream_timer(stream&&) = delete;
  explicit stream_timer(stream_ref s)
      : stream_(s),
        context_(detail::stream_context(s.get())),
        start_(timing_event(s, context_)),
        stop_(timing_event(s, context_)) {
    try {
      detail::stream_context_scope in_context(stream_.get(), context_);  // as launch does
      start_.record(stream_);
    } catch (...) {
      destroy_events();  // in their context, not by the members' destructors
      throw;
    }
  }
  /// Destroys its events in the stream's context, where they were made and recorded.
  ~stream_timer() { destroy_events(); }
  /// The moved-from timer holds no events (every use throws; its destructor makes no call).
  stream_timer(stream_timer&&) noexcept = default;
  /// Destroys this timer's events as the destructor does (in its stream's context), then takes
  /// the other's.
  stream_timer& operator=(stream_timer&& other) noexcept {
    if (this != &other) {
      destroy_events();
      stream_ = other.stream_;
      context_ = other.context_;
      start_ = std::move(other.start_);
      stop_ = std::move(other.stop_);
      stopped_ = other.stopped_;
    }
    return *this;
  }
  /// Records the stop event now (once; later calls keep the first) and returns at once.
  void record_stop() {
    if (stopped_) return;
    detail::stream_context_scope in_context(stream_.get(), context_);
    stop_.record(stream_);
    stopped_ = true;
  }
  /// True once the region's work is done (record_stop() first).
  bool ready() const {
    require_stopped("ready()");
    detail::stream_context_scope in_context(stream_.get(), context_);
    return stop_.ready();
  }
  /// The region's GPU time; waits for the region's work if it is not done yet.
  event_duration elapsed() const {
    require_stopped("elapsed()");
    detail::stream_context_scope in_context(stream_.get(), context_);
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
  static event timing_event(stream_ref s, CUcontext context) {
    if (context == nullptr) return event(s.device(), event_flags::timing);
    detail::context_scope in(context);
    return event(s.device(), event_flags::timing);
  }
  // Destroys the events in the context they were made in (the driver may no longer tell the
  // stream's: a capture invalidated since); nothing to do when they were moved away.
  void destroy_events() noexcept {
    if (!start_.valid() && !stop_.valid()) return;
    try {
      detail::stream_context_scope in_context(stream_.get(), context_);
      event start = std::move(start_), stop = std::move(stop_);
    } catch (...) {
      // The context could not be made current: the events go with the members, as they are.
    }
  }
  void require_stopped(const char* operation) const {
    if (!stopped_)
      detail::raise(cudaErrorNotReady, std::string("curt::stream_timer::") + operation,
                    "the region has no end yet: call record_stop() (or stop()) first", __FILE__,
                    __LINE__);
  }
  stream_ref stream_;
  CUcontext context_;  // the stream's, learnt first; null for a default stream
  event start_;
  event stop_;
  bool stopped_ = false;
};

}  // namespace curt
