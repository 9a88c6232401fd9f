// curt/green_context.hpp: green contexts: partitions of a GPU's SMs, each with streams of its own,
// so that latency-critical work is not starved by bulk work.
//
//   curt::sm_resource all = curt::device_sm_resource(gpu);   // every SM of the device
//   curt::sm_split split = all.split(1, 16);                 // 1 group of >= 16 SMs, the rest left
//   curt::green_context urgent(gpu, split.group(0));
//   curt::green_context bulk(gpu, split.rest(1));            // every other SM of that split
//   curt::stream s = urgent.make_stream();                   // a curt::stream like any other
//   curt::launch(s, config, kernel, args...);                // runs on urgent's SMs only
//
// Resources. An sm_resource is a set of SMs: a device's or a green context's whole set, or a
// group or the remainder of a split. split() returns every group and the remainder from one
// driver call and says what the driver delivered, which is not always what was asked: it rounds
// a group up to its granularity (on the H200, 9 SMs become 16; ignore_coscheduling gives finer
// groups at the cost of large clusters) and treats the group count as a capacity (no more groups
// than fit). sm_split_mode::exact refuses such a request with a cuda_error instead. Groups of one
// split are disjoint, and any of them and its remainder may be combined into one green context;
// separate splits hand out the same SMs, so curt refuses to combine their pieces (CUDA 13.0 does
// not). A piece of a split cannot be split again: split a green context's resources() instead.
// A partition is not a reservation: work on ordinary streams still runs on every SM, so keep the
// bulk work in a green context too. And green contexts split SMs, not memory bandwidth.
//
// Streams. make_stream() returns a curt::stream (always non-blocking: the driver's rule) that
// every curt API takes: launch, copies, fills, events, waits, pools, capture (a graph captured
// there stays on the partition wherever it is launched), host functions, timers. On a thread
// with no current context, curt's calls on such a stream make its green context current for the
// call and pop it after, as for any stream; the driver lets a green context be used from one
// thread at a time, so threads that share a green context should keep a context current (a
// runtime call such as cudaSetDevice does) or take turns. green_context_of(stream) finds the
// green context of any stream (none for an ordinary one).
//
// Lifetime. The driver requires streams to be destroyed before their green context. Streams made
// by make_stream() keep their green context alive: it is destroyed when the owner and every
// such stream are gone, in whatever order (a released stream keeps it for good). So does a graph
// captured through curt (capture, capture_scope, capture_to_graph) on such a stream, and every
// executable graph made from it: CUDA lets go of a graph's references on a thread of its own, so
// the green context goes at the next synchronize (of a stream, event or device) or stream
// destruction after the last of them is destroyed. What curt caches in a green context of its own
// (a thread's wait event for stream-on-stream waits, the stream of synchronous pool allocations
// made while context() was current) is destroyed before it. Not covered, the caller's to keep
// alive or to destroy first: streams made any other way in a green context (a runtime stream made
// while context() was current, a raw cuGreenCtxStreamCreate); graph nodes added while context()
// was current, and work of a green stream joined into a capture that began on another stream
// (only the capturing stream's green context is kept); a raw capture (cudaStreamBeginCapture);
// green contexts curt does not own (a green_context_ref of a raw handle; a released one, see
// release() for what its new owner waits for). An
// async_buffer allocated on a default stream while context() is current would be freed in the
// green context: that allocation is refused (cudaErrorNotSupported); allocate on a green stream.
//
// Owners follow curt's rules: move-only; an empty (curt::no_handle), moved-from or released owner,
// and a ref made from one, throw a cuda_error that says which. Driver functions are reached
// through cudaGetDriverEntryPointByVersion with the ABI each needs: 12040 for the family,
// 12050 for cuGreenCtxStreamCreate, 12090 for cuGreenCtxGetId (an older driver gets a cuda_error
// naming the function and the versions). This header includes <cuda.h> for the driver's resource
// and handle types; it is not part of <curt/curt.hpp>.
//
// CUDA 13.1 adds a runtime API for green contexts (cudaGreenCtxCreate, cudaDevResource,
// cudaStreamGetDevResource). curt uses it only where the toolkit has it (stream_sm_count below);
// on 13.0 nothing of it is declared.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/driver_result.hpp>
#include <curt/detail/green_lifetime.hpp>
#include <curt/detail/green_resources.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>
#include <curt/stream.hpp>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// curt calls the 12040 ABI of the resource functions with the resource type of this header: a
// toolkit whose CUdevResource differs needs a look at that ABI first.
#if !defined(RESOURCE_ABI_VERSION) || RESOURCE_ABI_VERSION != 1
#  error "curt/green_context.hpp: this <cuda.h> has another CUdevResource ABI than 12040's (RESOURCE_ABI_VERSION 1); check the driver entry point versions curt asks for"
#endif
static_assert(sizeof(CUdevResource) == 144,
              "curt/green_context.hpp: CUdevResource is not the 12040 ABI's 144 bytes; check the "
              "driver entry point versions curt asks for");

// The driver functions of green contexts, typed here (not with <cudaTypedefs.h>'s PFN_ names,
// which a user's translation unit may declare too).
namespace curt::detail::green_fn {
using cuDeviceGetDevResource_v12040 = CUresult(CUDAAPI*)(CUdevice, CUdevResource*,
                                                         CUdevResourceType);
using cuGreenCtxGetDevResource_v12040 = CUresult(CUDAAPI*)(CUgreenCtx, CUdevResource*,
                                                           CUdevResourceType);
using cuDevSmResourceSplitByCount_v12040 = CUresult(CUDAAPI*)(CUdevResource* result,
                                                              unsigned* groups,
                                                              const CUdevResource* input,
                                                              CUdevResource* remaining,
                                                              unsigned flags, unsigned min_count);
using cuDevResourceGenerateDesc_v12040 = CUresult(CUDAAPI*)(CUdevResourceDesc*, CUdevResource*,
                                                            unsigned);
using cuGreenCtxCreate_v12040 = CUresult(CUDAAPI*)(CUgreenCtx*, CUdevResourceDesc, CUdevice,
                                                   unsigned);
using cuGreenCtxDestroy_v12040 = CUresult(CUDAAPI*)(CUgreenCtx);
using cuCtxFromGreenCtx_v12040 = CUresult(CUDAAPI*)(CUcontext*, CUgreenCtx);
using cuGreenCtxRecordEvent_v12040 = CUresult(CUDAAPI*)(CUgreenCtx, CUevent);
using cuGreenCtxWaitEvent_v12040 = CUresult(CUDAAPI*)(CUgreenCtx, CUevent);
using cuStreamGetGreenCtx_v12040 = CUresult(CUDAAPI*)(CUstream, CUgreenCtx*);
using cuGreenCtxStreamCreate_v12050 = CUresult(CUDAAPI*)(CUstream*, CUgreenCtx, unsigned, int);
using cuGreenCtxGetId_v12090 = CUresult(CUDAAPI*)(CUgreenCtx, unsigned long long*);
}  // namespace curt::detail::green_fn

#define CURT_DETAIL_GREEN_FUNCTION(name, version) \
  CURT_DETAIL_DRIVER_LOOKUP(::curt::detail::green_fn::name##_v##version, #name, version)

namespace curt {

/// Flags of a split (CUdevSmResourceSplit_flags); combine with |.
enum class sm_split_flags : unsigned {
  none = 0,
  /// Finer groups (2 SMs on the H200 instead of 8), each SM taken on its own: large thread
  /// block clusters may not fit such a group.
  ignore_coscheduling = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
  /// Groups that allow the largest clusters (compute capability 9.0+).
  max_cluster_size = CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE,
};
constexpr sm_split_flags operator|(sm_split_flags a, sm_split_flags b) noexcept {
  return static_cast<sm_split_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has_flag(sm_split_flags set, sm_split_flags flag) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0;
}

class sm_split;
class green_context_ref;
class sm_resource;
sm_resource device_sm_resource(curt::device d);

namespace detail {

CURT_COLD inline const char* green_failure_reason(CUresult status) noexcept {
  switch (status) {
    case CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION:
      return "the driver cannot make this set of SMs (a piece of a split split again, more SMs "
             "than the set holds, or a combination it refuses)";
    case CUDA_ERROR_INVALID_RESOURCE_TYPE:
      return "only SM resources are supported";
    case CUDA_ERROR_NOT_SUPPORTED:
      return "this device, platform or driver does not support green contexts";
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return "the green context was destroyed";
    default:
      return "";
  }
}

/// Throws the cuda_error (driver_category) of a failed green-context call.
[[noreturn]] CURT_COLD inline void throw_green(CUresult status, std::string call, const char* file,
                                               int line, std::string why = {}) {
  if (why.empty()) why = green_failure_reason(status);
  throw_error(std::error_code(static_cast<int>(status), driver_category()), std::move(call),
              location(file, line), std::move(why));
}
inline void check_green(CUresult status, const char* call, const char* file, int line) {
  if (CURT_UNLIKELY(status != CUDA_SUCCESS)) throw_green(status, call, file, line);
}

inline CUcontext green_driver_context(CUgreenCtx green) {
  CUcontext context = nullptr;
  check_green(CURT_DETAIL_GREEN_FUNCTION(cuCtxFromGreenCtx, 12040)(&context, green),
              "cuCtxFromGreenCtx(green context)", __FILE__, __LINE__);
  return context;
}

/// On a thread with no current context, makes the green context current for a call on it and
/// pops it after (a thread that had none is left with none); otherwise does nothing but one
/// cuCtxGetCurrent.
class green_call_scope {
 public:
  explicit green_call_scope(CUgreenCtx green) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    pushed_.push(green_driver_context(green));
  }

 private:
  pushed_context pushed_;
};

inline void destroy_green_context(CUgreenCtx green) noexcept {
  try {
    CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxDestroy, 12040)(green);
    if (status == CUDA_ERROR_DEINITIALIZED) return;  // at exit: the driver freed it already
    check_driver_noexcept(static_cast<int>(status), "cuGreenCtxDestroy(green context)", __FILE__,
                          __LINE__);
  } catch (const std::exception& error) {  // no entry point: cannot happen after a creation
    report_caught(error);
  }
}

/// The id of a green context's driver context (what green_contexts() knows it by).
inline unsigned long long green_context_id(CUgreenCtx green) {
  unsigned long long id = 0;
  CURT_DETAIL_DRIVER_CALL(cuCtxGetId, 12000, green_driver_context(green), &id);
  return id;
}

/// What a green_context owner shares with the streams it made and the graphs captured on them:
/// the context is destroyed when the last of them lets go (see detail/green_lifetime.hpp), after
/// what curt kept in it. A released one is not destroyed by curt: what curt kept in it goes when
/// the owner and its streams are gone, which its new owner can see, not when CUDA lets go of the
/// last graph (on a thread of CUDA's, at a moment nobody knows).
struct green_state {
  green_state(CUgreenCtx h, unsigned long long id) noexcept : handle(h), context_id(id) {}
  CUgreenCtx handle;
  unsigned long long context_id;      // of its driver context: the key in green_contexts()
  atomic<int> references{1};          // the owner, each stream made through it, each graph
  atomic<int> users{1};               // the owner and each stream made through it
  atomic<bool> destroy_at_end{true};  // false once the owner released the handle
  static void retain(void* self) noexcept {  // for a graph
    static_cast<green_state*>(self)->references.fetch_add(1);
  }
  static void drop(void* self) noexcept {  // a graph's, and the last step of the others
    auto* state = static_cast<green_state*>(self);
    if (state->references.fetch_sub(1) != 1) return;
    if (state->destroy_at_end.load()) {
      green_contexts().context_ending(state->context_id, true);  // curt's own things first
      destroy_green_context(state->handle);
    }
    delete state;
  }
  static void drop_user(void* self) noexcept {  // the owner's or a stream's
    auto* state = static_cast<green_state*>(self);
    if (state->users.fetch_sub(1) == 1 && !state->destroy_at_end.load())
      green_contexts().context_ending(state->context_id, false);
    drop(self);
  }
  /// The state of a green context just made (or adopted); on failure the caller still owns it.
  static green_state* make(CUgreenCtx h) {
    const unsigned long long id = green_context_id(h);
    auto* state = new green_state(h, id);
    try {
      green_contexts().context_made(id);
    } catch (...) {
      delete state;
      throw;
    }
    return state;
  }
};

inline unsigned long long next_split_id() noexcept {
  static atomic<unsigned long long> last{0};
  return last.fetch_add(1) + 1;
}

CURT_COLD inline std::string describe_split_flags(sm_split_flags flags) {
  std::string text;
  if (has_flag(flags, sm_split_flags::ignore_coscheduling)) text += ", ignore_coscheduling";
  if (has_flag(flags, sm_split_flags::max_cluster_size)) text += ", max_cluster_size";
  return text;
}

}  // namespace detail

/// A set of SMs of one device (a CUdevResource of type SM): a device's or a green context's whole
/// set, or a group or the remainder of a split. Plain data, cheap to copy; it owns nothing.
class sm_resource {
 public:
  /// SMs in the set.
  unsigned sm_count() const noexcept { return native_.sm.smCount; }
  /// The fewest SMs a group split from this set can have (without ignore_coscheduling).
  unsigned min_partition_size() const noexcept { return native_.sm.minSmPartitionSize; }
  /// SMs guaranteed to be co-scheduled on one GPU processing cluster; groups are multiples.
  unsigned coscheduled_alignment() const noexcept { return native_.sm.smCoscheduledAlignment; }
  curt::device device() const noexcept { return curt::device::from_ordinal_unchecked(device_); }
  sm_resource_kind kind() const noexcept { return kind_; }
  /// The split this came from (unique in the process, from 1); 0 for a whole set.
  unsigned long long split_id() const noexcept { return split_; }
  /// Its group's index in its split; for the remainder, the split's number of groups.
  unsigned index() const noexcept { return index_; }
  /// The driver's resource, for raw driver calls.
  const CUdevResource& native() const noexcept { return native_; }

  /// How many groups of at least `min_sm_count` SMs a split would make (the driver's dry run;
  /// nothing is split).
  unsigned max_groups(unsigned min_sm_count, sm_split_flags flags = sm_split_flags::none) const;

  /// Splits this whole set into up to `groups` groups of at least `min_sm_count` SMs (0: the
  /// driver's smallest) and the remainder, in one driver call (cuDevSmResourceSplitByCount).
  /// The sm_split says what was delivered; with sm_split_mode::exact anything but `groups`
  /// groups of exactly `min_sm_count` SMs throws cudaErrorInvalidResourceConfiguration.
  /// Refused: 0 groups (cudaErrorInvalidValue), more SMs than the set holds or a set that is a
  /// piece of a split (cudaErrorInvalidResourceConfiguration).
  sm_split split(unsigned groups, unsigned min_sm_count,
                 sm_split_flags flags = sm_split_flags::none,
                 sm_split_mode mode = sm_split_mode::at_least) const;

 private:
  friend class sm_split;
  friend class green_context;
  friend class green_context_ref;
  friend sm_resource device_sm_resource(curt::device d);
  sm_resource(const CUdevResource& native_resource, int ordinal, sm_resource_kind kind,
              unsigned long long split, unsigned index) noexcept
      : native_(native_resource), device_(ordinal), split_(split), index_(index), kind_(kind) {}

  detail::resource_tag tag() const noexcept {
    return detail::resource_tag{device_, split_, kind_, index_, sm_count()};
  }
  CURT_COLD std::string describe_split(unsigned groups, unsigned min_sm_count,
                                       sm_split_flags flags, bool exact) const {
    return "curt::sm_resource::split(" + std::to_string(groups) + " group" +
           (groups == 1 ? "" : "s") + " of at least " + std::to_string(min_sm_count) + " SMs" +
           detail::describe_split_flags(flags) + (exact ? ", exact" : "") + ") of " +
           detail::describe_resource(tag());
  }

  CUdevResource native_{};
  int device_ = -1;
  unsigned long long split_ = 0;
  unsigned index_ = 0;
  sm_resource_kind kind_ = sm_resource_kind::whole;
};

/// Every group and the remainder of one split, and what was asked for.
class sm_split {
 public:
  std::size_t group_count() const noexcept { return groups_.size(); }
  const std::vector<sm_resource>& groups() const noexcept { return groups_; }
  /// Group `i`; throws cudaErrorInvalidValue past the last.
  const sm_resource& group(std::size_t i) const {
    if (i >= groups_.size())
      detail::raise(cudaErrorInvalidValue, "curt::sm_split::group(" + std::to_string(i) + ")",
                    "the split made " + std::to_string(groups_.size()) + " group(s)", __FILE__,
                    __LINE__);
    return groups_[i];
  }
  /// SMs in each group as delivered (a split's groups are equal); 0 when it made none.
  unsigned group_sm_count() const noexcept { return groups_.empty() ? 0 : groups_[0].sm_count(); }
  /// The SMs no group took; sm_count() 0 when none was left.
  const sm_resource& remainder() const noexcept { return remainder_; }
  /// Groups `first_group` onwards and the remainder when it holds SMs: "everything else" for a
  /// green context next to one made of the first groups.
  std::vector<sm_resource> rest(std::size_t first_group) const {
    std::vector<sm_resource> left;
    for (std::size_t i = first_group; i < groups_.size(); ++i) left.push_back(groups_[i]);
    if (remainder_.sm_count() > 0) left.push_back(remainder_);
    return left;
  }
  unsigned requested_groups() const noexcept { return requested_groups_; }
  unsigned requested_sm_count() const noexcept { return requested_sms_; }
  sm_split_flags flags() const noexcept { return flags_; }
  /// True when the driver delivered exactly the groups and the size asked for.
  bool exact() const noexcept {
    return groups_.size() == requested_groups_ && group_sm_count() == requested_sms_;
  }
  /// The split's process-unique id (its pieces' split_id()).
  unsigned long long id() const noexcept { return remainder_.split_id(); }

 private:
  friend class sm_resource;
  sm_split(std::vector<sm_resource> groups, sm_resource remainder, unsigned requested_groups,
           unsigned requested_sms, sm_split_flags flags) noexcept
      : groups_(std::move(groups)),
        remainder_(remainder),
        requested_groups_(requested_groups),
        requested_sms_(requested_sms),
        flags_(flags) {}

  std::vector<sm_resource> groups_;
  sm_resource remainder_;
  unsigned requested_groups_;
  unsigned requested_sms_;
  sm_split_flags flags_;
};

/// Every SM of device `d` (cuDeviceGetDevResource): SM count, minimum partition size,
/// co-scheduling alignment; the start of every split.
inline sm_resource device_sm_resource(curt::device d) {
  CUdevice native_device = 0;
  CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &native_device, d.ordinal());
  CUdevResource native{};
  CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuDeviceGetDevResource, 12040)(
      native_device, &native, CU_DEV_RESOURCE_TYPE_SM);
  if (CURT_UNLIKELY(status != CUDA_SUCCESS))
    detail::throw_green(status, "cuDeviceGetDevResource(device " + std::to_string(d.ordinal()) +
                                    ", SM)",
                        __FILE__, __LINE__);
  return sm_resource(native, d.ordinal(), sm_resource_kind::whole, 0, 0);
}

inline unsigned sm_resource::max_groups(unsigned min_sm_count, sm_split_flags flags) const {
  if (detail::green_refusal refused =
          detail::split_request_refusal(kind_, sm_count(), 1, min_sm_count, false))
    detail::raise(refused.status,
                  "curt::sm_resource::max_groups(" + std::to_string(min_sm_count) + " SMs" +
                      detail::describe_split_flags(flags) + ") of " + detail::describe_resource(tag()),
                  refused.why, __FILE__, __LINE__);
  unsigned count = 0;
  CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuDevSmResourceSplitByCount, 12040)(
      nullptr, &count, &native_, nullptr, static_cast<unsigned>(flags), min_sm_count);
  if (CURT_UNLIKELY(status != CUDA_SUCCESS))
    detail::throw_green(status, "cuDevSmResourceSplitByCount(dry run, " +
                                    std::to_string(min_sm_count) + " SMs" +
                                    detail::describe_split_flags(flags) + ")",
                        __FILE__, __LINE__);
  return count;
}

inline sm_split sm_resource::split(unsigned groups, unsigned min_sm_count, sm_split_flags flags,
                                   sm_split_mode mode) const {
  const bool exact = mode == sm_split_mode::exact;
  if (detail::green_refusal refused =
          detail::split_request_refusal(kind_, sm_count(), groups, min_sm_count, exact))
    detail::raise(refused.status, describe_split(groups, min_sm_count, flags, exact), refused.why,
                  __FILE__, __LINE__);
  // The driver makes no more groups than the set has SMs: a larger capacity changes nothing.
  const unsigned capacity = groups < sm_count() ? groups : (sm_count() > 0 ? sm_count() : 1u);
  std::vector<CUdevResource> made(capacity);
  CUdevResource remaining{};
  unsigned count = capacity;
  CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuDevSmResourceSplitByCount, 12040)(
      made.data(), &count, &native_, &remaining, static_cast<unsigned>(flags), min_sm_count);
  if (CURT_UNLIKELY(status != CUDA_SUCCESS))
    detail::throw_green(status, describe_split(groups, min_sm_count, flags, exact), __FILE__,
                        __LINE__);
  if (count > capacity) count = capacity;
  const unsigned long long id = detail::next_split_id();
  std::vector<sm_resource> pieces;
  pieces.reserve(count);
  for (unsigned i = 0; i < count; ++i)
    pieces.push_back(sm_resource(made[i], device_, sm_resource_kind::group, id, i));
  sm_split result(std::move(pieces),
                  sm_resource(remaining, device_, sm_resource_kind::remainder, id, count), groups,
                  min_sm_count, flags);
  if (exact) {
    std::string why = detail::exact_split_shortfall(
        groups, min_sm_count, count, result.group_sm_count(), result.remainder().sm_count(),
        min_partition_size(), coscheduled_alignment(),
        has_flag(flags, sm_split_flags::ignore_coscheduling));
    if (!why.empty())
      detail::raise(cudaErrorInvalidResourceConfiguration,
                    describe_split(groups, min_sm_count, flags, exact), std::move(why), __FILE__,
                    __LINE__);
  }
  return result;
}

/// A non-owning green context handle (CUgreenCtx) and its device.
class green_context_ref {
 public:
  /// A green context made elsewhere (cuGreenCtxCreate) on device `d`; not null.
  green_context_ref(CUgreenCtx handle, curt::device d) : handle_(handle), device_(d.ordinal()) {
    if (handle == nullptr)
      detail::raise(cudaErrorInvalidResourceHandle, "curt::green_context_ref(null)",
                    "a green context handle cannot be null", __FILE__, __LINE__);
  }

  /// The native handle; throws when this refers to an empty, moved-from or released owner.
  CUgreenCtx get() const { return native("get()"); }
  /// False for a ref to an empty, moved-from or released owner.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }
  curt::device device() const {
    (void)native("device()");
    return curt::device::from_ordinal_unchecked(device_);
  }

  /// The green context's id, unique in the process (cuGreenCtxGetId; needs a CUDA 12.9 driver).
  unsigned long long id() const {
    CUgreenCtx h = native("id()");
    detail::green_call_scope in(h);
    unsigned long long value = 0;
    detail::check_green(CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxGetId, 12090)(h, &value),
                        "cuGreenCtxGetId(green context)", __FILE__, __LINE__);
    return value;
  }
  /// Its SMs (cuGreenCtxGetDevResource): a whole set, which split() partitions further.
  sm_resource resources() const {
    CUgreenCtx h = native("resources()");
    detail::green_call_scope in(h);
    CUdevResource native_resource{};
    detail::check_green(CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxGetDevResource, 12040)(
                            h, &native_resource, CU_DEV_RESOURCE_TYPE_SM),
                        "cuGreenCtxGetDevResource(green context, SM)", __FILE__, __LINE__);
    return sm_resource(native_resource, device_, sm_resource_kind::whole, 0, 0);
  }
  /// The driver context of this green context (cuCtxFromGreenCtx), for driver and runtime calls
  /// that need one current: runtime streams and events made while it is current belong to it
  /// (the caller's to destroy before the green context goes; see the file comment's Lifetime).
  /// It is a context of its own, not the device's primary one; current on one thread at a time.
  CUcontext context() const { return detail::green_driver_context(native("context()")); }

  /// Records in `e` all work submitted to this green context's streams so far
  /// (cuGreenCtxRecordEvent). `e` must be an event of the same device.
  void record(event_ref e) const {
    CUgreenCtx h = native("record(event)");
    cudaEvent_t event = e.get();
    detail::green_call_scope in(h);
    CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxRecordEvent, 12040)(h, event);
    if (CURT_UNLIKELY(status != CUDA_SUCCESS))
      detail::throw_green(status, "cuGreenCtxRecordEvent(green context, event)", __FILE__,
                          __LINE__, event_call_reason(status));
  }
  /// Later work on every stream of this green context waits for the work `e` captured
  /// (cuGreenCtxWaitEvent); `e` may be of any context or device.
  void wait(event_ref e) const {
    CUgreenCtx h = native("wait(event)");
    cudaEvent_t event = e.get();
    detail::green_call_scope in(h);
    CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxWaitEvent, 12040)(h, event);
    if (CURT_UNLIKELY(status != CUDA_SUCCESS))
      detail::throw_green(status, "cuGreenCtxWaitEvent(green context, event)", __FILE__,
                          __LINE__, event_call_reason(status));
  }

  friend bool operator==(const green_context_ref& a, const green_context_ref& b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(const green_context_ref& a, const green_context_ref& b) noexcept {
    return a.handle_ != b.handle_;
  }

 protected:
  struct from_state_t {};
  green_context_ref(CUgreenCtx handle, int ordinal, from_state_t) noexcept
      : handle_(handle), device_(ordinal) {}

  /// The handle for a driver call; throws, naming `operation`, when there is none.
  CUgreenCtx native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::green_context", operation);
  }

  CUgreenCtx handle_;
  int device_;

 private:
  CURT_COLD static std::string event_call_reason(CUresult status) {
    if (status == CUDA_ERROR_INVALID_HANDLE)
      return "the event must be an event of the green context's device";
    if (status == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
      return "a stream of this green context (or the event) is being captured: the driver "
             "refuses the whole-context call then and invalidates that capture; use the "
             "capturing stream's record or wait instead";
    return detail::green_failure_reason(status);
  }
};

/// An owning green context: a partition of a device's SMs (cuGreenCtxCreate). Move-only.
/// Destroying the owner destroys the green context once every stream made by make_stream() is
/// gone too (see the file comment).
class green_context : public green_context_ref {
 public:
  /// A green context on device `d` with the SMs of `resource`.
  green_context(curt::device d, const sm_resource& resource) : green_context(d, &resource, 1) {}
  /// A green context with the SMs of several resources: groups and the remainder of one split.
  green_context(curt::device d, std::initializer_list<sm_resource> resources)
      : green_context(d, resources.begin(), resources.size()) {}
  green_context(curt::device d, const std::vector<sm_resource>& resources)
      : green_context(d, resources.data(), resources.size()) {}
  /// An empty owner: every use throws until a green context is assigned.
  explicit green_context(no_handle_t) noexcept
      : green_context_ref(detail::state_handle<CUgreenCtx>(detail::handle_state::empty), -1,
                          from_state_t{}) {}

  /// Takes ownership of a green context made on device `d` (cuGreenCtxCreate); not null. If this
  /// throws, the handle stays the caller's.
  static green_context from_native_handle(curt::device d, CUgreenCtx handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::green_context::from_native_handle",
                    "only a created green context can be owned, not null", __FILE__, __LINE__);
    green_context owner(no_handle);
    owner.state_ = detail::green_state::make(handle);
    owner.handle_ = handle;
    owner.device_ = d.ordinal();
    return owner;
  }

  green_context(green_context&& other) noexcept
      : green_context_ref(other.take(detail::handle_state::moved_from), other.device_,
                          from_state_t{}),
        state_(std::exchange(other.state_, nullptr)) {}
  green_context& operator=(green_context&& other) noexcept {
    if (this != &other) {
      destroy();
      device_ = other.device_;
      state_ = std::exchange(other.state_, nullptr);
      handle_ = other.take(detail::handle_state::moved_from);
    }
    return *this;
  }
  green_context(const green_context&) = delete;
  green_context& operator=(const green_context&) = delete;
  ~green_context() { destroy(); }

  /// Gives up ownership; the caller destroys the green context (cuGreenCtxDestroy), after every
  /// stream made in it and every graph captured on one is gone, and after every thread that
  /// waited on one of its streams (stream::wait) has exited: such a thread keeps a reusable
  /// event in the context until then. The rest of what curt cached there (the stream of
  /// synchronous pool allocations) is destroyed here when no stream made through this owner is
  /// left, else with the last of them; graphs do not keep it (CUDA lets go of them at a moment
  /// the caller cannot see). After that, curt counts the context as any other: a synchronous
  /// pool allocation made while it is current leaves a stream of curt's in it, so make none.
  /// The owner is then "released".
  CUgreenCtx release() {
    CUgreenCtx h = native("release()");
    state_->destroy_at_end.store(false);  // before the owner's part is dropped
    detail::green_state::drop_user(state_);  // streams still made through it keep only the record
    state_ = nullptr;
    handle_ = detail::state_handle<CUgreenCtx>(detail::handle_state::released);
    return h;
  }

  /// A stream of this green context (cuGreenCtxStreamCreate): non-blocking (the driver accepts
  /// no other kind), with `priority` in the device's stream_priority_range() (lower runs first;
  /// out of range is an error, not clamped). The stream keeps the green context alive.
  curt::stream make_stream(int priority = 0) const {
    CUgreenCtx h = native("make_stream()");
    detail::check_stream_priority(curt::device::from_ordinal_unchecked(device_), priority,
                                  "curt::green_context::make_stream");
    CUstream created = nullptr;
    {
      detail::green_call_scope in(h);
      CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxStreamCreate, 12050)(
          &created, h, CU_STREAM_NON_BLOCKING, priority);
      if (CURT_UNLIKELY(status != CUDA_SUCCESS))
        detail::throw_green(status,
                            "cuGreenCtxStreamCreate(green context, non-blocking, priority " +
                                std::to_string(priority) + ")",
                            __FILE__, __LINE__);
    }
    curt::stream made = curt::stream::from_native_handle(created);
    state_->references.fetch_add(1);
    state_->users.fetch_add(1);
    try {
      detail::held_by_streams().add(
          created, detail::stream_hold{&detail::green_state::drop_user, state_,
                                       &detail::green_state::retain, &detail::green_state::drop});
    } catch (...) {
      state_->users.fetch_sub(1);
      state_->references.fetch_sub(1);  // `made` destroys the stream
      throw;
    }
    return made;
  }

 private:
  green_context(curt::device d, const sm_resource* first, std::size_t count)
      : green_context_ref(detail::state_handle<CUgreenCtx>(detail::handle_state::empty),
                          d.ordinal(), from_state_t{}) {
    std::vector<detail::resource_tag> tags(count);
    std::vector<CUdevResource> natives(count);
    unsigned total = 0;
    for (std::size_t i = 0; i < count; ++i) {
      tags[i] = first[i].tag();
      natives[i] = first[i].native_;
      total += first[i].sm_count();
    }
    if (detail::green_refusal refused = detail::partition_refusal(tags.data(), count, d.ordinal()))
      detail::raise(refused.status, describe_creation(d, count, total), refused.why, __FILE__,
                    __LINE__);
    CUdevResourceDesc description = nullptr;
    CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuDevResourceGenerateDesc, 12040)(
        &description, natives.data(), static_cast<unsigned>(count));
    if (CURT_UNLIKELY(status != CUDA_SUCCESS))
      detail::throw_green(status, "cuDevResourceGenerateDesc for " + describe_creation(d, count, total),
                          __FILE__, __LINE__);
    // The green context retains the primary context; one that is inactive would be created and
    // destroyed with each green context.
    const CUdevice native_device = detail::keep_primary_context(d.ordinal());
    CUgreenCtx created = nullptr;
    status = CURT_DETAIL_GREEN_FUNCTION(cuGreenCtxCreate, 12040)(&created, description,
                                                                 native_device,
                                                                 CU_GREEN_CTX_DEFAULT_STREAM);
    if (CURT_UNLIKELY(status != CUDA_SUCCESS))
      detail::throw_green(status, "cuGreenCtxCreate for " + describe_creation(d, count, total),
                          __FILE__, __LINE__);
    try {
      state_ = detail::green_state::make(created);
    } catch (...) {
      detail::destroy_green_context(created);
      throw;
    }
    handle_ = created;
  }

  CURT_COLD static std::string describe_creation(curt::device d, std::size_t count,
                                                 unsigned total) {
    return "curt::green_context(device " + std::to_string(d.ordinal()) + ", " +
           std::to_string(count) + " resource" + (count == 1 ? "" : "s") + " of " +
           std::to_string(total) + " SMs)";
  }
  CUgreenCtx take(detail::handle_state left) noexcept {
    return std::exchange(handle_, detail::state_handle<CUgreenCtx>(left));
  }
  void destroy() noexcept {
    if (state_) detail::green_state::drop_user(state_);
    state_ = nullptr;
    handle_ = detail::state_handle<CUgreenCtx>(detail::handle_state::empty);
  }

  detail::green_state* state_ = nullptr;
};

/// The green context `stream` belongs to (cuStreamGetGreenCtx); none for a stream of an
/// ordinary context. A default stream answers for the context current on the calling thread.
inline std::optional<green_context_ref> green_context_of(stream_ref stream) {
  cudaStream_t h = stream.get();
  CUgreenCtx green = nullptr;
  {
    detail::stream_context_scope in_context(h);
    CUresult status = CURT_DETAIL_GREEN_FUNCTION(cuStreamGetGreenCtx, 12040)(h, &green);
    if (CURT_UNLIKELY(status != CUDA_SUCCESS))
      detail::throw_green(status, "cuStreamGetGreenCtx(stream)", __FILE__, __LINE__);
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
  detail::stream_context_scope in_context(h);
  cudaDevResource resource{};
  detail::check(cudaStreamGetDevResource(h, &resource, cudaDevResourceTypeSm),
                "cudaStreamGetDevResource(stream, SM)", __FILE__, __LINE__);
  return resource.sm.smCount;
}
#endif

}  // namespace curt
