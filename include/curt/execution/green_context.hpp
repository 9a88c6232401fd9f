// curt/execution/green_context.hpp: green contexts: partitions of a GPU's SMs, each with streams
// of its own, so that latency-critical work is not starved by bulk work.
//
//   curt::sm_resource all = curt::device_sm_resource(gpu);   // every SM of the device
//   curt::sm_split split = all.split(1, 16);                 // 1 group of >= 16 SMs, the rest left
//   curt::green_context urgent(gpu, split.group(0));
//   curt::green_context bulk(gpu, split.rest(1));            // every other SM of that split
//   curt::stream s = urgent.make_stream();                   // a curt::stream like any other
//   curt::launch(s, config, kernel, args...);                // runs on urgent's SMs only
//
// Sets of SMs and splits are green_resources.hpp's. A partition is not a reservation (work on
// ordinary streams still runs on every SM), and it splits SMs, not memory bandwidth.
//
// make_stream() returns a curt::stream (non-blocking: the driver's rule) that curt APIs take; a
// graph captured there stays on the partition wherever it is launched. Such streams keep their
// green context alive (the driver requires streams to go first): it is destroyed when the owner and
// every such stream are gone, in any order (a released stream keeps it for good). Everything else
// made in it (streams, events, memory made while context() was current, graphs captured on its
// streams) must not outlive it (CUDA's rule). With no current context, curt's calls needing one
// make it current for the call only (the driver lets it be current on one thread at a time).
//
// Driver functions come through entry points with the ABI each needs (12040; 12050 for
// cuGreenCtxStreamCreate, 12090 for cuGreenCtxGetId). No <cuda.h> here (a tenth of a
// translation unit): the driver's types are declared as <cuda.h> declares them.
#pragma once

#include <curt/core/entries.hpp>
#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>
#include <curt/execution/event.hpp>
#include <curt/execution/green_resources.hpp>
#include <curt/execution/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

typedef struct CUdevResourceDesc_st* CUdevResourceDesc;

namespace curt::detail::driver_fn {
CURT_DETAIL_DRIVER_TYPE(cuDevResourceGenerateDesc_v12040, CUdevResourceDesc*, dev_resource*,
                        unsigned count);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxCreate_v12040, CUgreenCtx*, CUdevResourceDesc, CUdevice,
                        unsigned flags);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxDestroy_v12040, CUgreenCtx green);
CURT_DETAIL_DRIVER_TYPE(cuCtxFromGreenCtx_v12040, CUcontext* context, CUgreenCtx green);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxRecordEvent_v12040, CUgreenCtx green, cudaEvent_t event);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxWaitEvent_v12040, CUgreenCtx green, cudaEvent_t event);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxStreamCreate_v12050, CUstream*, CUgreenCtx, unsigned, int);
CURT_DETAIL_DRIVER_TYPE(cuGreenCtxGetId_v12090, CUgreenCtx green, unsigned long long* id);
}  // namespace curt::detail::driver_fn

namespace curt {
namespace detail {

inline CUcontext green_driver_context(CUgreenCtx green) {
  CUcontext context = nullptr;
  CURT_DETAIL_DRIVER_CALL(cuCtxFromGreenCtx, 12040, &context, green);
  return context;
}
// The context a call on `green` runs in: the current one, or where none is current, its own.
inline CUcontext context_for(CUgreenCtx green) {
  CUcontext current = current_context();
  return current ? current : green_driver_context(green);
}

/// What a green_context owner shares with the streams it made: the last of them to go destroys
/// the green context (after its streams, the driver's rule), unless the owner released it.
struct green_hold final : shared_state {
  explicit green_hold(CUgreenCtx h) noexcept : shared_state(&destroy), handle(h) {}
  CUgreenCtx handle;
  atomic<bool> owned{true};
  static void destroy(shared_state* self) noexcept {
    auto* hold = static_cast<green_hold*>(self);
    try {
      if (hold->owned.load())
        report(CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxDestroy, 12040)(hold->handle),
               "cuGreenCtxDestroy(green context)", __FILE__, __LINE__);
    } catch (const std::exception& error) {  // the entry point's lookup, at exit
      report(error);
    }
    delete hold;
  }
};

}  // namespace detail

/// A non-owning green context handle (CUgreenCtx) and its device.
class green_context_ref {
 public:
  /// A green context made elsewhere (cuGreenCtxCreate) on device `d`; not null.
  green_context_ref(CUgreenCtx handle, curt::device d) : handle_(handle), device_(d.ordinal()) {
    if (handle == nullptr)
      detail::raise(cudaErrorInvalidResourceHandle, "curt::green_context_ref(null)",
                    "a green context handle cannot be null", __FILE__, __LINE__);
  }

  CUgreenCtx get() const { return native("get()"); }  ///< The handle; throws if the owner has none.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///< It holds a handle.
  /// The device it was made on; throws if the owner has none.
  curt::device device() const {
    (void)native("device()");
    return curt::device::from_ordinal_unchecked(device_);
  }

  /// The green context's id, unique in the process (cuGreenCtxGetId; needs a CUDA 12.9 driver).
  unsigned long long id() const {
    CUgreenCtx h = native("id()");
    detail::context_scope in(detail::context_for(h));
    unsigned long long value = 0;
    CURT_DETAIL_DRIVER_CALL(cuGreenCtxGetId, 12090, h, &value);
    return value;
  }
  /// Its SMs (cuGreenCtxGetDevResource): a whole set, which split() partitions further.
  sm_resource resources() const {
    CUgreenCtx h = native("resources()");
    detail::context_scope in(detail::context_for(h));
    detail::driver_fn::dev_resource native_resource{};
    CURT_DETAIL_DRIVER_CALL(cuGreenCtxGetDevResource, 12040, h, &native_resource,
                            detail::driver_fn::resource_type_sm);
    return sm_resource(native_resource, device_, sm_resource_kind::whole, 0, 0);
  }
  /// The driver context of this green context (cuCtxFromGreenCtx), for calls that need one
  /// current: what they make belongs to it (the caller's to destroy before it goes).
  CUcontext context() const { return detail::green_driver_context(native("context()")); }

  /// Records in `e` all work so far on its streams (cuGreenCtxRecordEvent); `e` of the same device.
  void record(event_ref e) const { event_call(true, e); }
  /// Its streams' later work waits for `e` (cuGreenCtxWaitEvent), of any context or device.
  void wait(event_ref e) const { event_call(false, e); }

  /// Same handle. Refs of owners that hold none compare by their state. @{
  friend bool operator==(const green_context_ref& a, const green_context_ref& b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(const green_context_ref& a, const green_context_ref& b) noexcept {
    return !(a == b);
  }  ///@}

 protected:
  green_context_ref(CUgreenCtx handle, int ordinal, std::nullptr_t) noexcept
      : handle_(handle), device_(ordinal) {}  ///< Unchecked, for owners: `handle` may be a state.
  /// The empty state, on no device (ordinal -1): what an owner starts as.
  static green_context_ref empty_ref() noexcept {
    return green_context_ref(detail::state_handle<CUgreenCtx>(detail::handle_state::empty), -1,
                             nullptr);
  }
  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  CUgreenCtx native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::green_context", operation);
  }
  CUgreenCtx handle_;  ///< The green context, or a state (handle.hpp) for an owner that holds none.
  int device_;         ///< Its device's ordinal.

 private:
  void event_call(bool record, event_ref e) const {
    CUgreenCtx h = native(record ? "record(event)" : "wait(event)");
    cudaEvent_t event = e.get();
    detail::context_scope in(detail::context_for(h));
    const int status = record ? CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxRecordEvent, 12040)(h, event)
                              : CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxWaitEvent, 12040)(h, event);
    if (CURT_UNLIKELY(status != 0))
      detail::throw_error(std::error_code(status, driver_category()),
                          record ? "cuGreenCtxRecordEvent(green context, event)"
                                 : "cuGreenCtxWaitEvent(green context, event)",
                          __FILE__, __LINE__, detail::green_reason(status, true));
  }
};

namespace detail {
struct green_traits {
  static void destroy(green_context_ref&, green_hold*& hold) { hold->release(); }
  // The handle is the caller's now: the streams made through the owner keep only the record.
  static void release(green_hold*& hold) noexcept {
    hold->owned.store(false);
    hold->release();
  }
};
}  // namespace detail

/// An owning green context: a partition of a device's SMs (cuGreenCtxCreate). Move-only.
/// release() gives it up: the caller destroys it, after every stream made in it is gone.
class green_context
    : public detail::unique_handle<green_context_ref, detail::green_traits, detail::green_hold*> {
  using base = detail::unique_handle<green_context_ref, detail::green_traits, detail::green_hold*>;

 public:
  /// A green context on device `d` with the SMs of `resource`, or of several: pieces of a split. @{
  green_context(curt::device d, const sm_resource& resource) : green_context(d, &resource, 1) {}
  green_context(curt::device d, std::initializer_list<sm_resource> resources)
      : green_context(d, resources.begin(), resources.size()) {}
  green_context(curt::device d, const std::vector<sm_resource>& resources)
      : green_context(d, resources.data(), resources.size()) {}  ///@}
  explicit green_context(no_handle_t) noexcept : base(empty_ref()) {}  ///< empty: uses throw

  /// Takes ownership of a green context made on device `d`; if this throws, it stays the caller's.
  static green_context from_native_handle(curt::device d, CUgreenCtx handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::green_context::from_native_handle",
                    "only a created green context can be owned, not null", __FILE__, __LINE__);
    green_context owner(no_handle);
    owner.state_ = new detail::green_hold(handle);
    owner.handle_ = handle;
    owner.device_ = d.ordinal();
    return owner;
  }

  /// A non-blocking stream of this green context (cuGreenCtxStreamCreate) that keeps it alive;
  /// `priority` must lie in the device's stream_priority_range() (lower runs first).
  curt::stream make_stream(int priority = 0) const {
    CUgreenCtx h = native("make_stream()");
    const std::string call = detail::fmt("curt::green_context::make_stream(priority %d)", priority);
    detail::check_stream_priority(device(), priority, call);
    CUstream created = nullptr;
    {
      detail::context_scope in(detail::context_for(h));
      const int status = CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxStreamCreate, 12050)(
          &created, h, 1 /* CU_STREAM_NON_BLOCKING */, priority);
      if (CURT_UNLIKELY(status != 0))
        detail::throw_error(std::error_code(status, driver_category()),
                            detail::fmt("cuGreenCtxStreamCreate for %s", call.c_str()), __FILE__,
                            __LINE__, detail::green_reason(status));
    }
    state_->retain();  // released by the stream, after it is destroyed
    return detail::adopt_stream(created, state_);
  }

 private:
  green_context(curt::device d, const sm_resource* first, std::size_t count) : base(empty_ref()) {
    device_ = d.ordinal();
    detail::entries<detail::resource_tag> tags(count);
    detail::entries<detail::driver_fn::dev_resource> natives(count);
    unsigned total = 0;
    for (std::size_t i = 0; i < count; ++i) {
      tags[i] = first[i].tag_;
      natives[i] = first[i].native_;
      total += first[i].sm_count();
    }
    const std::string call = detail::fmt("curt::green_context(device %d, %zu resource%s of %u SMs)",
                                         d.ordinal(), count, (count == 1 ? "" : "s"), total);
    if (detail::green_refusal refused = detail::partition_refusal(tags.data(), count, device_))
      detail::raise(refused.status, call, refused.why, __FILE__, __LINE__);
    CUdevResourceDesc description = nullptr;
    int status = CURT_DETAIL_DRIVER_FUNCTION(cuDevResourceGenerateDesc, 12040)(
        &description, natives.data(), static_cast<unsigned>(count));
    if (CURT_UNLIKELY(status != 0))
      detail::throw_error(std::error_code(status, driver_category()),
                          detail::fmt("cuDevResourceGenerateDesc for %s", call.c_str()), __FILE__,
                          __LINE__, detail::green_reason(status));
    // A green context retains the primary context: kept active here, it is not remade for each.
    (void)detail::primary_context(device_);
    CUgreenCtx created = nullptr;
    status = CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxCreate, 12040)(
        &created, description, detail::driver_device(device_), 1 /* CU_GREEN_CTX_DEFAULT_STREAM */);
    if (CURT_UNLIKELY(status != 0))
      detail::throw_error(std::error_code(status, driver_category()),
                          detail::fmt("cuGreenCtxCreate for %s", call.c_str()), __FILE__, __LINE__,
                          detail::green_reason(status));
    try {
      state_ = new detail::green_hold(created);
    } catch (...) {
      (void)CURT_DETAIL_DRIVER_FUNCTION(cuGreenCtxDestroy, 12040)(created);
      throw;
    }
    handle_ = created;
  }
};

/// The green context `stream` belongs to (cuStreamGetGreenCtx); none for a stream of an
/// ordinary context. A default stream answers for the context current on the calling thread.
inline std::optional<green_context_ref> green_context_of(stream_ref stream) {
  cudaStream_t h = stream.get();
  CUgreenCtx green = nullptr;
  {
    detail::context_scope in(detail::for_stream, h);
    CURT_DETAIL_DRIVER_CALL(cuStreamGetGreenCtx, 12040, h, &green);
  }
  if (green == nullptr) return std::nullopt;
  return green_context_ref(green, stream.device());
}

#if CUDART_VERSION >= 13010
/// The number of SMs work on `stream` may use (the runtime's cudaStreamGetDevResource, CUDA
/// 13.1+): a green context's partition, or the whole device. Needs a CUDA 13.1 driver.
inline unsigned stream_sm_count(stream_ref stream) {
  cudaStream_t h = stream.get();
  int driver = 0;
  detail::check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion", __FILE__, __LINE__);
  if (driver < 13010)
    detail::raise(cudaErrorInsufficientDriver, "curt::stream_sm_count(stream)",
                  "cudaStreamGetDevResource needs a CUDA 13.1 driver; this driver supports CUDA " +
                      detail::version_text(driver),
                  __FILE__, __LINE__);
  detail::context_scope in(detail::for_stream, h);
  cudaDevResource resource{};
  detail::check(cudaStreamGetDevResource(h, &resource, cudaDevResourceTypeSm),
                "cudaStreamGetDevResource(stream, SM)", __FILE__, __LINE__);
  return resource.sm.smCount;
}
#endif

}  // namespace curt
