// curt/multi_gpu/nccl.hpp: NCCL communicators and collectives on curt streams and buffers
// (opt-in: needs <nccl.h> and libnccl; CMake's target curt::nccl brings both where NCCL is found).
//
//   std::vector<curt::nccl_communicator> comms = curt::nccl_communicator::create_all(devices);
//   {
//     curt::nccl_group group;                       // ncclGroupStart ... ncclGroupEnd
//     for (std::size_t i = 0; i < comms.size(); ++i)
//       curt::all_reduce(send[i], recv[i], curt::nccl_op::sum, comms[i], streams[i]);
//   }
//   // Several processes: rank 0 makes an id (curt::nccl_unique_id()) and hands its bytes to the
//   // others; each makes curt::nccl_communicator(device, ranks, id, rank).
//
// Collectives take ranges on the communicator's device; sizes and the stream's device are checked
// first; nccl_group is all or nothing. Processes must issue matching collectives: if one stops, the
// rest hang on the device (streams, cudaFree, destruction) until abort() on theirs (any thread).
//
// Contexts: NCCL switches devices with cudaSetDevice and restores the device, not the context.
// curt runs its calls in the communicator's device's context (creation, destruction, abort), the
// stream's (a collective; a default stream: its device's primary context, refused while another
// context of that device is current, which NCCL would not order after), an active primary
// context (a group on a thread with none), and puts back the context and the runtime device.
#pragma once

#if !__has_include(<nccl.h>)
#  error "<curt/nccl.hpp> needs NCCL's <nccl.h>: install NCCL and link curt::nccl (CMake)"
#endif

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/range.hpp>

#include <nccl.h>

#include <cstddef>
#include <exception>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt::detail::driver_fn {
CURT_DETAIL_DRIVER_TYPE(cuCtxSetCurrent_v4000, CUcontext context);
CURT_DETAIL_DRIVER_TYPE(cuStreamGetDevice_v12080, CUstream stream, CUdevice* device);
}  // namespace curt::detail::driver_fn

namespace curt {
namespace detail {
class nccl_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "nccl"; }
  std::string message(int code) const override {  // "ncclInvalidArgument (invalid argument)"
    static const char* const names[] = {
        "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
        "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
    return fmt("%s (%s)", code >= 0 && code < 8 ? names[code] : "ncclResult_t",
               ncclGetErrorString(static_cast<ncclResult_t>(code)));
  }
};
}  // namespace detail

/// The error category of ncclResult_t values (never destroyed).
inline const std::error_category& nccl_category() noexcept {
  static const auto* category = new detail::nccl_category_impl;
  return *category;
}

/// A failed NCCL call: what() names the call, NCCL's result and text, and ncclGetLastError's.
class nccl_error : public cuda_error {
 public:
  using cuda_error::cuda_error;
  /// NCCL's result: code().value() as an ncclResult_t.
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

/// detail::check of an ncclResult_t: nccl_error in NCCL's category, explained by ncclGetLastError.
template <>
struct status_traits<ncclResult_t> {
  static const std::error_category& category() noexcept { return nccl_category(); }
  using error = nccl_error;
  static std::string explain() { return nccl_last_error(); }
};
/// Cancels the thread's open NCCL group, if any: NCCL marks a group failed when a call in it is
/// refused (a collective on a null communicator), and its end then launches nothing.
inline void nccl_cancel_group() noexcept {
  (void)ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, nullptr, nullptr);
}
/// Makes `saved` current again if NCCL's device switching replaced it.
inline void nccl_put_back(CUcontext saved) noexcept {
  CUcontext now = nullptr;
  (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetCurrent, 4000)(&now);
  if (CURT_UNLIKELY(now != saved)) (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxSetCurrent, 4000)(saved);
}

/// On a thread with no context, NCCL's cudaSetDevice changed the runtime device too: puts `saved`
/// back (cudaSetDevice and a pop) where that makes no context (its primary context is active).
CURT_COLD inline void nccl_restore_runtime_device(int saved) noexcept {
  try {
    int now = -1;
    if (current_context() == nullptr && cudaGetDevice(&now) == cudaSuccess && now != saved &&
        primary_context_active(saved) && cudaSetDevice(saved) == cudaSuccess) {
      CUcontext popped = nullptr;  // cudaSetDevice made it current: the thread had none
      (void)CURT_DETAIL_DRIVER_FUNCTION(cuCtxPopCurrent, 4000)(&popped);
    }
    (void)cudaGetLastError();
  } catch (...) {  // a failed driver query: the runtime device stays as NCCL left it
  }
}

/// Runs `call` (NCCL's) in the scope `enter()` returns (a device_guard, a context_scope), then puts
/// back the context that scope made current and, on a thread that had none, the runtime device.
template <class Enter, class Call>
ncclResult_t nccl_call(Enter&& enter, Call&& call) {
  int runtime_device = -1;
  if (current_context() == nullptr && cudaGetDevice(&runtime_device) != cudaSuccess)
    runtime_device = ((void)cudaGetLastError(), -1);
  ncclResult_t result = ncclSuccess;
  {
    auto in = enter();
    const CUcontext inside = current_context();
    result = call();
    nccl_put_back(inside);
  }
  if (runtime_device >= 0) nccl_restore_runtime_device(runtime_device);
  return result;
}
template <class Call>  // in device `ordinal`'s context: creation, destruction, abort
ncclResult_t nccl_on_device(int ordinal, Call&& call) {
  return nccl_call([&] { return device_guard(device::from_ordinal_unchecked(ordinal)); }, call);
}
struct nccl_traits;
struct nccl_collectives;
}  // namespace detail

/// NCCL's data type for elements of type T (const and volatile ignored): 8-, 32- and 64-bit
/// integers, float, double, and __half / __nv_bfloat16 where their headers are included first.
template <class T>
constexpr ncclDataType_t nccl_type_of() noexcept {
  using U = std::remove_cv_t<T>;
  constexpr bool integer = std::is_integral_v<U> && !std::is_same_v<U, bool>;
  constexpr bool is_signed = std::is_signed_v<U>;
  constexpr ncclDataType_t type =
      integer && sizeof(U) == 1   ? (is_signed ? ncclInt8 : ncclUint8)
      : integer && sizeof(U) == 4 ? (is_signed ? ncclInt32 : ncclUint32)
      : integer && sizeof(U) == 8 ? (is_signed ? ncclInt64 : ncclUint64)
      : std::is_same_v<U, float>  ? ncclFloat32
      : std::is_same_v<U, double> ? ncclFloat64
#if defined(__CUDA_FP16_TYPES_EXIST__)
      : std::is_same_v<U, __half> ? ncclFloat16
#endif
#if defined(__CUDA_BF16_TYPES_EXIST__)
      : std::is_same_v<U, __nv_bfloat16> ? ncclBfloat16
#endif
                                         : ncclNumTypes;
  static_assert(type != ncclNumTypes, "curt: NCCL has no data type for this element type");
  return type;
}

/// NCCL's built-in reductions.
enum class nccl_op : int { sum = ncclSum, prod = ncclProd, max = ncclMax, min = ncclMin,
                           avg = ncclAvg };

/// The version of the NCCL library loaded (ncclGetVersion), e.g. 22809 for 2.28.9.
inline int nccl_version() {
  int v = 0;
  detail::check(ncclGetVersion(&v), "ncclGetVersion()", __FILE__, __LINE__);
  return v;
}

/// A new id for a communicator of several processes (ncclGetUniqueId): made by rank 0 and given
/// to the others (its `internal` bytes, by any means).
inline ncclUniqueId nccl_unique_id() {
  ncclUniqueId id{};
  detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId()", __FILE__, __LINE__);
  return id;
}

/// A communicator (non-owning): its handle, and its device, rank and rank count, read once.
class nccl_communicator_ref {
 public:
  /// A ref to a communicator the caller made; asks NCCL for its device, rank and size.
  static nccl_communicator_ref from_native_handle(ncclComm_t comm) {
    nccl_communicator_ref ref(comm);
    return ref.describe(), ref;
  }
  ncclComm_t get() const { return native("get()"); }  ///< the native handle; throws if none
  /// False for a null communicator, or a ref of an owner that holds none (get() throws then).
  bool valid() const noexcept { return handle_ != nullptr && !detail::is_state_handle(handle_); }
  /// This communicator's rank, the number of ranks, the device this rank runs on. @{
  int rank() const { return (void)native("rank()"), rank_; }
  int size() const { return (void)native("size()"), size_; }
  curt::device device() const {
    return (void)native("device()"), curt::device::from_ordinal_unchecked(ordinal_);
  }  ///@}
  /// The first asynchronous error NCCL met on this communicator (ncclCommGetAsyncError); no CUDA.
  ncclResult_t async_error() const {
    ncclResult_t error = ncclSuccess;
    detail::check(ncclCommGetAsyncError(native("async_error()"), &error),
                       "ncclCommGetAsyncError()", __FILE__, __LINE__);
    return error;
  }
  /// Same communicator handle. @{
  friend bool operator==(nccl_communicator_ref a, nccl_communicator_ref b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(nccl_communicator_ref a, nccl_communicator_ref b) noexcept {
    return !(a == b);
  }  ///@}

 protected:
  friend struct detail::nccl_traits;
  friend struct detail::nccl_collectives;
  explicit nccl_communicator_ref(ncclComm_t comm) noexcept : handle_(comm) {}  ///< no NCCL query
  /// The handle for an NCCL call; throws, naming `operation`, if null or there is none.
  ncclComm_t native(const char* operation) const {
    if (CURT_UNLIKELY(handle_ == nullptr))
      detail::raise(cudaErrorInvalidResourceHandle,
                    detail::fmt("curt::nccl_communicator::%s", operation),
                    "the communicator is null", __FILE__, __LINE__);
    return detail::usable_handle(handle_, "curt::nccl_communicator", operation);
  }
  /// Reads the device, rank and size (ncclCommCuDevice, ncclCommUserRank, ncclCommCount).
  void describe() {
    ncclComm_t comm = native("from_native_handle");
    detail::check(ncclCommCuDevice(comm, &ordinal_), "ncclCommCuDevice", __FILE__, __LINE__);
    detail::check(ncclCommUserRank(comm, &rank_), "ncclCommUserRank", __FILE__, __LINE__);
    detail::check(ncclCommCount(comm, &size_), "ncclCommCount", __FILE__, __LINE__);
    cu_device_ = detail::driver_device(ordinal_);
  }
  /// ncclCommAbort in device `ordinal`'s context; returns NCCL's result.
  static ncclResult_t abort_native(ncclComm_t comm, int ordinal) {
    return detail::nccl_on_device(ordinal, [&] { return ncclCommAbort(comm); });
  }

  ncclComm_t handle_;        ///< the communicator; a state for an owner that holds none
  int ordinal_ = -1;         ///< its device (ncclCommCuDevice)
  int rank_ = -1;            ///< its rank (ncclCommUserRank)
  int size_ = 0;             ///< the number of ranks (ncclCommCount)
  CUdevice cu_device_ = -1;  ///< the driver's handle of device ordinal_ (streams name theirs so)
};

namespace detail {
struct nccl_traits {
  // ncclCommDestroy refuses a communicator with an asynchronous error (a peer that died, a
  // network failure): it returns that error and frees nothing. Such a one is aborted instead.
  static void destroy(nccl_communicator_ref& c, no_state&) {
    ncclResult_t async = ncclSuccess;
    const bool healthy = ncclCommGetAsyncError(c.handle_, &async) == ncclSuccess &&
                         (async == ncclSuccess || async == ncclInProgress);
    const ncclResult_t result = nccl_on_device(c.ordinal_, [&] {
      return healthy ? ncclCommDestroy(c.handle_) : ncclCommAbort(c.handle_);
    });
    check(result, healthy ? "ncclCommDestroy" : "ncclCommAbort", __FILE__, __LINE__);
  }
};
}  // namespace detail

/// Owns an NCCL communicator. Move-only; a moved-from, released or aborted owner throws on use.
class nccl_communicator : public detail::unique_handle<nccl_communicator_ref, detail::nccl_traits> {
  using base = detail::unique_handle<nccl_communicator_ref, detail::nccl_traits>;

 public:
  /// Rank `rank` of `ranks` (ncclCommInitRank) on device d: blocks until every rank has joined
  /// with the same id (no timeout), so each needs its own thread or process. Not inside an
  /// nccl_group (NCCL would defer it to the group's end). A failure aborts what NCCL made.
  nccl_communicator(curt::device d, int ranks, const ncclUniqueId& id, int rank) : base(no_handle) {
    ncclComm_t comm = nullptr;
    init(d.ordinal(), &comm, 1, [&] { return ncclCommInitRank(&comm, ranks, id, rank); }, [&] {
      return detail::fmt("ncclCommInitRank(ranks %d, rank %d, device %d)", ranks, rank,
                         d.ordinal());
    });
    own(comm);
  }

  /// One communicator per device of this process (ncclCommInitAll): element i is rank i.
  static std::vector<nccl_communicator> create_all(const std::vector<curt::device>& devices) {
    std::vector<int> ordinals;
    for (curt::device d : devices) ordinals.push_back(d.ordinal());
    if (CURT_UNLIKELY(ordinals.empty()))
      detail::raise(cudaErrorInvalidValue, "curt::nccl_communicator::create_all(no devices)",
                    "name at least one device", __FILE__, __LINE__);
    std::vector<ncclComm_t> comms(ordinals.size(), nullptr);
    // NCCL sets each device in turn and restores the one it found: let it find devices[0].
    init(ordinals[0], comms.data(), comms.size(),
         [&] { return ncclCommInitAll(comms.data(), int(comms.size()), ordinals.data()); }, [&] {
           std::string call = "ncclCommInitAll(devices";
           for (int o : ordinals) call += detail::fmt(" %d", o);
           return call + ")";
         });
    std::vector<nccl_communicator> owners;
    std::size_t k = 0;
    try {
      owners.reserve(comms.size());
      for (; k < comms.size(); ++k) owners.push_back(from_native_handle(comms[k]));
    } catch (...) {  // the owners made destroy theirs; NCCL frees them when the last goes
      for (; k < comms.size(); ++k) (void)abort_native(comms[k], ordinals[k]);
      throw;
    }
    return owners;
  }
  /// over every visible device
  static std::vector<nccl_communicator> create_all() {
    const device_range all = devices();
    return create_all(std::vector<curt::device>(all.begin(), all.end()));
  }

  /// Takes ownership of a communicator the caller made (also if this throws).
  static nccl_communicator from_native_handle(ncclComm_t comm) {
    if (comm == nullptr || detail::is_state_handle(comm))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::nccl_communicator::from_native_handle",
                    "only a created communicator can be owned, not null", __FILE__, __LINE__);
    nccl_communicator owner(no_handle);
    owner.own(comm);
    return owner;
  }
  explicit nccl_communicator(no_handle_t) noexcept : base(no_handle) {}  ///< empty: uses throw

  /// Aborts the communicator now (ncclCommAbort): its running collectives are told to stop, and it
  /// is freed without waiting; call it before anything waits on them, from any thread. Refused
  /// while this thread fills an nccl_group: NCCL defers an abort to the group's end, and a
  /// cancelled group drops it. The owner is left empty even if NCCL fails (thrown as nccl_error).
  void abort() {
    ncclComm_t comm = native("abort()");
    auto call = [&] {
      return detail::fmt("curt::nccl_communicator::abort() (rank %d of %d on device %d)", rank_,
                         size_, ordinal_);
    };
    if (CURT_UNLIKELY(detail::thread_state::current().nccl_groups != 0))
      detail::raise(cudaErrorNotPermitted, call(),
                    "an nccl_group is open on this thread; inside an nccl_group NCCL defers an "
                    "abort to the group's end, and a cancelled group drops it: abort outside any "
                    "group. Nothing was aborted",
                    __FILE__, __LINE__);
    handle_ = detail::state_handle<ncclComm_t>(detail::handle_state::empty);
    const ncclResult_t result = abort_native(comm, ordinal_);
    if (CURT_UNLIKELY(result != ncclSuccess))
      detail::throw_error<nccl_error>(make_error_code(result), call(), __FILE__, __LINE__,
                                      detail::nccl_last_error());
  }

 private:
  // Runs `create` (NCCL's creation of `comms`) on device `ordinal`; on failure aborts what it
  // made (a failed creation may hand communicators out in their error state) and throws.
  template <class Create, class Call>
  static void init(int ordinal, ncclComm_t* comms, std::size_t count, Create&& create,
                   Call&& call) {
    std::string explanation;
    const ncclResult_t result = detail::nccl_on_device(ordinal, [&] {
      const ncclResult_t r = create();
      if (CURT_UNLIKELY(r != ncclSuccess)) explanation = detail::nccl_last_error();  // NCCL's own
      for (std::size_t i = 0; i < count && r != ncclSuccess; ++i)
        if (comms[i] != nullptr) (void)ncclCommAbort(std::exchange(comms[i], nullptr));
      return r;
    });
    if (CURT_UNLIKELY(result != ncclSuccess))
      detail::throw_error<nccl_error>(make_error_code(result), call(), __FILE__, __LINE__,
                                      explanation);
  }
  // Owns `comm` and reads its device, rank and size; where that fails, `comm` stays the caller's.
  void own(ncclComm_t comm) {
    handle_ = comm;
    try {
      describe();
    } catch (...) {
      handle_ = detail::state_handle<ncclComm_t>(detail::handle_state::empty);
      throw;
    }
  }
};

/// ncclGroupStart here, ncclGroupEnd at scope end or end() (throws where the destructor reports):
/// this thread's collectives in it launch together. All or nothing: if an exception leaves the
/// scope, a collective is refused (by curt or NCCL, even if caught inside; end() then throws the
/// refusal), or on cancel(), none launches, on any rank; the communicators stay usable. Groups
/// nest: the outermost launches. (NCCL 2.28 runs a one-rank communicator's collective at once.)
class nccl_group {
 public:
  nccl_group() : in_(detail::any_context), context_(detail::current_context()) {
    detail::check(ncclGroupStart(), "ncclGroupStart()", __FILE__, __LINE__);
    ++detail::thread_state::current().nccl_groups;
  }
  ~nccl_group() {
    if (std::uncaught_exceptions() > uncaught_) cancel();  // unwinding: launch nothing
    if (!open_) return;
    try {
      detail::check(close(), "ncclGroupEnd", __FILE__, __LINE__);
    } catch (const std::exception& error) {
      detail::report(error);
    }
  }
  /// Ends the group now (ncclGroupEnd); throws nccl_error on failure (then none was launched).
  void end() {
    if (!open_) return;
    detail::check(close(), "ncclGroupEnd()", __FILE__, __LINE__);
  }
  /// Ends the group now without launching any of its collectives; nothing is thrown or reported.
  void cancel() noexcept {
    if (!open_) return;
    detail::nccl_cancel_group();
    (void)close();  // ncclGroupEnd returns the cancellation (or an earlier error)
  }

 private:
  // ncclGroupEnd, then the thread's context as it was before NCCL's device switching.
  ncclResult_t close() noexcept {
    open_ = false;
    --detail::thread_state::current().nccl_groups;
    const ncclResult_t result = ncclGroupEnd();
    detail::nccl_put_back(context_);
    return result;
  }

  int uncaught_ = std::uncaught_exceptions();
  bool open_ = true;
  detail::context_scope in_;  // an active primary context, on a thread with none (not copyable)
  CUcontext context_;
};

namespace detail {
inline const char* nccl_op_name(nccl_op op) noexcept {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg"};
  return names[static_cast<int>(op)];
}
// What a collective's sizes must be: equal (on the root), receive = ranks x send, or the reverse.
enum class nccl_sizes { equal, equal_on_root, gather, scatter };
struct nccl_collectives {
  /// One collective: curt's checks, then `issue(send, recv, count, type, comm, stream)` in the
  /// context curt chooses. Whatever throws cancels the thread's group: NCCL's rule for a refusal.
  template <class Send, class Recv, class Issue>
  static void run(const char* name, const char* nccl_name, const char* op, int root,
                  nccl_sizes sizes, std::remove_reference_t<Send>& send,
                  std::remove_reference_t<Recv>& recv, const nccl_communicator_ref& comm,
                  stream_ref stream, Issue&& issue) {
    static_assert(is_range_v<Send> && is_range_v<Recv>, "curt: collectives take data(), size()");
    static_assert(std::is_same_v<range_value_t<Send>, range_value_t<Recv>> &&
                      !std::is_const_v<element_of_t<Recv>>,
                  "curt: send and receive ranges of one element type, the receive one writable");
    constexpr ncclDataType_t type = nccl_type_of<range_value_t<Recv>>();
    try {
      check_kept_range<Recv>(recv, name);
      check_kept_range<Send>(send, name);
      const std::size_t n_send = send.size(), n_recv = recv.size();
      const std::size_t ranks = sizes >= nccl_sizes::gather ? std::size_t(comm.size()) : 1;
      const bool off_root = sizes == nccl_sizes::equal_on_root && comm.rank() != root;
      const bool fits = sizes == nccl_sizes::gather    ? n_recv == n_send * ranks
                        : sizes == nccl_sizes::scatter ? n_send == n_recv * ranks
                                                       : n_send == n_recv || off_root;
      static const char* const rules[] = {
          "send and receive must have the same size",
          "on the root, send and receive must have the same size",
          "the receive range must hold the send range of each of the ",
          "the send range must hold one receive range for each of the "};
      if (CURT_UNLIKELY(!fits))
        raise(cudaErrorInvalidValue,
              fmt("%s(send of %zu elements, receive of %zu elements)", name, n_send, n_recv),
              fmt("%s%s", rules[int(sizes)],
                  sizes >= nccl_sizes::gather ? fmt("%zu ranks", ranks).c_str() : ""),
              __FILE__, __LINE__);
      const bool by_send = sizes == nccl_sizes::equal_on_root || sizes == nccl_sizes::gather;
      const std::size_t count = by_send ? n_send : n_recv;
      cudaStream_t h = stream.get();
      ncclComm_t c = comm.get();
      auto call = [&] { return issue(send.data(), recv.data(), count, type, c, h); };
      const ncclResult_t result =
          is_default_stream_handle(h)
              ? nccl_call([&] { return device_guard(comm.device()); },
                          [&] { return require_primary(comm, name), call(); })
              : nccl_call([&] { return context_scope(for_stream, h); },
                          [&] { return check_device(h, comm, name), call(); });
      if (CURT_UNLIKELY(result != ncclSuccess))
        throw_error<nccl_error>(
            curt::make_error_code(result),
            fmt("%s(count %zu, ncclDataType_t %d%s%s%s, rank %d of %d on device %d)", nccl_name,
                count, int(type), op ? ", " : "", op ? op : "",
                root >= 0 ? fmt(", root %d", root).c_str() : "", comm.rank_, comm.size_,
                comm.ordinal_),
            __FILE__, __LINE__, nccl_last_error());
    } catch (...) {
      nccl_cancel_group();
      throw;
    }
  }
  // NCCL launches a group in the device's primary context, on its default stream: with another
  // context of the device current, a collective on "the default stream" would not follow its work.
  static void require_primary(const nccl_communicator_ref& comm, const char* operation) {
    if (CURT_LIKELY(primary_context_active(comm.ordinal_) &&
                    primary_context(comm.ordinal_) == current_context()))
      return;
    raise(cudaErrorNotSupported, operation,
          fmt("a default stream with a context of device %d current that is not its primary "
              "context (a green context's or a user's): NCCL runs the collective on the primary "
              "context's default stream, not ordered after this context's; pass a named stream "
              "of that context; nothing was enqueued", comm.ordinal_),
          __FILE__, __LINE__);
  }
  // NCCL would find a stream of another device only at launch (a group's end, after the other
  // ranks' work may have gone). A stream the driver cannot tell the device of is left to NCCL.
  static void check_device(cudaStream_t stream, const nccl_communicator_ref& comm,
                           const char* operation) {
    CUdevice device = -1;
    if (CURT_DETAIL_DRIVER_FUNCTION(cuStreamGetDevice, 12080)(stream, &device) != 0 ||
        CURT_LIKELY(device == comm.cu_device_))
      return;
    int ordinal = static_cast<int>(device);  // the runtime's ordinal, where it can tell
    if (cudaStreamGetDevice(stream, &ordinal) != cudaSuccess) (void)cudaGetLastError();
    raise(cudaErrorInvalidValue, operation,
          fmt("the stream is on device %d, the communicator (rank %d) on device %d: a "
              "collective runs on its communicator's device; nothing was enqueued",
              ordinal, comm.rank_, comm.ordinal_),
          __FILE__, __LINE__);
  }
};
}  // namespace detail

// NCCL's calls, as nccl_collectives::run issues them.
#define CURT_DETAIL_NCCL_ISSUE(...)                                                        \
  [&](const void* s, void* r, std::size_t n, ncclDataType_t t, ncclComm_t c, cudaStream_t h) { \
    return __VA_ARGS__;                                                                    \
  }

/// recv = op over every rank's send (ncclAllReduce), on `stream`; equal sizes, may be one range.
template <class Send, class Recv>
void all_reduce(Send&& send, Recv&& recv, nccl_op op, nccl_communicator_ref comm,
                stream_ref stream) {
  detail::nccl_collectives::run<Send, Recv>(
      "curt::all_reduce", "ncclAllReduce", detail::nccl_op_name(op), -1, detail::nccl_sizes::equal,
      send, recv, comm, stream,
      CURT_DETAIL_NCCL_ISSUE(ncclAllReduce(s, r, n, t, ncclRedOp_t(op), c, h)));
}
/// In place: data = op over every rank's data.
template <class Data>
void all_reduce(Data&& data, nccl_op op, nccl_communicator_ref comm, stream_ref stream) {
  all_reduce(data, std::forward<Data>(data), op, comm, stream);
}
/// recv = root's send on every rank (ncclBroadcast); send is read on the root only. Equal sizes.
template <class Send, class Recv>
void broadcast(Send&& send, Recv&& recv, int root, nccl_communicator_ref comm, stream_ref stream) {
  detail::nccl_collectives::run<Send, Recv>(
      "curt::broadcast", "ncclBroadcast", nullptr, root, detail::nccl_sizes::equal, send, recv,
      comm, stream, CURT_DETAIL_NCCL_ISSUE(ncclBroadcast(s, r, n, t, root, c, h)));
}
/// In place: data = root's data on every rank.
template <class Data>
void broadcast(Data&& data, int root, nccl_communicator_ref comm, stream_ref stream) {
  broadcast(data, std::forward<Data>(data), root, comm, stream);
}
/// recv on `root` = op over every rank's send (ncclReduce); recv's size matters on the root only.
template <class Send, class Recv>
void reduce(Send&& send, Recv&& recv, nccl_op op, int root, nccl_communicator_ref comm,
            stream_ref stream) {
  detail::nccl_collectives::run<Send, Recv>(
      "curt::reduce", "ncclReduce", detail::nccl_op_name(op), root,
      detail::nccl_sizes::equal_on_root, send, recv, comm, stream,
      CURT_DETAIL_NCCL_ISSUE(ncclReduce(s, r, n, t, ncclRedOp_t(op), root, c, h)));
}
/// recv = every rank's send, in rank order (ncclAllGather): recv = size() * send.
template <class Send, class Recv>
void all_gather(Send&& send, Recv&& recv, nccl_communicator_ref comm, stream_ref stream) {
  detail::nccl_collectives::run<Send, Recv>(
      "curt::all_gather", "ncclAllGather", nullptr, -1, detail::nccl_sizes::gather, send, recv,
      comm, stream, CURT_DETAIL_NCCL_ISSUE(ncclAllGather(s, r, n, t, c, h)));
}
/// recv = block rank() of op over every rank's send (ncclReduceScatter): send = size() * recv.
template <class Send, class Recv>
void reduce_scatter(Send&& send, Recv&& recv, nccl_op op, nccl_communicator_ref comm,
                    stream_ref stream) {
  detail::nccl_collectives::run<Send, Recv>(
      "curt::reduce_scatter", "ncclReduceScatter", detail::nccl_op_name(op), -1,
      detail::nccl_sizes::scatter, send, recv, comm, stream,
      CURT_DETAIL_NCCL_ISSUE(ncclReduceScatter(s, r, n, t, ncclRedOp_t(op), c, h)));
}

#undef CURT_DETAIL_NCCL_ISSUE

}  // namespace curt
