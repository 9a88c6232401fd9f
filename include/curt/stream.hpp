// curt/stream.hpp: CUDA streams (owning curt::stream, non-owning curt::stream_ref) and
// curt::stream_timer.
//
// stream_ref converts implicitly to cudaStream_t, so curt streams go straight into Thrust, CUB and
// any raw API. The path to CCCL's cuda::stream_ref is explicit (cccl()), because implicit
// conversions to both would make calls that accept either ambiguous.
//
// Host functions: stream.host_call(f) runs f on a runtime thread once the work before it is done.
// An exception thrown by f is caught there and rethrown by the next synchronize() of that stream
// through curt (the first one is kept; later ones on the same stream are dropped). f must not
// call CUDA (a rule of cudaLaunchHostFunc).
#pragma once

#include <curt/access_policy.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>

#include <cuda_runtime_api.h>

#if __has_include(<cuda/stream_ref>)
#  include <cuda/stream_ref>
#  define CURT_HAS_CCCL_STREAM_REF 1
#endif

#include <atomic>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt {

/// How a stream orders itself against the legacy default stream.
enum class stream_flags : unsigned {
  non_blocking = cudaStreamNonBlocking,  ///< runs concurrently with the legacy default stream
  blocking = cudaStreamDefault,          ///< synchronizes with the legacy default stream
};

namespace detail {

// Exceptions thrown by host functions, keyed by stream, until that stream is synchronized.
// `pending` lets synchronize() skip the lock when no host function has ever failed.
struct host_error_table {
  // The stream, with the submitting thread for the per-thread default stream (one handle value
  // that names a different stream on each thread).
  using key = std::pair<cudaStream_t, std::thread::id>;

  static key key_of(cudaStream_t stream) {
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    if (stream == nullptr) stream = cudaStreamPerThread;
#else
    if (stream == nullptr) stream = cudaStreamLegacy;  // 0 is the legacy default stream
#endif
    return {stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id()};
  }

  std::mutex mutex;
  std::map<key, std::exception_ptr> errors;
  std::atomic<int> pending{0};

  void store(const key& k, std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mutex);
    if (errors.emplace(k, std::move(error)).second) pending.fetch_add(1);
  }
  std::exception_ptr take(cudaStream_t stream) {
    if (pending.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = errors.find(key_of(stream));
    if (it == errors.end()) return nullptr;
    std::exception_ptr error = std::move(it->second);
    errors.erase(it);
    pending.fetch_sub(1);
    return error;
  }
};

// Never destroyed: streams with static storage may be destroyed after it would have been.
inline host_error_table& host_errors() {
  static host_error_table* table = new host_error_table;
  return *table;
}

template <class F>
struct host_task {
  F function;
  host_error_table::key stream;

  static void CUDART_CB run(void* self) noexcept {
    std::unique_ptr<host_task> task(static_cast<host_task*>(self));
    try {
      task->function();
    } catch (...) {
      try {
        host_errors().store(task->stream, std::current_exception());
      } catch (...) {
        std::fprintf(stderr, "curt: an exception from a host function was lost (out of memory)\n");
      }
    }
  }
};

// One reusable event per device and thread, for stream-on-stream waits: cudaStreamWaitEvent
// captures the event's state when called, so re-recording it right after is safe.
inline cudaEvent_t scratch_event(int ordinal) {
  struct events {
    std::vector<cudaEvent_t> by_device;
    ~events() {
      for (cudaEvent_t e : by_device)
        if (e) check_noexcept(cudaEventDestroy(e), "cudaEventDestroy(scratch event)", __FILE__, __LINE__);
    }
  };
  thread_local events cache;
  if (cache.by_device.size() <= static_cast<std::size_t>(ordinal))
    cache.by_device.resize(static_cast<std::size_t>(ordinal) + 1, nullptr);
  cudaEvent_t& e = cache.by_device[static_cast<std::size_t>(ordinal)];
  if (!e) {
    device_guard guard(device::from_ordinal_unchecked(ordinal));
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags", __FILE__,
          __LINE__);
  }
  return e;
}

}  // namespace detail

/// A non-owning stream handle. Implicitly constructible from and convertible to cudaStream_t.
class stream_ref {
 public:
  constexpr stream_ref(cudaStream_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit

  /// The legacy default stream (synchronizes with blocking streams of its device).
  static stream_ref legacy_default() noexcept { return stream_ref(cudaStreamLegacy); }
  /// The calling thread's default stream.
  static stream_ref per_thread_default() noexcept { return stream_ref(cudaStreamPerThread); }

  constexpr cudaStream_t get() const noexcept { return handle_; }
  constexpr operator cudaStream_t() const noexcept { return handle_; }  // NOLINT: for Thrust, CUB, raw calls

#ifdef CURT_HAS_CCCL_STREAM_REF
  /// The same stream as CCCL's cuda::stream_ref.
  ::cuda::stream_ref cccl() const noexcept { return ::cuda::stream_ref(handle_); }
#endif

  /// Waits for all work on the stream, then rethrows an exception a host function on it threw.
  void synchronize() const {
    detail::check(cudaStreamSynchronize(handle_), "cudaStreamSynchronize(stream)", __FILE__,
                  __LINE__);
    if (std::exception_ptr error = detail::host_errors().take(handle_)) std::rethrow_exception(error);
  }
  /// True when all work on the stream is done.
  bool ready() const {
    cudaError_t status = cudaStreamQuery(handle_);
    if (status == cudaErrorNotReady) return false;
    detail::check(status, "cudaStreamQuery(stream)", __FILE__, __LINE__);
    return true;
  }

  /// Later work on this stream waits for the work `e` captured.
  void wait(event_ref e) const {
    detail::check(cudaStreamWaitEvent(handle_, e.get(), 0), "cudaStreamWaitEvent(stream, event)",
                  __FILE__, __LINE__);
  }
  /// Later work on this stream waits for all work submitted to `other` so far.
  void wait(stream_ref other) const {
    cudaEvent_t e = detail::scratch_event(other.device().ordinal());
    detail::check(cudaEventRecord(e, other.handle_), "cudaEventRecord(scratch event, other stream)",
                  __FILE__, __LINE__);
    detail::check(cudaStreamWaitEvent(handle_, e, 0), "cudaStreamWaitEvent(stream, other stream)",
                  __FILE__, __LINE__);
  }
  /// Records `e` on this stream.
  void record(event_ref e) const { e.record(handle_); }

  /// Runs `function()` on a runtime thread once the work before it is done. See the file comment
  /// for what happens to an exception it throws.
  template <class F>
  void host_call(F&& function) const {
    using task = detail::host_task<std::decay_t<F>>;
    auto* t = new task{std::forward<F>(function), detail::host_error_table::key_of(handle_)};
    cudaError_t status = cudaLaunchHostFunc(handle_, &task::run, t);
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      delete t;
      detail::throw_error(status, "cudaLaunchHostFunc(stream, function)", __FILE__, __LINE__);
    }
  }

  curt::device device() const {
    int ordinal = 0;
    detail::check(cudaStreamGetDevice(handle_, &ordinal), "cudaStreamGetDevice(stream)", __FILE__,
                  __LINE__);
    return device::from_ordinal_unchecked(ordinal);
  }
  stream_flags flags() const {
    unsigned native = 0;
    detail::check(cudaStreamGetFlags(handle_, &native), "cudaStreamGetFlags(stream)", __FILE__,
                  __LINE__);
    return (native & cudaStreamNonBlocking) ? stream_flags::non_blocking : stream_flags::blocking;
  }
  int priority() const {
    int value = 0;
    detail::check(cudaStreamGetPriority(handle_, &value), "cudaStreamGetPriority(stream)", __FILE__,
                  __LINE__);
    return value;
  }
  /// The stream's process-unique id.
  unsigned long long id() const {
    unsigned long long value = 0;
    detail::check(cudaStreamGetId(handle_, &value), "cudaStreamGetId(stream)", __FILE__, __LINE__);
    return value;
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

  // Comparisons go through the conversion to cudaStream_t, so refs, owners and native handles
  // compare with each other alike.

 protected:
  void set_attribute(cudaStreamAttrID id, const cudaStreamAttrValue& value, const char* what) const {
    detail::check_with(cudaStreamSetAttribute(handle_, id, &value),
                       [&] { return std::string("cudaStreamSetAttribute(stream, ") + what + ")"; },
                       __FILE__, __LINE__);
  }
  cudaStreamAttrValue attribute(cudaStreamAttrID id, const char* what) const {
    cudaStreamAttrValue value{};
    detail::check_with(cudaStreamGetAttribute(handle_, id, &value),
                       [&] { return std::string("cudaStreamGetAttribute(stream, ") + what + ")"; },
                       __FILE__, __LINE__);
    return value;
  }

  cudaStream_t handle_;
};

/// An owning stream. Move-only; destroying it does not wait for its work (CUDA frees the stream
/// once that work is done).
class stream : public stream_ref {
 public:
  /// Creates a stream on device `d`. `priority` must lie in d.stream_priority_range()
  /// (lower numbers run first); out of range is an error, not clamped.
  explicit stream(curt::device d, stream_flags flags = stream_flags::non_blocking, int priority = 0)
      : stream_ref(nullptr) {
    const auto [greatest, least] = d.stream_priority_range();
    if (priority < greatest || priority > least)
      throw cuda_error(cudaErrorInvalidValue,
                       "curt::stream(device " + std::to_string(d.ordinal()) + ", priority " +
                           std::to_string(priority) + ")",
                       "priority " + std::to_string(priority) + " is outside the device's range [" +
                           std::to_string(greatest) + ", " + std::to_string(least) +
                           "] (lower numbers run first)",
                       detail::location(__FILE__, __LINE__));
    device_guard guard(d);
    detail::check_with(
        cudaStreamCreateWithPriority(&handle_, static_cast<unsigned>(flags), priority),
        [&] {
          return "cudaStreamCreateWithPriority(flags " + std::to_string(unsigned(flags)) +
                 ", priority " + std::to_string(priority) + ", device " +
                 std::to_string(d.ordinal()) + ")";
        },
        __FILE__, __LINE__);
  }

  /// Takes ownership of a native stream.
  static stream from_native_handle(cudaStream_t handle) noexcept { return stream(handle); }

  stream(stream&& other) noexcept : stream_ref(std::exchange(other.handle_, nullptr)) {}
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() { destroy(); }

  /// Gives up ownership; the caller destroys the returned handle.
  cudaStream_t release() noexcept { return std::exchange(handle_, nullptr); }

 private:
  explicit stream(cudaStream_t handle) noexcept : stream_ref(handle) {}
  void destroy() noexcept {
    if (!handle_) return;
    if (std::exception_ptr lost = detail::host_errors().take(handle_)) {
      try {
        std::rethrow_exception(lost);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "curt: stream destroyed before synchronize(); its host function threw: %s\n",
                     e.what());
      } catch (...) {
        std::fprintf(stderr, "curt: stream destroyed before synchronize(); its host function threw\n");
      }
    }
    detail::check_noexcept(cudaStreamDestroy(handle_), "cudaStreamDestroy(stream)", __FILE__,
                           __LINE__);
    handle_ = nullptr;
  }
};

/// Times a region of work on a stream: records a start event now and a stop event at stop().
///   curt::stream_timer timer(stream);  ... enqueue work ...;  auto ms = timer.stop();
class stream_timer {
 public:
  explicit stream_timer(stream_ref s)
      : stream_(s), start_(s.device(), event_flags::timing), stop_(s.device(), event_flags::timing) {
    start_.record(stream_);
  }
  /// Records the stop event (the first time), waits for it and returns the region's GPU time.
  event_duration stop() {
    if (!stopped_) {
      stop_.record(stream_);
      stopped_ = true;
    }
    stop_.synchronize();
    return elapsed(start_, stop_);
  }

 private:
  stream_ref stream_;
  event start_;
  event stop_;
  bool stopped_ = false;
};

}  // namespace curt
