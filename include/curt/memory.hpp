// curt/memory.hpp: typed, move-only owners of memory, one per kind:
//   curt::device_buffer<T>    cudaMalloc on a device
//   curt::pinned_buffer<T>    cudaHostAlloc: page-locked host memory (portable, mapped, write-combined)
//   curt::managed_buffer<T>   cudaMallocManaged: memory the host and every device address alike
//   curt::host_registration   cudaHostRegister of host memory the program already has
//
// Each buffer is made on an explicit device (through device_guard: no hidden current device, and
// a thread without a context keeps none) and frees its memory in the context it was allocated in
// (a user's context current at the allocation, else the device's primary one). A buffer
// of 0 elements allocates nothing and is valid; count * sizeof(T) beyond std::size_t is refused
// before CUDA is called. An empty buffer (`curt::device_buffer<float> b(curt::no_handle)`), a
// moved-from one and a released one hold no memory: every accessor that would hand out the pointer
// (data(), get(), views, operator[], begin(), ...) throws a cuda_error that names the owner and
// says "empty", "moved-from" or "released". size() is 0 then; empty() is size() == 0, valid()
// says whether memory (possibly of 0 elements) is held.
//
// Views: a buffer converts implicitly to any span-like view of its elements (cuda::std::span,
// std::span, a view of your own; see detail/span_like.hpp), so a kernel taking
// cuda::std::span<float> by value takes a device_buffer<float> through curt::launch or <<<>>>.
// A const buffer gives views of const elements; a temporary buffer gives none (it would dangle).
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/driver_result.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace curt {

/// How cudaHostAlloc pins memory; combine with |.
enum class pinned_flags : unsigned {
  none = cudaHostAllocDefault,
  portable = cudaHostAllocPortable,              ///< pinned for every context, not only its device's
  mapped = cudaHostAllocMapped,                  ///< kernels may address it (device_pointer())
  write_combined = cudaHostAllocWriteCombined,   ///< faster host writes and PCIe reads, slow host reads
};
/// How cudaHostRegister pins existing memory; combine with |.
enum class register_flags : unsigned {
  none = cudaHostRegisterDefault,
  portable = cudaHostRegisterPortable,    ///< pinned for every context
  mapped = cudaHostRegisterMapped,        ///< kernels may address it (device_pointer())
  io_memory = cudaHostRegisterIoMemory,   ///< the range is memory-mapped I/O (a PCI BAR)
  read_only = cudaHostRegisterReadOnly,   ///< the device only reads it (needs the device attribute)
};
/// Which streams may use managed memory: cudaMallocManaged takes global or host;
/// managed_buffer::attach also takes single (one stream).
enum class attach_flags : unsigned {
  global = cudaMemAttachGlobal,  ///< any stream on any device
  host = cudaMemAttachHost,      ///< no stream until attached: the host uses it freely
  single = cudaMemAttachSingle,  ///< only the stream it is attached to (attach() only)
};

constexpr pinned_flags operator|(pinned_flags a, pinned_flags b) noexcept {
  return static_cast<pinned_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr register_flags operator|(register_flags a, register_flags b) noexcept {
  return static_cast<register_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
constexpr bool has_flag(pinned_flags set, pinned_flags flag) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0;
}
constexpr bool has_flag(register_flags set, register_flags flag) noexcept {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0;
}

namespace detail {

// T's name for messages: "float" for the fundamental types, the compiler's spelling otherwise.
template <class T>
const char* fundamental_name() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return "float";
  else if constexpr (std::is_same_v<U, double>) return "double";
  else if constexpr (std::is_same_v<U, int>) return "int";
  else if constexpr (std::is_same_v<U, unsigned>) return "unsigned int";
  else if constexpr (std::is_same_v<U, char>) return "char";
  else if constexpr (std::is_same_v<U, signed char>) return "signed char";
  else if constexpr (std::is_same_v<U, unsigned char>) return "unsigned char";
  else if constexpr (std::is_same_v<U, short>) return "short";
  else if constexpr (std::is_same_v<U, unsigned short>) return "unsigned short";
  else if constexpr (std::is_same_v<U, long>) return "long";
  else if constexpr (std::is_same_v<U, unsigned long>) return "unsigned long";
  else if constexpr (std::is_same_v<U, long long>) return "long long";
  else if constexpr (std::is_same_v<U, unsigned long long>) return "unsigned long long";
  else if constexpr (std::is_same_v<U, bool>) return "bool";
  else return nullptr;
}

template <class T>
CURT_COLD std::string type_name() {
  if (const char* name = fundamental_name<T>()) return name;
#if defined(__GNUC__) || defined(__clang__)
  std::string text = __PRETTY_FUNCTION__;  // "... type_name() [with T = foo; ...]" or "[T = foo]"
  std::size_t start = text.find("T = ");
  if (start != std::string::npos) {
    start += 4;
    std::size_t end = text.find_first_of(";]", start);
    if (end != std::string::npos) return text.substr(start, end - start);
  }
#endif
  return std::to_string(sizeof(T)) + "-byte type";
}

// "device_buffer<float>"
template <class T>
CURT_COLD std::string owner_name(const char* kind) {
  return std::string(kind) + "<" + type_name<T>() + ">";
}

/// Throws for using an owner of memory that holds none.
[[noreturn]] CURT_COLD inline void throw_no_memory(const void* state, const std::string& owner,
                                                   const char* operation) {
  auto s = static_cast<handle_state>(reinterpret_cast<std::uintptr_t>(state));
  const char* what = s == handle_state::moved_from ? "moved-from"
                     : s == handle_state::released ? "released"
                     : s == handle_state::freed    ? "freed"
                                                   : "empty";
  raise(cudaErrorInvalidResourceHandle, "curt::" + owner + "::" + operation,
        "this " + owner + " is " + what + ": it holds no memory; assign a new one first",
        __FILE__, __LINE__);
}

/// count * sizeof(T) in bytes; throws (naming the owner and the numbers) when it overflows.
template <class T>
std::size_t checked_bytes(std::size_t count, const char* kind, const char* what) {
  if (CURT_UNLIKELY(count > std::numeric_limits<std::size_t>::max() / sizeof(T)))
    raise(cudaErrorInvalidValue, "curt::" + owner_name<T>(kind) + "(" + what + ")",
          std::to_string(count) + " elements of " + std::to_string(sizeof(T)) +
              " bytes overflow std::size_t (at most " +
              std::to_string(std::numeric_limits<std::size_t>::max() / sizeof(T)) + ")",
          __FILE__, __LINE__);
  return count * sizeof(T);
}

// Is S constructible from an lvalue contiguous range of Element (S has a range constructor,
// as cuda::std::span and std::span do)? Then S takes an owner with begin()/end() by that
// constructor, and the owner's own conversion must stand aside or the two are ambiguous.
template <class Element>
struct probe_range {
  Element* begin() const noexcept;
  Element* end() const noexcept;
  Element* data() const noexcept;
  std::size_t size() const noexcept;
};
template <class S, class Element, bool Iterable>
using owner_view_of = std::enable_if_t<
    is_span_like_of<S, Element>::value &&
        !(Iterable && std::is_constructible_v<S, probe_range<Element>&>),
    int>;

/// Where an owner's memory was allocated: the device, and the driver's process-unique id of the
/// allocation (CU_POINTER_ATTRIBUTE_BUFFER_ID; 0 where the driver gives none). The address alone
/// does not name it: after cudaDeviceReset the memory is gone, and a new allocation, in any
/// context, may get the same address.
struct device_allocation {
  int ordinal = 0;
  unsigned long long id = 0;
};

/// What every memory owner shares: the pointer (or the state of an owner that holds none), the
/// element count and where the memory is freed (Kind::place: a device ordinal, a stream, a
/// location). Kind supplies name (for messages), host_iterable (begin/end and operator[]), place
/// and free(pointer, place) noexcept.
template <class T, class Kind>
class memory_owner {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>,
                "curt buffers hold trivially copyable, non-const element types: CUDA copies "
                "them as bytes and constructs nothing");

 public:
  using element_type = T;
  using value_type = T;
  using size_type = std::size_t;
  using pointer = T*;
  using const_pointer = const T*;
  using place_type = typename Kind::place;

  memory_owner(const memory_owner&) = delete;
  memory_owner& operator=(const memory_owner&) = delete;

  /// The elements; throws when the owner holds no memory. Null for a buffer of 0 elements.
  T* data() { return usable("data()"); }
  const T* data() const { return usable("data()"); }
  T* get() { return usable("get()"); }
  const T* get() const { return usable("get()"); }
  std::size_t size() const noexcept { return count_; }
  std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  /// size() == 0: true for a buffer of 0 elements and for an owner that holds nothing.
  bool empty() const noexcept { return count_ == 0; }
  /// True when the owner holds memory (a buffer of 0 elements too); false when it is empty,
  /// moved-from or released.
  bool valid() const noexcept { return !is_state_handle(pointer_); }
  /// The device the memory was allocated on (in whose context it is freed).
  template <class P = place_type, std::enable_if_t<std::is_same_v<P, device_allocation>, int> = 0>
  curt::device device() const {
    (void)usable("device()");
    return curt::device::from_ordinal_unchecked(place_.ordinal);
  }

  /// Gives up ownership; the caller frees the returned pointer (cudaFree, cudaFreeHost as the
  /// kind says). The owner is then "released".
  T* release() {
    T* p = usable("release()");
    pointer_ = state_handle<T*>(handle_state::released);
    count_ = 0;
    return p;
  }

  /// Views (see the file comment). For owners with begin()/end(), views with a range
  /// constructor (cuda::std::span, std::span) are made by that constructor instead.
  template <class S, owner_view_of<S, T, Kind::host_iterable> = 0>
  operator S() & {  // NOLINT: implicit by design
    return S(data(), count_);
  }
  template <class S, owner_view_of<S, const T, Kind::host_iterable> = 0>
  operator S() const& {  // NOLINT: implicit by design
    return S(data(), count_);
  }
  /// A view of a temporary (const or not) would dangle at the end of the statement.
  template <class S, std::enable_if_t<is_span_like_of<S, const T>::value, int> = 0>
  operator S() && = delete;
  template <class S, std::enable_if_t<is_span_like_of<S, const T>::value, int> = 0>
  operator S() const&& = delete;

 protected:
  memory_owner(T* memory, std::size_t count, place_type place) noexcept
      : pointer_(memory), count_(count), place_(place) {}
  explicit memory_owner(handle_state state) noexcept
      : pointer_(state_handle<T*>(state)), count_(0), place_() {}
  memory_owner(memory_owner&& other) noexcept
      : pointer_(std::exchange(other.pointer_, state_handle<T*>(handle_state::moved_from))),
        count_(std::exchange(other.count_, 0)),
        place_(other.place_) {}
  memory_owner& operator=(memory_owner&& other) noexcept {
    if (this != &other) {
      free();
      pointer_ = std::exchange(other.pointer_, state_handle<T*>(handle_state::moved_from));
      count_ = std::exchange(other.count_, 0);
      place_ = other.place_;
    }
    return *this;
  }
  ~memory_owner() { free(); }

  // Set once the memory is allocated (the owner is made first, holding 0 elements' null, so a
  // failed allocation frees nothing).
  void own(T* memory, const place_type& place) noexcept {
    pointer_ = memory;
    place_ = place;
  }
  const place_type& place() const noexcept { return place_; }
  /// For an explicit free: the pointer (throws when the owner holds none); the owner is then
  /// "freed" and frees nothing more.
  T* take_for_free(const char* operation) {
    T* p = usable(operation);
    pointer_ = state_handle<T*>(handle_state::freed);
    count_ = 0;
    return p;
  }

  T* usable(const char* operation) const {
    if (CURT_UNLIKELY(is_state_handle(pointer_)))
      throw_no_memory(pointer_, owner_name<T>(Kind::name), operation);
    return pointer_;
  }

 private:
// g++ 13 at -O3 warns here, wrongly, for an owner held in a std::optional that is reset (it loses
// track of the optional's engaged flag); user code built with -Werror would fail on it.
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  void free() noexcept {
    if (!is_state_handle(pointer_) && pointer_ != nullptr) Kind::free(pointer_, place_);
    pointer_ = state_handle<T*>(handle_state::empty);
    count_ = 0;
  }
#if defined(__GNUC__) && !defined(__clang__)
#  pragma GCC diagnostic pop
#endif

  T* pointer_;
  std::size_t count_;
  place_type place_;
};

/// Host access to the elements of a host-addressable owner (pinned, managed).
template <class T, class Kind>
class host_memory_owner : public memory_owner<T, Kind> {
  using base = memory_owner<T, Kind>;

 public:
  using iterator = T*;
  using const_iterator = const T*;
  /// Unchecked index, as std::vector's; throws only when the owner holds no memory.
  T& operator[](std::size_t i) { return this->usable("operator[]")[i]; }
  const T& operator[](std::size_t i) const { return this->usable("operator[]")[i]; }
  T* begin() { return this->usable("begin()"); }
  T* end() { return this->usable("end()") + this->size(); }
  const T* begin() const { return this->usable("begin()"); }
  const T* end() const { return this->usable("end()") + this->size(); }

 protected:
  using base::base;
};

// The driver's process-unique id of the allocation `memory` lies in, into `id`; the driver's status.
inline int query_allocation_id(const void* memory, unsigned long long& id) {
  return query_pointer_attribute(&id, driver_fn::pointer_attribute_buffer_id, memory);
}
/// Where an owner's memory was allocated: `ordinal` and the allocation's id (0: not known).
inline device_allocation allocated_on(int ordinal, const void* memory) noexcept {
  unsigned long long id = 0;
  try {
    if (query_allocation_id(memory, id) != 0) id = 0;
  } catch (const cuda_error&) {  // no lookup: the free then goes by the address alone
    id = 0;
  }
  return {ordinal, id};
}
// Throws unless `memory` is still the allocation `where` names.
inline void require_same_allocation(const void* memory, device_allocation where, const char* call) {
  if (where.id == 0) return;
  unsigned long long id = 0;
  const int status = query_allocation_id(memory, id);
  constexpr int unknown_address = 1;  // CUDA_ERROR_INVALID_VALUE: gone with its context
  if (status != 0 && status != unknown_address)  // the driver shut down (at exit), a lost context
    check_driver(status, "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID)", __FILE__,
                 __LINE__);
  if (CURT_UNLIKELY(id != where.id))
    raise(cudaErrorContextIsDestroyed, call,
          "the memory went with its context (cudaDeviceReset or cuCtxDestroy) before its owner; "
          "nothing is freed, as the address may hold a new allocation now",
          __FILE__, __LINE__);
}

// Frees in the context the memory was allocated in: on a thread without a context the runtime
// would make device 0's primary context current (and leave it so), and from another context of
// the device (the primary one, for memory of a user's context) the memory is not freed. Memory
// that names no context is freed in its device's (device_guard). Memory whose allocation id
// changed went with its context (cudaDeviceReset, cuCtxDestroy): its address may be another
// allocation's now, which a free would take, so it is reported and nothing is freed.
template <class Free>
void free_on_device(const void* memory, device_allocation where, Free free_call,
                    const char* call) noexcept {
  try {
    require_same_allocation(memory, where, call);
    if (CUcontext own = memory_context(memory)) {
      context_scope in_own(own);
      check_noexcept(free_call(), call, __FILE__, __LINE__);
      return;
    }
    device_guard guard(curt::device::from_ordinal_unchecked(where.ordinal));
    check_noexcept(free_call(), call, __FILE__, __LINE__);
  } catch (const cuda_error& error) {  // the context could not be made current, or is gone
    report_caught(error);
  }
}

struct device_memory_kind {
  using place = device_allocation;
  static constexpr const char* name = "device_buffer";
  static constexpr bool host_iterable = false;
  static void free(void* p, const device_allocation& where) noexcept {
    free_on_device(p, where, [p] { return cudaFree(p); }, "cudaFree(device_buffer)");
  }
};
struct pinned_memory_kind {
  using place = device_allocation;
  static constexpr const char* name = "pinned_buffer";
  static constexpr bool host_iterable = true;
  static void free(void* p, const device_allocation& where) noexcept {
    free_on_device(p, where, [p] { return cudaFreeHost(p); }, "cudaFreeHost(pinned_buffer)");
  }
};
struct managed_memory_kind {
  using place = device_allocation;
  static constexpr const char* name = "managed_buffer";
  static constexpr bool host_iterable = true;
  static void free(void* p, const device_allocation& where) noexcept {
    free_on_device(p, where, [p] { return cudaFree(p); }, "cudaFree(managed_buffer)");
  }
};

[[noreturn]] CURT_COLD inline void throw_adopt_null(const std::string& owner, std::size_t count) {
  raise(cudaErrorInvalidValue, "curt::" + owner + "::adopt(null, " + std::to_string(count) + ")",
        "a null pointer can only be adopted with a count of 0", __FILE__, __LINE__);
}

}  // namespace detail

/// count elements of T in device memory of one device (cudaMalloc). Not initialized.
template <class T>
class device_buffer : public detail::memory_owner<T, detail::device_memory_kind> {
  using base = detail::memory_owner<T, detail::device_memory_kind>;

 public:
  /// Allocates count elements on d (in d's primary context, or a context of d current already).
  /// Throws curt::out_of_memory when d has not enough; 0 elements allocate nothing.
  device_buffer(curt::device d, std::size_t count) : base(nullptr, count, {d.ordinal(), 0}) {
    std::size_t bytes = detail::checked_bytes<T>(count, "device_buffer", "count");
    if (bytes == 0) return;
    void* p = nullptr;
    device_guard guard(d);
    detail::check_call(cudaMalloc(&p, bytes), "cudaMalloc",
                       {{"bytes", static_cast<long long>(bytes)}, {"device", d.ordinal()}},
                       __FILE__, __LINE__);
    this->own(static_cast<T*>(p), detail::allocated_on(d.ordinal(), p));
  }
  /// An empty owner: every use throws until a buffer is assigned.
  explicit device_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

  /// Takes ownership of `count` elements the caller allocated with cudaMalloc on device d; the
  /// buffer frees them with cudaFree. A null pointer only with a count of 0.
  static device_buffer adopt(curt::device d, T* memory, std::size_t count) {
    (void)detail::checked_bytes<T>(count, "device_buffer", "adopt count");
    if (memory == nullptr && count != 0)
      detail::throw_adopt_null(detail::owner_name<T>("device_buffer"), count);
    return device_buffer(memory, count, detail::allocated_on(d.ordinal(), memory));
  }

  device_buffer(device_buffer&&) noexcept = default;
  device_buffer& operator=(device_buffer&&) noexcept = default;

 private:
  device_buffer(T* memory, std::size_t count, detail::device_allocation where) noexcept
      : base(memory, count, where) {}
};

/// count elements of T in page-locked host memory (cudaHostAlloc), allocated in device d's
/// context: fast, asynchronous copies to and from devices; with pinned_flags::mapped, kernels may
/// address it too. The host reads and writes it as an array. Not initialized.
template <class T>
class pinned_buffer : public detail::host_memory_owner<T, detail::pinned_memory_kind> {
  using base = detail::host_memory_owner<T, detail::pinned_memory_kind>;

 public:
  pinned_buffer(curt::device d, std::size_t count, pinned_flags flags = pinned_flags::none)
      : base(nullptr, count, {d.ordinal(), 0}), flags_(flags) {
    std::size_t bytes = detail::checked_bytes<T>(count, "pinned_buffer", "count");
    if (bytes == 0) return;
    void* p = nullptr;
    device_guard guard(d);
    detail::check_call(cudaHostAlloc(&p, bytes, static_cast<unsigned>(flags)), "cudaHostAlloc",
                       {{"bytes", static_cast<long long>(bytes)},
                        {"flags", static_cast<long long>(flags)},
                        {"device", d.ordinal()}},
                       __FILE__, __LINE__);
    this->own(static_cast<T*>(p), detail::allocated_on(d.ordinal(), p));
  }
  explicit pinned_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

  /// Takes ownership of `count` elements the caller allocated with cudaHostAlloc (or
  /// cudaMallocHost) in device d's context with `flags`; freed with cudaFreeHost.
  static pinned_buffer adopt(curt::device d, T* memory, std::size_t count,
                             pinned_flags flags = pinned_flags::none) {
    (void)detail::checked_bytes<T>(count, "pinned_buffer", "adopt count");
    if (memory == nullptr && count != 0)
      detail::throw_adopt_null(detail::owner_name<T>("pinned_buffer"), count);
    return pinned_buffer(memory, count, detail::allocated_on(d.ordinal(), memory), flags);
  }

  pinned_flags flags() const noexcept { return flags_; }

  /// The address kernels use for this memory (cudaHostGetDevicePointer; under unified
  /// addressing the host address itself). Only for memory allocated with pinned_flags::mapped.
  T* device_pointer() const {
    T* host = const_cast<T*>(this->usable("device_pointer()"));
    if (!has_flag(flags_, pinned_flags::mapped))
      detail::raise(cudaErrorInvalidValue,
                    "curt::" + detail::owner_name<T>("pinned_buffer") + "::device_pointer()",
                    "this buffer was allocated without pinned_flags::mapped, so kernels cannot "
                    "address it; allocate it with pinned_flags::mapped",
                    __FILE__, __LINE__);
    if (host == nullptr) return nullptr;  // 0 elements
    void* p = nullptr;
    const int ordinal = this->place().ordinal;
    device_guard guard(curt::device::from_ordinal_unchecked(ordinal));
    detail::check_call(cudaHostGetDevicePointer(&p, host, 0), "cudaHostGetDevicePointer",
                       {"pinned_buffer", {"device", ordinal}}, __FILE__, __LINE__);
    return static_cast<T*>(p);
  }

  pinned_buffer(pinned_buffer&&) noexcept = default;
  pinned_buffer& operator=(pinned_buffer&&) noexcept = default;

 private:
  pinned_buffer(T* memory, std::size_t count, detail::device_allocation where,
                pinned_flags flags) noexcept
      : base(memory, count, where), flags_(flags) {}
  pinned_flags flags_ = pinned_flags::none;
};

/// count elements of T in managed memory (cudaMallocManaged), allocated in device d's context:
/// the host and every device address it by the same pointer and the driver migrates pages on
/// demand (see curt/unified_memory.hpp for prefetches and advice). Not initialized.
///
/// On devices without concurrent managed access the host must not touch it while a kernel that
/// may use it runs; the H200 has concurrent access.
template <class T>
class managed_buffer : public detail::host_memory_owner<T, detail::managed_memory_kind> {
  using base = detail::host_memory_owner<T, detail::managed_memory_kind>;

 public:
  /// `flags`: attach_flags::global (any stream may use it) or attach_flags::host (no stream
  /// until attach()).
  managed_buffer(curt::device d, std::size_t count, attach_flags flags = attach_flags::global)
      : base(nullptr, count, {d.ordinal(), 0}) {
    std::size_t bytes = detail::checked_bytes<T>(count, "managed_buffer", "count");
    if (flags != attach_flags::global && flags != attach_flags::host)
      detail::raise(cudaErrorInvalidValue,
                    "curt::" + detail::owner_name<T>("managed_buffer") + "(attach flags " +
                        std::to_string(static_cast<unsigned>(flags)) + ")",
                    "cudaMallocManaged takes attach_flags::global or attach_flags::host; attach "
                    "to a single stream afterwards with attach(stream, attach_flags::single)",
                    __FILE__, __LINE__);
    if (bytes == 0) return;
    void* p = nullptr;
    device_guard guard(d);
    detail::check_call(cudaMallocManaged(&p, bytes, static_cast<unsigned>(flags)),
                       "cudaMallocManaged",
                       {{"bytes", static_cast<long long>(bytes)},
                        {"flags", static_cast<long long>(flags)},
                        {"device", d.ordinal()}},
                       __FILE__, __LINE__);
    this->own(static_cast<T*>(p), detail::allocated_on(d.ordinal(), p));
  }
  explicit managed_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

  /// Takes ownership of `count` elements the caller allocated with cudaMallocManaged in device
  /// d's context; freed with cudaFree.
  static managed_buffer adopt(curt::device d, T* memory, std::size_t count) {
    (void)detail::checked_bytes<T>(count, "managed_buffer", "adopt count");
    if (memory == nullptr && count != 0)
      detail::throw_adopt_null(detail::owner_name<T>("managed_buffer"), count);
    return managed_buffer(memory, count, detail::allocated_on(d.ordinal(), memory));
  }

  /// Which streams may use the whole allocation from the point this reaches in `stream`
  /// (cudaStreamAttachMemAsync): attach_flags::single for `stream` alone, host for none, global
  /// for all. A buffer of 0 elements has nothing to attach.
  void attach(stream_ref stream, attach_flags flags = attach_flags::single) {
    T* p = this->usable("attach()");
    cudaStream_t h = stream.get();
    if (p == nullptr) return;
    detail::stream_context_scope in_context(h);
    detail::check_call(cudaStreamAttachMemAsync(h, p, 0, static_cast<unsigned>(flags)),
                       "cudaStreamAttachMemAsync",
                       {"stream", "managed_buffer", {"flags", static_cast<long long>(flags)}},
                       __FILE__, __LINE__);
  }

  managed_buffer(managed_buffer&&) noexcept = default;
  managed_buffer& operator=(managed_buffer&&) noexcept = default;

 private:
  managed_buffer(T* memory, std::size_t count, detail::device_allocation where) noexcept
      : base(memory, count, where) {}
};

/// Page-locks host memory the program already has (cudaHostRegister) for the owner's lifetime,
/// in device d's context, and unregisters it at the end. The memory itself stays the caller's:
/// it must outlive the registration. Registering memory that is already page-locked (registered
/// again, or from cudaHostAlloc) fails with cudaErrorHostMemoryAlreadyRegistered, explained.
/// A registration of 0 bytes registers nothing.
class host_registration {
 public:
  host_registration(curt::device d, void* pointer, std::size_t bytes,
                    register_flags flags = register_flags::none)
      : pointer_(pointer), bytes_(bytes), where_{d.ordinal(), 0}, flags_(flags) {
    if (bytes == 0) return;
    if (pointer == nullptr)
      detail::raise(cudaErrorInvalidValue,
                    "curt::host_registration(null, " + std::to_string(bytes) + " bytes)",
                    "nothing to register at a null pointer", __FILE__, __LINE__);
    device_guard guard(d);
    cudaError_t status = cudaHostRegister(pointer, bytes, static_cast<unsigned>(flags));
    if (CURT_UNLIKELY(status != cudaSuccess)) fail(status, pointer, bytes, flags, d.ordinal());
    where_ = detail::allocated_on(d.ordinal(), pointer);
  }
  /// Registers a contiguous range's elements (a std::vector, a std::array, ...), which must
  /// outlive the registration.
  template <class Range, std::enable_if_t<detail::has_data_and_size<Range>::value, int> = 0>
  host_registration(curt::device d, Range& range, register_flags flags = register_flags::none)
      : host_registration(d, const_cast<void*>(static_cast<const void*>(range.data())),
                          range.size() * sizeof(*range.data()), flags) {}
  explicit host_registration(no_handle_t) noexcept
      : pointer_(detail::state_handle<void*>(detail::handle_state::empty)) {}

  host_registration(host_registration&& other) noexcept
      : pointer_(std::exchange(other.pointer_,
                               detail::state_handle<void*>(detail::handle_state::moved_from))),
        bytes_(std::exchange(other.bytes_, 0)),
        where_(other.where_),
        flags_(other.flags_) {}
  host_registration& operator=(host_registration&& other) noexcept {
    if (this != &other) {
      unregister();
      pointer_ = std::exchange(other.pointer_,
                               detail::state_handle<void*>(detail::handle_state::moved_from));
      bytes_ = std::exchange(other.bytes_, 0);
      where_ = other.where_;
      flags_ = other.flags_;
    }
    return *this;
  }
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;
  ~host_registration() { unregister(); }

  /// The registered memory; throws when the owner holds none.
  void* data() const { return usable("data()"); }
  void* get() const { return usable("get()"); }
  std::size_t size_bytes() const noexcept { return bytes_; }
  bool valid() const noexcept { return !detail::is_state_handle(pointer_); }
  register_flags flags() const noexcept { return flags_; }
  curt::device device() const {
    (void)usable("device()");
    return curt::device::from_ordinal_unchecked(where_.ordinal);
  }

  /// The address kernels use for the memory (cudaHostGetDevicePointer); only when registered
  /// with register_flags::mapped. Null for a registration of 0 bytes.
  void* device_pointer() const {
    void* host = usable("device_pointer()");
    if (!has_flag(flags_, register_flags::mapped))
      detail::raise(cudaErrorInvalidValue, "curt::host_registration::device_pointer()",
                    "the memory was registered without register_flags::mapped, so kernels cannot "
                    "address it; register it with register_flags::mapped",
                    __FILE__, __LINE__);
    if (bytes_ == 0) return nullptr;
    void* p = nullptr;
    device_guard guard(curt::device::from_ordinal_unchecked(where_.ordinal));
    detail::check_call(cudaHostGetDevicePointer(&p, host, 0), "cudaHostGetDevicePointer",
                       {"registered memory", {"device", where_.ordinal}}, __FILE__, __LINE__);
    return p;
  }

  /// Gives up the registration: the caller unregisters the returned pointer
  /// (cudaHostUnregister). The owner is then "released".
  void* release() {
    void* p = usable("release()");
    pointer_ = detail::state_handle<void*>(detail::handle_state::released);
    bytes_ = 0;
    return p;
  }

 private:
  void* usable(const char* operation) const {
    if (CURT_UNLIKELY(detail::is_state_handle(pointer_)))
      detail::throw_no_memory(pointer_, "host_registration", operation);
    return pointer_;
  }
  void unregister() noexcept {
    if (!detail::is_state_handle(pointer_) && bytes_ != 0) {
      void* p = pointer_;
      detail::free_on_device(p, where_, [p] { return cudaHostUnregister(p); },
                             "cudaHostUnregister(host_registration)");
    }
    pointer_ = detail::state_handle<void*>(detail::handle_state::empty);
    bytes_ = 0;
  }
  [[noreturn]] CURT_COLD static void fail(cudaError_t status, void* pointer, std::size_t bytes,
                                          register_flags flags, int ordinal) {
    std::string explanation;
    if (status == cudaErrorHostMemoryAlreadyRegistered)
      explanation = "this memory, or part of it, is page-locked already: registered before (by "
                    "another host_registration or cudaHostRegister) or allocated with "
                    "cudaHostAlloc / curt::pinned_buffer; register each range once";
    else if (status == cudaErrorNotSupported && has_flag(flags, register_flags::read_only))
      explanation = "register_flags::read_only needs cudaDevAttrHostRegisterReadOnlySupported";
    char address[32];
    std::snprintf(address, sizeof address, "%p", pointer);
    detail::throw_error(make_error_code(status),
                        std::string("cudaHostRegister(") + address + ", " +
                            std::to_string(bytes) + " bytes, flags " +
                            std::to_string(static_cast<unsigned>(flags)) + ", device " +
                            std::to_string(ordinal) + ")",
                        detail::location(__FILE__, __LINE__), std::move(explanation));
  }

  void* pointer_;
  std::size_t bytes_ = 0;
  detail::device_allocation where_{-1, 0};
  register_flags flags_ = register_flags::none;
};

/// Which kind of memory a pointer points into (cudaMemoryType).
enum class memory_kind {
  unregistered = cudaMemoryTypeUnregistered,  ///< pageable host memory, or not CUDA's at all
  host = cudaMemoryTypeHost,                  ///< page-locked host memory (pinned or registered)
  device = cudaMemoryTypeDevice,              ///< device memory
  managed = cudaMemoryTypeManaged,            ///< managed memory
};

/// What CUDA knows about a pointer (cudaPointerGetAttributes, and the driver for the pool).
struct pointer_info {
  memory_kind kind = memory_kind::unregistered;
  /// The device the memory belongs to; cudaInvalidDeviceId (-2) for unregistered memory.
  int device = cudaInvalidDeviceId;
  /// The address kernels use; null where the device cannot address the memory.
  void* device_pointer = nullptr;
  /// The address the host uses; null where the host cannot address the memory.
  void* host_pointer = nullptr;
  /// The memory pool the memory was allocated from (stream-ordered allocation); null otherwise.
  cudaMemPool_t pool = nullptr;
};

/// What CUDA knows about `pointer`. Pageable memory (or any address CUDA does not know) is
/// kind unregistered, device -2, no error (CUDA 13.0 gives the pointer itself as its host
/// address). On a thread with no current context the calls run in the memory's own context, as
/// advise() and the range queries do (unified_memory.hpp; detail::current_device_scope). The pool comes
/// from the driver
/// (CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE); for page-locked host memory the driver's refusal to
/// answer is taken as "no pool".
inline pointer_info pointer_attributes(const void* pointer) {
  cudaPointerAttributes native{};
  detail::current_device_scope in_context(detail::any_context, pointer);
  detail::check(cudaPointerGetAttributes(&native, pointer), "cudaPointerGetAttributes", __FILE__,
                __LINE__);
  pointer_info info;
  info.kind = static_cast<memory_kind>(native.type);
  info.device = native.device;
  info.device_pointer = native.devicePointer;
  info.host_pointer = native.hostPointer;
  if (info.kind == memory_kind::unregistered) return info;
  CUmemoryPool pool = nullptr;
  const int status =
      detail::query_pointer_attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, pointer);
  if (status == CUDA_SUCCESS)
    info.pool = reinterpret_cast<cudaMemPool_t>(pool);
  else if (info.kind != memory_kind::host)
    detail::check_driver(status, "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)",
                         __FILE__, __LINE__);
  return info;
}

}  // namespace curt
