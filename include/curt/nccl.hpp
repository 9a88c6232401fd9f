// curt/nccl.hpp: NCCL communicators and collectives on curt streams and buffers (opt-in: needs
// <nccl.h> and linking libnccl; CMake's target curt::nccl does both where NCCL is found, in the
// build tree and in the installed package).
//
//   // One process, every local GPU:
//   std::vector<curt::nccl_communicator> comms = curt::nccl_communicator::create_all(devices);
//   {
//     curt::nccl_group group;                       // ncclGroupStart ... ncclGroupEnd
//     for (std::size_t i = 0; i < comms.size(); ++i)
//       curt::all_reduce(send[i], recv[i], curt::nccl_op::sum, comms[i], streams[i]);
//   }
//   // Several processes: rank 0 makes an id (curt::nccl_unique_id()) and hands its 128 bytes
//   // (id.internal, NCCL_UNIQUE_ID_BYTES) to the others by any means; each process then makes
//   // curt::nccl_communicator(device, ranks, id, rank), one rank per process and device.
//
// - Collectives take ranges with data() and size() of device memory (curt buffers, async
//   buffers, spans) and infer NCCL's data type from the element type (nccl_type_of<T>): 8-, 32-
//   and 64-bit integers, float, double, and __half / __nv_bfloat16 where their headers are
//   included first. A temporary that owns its elements does not compile (freed before the stream
//   reaches the collective). The memory must be the communicator's device's (or mapped for it):
//   NCCL does not check it unless NCCL_CHECK_POINTERS=1.
// - Sizes are checked before NCCL is called: all_reduce / broadcast / reduce need equal send and
//   receive sizes, all_gather a receive buffer of size() * send, reduce_scatter a send buffer of
//   size() * receive. A collective's stream must be on its communicator's device.
// - Errors: a failed NCCL call throws curt::nccl_error (a curt::cuda_error whose code() is in
//   nccl_category()) whose message has NCCL's result name and text and ncclGetLastError's
//   explanation ("Broadcast : invalid root 5 (root should be in the 0..1 range)"). Errors met
//   later, while the work runs (a peer that died, a network failure), are not thrown by anything:
//   ask async_error(), and abort() the communicator.
// - Groups are all or nothing. Several ranks driven by one thread (create_all) must issue each
//   collective for all of them inside one nccl_group: NCCL launches them together at the group's
//   end. If anything goes wrong inside the scope -- an exception leaves it, curt or NCCL refuses a
//   collective (even one whose exception is caught inside), or cancel() is called -- NCCL's group
//   end launches none of the group's collectives, on any rank, and the communicators stay usable.
//   (NCCL's own rule for a refused call, which curt applies to its refusals too, by passing NCCL a
//   call it refuses: with NCCL_DEBUG=WARN that shows as "AllReduce : comm argument is NULL".)
//   Exception: NCCL (2.28) runs a collective of a communicator of one rank as soon as it is
//   issued; there is nothing to cancel, and nothing waits for a partner either.
// - Several processes: each process's collectives must match the others' (same order, sizes,
//   roots). When one process stops issuing them (an error, an exception), the others' collectives
//   wait forever on the device: their streams, stream synchronization, cudaFree and the
//   communicator's destruction all hang. Get out with abort() on the waiting communicators
//   (from any thread), before anything else waits; agreeing on it between processes is the
//   program's business (NCCL does not tell them).
// - Creation blocks until every rank has joined (ncclCommInitRank has no timeout: a rank that
//   never comes leaves the others waiting; NCCL's non-blocking mode, which would allow aborting
//   that wait, is not wrapped). A failed creation aborts what NCCL had made: nothing leaks.
// - Destruction (ncclCommDestroy) waits for the communicator's issued collectives, so they must
//   be able to finish; a communicator with an asynchronous error is aborted instead (NCCL refuses
//   to destroy it). Streams and buffers may go before or after their communicator: destroying a
//   stream does not wait, cudaFree waits for the whole device, and a stream-ordered (async)
//   buffer is freed in its stream's order, so free it on the collective's stream (or after
//   synchronizing it). In the usual order -- communicators first, then streams, then buffers --
//   everything is released after the work it served.
// - Threads: NCCL allows one thread at a time per communicator, and a group belongs to the thread
//   that opened it.
// - Contexts and devices: NCCL switches devices with cudaSetDevice and restores the device it
//   found (not the context; and some calls, like NCCL 2.28's ncclCommDestroy, not the device
//   either). curt runs NCCL's calls in a context it chooses: creation, destruction and abort in
//   the communicator's device's (the current one if it is of that device, else its primary
//   context), a collective on a thread with no context in its stream's, one on a default stream
//   (which names no device) in its communicator's device's primary context (refused while
//   another context of that device is current: NCCL would not order it after that context's
//   default stream), a group on a thread with
//   no context in an active primary context. Afterwards it puts back the context that was
//   current and, on a thread that had none, the runtime's current device (cudaGetDevice), with
//   cudaSetDevice and a pop, where that device's primary context is active. Where it is not,
//   putting the device back would make a context on a device the thread never used: the runtime
//   device then stays the one NCCL left.
//   nccl_unique_id(), nccl_version() and async_error() make no CUDA call.
// - Not wrapped (use get() and NCCL's API): point-to-point send/recv and all-to-all, communicator
//   configuration (ncclCommInitRankConfig: non-blocking mode, CTA counts), split and shrink,
//   buffer registration and ncclMemAlloc, user reduction operators.
#pragma once

#if !__has_include(<nccl.h>)
#  error "<curt/nccl.hpp> needs NCCL's <nccl.h>: install NCCL and link curt::nccl (CMake)"
#endif

#include <curt/device.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt {

namespace detail {

inline const char* nccl_result_name(int code) noexcept {
  switch (code) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult_t";
  }
}

class nccl_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "nccl"; }
  std::string message(int code) const override {
    return std::string(nccl_result_name(code)) + " (" +
           ncclGetErrorString(static_cast<ncclResult_t>(code)) + ")";
  }
};

}  // namespace detail

/// The error category of ncclResult_t values.
inline const std::error_category& nccl_category() noexcept {
  static const auto* category = new detail::nccl_category_impl;  // never destroyed
  return *category;
}

/// A failed NCCL call: what() names the call, NCCL's result and text, and what ncclGetLastError
/// said about it. code() is in nccl_category(); result() gives the ncclResult_t.
class nccl_error : public cuda_error {
 public:
  using cuda_error::cuda_error;
  ncclResult_t result() const noexcept { return static_cast<ncclResult_t>(code().value()); }
};

namespace detail {

// What NCCL said about its last failure on this thread (ncclGetLastError), without the newline.
CURT_COLD inline std::string nccl_last_error() {
  const char* last = ncclGetLastError(nullptr);
  std::string text = last != nullptr ? last : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

[[noreturn]] CURT_COLD inline void throw_nccl(ncclResult_t result, std::string call,
                                              std::string explanation, const char* file,
                                              int line) {
  throw nccl_error(std::error_code(static_cast<int>(result), nccl_category()), std::move(call),
                   std::move(explanation), location(file, line));
}
[[noreturn]] CURT_COLD inline void throw_nccl(ncclResult_t result, std::string call,
                                              const char* file, int line) {
  throw_nccl(result, std::move(call), nccl_last_error(), file, line);
}

// The call's description is built only on failure.
template <class Describe>
void check_nccl(ncclResult_t result, Describe&& describe, const char* file, int line) {
  if (CURT_UNLIKELY(result != ncclSuccess)) throw_nccl(result, describe(), file, line);
}

/// Cancels the calling thread's open NCCL group, if any: NCCL marks a group failed when a call
/// in it is refused, and its group end then launches none of the group's operations (and returns
/// that error). The call refused here is a collective on a null communicator, which NCCL turns
/// down before it looks at anything else (ncclInvalidArgument, "AllReduce : comm argument is
/// NULL" in ncclGetLastError and, with NCCL_DEBUG=WARN, in NCCL's log). Outside a group nothing
/// else happens. Makes no CUDA call; never throws.
inline void nccl_cancel_group() noexcept {
  (void)ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, nullptr, nullptr);
}

/// Runs `issue` (a collective's checks and its NCCL call); when it throws, cancels the thread's
/// NCCL group before the exception leaves: a collective curt refuses inside a group cancels the
/// group as one NCCL refuses does (NCCL has done that itself then), so that no rank's collectives
/// of the group are launched without the refused one.
template <class Issue>
void nccl_collective(Issue&& issue) {
  try {
    issue();
  } catch (...) {
    nccl_cancel_group();
    throw;
  }
}

template <class T>
constexpr bool nccl_type_known() {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return sizeof(T) == 1 || sizeof(T) == 4 || sizeof(T) == 8;
  else
    return std::is_same_v<T, float> || std::is_same_v<T, double>
#if defined(__CUDA_FP16_TYPES_EXIST__)
           || std::is_same_v<T, __half>
#endif
#if defined(__CUDA_BF16_TYPES_EXIST__)
           || std::is_same_v<T, __nv_bfloat16>
#endif
        ;
}

}  // namespace detail

/// NCCL's data type for elements of type T (const and volatile ignored).
template <class T>
constexpr ncclDataType_t nccl_type_of() noexcept {
  using U = std::remove_cv_t<T>;
  static_assert(detail::nccl_type_known<U>(),
                "curt: NCCL has no data type for this element type (it knows 8-, 32- and 64-bit "
                "integers, float, double, __half and __nv_bfloat16)");
  if constexpr (std::is_integral_v<U>) {
    if constexpr (sizeof(U) == 1) return std::is_signed_v<U> ? ncclInt8 : ncclUint8;
    else if constexpr (sizeof(U) == 4) return std::is_signed_v<U> ? ncclInt32 : ncclUint32;
    else return std::is_signed_v<U> ? ncclInt64 : ncclUint64;
  } else if constexpr (std::is_same_v<U, float>) {
    return ncclFloat32;
  } else if constexpr (std::is_same_v<U, double>) {
    return ncclFloat64;
#if defined(__CUDA_FP16_TYPES_EXIST__)
  } else if constexpr (std::is_same_v<U, __half>) {
    return ncclFloat16;
#endif
#if defined(__CUDA_BF16_TYPES_EXIST__)
  } else if constexpr (std::is_same_v<U, __nv_bfloat16>) {
    return ncclBfloat16;
#endif
  } else {
    return ncclNumTypes;
  }
}

/// NCCL's built-in reductions.
enum class nccl_op : int {
  sum = ncclSum,
  prod = ncclProd,
  max = ncclMax,
  min = ncclMin,
  avg = ncclAvg,
};

/// The version of the NCCL library loaded (ncclGetVersion), e.g. 22809 for 2.28.9.
inline int nccl_version() {
  int v = 0;
  detail::check_nccl(ncclGetVersion(&v), [] { return std::string("ncclGetVersion()"); }, __FILE__,
                     __LINE__);
  return v;
}

/// A new id for a communicator of several processes (ncclGetUniqueId): made once, by one
/// process (rank 0), and given to the others (its `internal` bytes, by any means) before each
/// makes its nccl_communicator(device, ranks, id, rank).
inline ncclUniqueId nccl_unique_id() {
  ncclUniqueId id{};
  detail::check_nccl(ncclGetUniqueId(&id), [] { return std::string("ncclGetUniqueId()"); },
                     __FILE__, __LINE__);
  return id;
}

class nccl_communicator;
namespace detail {
class nccl_stream_scope;
}

/// A communicator (non-owning, copyable): its handle, and the device, rank and rank count it was
/// made with (read once, so that collectives check sizes and streams without asking NCCL).
class nccl_communicator_ref {
 public:
  /// A ref to a communicator the caller made; asks NCCL for its device, rank and size.
  static nccl_communicator_ref from_native_handle(ncclComm_t comm) {
    nccl_communicator_ref ref;
    ref.comm_ = comm;
    ref.describe();
    return ref;
  }

  ncclComm_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(comm_) && comm_ != nullptr; }
  /// This communicator's rank, in [0, size()).
  int rank() const { return (void)native("rank()"), rank_; }
  /// The number of ranks.
  int size() const { return (void)native("size()"), size_; }
  /// The device this rank runs on.
  curt::device device() const {
    return (void)native("device()"), curt::device::from_ordinal_unchecked(ordinal_);
  }

  /// The first asynchronous error NCCL met on this communicator (ncclCommGetAsyncError);
  /// ncclSuccess when none, ncclInProgress while a non-blocking operation runs.
  ncclResult_t async_error() const {
    ncclResult_t error = ncclSuccess;
    ncclComm_t comm = native("async_error()");
    detail::check_nccl(ncclCommGetAsyncError(comm, &error),
                       [] { return std::string("ncclCommGetAsyncError()"); }, __FILE__, __LINE__);
    return error;
  }

  friend bool operator==(nccl_communicator_ref a, nccl_communicator_ref b) noexcept {
    return a.comm_ == b.comm_;
  }
  friend bool operator!=(nccl_communicator_ref a, nccl_communicator_ref b) noexcept {
    return a.comm_ != b.comm_;
  }

 protected:
  friend class detail::nccl_stream_scope;  // reads cu_device_
  nccl_communicator_ref() noexcept = default;
  ncclComm_t native(const char* operation) const {
    if (CURT_UNLIKELY(comm_ == nullptr))
      detail::raise(cudaErrorInvalidResourceHandle,
                    std::string("curt::nccl_communicator::") + operation,
                    "the communicator is null", __FILE__, __LINE__);
    return detail::usable_handle(comm_, "curt::nccl_communicator", operation);
  }
  void describe() {
    ncclComm_t comm = native("from_native_handle");
    auto what = [](const char* call) { return [call] { return std::string(call); }; };
    detail::check_nccl(ncclCommCuDevice(comm, &ordinal_), what("ncclCommCuDevice()"), __FILE__,
                       __LINE__);
    detail::check_nccl(ncclCommUserRank(comm, &rank_), what("ncclCommUserRank()"), __FILE__,
                       __LINE__);
    detail::check_nccl(ncclCommCount(comm, &size_), what("ncclCommCount()"), __FILE__, __LINE__);
    CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &cu_device_, ordinal_);
  }

  ncclComm_t comm_ = nullptr;
  int ordinal_ = -1;
  int rank_ = -1;
  int size_ = 0;
  CUdevice cu_device_ = -1;  // the driver's handle of device ordinal_ (streams name theirs so)
};

namespace detail {

/// NCCL's cudaSetDevice calls also set the thread's runtime device, which cudaGetDevice reports
/// (and which runtime calls and default-stream work use) while no context is current: on a thread
/// with none, the device curt made current for NCCL would stay the thread's runtime device after
/// curt popped the context. Made before that context is pushed, this puts the runtime device back
/// at the end, with cudaSetDevice and a pop, where that makes no context: where the old device's
/// primary context is active already (otherwise the runtime device stays as NCCL left it; making
/// a context on a device the thread never used would be worse). One cuCtxGetCurrent where a
/// context is current (none when the caller passes the context it read); nothing else then.
class nccl_runtime_device_keeper {
 public:
  nccl_runtime_device_keeper() : nccl_runtime_device_keeper(current_context()) {}
  /// `current`: the thread's current context, read by the caller just before.
  explicit nccl_runtime_device_keeper(CUcontext current) {
    if (CURT_LIKELY(current != nullptr)) return;
    if (cudaGetDevice(&saved_) != cudaSuccess) {
      (void)cudaGetLastError();
      saved_ = -1;
    }
  }
  ~nccl_runtime_device_keeper() {
    if (CURT_UNLIKELY(saved_ >= 0)) restore(saved_);
  }
  nccl_runtime_device_keeper(const nccl_runtime_device_keeper&) = delete;
  nccl_runtime_device_keeper& operator=(const nccl_runtime_device_keeper&) = delete;

 private:
  CURT_COLD static void restore(int saved) noexcept {
    try {
      if (current_context() != nullptr)
        return;  // a context is current again: cudaGetDevice means it, not the runtime device
      int now = -1;
      if (cudaGetDevice(&now) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
      }
      if (now == saved) return;
      CUdevice device = 0;
      CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &device, saved);
      if (!primary_context_active(device)) return;
      if (cudaSetDevice(saved) != cudaSuccess) {  // makes that primary context current...
        (void)cudaGetLastError();
        return;
      }
      CUcontext popped = nullptr;  // ... and the thread is left with none, as it was
      (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxPopCurrent, 4000)(&popped);
    } catch (...) {  // a failed driver query: the runtime device stays as NCCL left it
    }
  }
  int saved_ = -1;
};

/// NCCL changes devices with cudaSetDevice, which makes the device's primary context current,
/// and restores the device it found, not the context (and nothing on a failure): this makes
/// `saved` (a user's own context, a green context's, the one curt pushed for NCCL) current again
/// if NCCL replaced it. One cuCtxGetCurrent when nothing changed; never throws.
inline void nccl_put_back_context(CUcontext saved) noexcept {
  CUcontext now = nullptr;
  (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetCurrent, 4000)(&now);
  if (CURT_UNLIKELY(now != saved)) (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxSetCurrent, 4000)(saved);
}

/// Puts back, at the end of its scope, the context that was current when it was made (see
/// nccl_put_back_context).
class nccl_context_keeper {
 public:
  nccl_context_keeper() noexcept {
    (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetCurrent, 4000)(&saved_);
  }
  ~nccl_context_keeper() { nccl_put_back_context(saved_); }
  nccl_context_keeper(const nccl_context_keeper&) = delete;
  nccl_context_keeper& operator=(const nccl_context_keeper&) = delete;

 private:
  CUcontext saved_ = nullptr;
};

/// How many curt::nccl_group scopes this thread has open (ncclCommAbort inside one is deferred
/// by NCCL to the group's end).
inline int& nccl_group_depth() noexcept {
  thread_local int depth = 0;
  return depth;
}

}  // namespace detail

/// Owns an NCCL communicator: destroyed (ncclCommDestroy, which waits for its work) with the
/// owner, or aborted (ncclCommAbort) when NCCL has an asynchronous error on it. Move-only; a
/// moved-from, released or aborted owner throws on use.
class nccl_communicator : public nccl_communicator_ref {
 public:
  /// One rank of `ranks` in a communicator of several processes (ncclCommInitRank), on device d.
  /// Every rank must make its communicator with the same id; this blocks until all have, so each
  /// rank needs its own thread or process (for the GPUs of one process, use create_all). Ranks of
  /// different processes need different devices (NCCL refuses two on one GPU). Not inside an
  /// nccl_group (NCCL would defer the creation to the group's end). On failure, whatever NCCL had
  /// made is aborted before nccl_error is thrown.
  nccl_communicator(curt::device d, int ranks, const ncclUniqueId& id, int rank) {
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclSuccess;
    std::string explanation;
    {
      detail::nccl_runtime_device_keeper keep_device;
      device_guard guard(d);  // NCCL makes the communicator on the current device
      detail::nccl_context_keeper keep;
      result = ncclCommInitRank(&comm, ranks, id, rank);
      if (CURT_UNLIKELY(result != ncclSuccess)) {
        explanation = detail::nccl_last_error();  // before the abort says anything
        // A failure after NCCL allocated the communicator (bootstrap, transport setup) hands it
        // out with its error state; only an abort frees it (and its threads and sockets).
        if (comm != nullptr) (void)ncclCommAbort(comm);
      }
    }
    if (CURT_UNLIKELY(result != ncclSuccess))
      detail::throw_nccl(result,
                         "ncclCommInitRank(ranks " + std::to_string(ranks) + ", rank " +
                             std::to_string(rank) + ", device " + std::to_string(d.ordinal()) +
                             ")",
                         std::move(explanation), __FILE__, __LINE__);
    comm_ = comm;
    ordinal_ = d.ordinal();
    try {
      describe();
    } catch (...) {
      (void)abort_native(comm, ordinal_);
      comm_ = nullptr;
      throw;
    }
  }

  /// One communicator per device, all in this process (ncclCommInitAll): element i is rank i, on
  /// devices[i]. No device may appear twice. On failure, whatever NCCL had made is aborted.
  static std::vector<nccl_communicator> create_all(const std::vector<curt::device>& devices) {
    std::vector<int> ordinals;
    ordinals.reserve(devices.size());
    for (curt::device d : devices) ordinals.push_back(d.ordinal());
    if (CURT_UNLIKELY(ordinals.empty()))
      detail::raise(cudaErrorInvalidValue, "curt::nccl_communicator::create_all(no devices)",
                    "name at least one device", __FILE__, __LINE__);
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    ncclResult_t result = ncclSuccess;
    std::string explanation;
    {
      // NCCL sets each device in turn and restores the one it found: let it find devices[0].
      detail::nccl_runtime_device_keeper keep_device;
      device_guard guard(devices.front());
      detail::nccl_context_keeper keep;
      result = ncclCommInitAll(comms.data(), static_cast<int>(ordinals.size()), ordinals.data());
      if (CURT_UNLIKELY(result != ncclSuccess)) {
        explanation = detail::nccl_last_error();
        // NCCL's group end leaves the communicators of failed ranks allocated (and the others
        // waiting for them): abort every one it handed out.
        for (ncclComm_t& comm : comms) {
          if (comm != nullptr) (void)ncclCommAbort(comm);
          comm = nullptr;
        }
      }
    }
    if (CURT_UNLIKELY(result != ncclSuccess)) {
      std::string call = "ncclCommInitAll(devices";
      for (int o : ordinals) call += " " + std::to_string(o);
      detail::throw_nccl(result, call + ")", std::move(explanation), __FILE__, __LINE__);
    }
    std::vector<nccl_communicator> owners;
    std::size_t adopted = 0;
    try {
      owners.reserve(comms.size());
      for (; adopted < comms.size(); ++adopted) owners.push_back(adopt(comms[adopted]));
    } catch (...) {
      // The owners made so far destroy theirs; the rest are aborted here (NCCL frees the
      // communicators of one process when the last of them is destroyed or aborted).
      for (std::size_t k = adopted; k < comms.size(); ++k)
        (void)abort_native(comms[k], ordinals[k]);
      throw;
    }
    return owners;
  }
  /// ncclCommInitAll over every visible device.
  static std::vector<nccl_communicator> create_all() {
    std::vector<curt::device> all;
    for (curt::device d : devices()) all.push_back(d);
    return create_all(all);
  }

  /// Takes ownership of a communicator the caller made.
  static nccl_communicator from_native_handle(ncclComm_t comm) {
    if (comm == nullptr || detail::is_state_handle(comm))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::nccl_communicator::from_native_handle",
                    "only a created communicator can be owned, not null", __FILE__, __LINE__);
    return adopt(comm);
  }
  /// An empty owner: every use throws until a communicator is assigned.
  explicit nccl_communicator(no_handle_t) noexcept { comm_ = state(detail::handle_state::empty); }

  nccl_communicator(nccl_communicator&& other) noexcept : nccl_communicator_ref(other) {
    other.comm_ = state(detail::handle_state::moved_from);
  }
  nccl_communicator& operator=(nccl_communicator&& other) noexcept {
    if (this != &other) {
      destroy();
      static_cast<nccl_communicator_ref&>(*this) = other;
      other.comm_ = state(detail::handle_state::moved_from);
    }
    return *this;
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() { destroy(); }

  /// Aborts the communicator now (ncclCommAbort): its collectives still running on the device
  /// are told to stop (their results are undefined), and it is freed without waiting for them
  /// or for the other ranks. The way out when collectives can no longer finish (a rank that
  /// stopped issuing them, a peer that died, an asynchronous error): call it before anything
  /// waits on their streams or frees their buffers. May be called from another thread than the
  /// one issuing collectives (NCCL's rule for ncclCommAbort). The owner is left empty; throws
  /// nccl_error if NCCL reports a failure (the communicator is gone all the same).
  void abort() {
    ncclComm_t comm = native("abort()");
    if (CURT_UNLIKELY(detail::nccl_group_depth() != 0))
      detail::raise(cudaErrorNotPermitted,
                    "curt::nccl_communicator::abort() (rank " + std::to_string(rank_) + " of " +
                        std::to_string(size_) + " on device " + std::to_string(ordinal_) + ")",
                    "this thread is inside an nccl_group, where NCCL defers an abort to the "
                    "group's end, and a cancelled group drops it: abort outside the group (or "
                    "from another thread). Nothing was aborted",
                    __FILE__, __LINE__);
    comm_ = state(detail::handle_state::empty);
    detail::check_nccl(abort_native(comm, ordinal_),
                       [&] { return "ncclCommAbort(rank " + std::to_string(rank_) + " of " +
                                    std::to_string(size_) + " on device " +
                                    std::to_string(ordinal_) + ")"; },
                       __FILE__, __LINE__);
  }

  /// Gives up ownership: the caller destroys the communicator.
  ncclComm_t release() {
    ncclComm_t comm = native("release()");
    comm_ = state(detail::handle_state::released);
    return comm;
  }

 private:
  nccl_communicator() noexcept = default;
  static ncclComm_t state(detail::handle_state s) noexcept {
    return detail::state_handle<ncclComm_t>(s);
  }
  static nccl_communicator adopt(ncclComm_t comm) {
    nccl_communicator owner;
    owner.comm_ = comm;
    try {
      owner.describe();
    } catch (...) {
      owner.comm_ = nullptr;  // the caller keeps ownership of what failed
      throw;
    }
    return owner;
  }
  // ncclCommAbort in the device's context (NCCL switches to the communicator's device and may
  // leave it current).
  static ncclResult_t abort_native(ncclComm_t comm, int ordinal) {
    detail::nccl_runtime_device_keeper keep_device;
    device_guard guard(curt::device::from_ordinal_unchecked(ordinal));
    detail::nccl_context_keeper keep;
    return ncclCommAbort(comm);
  }
  void destroy() noexcept {
    if (comm_ == nullptr || detail::is_state_handle(comm_)) return;
    ncclComm_t comm = comm_;
    comm_ = state(detail::handle_state::empty);
    try {
      // NCCL switches to the communicator's device: let it find that device current.
      detail::nccl_runtime_device_keeper keep_device;
      device_guard guard(curt::device::from_ordinal_unchecked(ordinal_));
      detail::nccl_context_keeper keep;
      // ncclCommDestroy refuses a communicator with an asynchronous error (a peer that died, a
      // network failure): it returns that error and frees nothing (NCCL 2.28 also leaves the
      // thread inside a group then). Such a communicator is aborted, which is what frees it.
      ncclResult_t async = ncclSuccess;
      const bool healthy = ncclCommGetAsyncError(comm, &async) == ncclSuccess &&
                           (async == ncclSuccess || async == ncclInProgress);
      const char* call = healthy ? "ncclCommDestroy" : "ncclCommAbort";
      ncclResult_t result = healthy ? ncclCommDestroy(comm) : ncclCommAbort(comm);
      if (result != ncclSuccess)
        throw nccl_error(std::error_code(static_cast<int>(result), nccl_category()), call,
                         detail::nccl_last_error(), detail::location(__FILE__, __LINE__));
    } catch (const std::exception& error) {
      detail::report_caught(error);
    }
  }
};

/// ncclGroupStart for a scope, ncclGroupEnd at its end: the collectives issued meanwhile (on one
/// communicator per device, from one thread) launch together. end() ends the group early and
/// throws on failure; the destructor reports a failure to the error handler instead.
/// All or nothing: when an exception leaves the scope, when a collective of the group is
/// refused (by curt or by NCCL, even if its exception is caught inside the scope), or on
/// cancel(), NCCL launches none of the group's collectives, on any of this thread's ranks (a
/// rank whose collectives went and another's that did not would wait for each other forever).
/// The group still ends (ncclGroupEnd is always called), and the communicators stay usable. A
/// refused collective makes end() throw (and the destructor report) the refusal's error; an
/// exception leaving the scope is the story, and the group's end adds nothing to it. Groups
/// nest (NCCL counts them): the outermost launches, and one cancelled cancels them all. (A
/// non-blocking communicator, made with ncclCommInitRankConfig and adopted, gets a cancellation
/// as its asynchronous error: NCCL's rule for any failed group.)
/// On a thread with no current context, an active primary context is current for the scope
/// (NCCL restores, with cudaSetDevice, the device it finds current).
class nccl_group {
 public:
  nccl_group() : context_(detail::current_context()), keep_device_(context_) {
    if (CURT_UNLIKELY(context_ == nullptr)) {
      in_context_.emplace(detail::any_context);
      context_ = detail::current_context();
    }
    detail::check_nccl(ncclGroupStart(), [] { return std::string("ncclGroupStart()"); },
                       __FILE__, __LINE__);
    ++detail::nccl_group_depth();
  }
  ~nccl_group() {
    if (!open_) return;
    if (std::uncaught_exceptions() > uncaught_) {  // unwinding: launch nothing, report nothing
      cancel();
      return;
    }
    ncclResult_t result = close(ncclGroupEnd());
    if (result != ncclSuccess) {
      try {
        throw nccl_error(std::error_code(static_cast<int>(result), nccl_category()),
                         "ncclGroupEnd", detail::nccl_last_error(),
                         detail::location(__FILE__, __LINE__));
      } catch (const std::exception& error) {
        detail::report_caught(error);
      }
    }
  }
  /// Ends the group now (ncclGroupEnd): launches its collectives; throws nccl_error on failure
  /// (then none was launched).
  void end() {
    if (!open_) return;
    detail::check_nccl(close(ncclGroupEnd()), [] { return std::string("ncclGroupEnd()"); },
                       __FILE__, __LINE__);
  }
  /// Ends the group now without launching any of its collectives (see above): for a program that
  /// finds, after issuing some, that it must not go on. Nothing is thrown or reported.
  void cancel() noexcept {
    if (!open_) return;
    detail::nccl_cancel_group();
    // ncclGroupEnd returns the cancellation's ncclInvalidArgument (or an earlier error).
    (void)close(ncclGroupEnd());
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;

 private:
  // After ncclGroupEnd: the group is closed, and the thread's context is what it was before
  // NCCL's device switching (at once, not at the end of the scope).
  ncclResult_t close(ncclResult_t result) noexcept {
    open_ = false;
    --detail::nccl_group_depth();
    detail::nccl_put_back_context(context_);
    return result;
  }

  // The context the group runs in: the one current when it was made, else the active primary
  // context in_context_ pushed (popped at the end of the scope, after close() put it back).
  CUcontext context_ = nullptr;
  detail::nccl_runtime_device_keeper keep_device_;  // before in_context_: restores after the pop
  std::optional<detail::current_device_scope> in_context_;  // only on a thread with no context
  int uncaught_ = std::uncaught_exceptions();
  bool open_ = true;
};

namespace detail {

inline const char* nccl_op_name(nccl_op op) noexcept {
  switch (op) {
    case nccl_op::sum: return "sum";
    case nccl_op::prod: return "prod";
    case nccl_op::max: return "max";
    case nccl_op::min: return "min";
    case nccl_op::avg: return "avg";
  }
  return "op";
}

// The driver function behind the stream check (CUDA 12.8), typed like curt's own in
// detail/driver_lookup.hpp: no <cuda.h> needed.
namespace driver_fn {
using cuStreamGetDevice_v12080 = int(CURT_DETAIL_DRIVER_API*)(CUstream stream,
                                                               CUdevice_v1* device);
}

/// A collective's call, with the fewest driver calls that keep the rules of the file comment: the
/// current context is read once before NCCL's call and once after it (and made current again if
/// NCCL's device switching replaced it), and a named stream's device is checked with one
/// cuStreamGetDevice. On a thread with no context, the stream's context is current for the call
/// (and the runtime device is put back afterwards, see nccl_runtime_device_keeper). A default
/// stream names no device: it is resolved on the communicator's device, in its primary context
/// (pushed for the call unless current), as NCCL itself does before it launches a group (a
/// communicator of one rank runs its collective at once, in the current context); with another
/// context of that device current it is refused (see require_primary).
class nccl_stream_scope {
 public:
  nccl_stream_scope(cudaStream_t stream, const nccl_communicator_ref& comm, const char* operation)
      : context_(current_context()), keep_device_(context_) {
    if (is_default_stream_handle(stream)) {
      if (CURT_UNLIKELY(context_ == nullptr || !current_on(comm.cu_device_)))
        enter_primary(comm.ordinal_);
      else
        require_primary(comm, operation);
      return;
    }
    if (CURT_UNLIKELY(context_ == nullptr)) {
      if (CUcontext own = stream_context(stream)) {
        pushed_.push(own);
        context_ = own;
      } else {
        enter_primary(comm.ordinal_);  // the driver cannot tell: NCCL will say what is wrong
      }
    }
    check_device(stream, comm, operation);
  }
  ~nccl_stream_scope() { nccl_put_back_context(context_); }
  nccl_stream_scope(const nccl_stream_scope&) = delete;
  nccl_stream_scope& operator=(const nccl_stream_scope&) = delete;

 private:
  static bool current_on(CUdevice device) {
    CUdevice current = -1;
    return CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetDevice, 2000)(&current) == 0 && current == device;
  }
  // A default stream is the current context's. NCCL launches a group of several ranks in the
  // device's primary context (cudaSetDevice), on that context's default stream: with another
  // context of the device current (a green context's, a user's), the collective would not be
  // ordered after the work the caller put on "the default stream". Refused, saying so.
  void require_primary(const nccl_communicator_ref& comm, const char* operation) {
    if (CURT_LIKELY(primary_context_active(comm.cu_device_))) {
      retained_primary_context primary;
      if (CURT_LIKELY(primary.retain(comm.cu_device_) == context_)) return;
    }
    raise(cudaErrorNotSupported, operation,
          "a default stream with a context of device " + std::to_string(comm.ordinal_) +
              " current that is not its primary context (a green context's or a user's): NCCL "
              "runs the collective on the primary context's default stream, not ordered after "
              "this context's; pass a named stream of that context; nothing was enqueued",
          __FILE__, __LINE__);
  }
  // Device `ordinal`'s primary context, current for the call (kept active: see
  // keep_primary_context).
  CURT_COLD void enter_primary(int ordinal) {
    context_ = primary_.retain(keep_primary_context(ordinal));
    pushed_.push(context_);
  }
  /// A collective's named stream must be on its communicator's device: NCCL would find out only
  /// when it launches (at a group's end, after the other ranks' work may have gone), as an
  /// unhandled CUDA error. A stream the driver cannot tell the device of is left to NCCL.
  static void check_device(cudaStream_t stream, const nccl_communicator_ref& comm,
                           const char* operation) {
    CUdevice device = -1;
    if (CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetDevice, 12080)(stream, &device) != 0) return;
    if (CURT_UNLIKELY(device != comm.cu_device_)) refuse(stream, device, comm, operation);
  }
  [[noreturn]] CURT_COLD static void refuse(cudaStream_t stream, CUdevice device,
                                            const nccl_communicator_ref& comm,
                                            const char* operation) {
    int ordinal = static_cast<int>(device);  // the runtime's ordinal, where it can tell
    if (cudaStreamGetDevice(stream, &ordinal) != cudaSuccess) (void)cudaGetLastError();
    raise(cudaErrorInvalidValue, operation,
          "the stream is on device " + std::to_string(ordinal) + ", the communicator (rank " +
              std::to_string(comm.rank_) + ") on device " + std::to_string(comm.ordinal_) +
              ": a collective runs on its communicator's device; nothing was enqueued",
          __FILE__, __LINE__);
  }

  // Declared in this order: put back (the destructor), popped, released, then the runtime
  // device restored.
  CUcontext context_;  // what must be current when NCCL's call returns
  nccl_runtime_device_keeper keep_device_;
  retained_primary_context primary_;
  pushed_context pushed_;
};

CURT_COLD inline std::string describe_collective(const char* call, std::size_t count,
                                                 ncclDataType_t type, const char* op, int root,
                                                 nccl_communicator_ref comm) {
  std::string text = std::string(call) + "(count " + std::to_string(count) + ", ncclDataType_t " +
                     std::to_string(static_cast<int>(type));
  if (op) text += std::string(", ") + op;
  if (root >= 0) text += ", root " + std::to_string(root);
  text += ", rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
          " on device " + std::to_string(comm.device().ordinal()) + ")";
  return text;
}

[[noreturn]] CURT_COLD inline void throw_collective_sizes(const char* call, std::size_t send,
                                                          std::size_t receive, std::string rule) {
  raise(cudaErrorInvalidValue,
        std::string(call) + "(send of " + std::to_string(send) + " elements, receive of " +
            std::to_string(receive) + " elements)",
        std::move(rule), __FILE__, __LINE__);
}

template <class Send, class Recv>
constexpr void check_collective_types() {
  static_assert(is_range_v<Send> && is_range_v<Recv>,
                "curt: NCCL collectives take ranges with data() and size() of device memory");
  static_assert(std::is_same_v<range_value_t<Send>, range_value_t<Recv>>,
                "curt: the send and receive ranges of a collective must have one element type");
  static_assert(!std::is_const_v<element_of_t<Recv>>,
                "curt: the receive range of a collective must be writable");
}

}  // namespace detail

/// recv = op over every rank's send (ncclAllReduce), on `stream`. send and recv (equal sizes)
/// may be the same memory (in place).
template <class Send, class Recv>
void all_reduce(Send&& send, Recv&& recv, nccl_op op, nccl_communicator_ref comm,
                stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
  detail::nccl_collective([&] {
    detail::check_kept_range<Recv>(recv, "curt::all_reduce: the receive range");
    detail::check_kept_range<Send>(send, "curt::all_reduce: the send range");
    using T = detail::range_value_t<Recv>;
    const std::size_t n = recv.size();
    if (CURT_UNLIKELY(static_cast<std::size_t>(send.size()) != n))
      detail::throw_collective_sizes("curt::all_reduce", send.size(), n,
                                     "send and receive must have the same size");
    cudaStream_t h = stream.get();
    ncclComm_t c = comm.get();
    detail::nccl_stream_scope in_context(h, comm, "curt::all_reduce");
    detail::check_nccl(ncclAllReduce(send.data(), recv.data(), n, nccl_type_of<T>(),
                                     static_cast<ncclRedOp_t>(op), c, h),
                       [&] {
                         return detail::describe_collective("ncclAllReduce", n, nccl_type_of<T>(),
                                                            detail::nccl_op_name(op), -1, comm);
                       },
                       __FILE__, __LINE__);
  });
}
/// In place: data = op over every rank's data.
template <class Data>
void all_reduce(Data&& data, nccl_op op, nccl_communicator_ref comm, stream_ref stream) {
  all_reduce(data, std::forward<Data>(data), op, comm, stream);
}

/// recv = root's send on every rank (ncclBroadcast); send is read on the root only. Equal sizes.
template <class Send, class Recv>
void broadcast(Send&& send, Recv&& recv, int root, nccl_communicator_ref comm,
               stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
  detail::nccl_collective([&] {
    detail::check_kept_range<Recv>(recv, "curt::broadcast: the receive range");
    detail::check_kept_range<Send>(send, "curt::broadcast: the send range");
    using T = detail::range_value_t<Recv>;
    const std::size_t n = recv.size();
    if (CURT_UNLIKELY(static_cast<std::size_t>(send.size()) != n))
      detail::throw_collective_sizes("curt::broadcast", send.size(), n,
                                     "send and receive must have the same size");
    cudaStream_t h = stream.get();
    ncclComm_t c = comm.get();
    detail::nccl_stream_scope in_context(h, comm, "curt::broadcast");
    detail::check_nccl(ncclBroadcast(send.data(), recv.data(), n, nccl_type_of<T>(), root, c, h),
                       [&] {
                         return detail::describe_collective("ncclBroadcast", n, nccl_type_of<T>(),
                                                            nullptr, root, comm);
                       },
                       __FILE__, __LINE__);
  });
}
/// In place: data = root's data on every rank.
template <class Data>
void broadcast(Data&& data, int root, nccl_communicator_ref comm, stream_ref stream) {
  broadcast(data, std::forward<Data>(data), root, comm, stream);
}

/// recv on `root` = op over every rank's send (ncclReduce). recv matters on the root only, where
/// it must have send's size; other ranks may pass any range (an empty one: its size is ignored).
template <class Send, class Recv>
void reduce(Send&& send, Recv&& recv, nccl_op op, int root, nccl_communicator_ref comm,
            stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
  detail::nccl_collective([&] {
    detail::check_kept_range<Recv>(recv, "curt::reduce: the receive range");
    detail::check_kept_range<Send>(send, "curt::reduce: the send range");
    using T = detail::range_value_t<Recv>;
    const std::size_t n = send.size();
    if (CURT_UNLIKELY(comm.rank() == root && static_cast<std::size_t>(recv.size()) != n))
      detail::throw_collective_sizes("curt::reduce", n, recv.size(),
                                     "on the root, send and receive must have the same size");
    cudaStream_t h = stream.get();
    ncclComm_t c = comm.get();
    detail::nccl_stream_scope in_context(h, comm, "curt::reduce");
    detail::check_nccl(ncclReduce(send.data(), recv.data(), n, nccl_type_of<T>(),
                                  static_cast<ncclRedOp_t>(op), root, c, h),
                       [&] {
                         return detail::describe_collective("ncclReduce", n, nccl_type_of<T>(),
                                                            detail::nccl_op_name(op), root, comm);
                       },
                       __FILE__, __LINE__);
  });
}

/// recv = every rank's send, in rank order (ncclAllGather): recv.size() == size() * send.size().
template <class Send, class Recv>
void all_gather(Send&& send, Recv&& recv, nccl_communicator_ref comm, stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
  detail::nccl_collective([&] {
    detail::check_kept_range<Recv>(recv, "curt::all_gather: the receive range");
    detail::check_kept_range<Send>(send, "curt::all_gather: the send range");
    using T = detail::range_value_t<Recv>;
    const std::size_t n = send.size();
    if (CURT_UNLIKELY(static_cast<std::size_t>(recv.size()) != n * std::size_t(comm.size())))
      detail::throw_collective_sizes("curt::all_gather", n, recv.size(),
                                     "the receive range must hold the send range of each of the " +
                                         std::to_string(comm.size()) + " ranks");
    cudaStream_t h = stream.get();
    ncclComm_t c = comm.get();
    detail::nccl_stream_scope in_context(h, comm, "curt::all_gather");
    detail::check_nccl(ncclAllGather(send.data(), recv.data(), n, nccl_type_of<T>(), c, h),
                       [&] {
                         return detail::describe_collective("ncclAllGather", n, nccl_type_of<T>(),
                                                            nullptr, -1, comm);
                       },
                       __FILE__, __LINE__);
  });
}

/// recv = this rank's block of op over every rank's send (ncclReduceScatter):
/// send.size() == size() * recv.size(); rank r receives block r.
template <class Send, class Recv>
void reduce_scatter(Send&& send, Recv&& recv, nccl_op op, nccl_communicator_ref comm,
                    stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
  detail::nccl_collective([&] {
    detail::check_kept_range<Recv>(recv, "curt::reduce_scatter: the receive range");
    detail::check_kept_range<Send>(send, "curt::reduce_scatter: the send range");
    using T = detail::range_value_t<Recv>;
    const std::size_t n = recv.size();
    if (CURT_UNLIKELY(static_cast<std::size_t>(send.size()) != n * std::size_t(comm.size())))
      detail::throw_collective_sizes("curt::reduce_scatter", send.size(), n,
                                     "the send range must hold one receive range for each of the " +
                                         std::to_string(comm.size()) + " ranks");
    cudaStream_t h = stream.get();
    ncclComm_t c = comm.get();
    detail::nccl_stream_scope in_context(h, comm, "curt::reduce_scatter");
    detail::check_nccl(ncclReduceScatter(send.data(), recv.data(), n, nccl_type_of<T>(),
                                         static_cast<ncclRedOp_t>(op), c, h),
                       [&] {
                         return detail::describe_collective("ncclReduceScatter", n,
                                                            nccl_type_of<T>(),
                                                            detail::nccl_op_name(op), -1, comm);
                       },
                       __FILE__, __LINE__);
  });
}

}  // namespace curt
