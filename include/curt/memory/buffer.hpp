// curt/memory/buffer.hpp: typed, move-only owners of memory, one per kind:
//   curt::device_buffer<T>    cudaMalloc on a device
//   curt::pinned_buffer<T>    cudaHostAlloc: page-locked host memory (portable, mapped, ...)
//   curt::managed_buffer<T>   cudaMallocManaged: memory the host and every device address alike
//   curt::host_registration   cudaHostRegister of host memory the program already has
// and curt::pointer_attributes, what CUDA knows about any pointer.
//
// Each is made on an explicit device (through device_guard) and freed in the context it was
// allocated in, which it learns then (a user's context of that device current at the allocation,
// else the device's primary one). 0 elements allocate nothing and are valid; count * sizeof(T)
// beyond std::size_t is refused before CUDA is called. Owners that hold nothing, and views: see
// memory/owner.hpp. Owners alive across cudaDeviceReset are outside curt's contract.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/error.hpp>
#include <curt/core/flags.hpp>
#include <curt/execution/stream.hpp>
#include <curt/memory/owner.hpp>
#include <curt/memory/range.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace curt {

/// How cudaHostAlloc pins memory; combine with |.
enum class pinned_flags : unsigned {
  none = cudaHostAllocDefault,
  portable = cudaHostAllocPortable,             ///< pinned for every context, not only its device's
  mapped = cudaHostAllocMapped,                 ///< kernels may address it (device_pointer())
  write_combined = cudaHostAllocWriteCombined,  ///< fast host writes, PCIe reads; slow host reads
};
CURT_DETAIL_FLAGS(pinned_flags);
/// How cudaHostRegister pins existing memory; combine with |.
enum class register_flags : unsigned {
  none = cudaHostRegisterDefault,
  portable = cudaHostRegisterPortable,   ///< pinned for every context
  mapped = cudaHostRegisterMapped,       ///< kernels may address it (device_pointer())
  io_memory = cudaHostRegisterIoMemory,  ///< the range is memory-mapped I/O (a PCI BAR)
  read_only = cudaHostRegisterReadOnly,  ///< the device only reads it (needs the device attribute)
};
CURT_DETAIL_FLAGS(register_flags);
/// Which streams may use managed memory (cudaMallocManaged: global or host; attach(): single too).
enum class attach_flags : unsigned {
  global = cudaMemAttachGlobal,  ///< any stream on any device
  host = cudaMemAttachHost,      ///< no stream until attached: the host uses it freely
  single = cudaMemAttachSingle,  ///< only the stream it is attached to (attach() only)
};


namespace detail {

/// Where memory was allocated: the context it is freed in, and its device.
struct allocation {
  CUcontext context = nullptr;
  int ordinal = -1;
};

// Frees `p` with `free` in the context it was allocated in (the owner reports a throw).
inline void free_in(const allocation& where, cudaError_t (*free)(void*), void* p,
                    const char* call) {
  context_scope in(where.context);
  check(free(p), call, __FILE__, __LINE__);
}

#define CURT_DETAIL_BUFFER_KIND(kind, owner, iterable, free_call)   \
  struct kind {                                                     \
    using place = allocation;                                       \
    static constexpr const char* name = #owner;                     \
    static constexpr bool host_iterable = iterable;                 \
    static void free(void* p, const allocation& where) {            \
      free_in(where, &free_call, p, #free_call "(" #owner ")");     \
    }                                                               \
  };
CURT_DETAIL_BUFFER_KIND(device_memory_kind, device_buffer, false, cudaFree)
CURT_DETAIL_BUFFER_KIND(pinned_memory_kind, pinned_buffer, true, cudaFreeHost)
CURT_DETAIL_BUFFER_KIND(managed_memory_kind, managed_buffer, true, cudaFree)
CURT_DETAIL_BUFFER_KIND(registration_kind, host_registration, false, cudaHostUnregister)
#undef CURT_DETAIL_BUFFER_KIND

template <class Allocate>  // runs `allocate()` in d's device_guard, learning the context it ran in
allocation allocate_on(curt::device d, Allocate&& allocate) {
  device_guard guard(d);
  allocate();
  return {current_context(), d.ordinal()};
}

/// For adopt(): memory a caller allocated on device d, in its own context where the driver names
/// one, else in d's primary context. Null memory is never freed: nothing is asked.
template <class T>
allocation adopted(const char* kind, curt::device d, const void* memory, std::size_t count) {
  (void)checked_bytes<T>(count, kind, "adopt count");
  if (memory == nullptr && count != 0)
    raise(cudaErrorInvalidValue, fmt("%s::adopt(null, %zu)", owner_name<T>(kind).c_str(), count),
          "a null pointer can only be adopted with a count of 0", __FILE__, __LINE__);
  CUcontext own = nullptr;
  if (memory != nullptr &&
      (context_scope::query_pointer(&own, driver_fn::pointer_attribute_context, memory) != 0 ||
       own == nullptr))
    own = primary_context(d.ordinal());
  return {own, d.ordinal()};
}

// The address kernels use for mapped host memory (cudaHostGetDevicePointer), in its context.
inline void* mapped_pointer(void* host, bool mapped, const allocation& where,
                            const std::string& owner, const char* flag, const char* argument) {
  if (!mapped)
    raise(cudaErrorInvalidValue, fmt("%s::device_pointer()", owner.c_str()),
          fmt("it was made without %s, so kernels cannot address it; make it with %s", flag, flag),
          __FILE__, __LINE__);
  if (host == nullptr) return nullptr;  // 0 elements
  void* p = nullptr;
  context_scope in(where.context);
  check(cudaHostGetDevicePointer(&p, host, 0), "cudaHostGetDevicePointer",
        {argument, {"device", where.ordinal}}, __FILE__, __LINE__);
  return p;
}

/// What the three buffers share: allocation on a device, adoption, device().
template <class T, class Kind>
class buffer : public memory_owner<T, Kind> {
  using base = memory_owner<T, Kind>;

 public:
  /// The device the memory was allocated on (in whose context it is freed).
  curt::device device() const {
    (void)this->native("device()");
    return curt::device::from_ordinal_unchecked(this->place_.ordinal);
  }

 protected:
  using base::base;
  // Allocates with `allocate(&p, bytes)`, runtime call `call` (`flags` < 0: none), in d's context.
  template <class Allocate>
  buffer(curt::device d, std::size_t count, const char* call, long long flags, Allocate allocate)
      : base(nullptr, count, allocation{nullptr, d.ordinal()}) {
    const std::size_t bytes = checked_bytes<T>(count, Kind::name, "count");
    if (bytes == 0) return;
    void* p = nullptr;
    this->place_ = allocate_on(d, [&] {
      const cudaError_t status = allocate(&p, bytes);
      const auto b = static_cast<long long>(bytes);
      if (flags < 0)
        check(status, call, {{"bytes", b}, {"device", d.ordinal()}}, __FILE__, __LINE__);
      else
        check(status, call, {{"bytes", b}, {"flags", flags}, {"device", d.ordinal()}}, __FILE__,
              __LINE__);
    });
    this->handle_ = static_cast<T*>(p);
  }
};

}  // namespace detail

/// count uninitialized elements of T in device memory of device d (cudaMalloc, in a context of d
/// current already, else d's primary context). Throws curt::out_of_memory when d has too little.
template <class T>
class device_buffer : public detail::buffer<T, detail::device_memory_kind> {
  using base = detail::buffer<T, detail::device_memory_kind>;

 public:
  /// Allocates (cudaMalloc); no_handle: an empty owner, every use throws until assigned. @{
  device_buffer(curt::device d, std::size_t count)
      : base(d, count, "cudaMalloc", -1,
             [](void** p, std::size_t n) { return cudaMalloc(p, n); }) {}
  explicit device_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}  ///@}

  /// Owns `count` elements from cudaMalloc on device d, freed by cudaFree; null only if count is 0.
  static device_buffer adopt(curt::device d, T* memory, std::size_t count) {
    return device_buffer(memory, count, detail::adopted<T>("device_buffer", d, memory, count));
  }

 private:
  using base::base;
};

/// count elements of T in page-locked host memory (cudaHostAlloc) of device d's context: fast,
/// asynchronous copies; with pinned_flags::mapped, kernels address it too. Not initialized.
template <class T>
class pinned_buffer : public detail::buffer<T, detail::pinned_memory_kind> {
  using base = detail::buffer<T, detail::pinned_memory_kind>;

 public:
  using iterator = T*;              ///< a pointer: the elements are contiguous host memory
  using const_iterator = const T*;  ///< a pointer to const elements
  /// Allocates with cudaHostAlloc(`flags`); no_handle: an empty owner, every use throws. @{
  pinned_buffer(curt::device d, std::size_t count, pinned_flags flags = pinned_flags::none)
      : base(d, count, "cudaHostAlloc", static_cast<long long>(flags),
             [flags](void** p, std::size_t n) {
               return cudaHostAlloc(p, n, static_cast<unsigned>(flags));
             }),
        flags_(flags) {}
  explicit pinned_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}  ///@}

  /// Owns elements from cudaHostAlloc/cudaMallocHost on device d with `flags` (cudaFreeHost frees).
  static pinned_buffer adopt(curt::device d, T* memory, std::size_t count,
                             pinned_flags flags = pinned_flags::none) {
    pinned_buffer b(memory, count, detail::adopted<T>("pinned_buffer", d, memory, count));
    b.flags_ = flags;
    return b;
  }

  pinned_flags flags() const noexcept { return flags_; }  ///< Flags it was made or adopted with.
  /// The address kernels use: data() if its device has unified addressing (all devices then reach
  /// cudaHostAlloc memory, whatever its flags), else the mapped one (pinned_flags::mapped only).
  T* device_pointer() const {
    T* host = const_cast<T*>(this->native("device_pointer()"));
    if (detail::cached_properties(this->place_.ordinal).unifiedAddressing) return host;
    return static_cast<T*>(detail::mapped_pointer(
        host, has_flag(flags_, pinned_flags::mapped), this->place_,
        detail::owner_name<T>("pinned_buffer"), "pinned_flags::mapped", "pinned_buffer"));
  }

 private:
  using base::base;
  pinned_flags flags_ = pinned_flags::none;
};

/// count elements of T in managed memory (cudaMallocManaged) of device d's context: one pointer for
/// the host and every device (prefetches, advice: memory/unified.hpp). Not initialized. Without
/// concurrent managed access, the host must not touch it while a kernel that may use it runs.
template <class T>
class managed_buffer : public detail::buffer<T, detail::managed_memory_kind> {
  using base = detail::buffer<T, detail::managed_memory_kind>;

 public:
  using iterator = T*;              ///< a pointer: the elements are contiguous managed memory
  using const_iterator = const T*;  ///< a pointer to const elements
  /// `flags`: attach_flags global (any stream) or host (none until attach()); no_handle: empty. @{
  managed_buffer(curt::device d, std::size_t count, attach_flags flags = attach_flags::global)
      : base(d, count, "cudaMallocManaged", allocation_flags(flags),
             [flags](void** p, std::size_t n) {
               return cudaMallocManaged(p, n, static_cast<unsigned>(flags));
             }) {}
  explicit managed_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}  ///@}

  /// Takes ownership of elements the caller allocated with cudaMallocManaged; freed with cudaFree.
  static managed_buffer adopt(curt::device d, T* memory, std::size_t count) {
    return managed_buffer(memory, count, detail::adopted<T>("managed_buffer", d, memory, count));
  }

  /// Which streams may use the whole allocation from the point this reaches in `stream`
  /// (cudaStreamAttachMemAsync): single for `stream` alone, host for none, global for all.
  void attach(stream_ref stream, attach_flags flags = attach_flags::single) {
    T* p = this->native("attach()");
    cudaStream_t h = stream.get();
    if (p == nullptr) return;  // 0 elements: nothing to attach
    detail::context_scope in(detail::for_stream, h);
    detail::check(
        cudaStreamAttachMemAsync(h, p, 0, static_cast<unsigned>(flags)), "cudaStreamAttachMemAsync",
        {"stream", "managed_buffer", {"flags", static_cast<long long>(flags)}}, __FILE__, __LINE__);
  }

 private:
  using base::base;
  static long long allocation_flags(attach_flags flags) {
    if (flags != attach_flags::global && flags != attach_flags::host)
      detail::raise(cudaErrorInvalidValue,
                    detail::fmt("%s(attach flags %u)",
                                detail::owner_name<T>("managed_buffer").c_str(),
                                static_cast<unsigned>(flags)),
                    "cudaMallocManaged takes attach_flags::global or attach_flags::host; attach "
                    "to a single stream afterwards with attach(stream, attach_flags::single)",
                    __FILE__, __LINE__);
    return static_cast<long long>(flags);
  }
};

/// Page-locks host memory the program already has (cudaHostRegister, in device d's context) for the
/// owner's lifetime. The memory, still the caller's, must outlive it. Already page-locked memory
/// fails with cudaErrorHostMemoryAlreadyRegistered. 0 bytes register nothing (a null pointer).
class host_registration
    : public detail::unique_handle<detail::memory_span<unsigned char, detail::registration_kind>,
                                   detail::memory_traits<detail::registration_kind>> {
  using span = detail::memory_span<unsigned char, detail::registration_kind>;
  using base = detail::unique_handle<span, detail::memory_traits<detail::registration_kind>>;

 public:
  /// Registers `bytes` bytes at `memory` (none for 0; null throws); no_handle: an empty owner. @{
  host_registration(curt::device d, void* memory, std::size_t bytes,
                    register_flags flags = register_flags::none)
      : base(span(nullptr, bytes, {nullptr, d.ordinal()})), flags_(flags) {
    if (bytes == 0) return;
    if (memory == nullptr)
      detail::raise(cudaErrorInvalidValue,
                    detail::fmt("curt::host_registration(null, %zu bytes)", bytes),
                    "nothing to register at a null pointer", __FILE__, __LINE__);
    place_ = detail::allocate_on(d, [&] {
      cudaError_t status = cudaHostRegister(memory, bytes, static_cast<unsigned>(flags));
      if (CURT_UNLIKELY(status != cudaSuccess)) fail(status, memory, bytes, flags, d.ordinal());
    });
    handle_ = static_cast<unsigned char*>(memory);
  }
  /// Registers a contiguous range's elements (a std::vector, ...), which must outlive it.
  template <class Range, std::enable_if_t<detail::has_data_and_size<Range>::value, int> = 0>
  host_registration(curt::device d, Range& range, register_flags flags = register_flags::none)
      : host_registration(d, const_cast<void*>(static_cast<const void*>(range.data())),
                          range.size() * sizeof(*range.data()), flags) {}
  explicit host_registration(no_handle_t) noexcept
      : base(span(detail::state_handle<unsigned char*>(detail::handle_state::empty), 0, {})) {}

  /// The registered memory; throws when the owner holds none.
  void* data() const { return usable("data()"); }  ///@}
  void* get() const { return usable("get()"); }  ///< Same as data().
  std::size_t size_bytes() const noexcept { return size(); }  ///< Bytes registered; 0 if none are.
  register_flags flags() const noexcept { return flags_; }  ///< The cudaHostRegister flags.
  /// The device in whose context it was registered; throws when the owner holds none.
  curt::device device() const {
    (void)usable("device()");
    return curt::device::from_ordinal_unchecked(place_.ordinal);
  }
  /// The address kernels use for the memory (with register_flags::mapped only).
  void* device_pointer() const {
    return detail::mapped_pointer(
        usable("device_pointer()"), has_flag(flags_, register_flags::mapped), place_,
        "curt::host_registration", "register_flags::mapped", "registered memory");
  }
  /// Gives up the registration (the caller unregisters the pointer); the owner is "released".
  void* release() {
    (void)usable("release()");
    return base::release();
  }

 private:
  using span::size;
  void* usable(const char* operation) const {
    if (CURT_UNLIKELY(detail::is_state_handle(handle_)))
      detail::throw_no_handle(handle_, "curt::host_registration", operation, "memory");
    return handle_;
  }
  [[noreturn]] CURT_COLD static void fail(cudaError_t status, void* memory, std::size_t bytes,
                                          register_flags flags, int ordinal) {
    detail::throw_error(
        make_error_code(status),
        detail::fmt("cudaHostRegister(%p, %zu bytes, flags %u, device %d)", memory, bytes,
                    static_cast<unsigned>(flags), ordinal),
        __FILE__, __LINE__, [&]() -> std::string {
          if (status == cudaErrorHostMemoryAlreadyRegistered)
            return "this memory, or part of it, is page-locked already: registered before (by "
                   "another host_registration or cudaHostRegister) or allocated with "
                   "cudaHostAlloc / curt::pinned_buffer; register each range once";
          if (status == cudaErrorNotSupported && has_flag(flags, register_flags::read_only))
            return "register_flags::read_only needs cudaDevAttrHostRegisterReadOnlySupported";
          return {};
        });
  }

  register_flags flags_ = register_flags::none;
};

/// Which kind of memory a pointer points into (cudaMemoryType).
enum class memory_kind {
  unregistered = cudaMemoryTypeUnregistered,  ///< pageable host memory, or not CUDA's at all
  host = cudaMemoryTypeHost,                  ///< page-locked host memory (pinned or registered)
  device = cudaMemoryTypeDevice,
  managed = cudaMemoryTypeManaged,
};

/// What CUDA knows about a pointer (cudaPointerGetAttributes, and the driver for the pool).
struct pointer_info {
  memory_kind kind = memory_kind::unregistered;  ///< cudaPointerAttributes::type
  int device = cudaInvalidDeviceId;  ///< -2 for unregistered memory
  void* device_pointer = nullptr;    ///< null where the device cannot address the memory
  void* host_pointer = nullptr;      ///< null where the host cannot address the memory
  cudaMemPool_t pool = nullptr;      ///< the pool of stream-ordered memory; null otherwise
};

/// What CUDA knows about `pointer` (in the memory's own context where none is current). Pageable
/// memory, or any address CUDA does not know, is kind unregistered, device -2, no error. The pool
/// comes from the driver; for page-locked host memory its refusal to answer means "no pool".
inline pointer_info pointer_attributes(const void* pointer) {
  cudaPointerAttributes native{};
  detail::context_scope in(detail::for_memory, pointer);
  detail::check(cudaPointerGetAttributes(&native, pointer), "cudaPointerGetAttributes", __FILE__,
                __LINE__);
  pointer_info info{static_cast<memory_kind>(native.type), native.device, native.devicePointer,
                    native.hostPointer, nullptr};
  if (info.kind == memory_kind::unregistered) return info;
  constexpr int mempool_handle = 17;  // CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
  const int status = detail::context_scope::query_pointer(&info.pool, mempool_handle, pointer);
  if (info.kind != memory_kind::host)
    detail::check(status, "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)", __FILE__,
                  __LINE__);
  if (status != 0) info.pool = nullptr;
  return info;
}

}  // namespace curt
