// curt/nccl.hpp: NCCL communicators and collectives on curt streams and buffers (opt-in: needs
// <nccl.h> and linking libnccl; CMake's target curt::nccl does both where NCCL is found).
//
//   // One process, every local GPU:
//   std::vector<curt::nccl_communicator> comms = curt::nccl_communicator::create_all(devices);
//   {
//     curt::nccl_group group;                       // ncclGroupStart ... ncclGroupEnd
//     for (std::size_t i = 0; i < comms.size(); ++i)
//       curt::all_reduce(send[i], recv[i], curt::nccl_op::sum, comms[i], streams[i]);
//   }
//   // Several processes: rank 0 makes an id (curt::nccl_unique_id()) and hands its bytes to the
//   // others; each process then makes curt::nccl_communicator(device, ranks, id, rank).
//
// - Collectives take ranges with data() and size() of device memory (curt buffers, async
//   buffers, spans) and infer NCCL's data type from the element type (nccl_type_of<T>): 8-, 32-
//   and 64-bit integers, float, double, and __half / __nv_bfloat16 where their headers are
//   included first. A temporary that owns its elements does not compile (freed before the stream
//   reaches the collective).
// - Sizes are checked before NCCL is called: all_reduce / broadcast / reduce need equal send and
//   receive sizes, all_gather a receive buffer of size() * send, reduce_scatter a send buffer of
//   size() * receive.
// - Errors: a failed NCCL call throws curt::nccl_error (a curt::cuda_error whose code() is in
//   nccl_category()) whose message has NCCL's result name and text and ncclGetLastError's
//   explanation ("Broadcast : invalid root 5 (root should be in the 0..1 range)").
// - Contexts: NCCL switches devices with cudaSetDevice and restores the device it found. curt
//   runs NCCL's calls where a context is current (the communicator's device's for its creation
//   and destruction, the stream's for a collective on a thread with none), so the thread is left
//   as it was and no context of an unused device is created.
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
                                              const char* file, int line) {
  std::string explanation = nccl_last_error();
  throw nccl_error(std::error_code(static_cast<int>(result), nccl_category()), std::move(call),
                   std::move(explanation), location(file, line));
}

// The call's description is built only on failure.
template <class Describe>
void check_nccl(ncclResult_t result, Describe&& describe, const char* file, int line) {
  if (CURT_UNLIKELY(result != ncclSuccess)) throw_nccl(result, describe(), file, line);
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

/// A communicator (non-owning, copyable): its handle, and the device, rank and rank count it was
/// made with (read once, so that collectives check sizes without asking NCCL).
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
  }

  ncclComm_t comm_ = nullptr;
  int ordinal_ = -1;
  int rank_ = -1;
  int size_ = 0;
};

namespace detail {

/// NCCL changes devices with cudaSetDevice, which makes the device's primary context current,
/// and restores the device it found, not the context (and nothing on a failure): this puts back
/// the context that was current when it was made (a user's own, a green context's), without
/// throwing.
class nccl_context_keeper {
 public:
  nccl_context_keeper() noexcept { saved_ = now(); }
  ~nccl_context_keeper() {
    if (now() != saved_) (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxSetCurrent, 4000)(saved_);
  }
  nccl_context_keeper(const nccl_context_keeper&) = delete;
  nccl_context_keeper& operator=(const nccl_context_keeper&) = delete;

 private:
  static CUcontext now() noexcept {
    CUcontext context = nullptr;
    (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetCurrent, 4000)(&context);
    return context;
  }
  CUcontext saved_ = nullptr;
};

}  // namespace detail

/// Owns an NCCL communicator: destroyed (ncclCommDestroy, which waits for its work) with the
/// owner. Move-only; a moved-from or released owner throws on use.
class nccl_communicator : public nccl_communicator_ref {
 public:
  /// One rank of `ranks` in a communicator of several processes (ncclCommInitRank), on device d.
  /// Every rank must make its communicator with the same id; this blocks until all have, so each
  /// rank needs its own thread or process (for the GPUs of one process, use create_all).
  nccl_communicator(curt::device d, int ranks, const ncclUniqueId& id, int rank) {
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclSuccess;
    {
      device_guard guard(d);  // NCCL makes the communicator on the current device
      detail::nccl_context_keeper keep;
      result = ncclCommInitRank(&comm, ranks, id, rank);
    }
    detail::check_nccl(
        result,
        [&] {
          return "ncclCommInitRank(ranks " + std::to_string(ranks) + ", rank " +
                 std::to_string(rank) + ", device " + std::to_string(d.ordinal()) + ")";
        },
        __FILE__, __LINE__);
    comm_ = comm;
    describe();
  }

  /// One communicator per device, all in this process (ncclCommInitAll): element i is rank i, on
  /// devices[i]. No device may appear twice.
  static std::vector<nccl_communicator> create_all(const std::vector<curt::device>& devices) {
    std::vector<int> ordinals;
    ordinals.reserve(devices.size());
    for (curt::device d : devices) ordinals.push_back(d.ordinal());
    if (CURT_UNLIKELY(ordinals.empty()))
      detail::raise(cudaErrorInvalidValue, "curt::nccl_communicator::create_all(no devices)",
                    "name at least one device", __FILE__, __LINE__);
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    ncclResult_t result = ncclSuccess;
    {
      // NCCL sets each device in turn and restores the one it found: let it find devices[0].
      device_guard guard(devices.front());
      detail::nccl_context_keeper keep;
      result = ncclCommInitAll(comms.data(), static_cast<int>(ordinals.size()), ordinals.data());
    }
    detail::check_nccl(
        result,
        [&] {
          std::string text = "ncclCommInitAll(devices";
          for (int o : ordinals) text += " " + std::to_string(o);
          return text + ")";
        },
        __FILE__, __LINE__);
    std::vector<nccl_communicator> owners;
    owners.reserve(comms.size());
    for (ncclComm_t comm : comms) owners.push_back(adopt(comm));
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
  void destroy() noexcept {
    if (comm_ == nullptr || detail::is_state_handle(comm_)) return;
    ncclComm_t comm = comm_;
    comm_ = state(detail::handle_state::empty);
    try {
      // NCCL switches to the communicator's device and back: let it find that device current.
      device_guard guard(curt::device::from_ordinal_unchecked(ordinal_));
      detail::nccl_context_keeper keep;
      ncclResult_t result = ncclCommDestroy(comm);
      if (result != ncclSuccess)
        throw nccl_error(std::error_code(static_cast<int>(result), nccl_category()),
                         "ncclCommDestroy", detail::nccl_last_error(),
                         detail::location(__FILE__, __LINE__));
    } catch (const std::exception& error) {
      detail::handle_error(error);
    }
  }
};

/// ncclGroupStart for a scope, ncclGroupEnd at its end: the collectives issued meanwhile (on one
/// communicator per device, from one thread) launch together. end() ends the group early and
/// throws on failure; the destructor reports a failure to the error handler instead. If an
/// exception leaves the scope after some ranks' collectives were issued, the others' are missing:
/// the group still ends (it must), and the issued ones wait for partners that never come, so
/// abort those communicators (ncclCommAbort) before waiting on their streams.
/// On a thread with no current context, an active primary context is current for the scope
/// (NCCL restores, with cudaSetDevice, the device it finds current).
class nccl_group {
 public:
  nccl_group() {
    detail::check_nccl(ncclGroupStart(), [] { return std::string("ncclGroupStart()"); },
                       __FILE__, __LINE__);
  }
  ~nccl_group() {
    if (!open_) return;
    open_ = false;
    ncclResult_t result = ncclGroupEnd();
    if (result != ncclSuccess) {
      try {
        throw nccl_error(std::error_code(static_cast<int>(result), nccl_category()),
                         "ncclGroupEnd", detail::nccl_last_error(),
                         detail::location(__FILE__, __LINE__));
      } catch (const std::exception& error) {
        detail::handle_error(error);
      }
    }
  }
  /// Ends the group now (ncclGroupEnd): launches its collectives; throws nccl_error on failure.
  void end() {
    if (!open_) return;
    open_ = false;
    detail::check_nccl(ncclGroupEnd(), [] { return std::string("ncclGroupEnd()"); }, __FILE__,
                       __LINE__);
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;

 private:
  detail::current_device_scope context_{detail::any_context};  // before the group starts
  detail::nccl_context_keeper keep_;  // after context_: puts back what the group end changed
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

/// A collective's stream must be on its communicator's device: NCCL would find out only when it
/// launches (at a group's end, after the other ranks' work may have gone), as an unhandled CUDA
/// error. Default streams are resolved on the communicator's device and need no check.
inline void check_collective_stream(cudaStream_t stream, const nccl_communicator_ref& comm,
                                    const char* operation) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return;
  int ordinal = -1;
  if (cudaStreamGetDevice(stream, &ordinal) != cudaSuccess) {
    (void)cudaGetLastError();  // NCCL will say what is wrong with the stream
    return;
  }
  const int expected = comm.device().ordinal();
  if (CURT_UNLIKELY(ordinal != expected))
    raise(cudaErrorInvalidValue, operation,
          "the stream is on device " + std::to_string(ordinal) + ", the communicator (rank " +
              std::to_string(comm.rank()) + ") on device " + std::to_string(expected) +
              ": a collective runs on its communicator's device; nothing was enqueued",
          __FILE__, __LINE__);
}

/// A collective's call: the stream checked, the stream's context current on a thread without
/// one, and whatever context was current before put back after NCCL's device switching.
class nccl_stream_scope {
 public:
  nccl_stream_scope(cudaStream_t stream, const nccl_communicator_ref& comm,
                    const char* operation)
      : in_context_(stream) {
    check_collective_stream(stream, comm, operation);
  }

 private:
  stream_context_scope in_context_;
  nccl_context_keeper keep_;  // after in_context_: restored before it pops
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
}

/// recv = every rank's send, in rank order (ncclAllGather): recv.size() == size() * send.size().
template <class Send, class Recv>
void all_gather(Send&& send, Recv&& recv, nccl_communicator_ref comm, stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
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
}

/// recv = this rank's block of op over every rank's send (ncclReduceScatter):
/// send.size() == size() * recv.size(); rank r receives block r.
template <class Send, class Recv>
void reduce_scatter(Send&& send, Recv&& recv, nccl_op op, nccl_communicator_ref comm,
                    stream_ref stream) {
  detail::check_collective_types<Send, Recv>();
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
}

}  // namespace curt
