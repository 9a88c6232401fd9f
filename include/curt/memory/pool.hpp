// curt/memory/pool.hpp: stream-ordered memory pools (cudaMemPool_t) and the buffers they hand out.
//
//   curt::memory_pool pool(curt::memory_pool_properties::device(gpu).max_size(256 << 20));
//   curt::async_buffer<float> x = pool.allocate<float>(n, stream);   // cudaMallocFromPoolAsync
//   curt::launch(stream, config, kernel, x.data(), n);
//   // ~async_buffer: cudaFreeAsync(x, stream), ordered after the kernel; no synchronization
//
// - memory_pool owns a pool made from memory_pool_properties and keeps them (CUDA 13.0 cannot
//   read them back); memory_pool_ref views any pool and carries what is known of it.
// - HOST AND MANAGED POOLS GIVE DEVICES NO ACCESS UNTIL set_access(device, read_write) (or the
//   devices are named when the pool is made): a kernel touching such memory before faults with a
//   sticky cudaErrorIllegalAddress. A device pool's own device always has access.
// - Synchronous allocation (allocate_sync, CCCL's allocate(bytes, alignment)) has no stream of its
//   own: it uses the thread's per-thread default stream of the pool's context (one of its device,
//   as device_guard picks it; any for host and managed pools; in a green context, which has no
//   per-thread stream, its legacy one) and waits for that stream (so also for the thread's earlier
//   work there, and for the legacy default stream it synchronizes with). deallocate_sync frees
//   there without waiting. Both run in relaxed capture mode, so a global-mode capture on another
//   thread stays valid; neither may run while the thread's per-thread default stream is captured.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/memory/async_buffer.hpp>
#include <curt/memory/location.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>

namespace curt::detail::driver_fn {
CURT_DETAIL_DRIVER_TYPE(cuMemPoolDestroy_v11020, cudaMemPool_t pool);
}  // namespace curt::detail::driver_fn

namespace curt {
/// What a device (or the host) may do with a pool's memory.
enum class pool_access : unsigned {
  none = cudaMemAccessFlagsProtNone,
  read = cudaMemAccessFlagsProtRead,
  read_write = cudaMemAccessFlagsProtReadWrite,
};

/// The properties a pool is created with (cudaMemPoolProps), set by name:
///   curt::memory_pool_properties::pinned_host().max_size(64 << 20)
///   curt::memory_pool_properties::device(gpu).exportable()
class memory_pool_properties {
  using at = memory_location;
  static constexpr auto managed_ = cudaMemAllocationTypeManaged;
  static constexpr auto posix_fd = cudaMemHandleTypePosixFileDescriptor;

 public:
  memory_pool_properties() noexcept = default;  ///< no location or kind (an unknown import)
  /// Device memory of `d`; pinned host memory (cannot be exported: CUDA's rule), on NUMA node
  /// `node`; managed memory with no preferred location, or preferring `d`. @{
  static memory_pool_properties device(curt::device d) noexcept { return {at::device(d)}; }
  static memory_pool_properties pinned_host() noexcept { return {at::host()}; }
  static memory_pool_properties host_numa(int node) noexcept { return {at::host_numa(node)}; }
  static memory_pool_properties managed() noexcept { return {at::none(), managed_}; }
  static memory_pool_properties managed(curt::device d) noexcept {
    return {at::device(d), managed_};
  }  ///@}
  /// The most the pool may hold, in bytes (0: the system's limit; CUDA rounds it up to 32 MiB).
  memory_pool_properties& max_size(std::size_t n) noexcept { return set(props_.maxSize, n); }
  /// Exportable to another process as a POSIX fd (<curt/memory_pool_ipc.hpp>), or as `types`. @{
  memory_pool_properties& exportable() noexcept { return handle_types(posix_fd); }
  memory_pool_properties& handle_types(cudaMemAllocationHandleType types) noexcept {
    return set(props_.handleTypes, types);
  }  ///@}
  /// Intended-usage flags (cudaMemPoolCreateUsageHwDecompress).
  memory_pool_properties& usage(unsigned short flags) noexcept { return set(props_.usage, flags); }

  /// As set (0 where unset: location none(), kind Invalid); native(): the cudaMemPoolProps. @{
  memory_location location() const noexcept { return at::from_native(props_.location); }
  cudaMemAllocationType allocation_type() const noexcept { return props_.allocType; }
  bool is_managed() const noexcept { return props_.allocType == managed_; }
  std::size_t max_size() const noexcept { return props_.maxSize; }
  cudaMemAllocationHandleType handle_types() const noexcept { return props_.handleTypes; }
  bool is_exportable() const noexcept { return (props_.handleTypes & posix_fd) != 0; }
  unsigned short usage() const noexcept { return props_.usage; }
  const cudaMemPoolProps& native() const noexcept { return props_; }  ///@}

 private:
  memory_pool_properties(memory_location where,
                         cudaMemAllocationType type = cudaMemAllocationTypePinned) noexcept {
    props_.allocType = type;
    props_.location = where.native();
  }
  template <class Field, class Value>
  memory_pool_properties& set(Field& field, Value value) noexcept {
    field = value;
    return *this;
  }
  cudaMemPoolProps props_{};
};

/// Reserved and used bytes of a pool, now and at their highest since the last reset.
struct memory_pool_statistics {
  /// In bytes: reserved, held from the system; used, allocated and not yet free for reuse. @{
  std::size_t reserved = 0, reserved_high = 0;
  std::size_t used = 0, used_high = 0;  ///@}
};

/// A pool checked to have cuda::mr properties: <curt/memory_resource.hpp> defines it for one or
/// more properties (this primary template says so where that header is missing).
template <class... Properties>
class pool_resource {
  static_assert(sizeof...(Properties) == std::size_t(-1),
                "curt::pool_resource needs <curt/memory_resource.hpp> and a cuda::mr property");
};

namespace detail {
/// Runs `call` (a runtime call on, or for, a pool) in a context: a device pool's in one of its
/// device (device_guard), others in any one (a thread with no context wakes no unused device).
template <class Call>
auto in_pool_context(memory_location where, Call&& call) {
  if (where.is_device()) {
    device_guard guard(curt::device::from_ordinal_unchecked(where.id()));
    return call();
  }
  context_scope in(any_context);
  return call();
}

/// CCCL's rule: a power of two no larger than 256 (every pool allocation is 256-byte aligned).
inline void check_pool_alignment(std::size_t n, const char* operation) {
  if (CURT_UNLIKELY(n == 0 || n > 256 || (n & (n - 1)) != 0))
    raise(cudaErrorInvalidValue, fmt("curt::memory_pool_ref::%s", operation),
          fmt("alignment %zu is not a power of two no larger than 256", n), __FILE__, __LINE__);
}

/// The stream of synchronous allocations: the per-thread default stream of the current
/// context, or in a green context, which has none (CUDA 13.0), its legacy one.
inline cudaStream_t sync_allocation_stream() {
  return green_context_current() ? cudaStreamLegacy : cudaStreamPerThread;
}
}  // namespace detail

/// Where memory_pool_ref::export_handle() ends up without <curt/memory_pool_ipc.hpp>.
template <class Pool>
void export_memory_pool(const Pool&) {
  static_assert(sizeof(Pool) == 0, "curt: export_handle() needs <curt/memory_pool_ipc.hpp>");
}

/// A copyable view of any pool, with its location, kind and maximum size where known (none for a
/// bare handle). A ref to an empty, moved-from or released memory_pool throws a cuda_error on use.
class memory_pool_ref {
 public:
  /// A bare handle (implicit): location, kind and maximum size unknown.
  memory_pool_ref(cudaMemPool_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit
  /// A pool whose location and kind the caller knows (its properties, or where it came from). @{
  memory_pool_ref(cudaMemPool_t handle, const memory_pool_properties& p) noexcept
      : memory_pool_ref(handle, p.location(), p.allocation_type()) {
    max_size_ = p.max_size();
  }
  memory_pool_ref(cudaMemPool_t handle, memory_location where, cudaMemAllocationType type) noexcept
      : handle_(handle), where_(where), type_(type) {}  ///@}
  memory_pool_ref(int) = delete;             ///< 0 is not a pool
  memory_pool_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The native handle; valid() is false, and get() throws, for a ref to an owner holding none. @{
  cudaMemPool_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///@}
  /// Where the pool's memory lives (none for managed memory without a preferred location).
  memory_location location() const noexcept { return where_; }
  /// Pinned (device or pinned host pool) or Managed; Invalid (kind unknown) for a bare handle. @{
  cudaMemAllocationType allocation_type() const noexcept { return type_; }
  bool kind_known() const noexcept { return type_ != cudaMemAllocationTypeInvalid; }
  bool is_device_pool() const noexcept { return is_pinned() && where_.is_device(); }
  bool is_host_pool() const noexcept { return is_pinned() && where_.is_host(); }
  bool is_managed_pool() const noexcept { return type_ == cudaMemAllocationTypeManaged; }
  ///@}
  /// The host addresses the pool's memory: a pool of pinned host (or host NUMA) or managed memory.
  bool host_addressable() const noexcept { return is_host_pool() || is_managed_pool(); }
  /// True for a pool imported from another process: it cannot allocate.
  bool is_imported() const noexcept { return imported_; }
  /// The maximum size the pool was made with (before CUDA's rounding); 0: none or unknown.
  std::size_t max_size() const noexcept { return max_size_; }
  /// Bytes the pool keeps after a synchronization before releasing more; never_release: all. @{
  std::size_t release_threshold() const { return size(threshold_); }
  void set_release_threshold(std::size_t bytes) const { set(threshold_, u64(bytes)); }
  static constexpr std::size_t never_release = ~std::size_t(0);  ///@}
  /// Reuse policies, all on by default: memory freed on another stream once an event orders the
  /// two; whose free the GPU passed, unordered; or (out of memory) after a pending free. @{
  bool reuse_follow_event_dependencies() const { return flag(follow_); }
  bool reuse_allow_opportunistic() const { return flag(opportunistic_); }
  bool reuse_allow_internal_dependencies() const { return flag(internal_); }
  void set_reuse_follow_event_dependencies(bool on) const { set(follow_, int(on)); }
  void set_reuse_allow_opportunistic(bool on) const { set(opportunistic_, int(on)); }
  void set_reuse_allow_internal_dependencies(bool on) const { set(internal_, int(on)); }  ///@}
  /// Bytes held from the system, and allocated and not yet free: now, and highest since reset. @{
  std::size_t reserved_memory() const { return size(cudaMemPoolAttrReservedMemCurrent); }
  std::size_t reserved_memory_high() const { return size(cudaMemPoolAttrReservedMemHigh); }
  std::size_t used_memory() const { return size(cudaMemPoolAttrUsedMemCurrent); }
  std::size_t used_memory_high() const { return size(cudaMemPoolAttrUsedMemHigh); }
  memory_pool_statistics statistics() const {
    return {reserved_memory(), reserved_memory_high(), used_memory(), used_memory_high()};
  }  ///@}
  /// Both high watermarks take on the current values.
  void reset_high_watermarks() const {
    set(cudaMemPoolAttrReservedMemHigh, u64(0));
    set(cudaMemPoolAttrUsedMemHigh, u64(0));
  }
  /// Releases unused memory, keeping at least `bytes_to_keep` (frees count once synchronized).
  void trim_to(std::size_t bytes_to_keep) const {
    cudaMemPool_t pool = native("trim_to()");
    call([&] { return cudaMemPoolTrimTo(pool, bytes_to_keep); }, "cudaMemPoolTrimTo",
         {"pool", {"bytes to keep", static_cast<long long>(bytes_to_keep)}});
  }

  /// Gives devices this access to all of the pool's memory, present and future. @{
  void set_access(curt::device d, pool_access access) const { set_access({d}, access); }
  void set_access(std::initializer_list<curt::device> devices, pool_access access) const {
    cudaMemPool_t pool = native("set_access()");
    for (curt::device d : devices) {
      const cudaMemAccessDesc one{memory_location::device(d).native(), cudaMemAccessFlags(access)};
      call([&] { return cudaMemPoolSetAccess(pool, &one, 1); }, "cudaMemPoolSetAccess",
           {"pool", {"device", d.ordinal()}, {"access", static_cast<long long>(access)}});
    }
  }  ///@}
  /// The access device `d`, the host, or any location has to the pool's memory. @{
  pool_access access(curt::device d) const { return access(memory_location::device(d)); }
  pool_access host_access() const { return access(memory_location::host()); }
  pool_access access(memory_location from) const {
    cudaMemPool_t pool = native("access()");
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    cudaMemLocation at = from.native();
    call([&] { return cudaMemPoolGetAccess(&flags, pool, &at); }, "cudaMemPoolGetAccess",
         {"pool", {"location type", at.type}, {"id", at.id}});
    return static_cast<pool_access>(flags);
  }  ///@}
  /// `count` elements of T, for work on `stream` after this call (and on other streams ordered
  /// after it); freed on `stream` by the buffer. Throws curt::out_of_memory past the pool's
  /// maximum size; refuses a default stream while a green context is current (async_buffer). @{
  template <class T>
  async_buffer<T> allocate(std::size_t count, stream_ref stream) const;
  template <class T>
  async_buffer<T> allocate(std::size_t count, const stream& s) const {
    return detail::async_memory_kind::watching(allocate<T>(count, stream_ref(s)), s);
  }  ///@}

  /// cuda::mr, CCCL 3.0.1 names: synchronous (see the file comment) and stream-ordered (the free's
  /// stream ordered after every use); deallocations report failures (CCCL calls them noexcept). @{
  void* allocate(std::size_t n, std::size_t align) const { return allocate_sync(n, align); }
  void deallocate(void* p, std::size_t n, std::size_t align) const noexcept {
    deallocate_sync(p, n, align);
  }
  void* allocate_async(std::size_t n, std::size_t align, stream_ref stream) const {
    detail::check_pool_alignment(align, "allocate_async()");
    return allocate_bytes(native("allocate_async()"), n, stream.get());
  }
  void deallocate_async(void* p, std::size_t, std::size_t, stream_ref stream) const noexcept {
    try {
      detail::free_async(p, detail::free_place{stream, nullptr, {}});
    } catch (const std::exception& error) {  // a stream that holds none: the memory stays
      detail::report(error);
    }
  }  ///@}
  /// cuda::mr, CCCL 3.1+ names. Allocation alignments: powers of two up to 256 (else it throws). @{
  void* allocate_sync(std::size_t n, std::size_t align = 256) const {
    detail::check_pool_alignment(align, "allocate_sync()");
    cudaMemPool_t pool = native("allocate_sync()");
    if (n == 0) return nullptr;
    return detail::in_pool_context(where_, [&] {
      detail::relaxed_capture relaxed;
      const cudaStream_t s = detail::sync_allocation_stream();
      void* p = allocate_bytes(pool, n, s);
      const cudaError_t status = cudaStreamSynchronize(s);
      if (CURT_UNLIKELY(status != cudaSuccess)) (void)cudaFreeAsync(p, s);
      detail::check(status, "cudaStreamSynchronize", {"default stream"}, __FILE__, __LINE__);
      return p;
    });
  }
  void deallocate_sync(void* p, std::size_t, std::size_t = 256) const noexcept {
    if (p == nullptr) return;
    try {
      detail::in_pool_context(where_, [&] {
        detail::relaxed_capture relaxed;
        detail::report(cudaFreeAsync(p, detail::sync_allocation_stream()),
                       "cudaFreeAsync(memory, default stream)", __FILE__, __LINE__);
      });
    } catch (const std::exception& error) {  // no context could be made current
      detail::report(error);
    }
  }
  void* allocate(stream_ref s, std::size_t n, std::size_t align = 256) const {
    return allocate_async(n, align, s);
  }
  void deallocate(stream_ref s, void* p, std::size_t n, std::size_t align = 256) const noexcept {
    deallocate_async(p, n, align, s);
  }  ///@}

  /// An owned POSIX file descriptor of an exportable() pool (<curt/memory_pool_ipc.hpp>).
  template <class Self = memory_pool_ref>
  auto export_handle() const {
    return export_memory_pool(static_cast<const Self&>(*this));  // ADL: memory_pool_ipc.hpp
  }

  /// Same pool. (Refs to owners that hold none compare by their state.) @{
  friend bool operator==(const memory_pool_ref& a, const memory_pool_ref& b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(const memory_pool_ref& a, const memory_pool_ref& b) noexcept {
    return a.handle_ != b.handle_;
  }  ///@}

  /// "pool 0x... of device 0 memory, max size ... bytes": for messages.
  CURT_COLD std::string describe() const {
    const std::string where = where_.describe();
    std::string kind = is_managed_pool() ? " of managed memory" : " (location unknown)";
    if (is_managed_pool()) kind += where_.is_none() ? " (no preferred location)" : " on " + where;
    if (is_pinned()) kind = (where_.is_device() ? " of " : " of pinned ") + where + " memory";
    return detail::fmt("pool %p%s%s%s", static_cast<void*>(handle_), kind.c_str(),
                       imported_ ? ", imported from another process" : "",
                       max_size_ ? detail::fmt(", max size %zu bytes", max_size_).c_str() : "");
  }

 protected:
  /// get(), naming `operation` in the error it throws.
  cudaMemPool_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::memory_pool", operation);
  }
  cudaMemPool_t handle_;                                        ///< get(), or a state (valid())
  memory_location where_;                                       ///< location()
  cudaMemAllocationType type_ = cudaMemAllocationTypeInvalid;  ///< allocation_type()
  bool imported_ = false;                                       ///< is_imported()
  std::size_t max_size_ = 0;                                    ///< max_size(), in bytes

 private:
  using u64 = std::uint64_t;  // the size attributes' type (cuuint64_t)
  static constexpr cudaMemPoolAttr threshold_ = cudaMemPoolAttrReleaseThreshold,
                                   follow_ = cudaMemPoolReuseFollowEventDependencies,
                                   opportunistic_ = cudaMemPoolReuseAllowOpportunistic,
                                   internal_ = cudaMemPoolReuseAllowInternalDependencies;
  bool is_pinned() const noexcept { return type_ == cudaMemAllocationTypePinned; }
  template <class Call>  // a checked runtime call on the pool in its context (in_pool_context)
  void call(Call&& runtime_call, const char* function,
            std::initializer_list<detail::call_argument> arguments) const {
    detail::check(detail::in_pool_context(where_, runtime_call), function, arguments, __FILE__,
                  __LINE__);
  }
  std::size_t size(cudaMemPoolAttr attribute) const { return get<u64>(attribute); }
  bool flag(cudaMemPoolAttr attribute) const { return get<int>(attribute) != 0; }
  template <class Value>
  Value get(cudaMemPoolAttr attribute) const {
    cudaMemPool_t pool = native("attribute()");
    Value value{};
    call([&] { return cudaMemPoolGetAttribute(pool, attribute, &value); },
         "cudaMemPoolGetAttribute", {"pool", {"attribute", attribute}});
    return value;
  }
  template <class Value>
  void set(cudaMemPoolAttr attribute, Value value) const {
    cudaMemPool_t pool = native("set_attribute()");
    call([&] { return cudaMemPoolSetAttribute(pool, attribute, &value); },
         "cudaMemPoolSetAttribute",
         {"pool", {"attribute", attribute}, {"value", static_cast<long long>(value)}});
  }

  // cudaMallocFromPoolAsync in the stream's context: the hot path of every allocation.
  void* allocate_bytes(cudaMemPool_t pool, std::size_t bytes, cudaStream_t stream) const {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    detail::context_scope in(detail::for_stream, stream);
    cudaError_t status = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(make_error_code(status),
                          detail::describe_call("cudaMallocFromPoolAsync",
                                                {"pool", {"bytes", static_cast<long long>(bytes)},
                                                 "stream"}),
                          __FILE__, __LINE__, [&] { return why_not(status, bytes); });
    return p;
  }
  // Why an allocation failed: an imported pool, or the pool's limit (rounded up to 32 MiB).
  CURT_COLD std::string why_not(cudaError_t status, std::size_t bytes) const {
    if (imported_)
      return describe() + ": a pool imported from another process cannot allocate; allocate in "
                          "the exporting process and import the pointer (curt::import_pointer)";
    if (status != cudaErrorMemoryAllocation || max_size_ == 0) return {};
    constexpr std::size_t granule = std::size_t(32) << 20;
    return detail::fmt("%s: %zu bytes did not fit: the pool's maximum size is %zu bytes, which "
                       "CUDA rounds up to %zu bytes (a multiple of 32 MiB)", describe().c_str(),
                       bytes, max_size_, (max_size_ + granule - 1) / granule * granule);
  }
};

namespace detail {
struct pool_traits {  // destroyed through the driver, which needs no current context
  static void destroy(memory_pool_ref& pool, memory_pool_properties&) {
    report(CURT_DETAIL_DRIVER_FUNCTION(cuMemPoolDestroy, 11020)(pool.get()),
           "cuMemPoolDestroy(pool)", __FILE__, __LINE__);
  }
  static void release(memory_pool_properties&) noexcept {}
};
}  // namespace detail

/// An owning pool (cudaMemPoolCreate), move-only; keeps its properties (properties()). Its memory
/// goes back to the system once it is destroyed and every allocation from it is freed.
class memory_pool
    : public detail::unique_handle<memory_pool_ref, detail::pool_traits, memory_pool_properties> {
  using base = detail::unique_handle<memory_pool_ref, detail::pool_traits, memory_pool_properties>;

 public:
  /// Creates a pool (for device memory, in a context of that device). Host and managed pools
  /// give devices no access: name them in `accessible_from` (read-write) or call set_access(). @{
  explicit memory_pool(const memory_pool_properties& properties)
      : memory_pool(create(properties), properties) {}
  memory_pool(const memory_pool_properties& properties,
              std::initializer_list<curt::device> accessible_from)
      : memory_pool(properties) {
    set_access(accessible_from, pool_access::read_write);
  }  ///@}
  explicit memory_pool(no_handle_t) noexcept : base(no_handle) {}  ///< An empty owner: uses throw.

  /// Takes ownership of a pool the caller created with these properties.
  static memory_pool from_native_handle(cudaMemPool_t handle,
                                        const memory_pool_properties& properties) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::memory_pool::from_native_handle",
                    "only a created pool can be owned, not null", __FILE__, __LINE__);
    return memory_pool(handle, properties);
  }
  /// Imports a pool another process exported (posix_fd, <curt/memory_pool_ipc.hpp>), made as
  /// `where` says if known. It cannot allocate: import the exporter's pointers (import_pointer).
  template <class Fd>
  static memory_pool import(const Fd& fd, const memory_pool_properties& where = {}) {
    memory_pool pool(import_memory_pool_handle(fd, where.location()), where);  // ADL: ipc header
    pool.imported_ = true;
    return pool;
  }

  /// The properties the pool was made with (CUDA cannot read them back).
  const memory_pool_properties& properties() const noexcept { return state_; }

 private:
  memory_pool(cudaMemPool_t handle, const memory_pool_properties& properties) noexcept
      : base(memory_pool_ref(handle, properties), properties) {}
  static cudaMemPool_t create(const memory_pool_properties& properties) {
    const memory_location where = properties.location();
    if (where.type() == cudaMemLocationTypeHost && properties.handle_types() != 0)
      detail::raise(cudaErrorInvalidValue, "curt::memory_pool(pinned host memory, exportable)",
                    "pools of cudaMemLocationTypeHost cannot be exported (CUDA's rule); use "
                    "memory_pool_properties::host_numa(node) for an exportable host pool",
                    __FILE__, __LINE__);
    cudaMemPool_t created = nullptr;
    const cudaMemPoolProps* p = &properties.native();
    detail::check(detail::in_pool_context(where, [&] { return cudaMemPoolCreate(&created, p); }),
                  "cudaMemPoolCreate", {{"location type", where.type()}, {"id", where.id()},
                                        {"allocation type", p->allocType}},
                  __FILE__, __LINE__);
    return created;
  }
};

namespace detail {
// The default pool, or the current pool (cudaMemGetMemPool), of `type` at `where`.
inline memory_pool_ref location_pool(memory_location where, cudaMemAllocationType type,
                                     bool current) {
  cudaMemPool_t pool = nullptr;
  cudaMemLocation at = where.native();
  const auto get = current ? &cudaMemGetMemPool : &cudaMemGetDefaultMemPool;
  check(in_pool_context(where, [&] { return get(&pool, &at, type); }),
        current ? "cudaMemGetMemPool" : "cudaMemGetDefaultMemPool",
        {{"location type", at.type}, {"id", at.id}, {"allocation type", type}}, __FILE__, __LINE__);
  return memory_pool_ref(pool, where, type);
}
}  // namespace detail

/// Default pools: device d's; pinned at `where` (device, host, NUMA node); managed preferring
/// `where` (or none). Host and managed pools give devices no access until set_access().
inline memory_pool_ref default_memory_pool(curt::device d) {
  return detail::location_pool(memory_location::device(d), cudaMemAllocationTypePinned, false);
}
inline memory_pool_ref default_memory_pool(memory_location where) {
  return detail::location_pool(where, cudaMemAllocationTypePinned, false);
}
inline memory_pool_ref default_managed_memory_pool(memory_location where = {}) {
  return detail::location_pool(where, cudaMemAllocationTypeManaged, false);
}
/// The current pools, of the same places (device d's: what cudaMallocAsync on d's streams uses).
inline memory_pool_ref current_memory_pool(curt::device d) {
  return detail::location_pool(memory_location::device(d), cudaMemAllocationTypePinned, true);
}
inline memory_pool_ref current_memory_pool(memory_location where) {
  return detail::location_pool(where, cudaMemAllocationTypePinned, true);
}
inline memory_pool_ref current_managed_memory_pool(memory_location where = {}) {
  return detail::location_pool(where, cudaMemAllocationTypeManaged, true);
}
/// Makes `pool` the current pool of its location and kind (cudaMemSetMemPool; for a device pool,
/// what allocate_async on its streams uses). The ref must know its location.
inline void set_current_memory_pool(memory_pool_ref pool) {
  cudaMemPool_t handle = pool.get();
  if (!pool.kind_known())
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::set_current_memory_pool(%s)", pool.describe().c_str()),
                  "the ref does not know the pool's location: make it from the pool's "
                  "properties (memory_pool_ref(handle, properties))",
                  __FILE__, __LINE__);
  cudaMemLocation at = pool.location().native();
  const cudaMemAllocationType type = pool.allocation_type();
  detail::check(detail::in_pool_context(pool.location(),
                                        [&] { return cudaMemSetMemPool(&at, type, handle); }),
                "cudaMemSetMemPool", {"pool", {"location type", at.type}, {"id", at.id}},
                __FILE__, __LINE__);
}

template <class T>
async_buffer<T> memory_pool_ref::allocate(std::size_t count, stream_ref stream) const {
  cudaMemPool_t pool = native("allocate<T>()");
  const std::size_t bytes =
      detail::checked_bytes<T>(count, "async_buffer", "curt::memory_pool_ref::allocate<T>");
  const detail::free_place where = detail::place_for(stream, "curt::memory_pool_ref::allocate<T>");
  void* p = allocate_bytes(pool, bytes, where.stream.get());
  return async_buffer<T>(static_cast<T*>(p), count, where, {host_addressable()});
}
}  // namespace curt
