// curt/memory_pool.hpp: stream-ordered memory pools (cudaMemPool_t) and the buffers they hand out.
//
//   curt::memory_pool pool(curt::memory_pool_properties::device(gpu).max_size(256 << 20));
//   curt::async_buffer<float> x = pool.allocate<float>(n, stream);   // cudaMallocFromPoolAsync
//   curt::launch(stream, config, kernel, x.data(), n);
//   // ~async_buffer: cudaFreeAsync(x, stream), ordered after the kernel; no synchronization
//
// - curt::memory_pool owns a pool made from curt::memory_pool_properties (device memory, pinned
//   host memory, a host NUMA node, managed memory; maximum size, export as a POSIX file
//   descriptor, usage flags) and keeps those properties: CUDA 13.0 cannot read them back.
//   curt::memory_pool_ref is a copyable view of any pool (a default or current pool, a pool of
//   your own) that carries what is known of it: location, kind, maximum size.
// - Access. A device pool's memory is accessible from its device. HOST AND MANAGED POOLS GIVE
//   DEVICES NO ACCESS UNTIL YOU CALL set_access(device, pool_access::read_write) (or name the
//   devices when the pool is made): a kernel that touches such memory before faults with a sticky
//   cudaErrorIllegalAddress, and the process's CUDA context is lost.
// - curt::async_buffer<T> owns one stream-ordered allocation and frees it on the stream it was
//   allocated on (cudaFreeAsync, in that stream's context) when destroyed, or on another stream
//   when asked (free(other)). The stream must still exist then. Allocating under stream capture
//   works and becomes a memory-allocation node; destroy the buffer before the capture ends so that
//   its free is a node of the graph too.
// - CUDA 13.0 rounds a pool's maximum size up to a multiple of 32 MiB; an allocation past it
//   throws curt::out_of_memory naming the pool, the bytes and the limit.
// - The members allocate(bytes, alignment) / deallocate / allocate_async / deallocate_async
//   (CCCL 3.0.1's cuda::mr names) and allocate_sync / allocate(stream, ...) (CCCL 3.1+) make a
//   pool a cuda::mr resource without this header including CCCL; <curt/memory_resource.hpp> adds
//   the accessibility properties. <curt/memory_pool_ipc.hpp> shares pools between processes.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/entries.hpp>
#include <curt/detail/green_lifetime.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/detail/span_like.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/memory.hpp>
#include <curt/memory_location.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

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
 public:
  /// Device memory of `d` (the kind a device's default pool holds).
  static memory_pool_properties device(curt::device d) noexcept {
    return {memory_location::device(d), cudaMemAllocationTypePinned};
  }
  /// Page-locked host memory, on no particular NUMA node. Cannot be exported (CUDA's rule).
  static memory_pool_properties pinned_host() noexcept {
    return {memory_location::host(), cudaMemAllocationTypePinned};
  }
  /// Page-locked host memory on NUMA node `node`.
  static memory_pool_properties host_numa(int node) noexcept {
    return {memory_location::host_numa(node), cudaMemAllocationTypePinned};
  }
  /// Managed memory with no preferred location.
  static memory_pool_properties managed() noexcept {
    return {memory_location::none(), cudaMemAllocationTypeManaged};
  }
  /// Managed memory that prefers device `d`.
  static memory_pool_properties managed(curt::device d) noexcept {
    return {memory_location::device(d), cudaMemAllocationTypeManaged};
  }

  /// The most the pool may hold, in bytes; 0 (the default) leaves it to the system. CUDA 13.0
  /// rounds it up to a multiple of 32 MiB.
  memory_pool_properties& max_size(std::size_t bytes) noexcept {
    props_.maxSize = bytes;
    return *this;
  }
  /// The pool can be exported to another process as a POSIX file descriptor
  /// (<curt/memory_pool_ipc.hpp>).
  memory_pool_properties& exportable() noexcept {
    return handle_types(cudaMemHandleTypePosixFileDescriptor);
  }
  /// The handle types the pool can be exported as (cudaMemHandleType*).
  memory_pool_properties& handle_types(cudaMemAllocationHandleType types) noexcept {
    props_.handleTypes = types;
    return *this;
  }
  /// Intended-usage flags (cudaMemPoolCreateUsageHwDecompress).
  memory_pool_properties& usage(unsigned short flags) noexcept {
    props_.usage = flags;
    return *this;
  }

  memory_location location() const noexcept { return memory_location::from_native(props_.location); }
  cudaMemAllocationType allocation_type() const noexcept { return props_.allocType; }
  bool is_managed() const noexcept { return props_.allocType == cudaMemAllocationTypeManaged; }
  std::size_t max_size() const noexcept { return props_.maxSize; }
  cudaMemAllocationHandleType handle_types() const noexcept { return props_.handleTypes; }
  bool is_exportable() const noexcept {
    return (props_.handleTypes & cudaMemHandleTypePosixFileDescriptor) != 0;
  }
  unsigned short usage() const noexcept { return props_.usage; }
  const cudaMemPoolProps& native() const noexcept { return props_; }

 private:
  memory_pool_properties(memory_location where, cudaMemAllocationType type) noexcept {
    props_.allocType = type;
    props_.location = where.native();
  }
  friend class memory_pool;  // the properties of an imported pool
  memory_pool_properties() noexcept = default;

  cudaMemPoolProps props_{};
};

/// Reserved and used bytes of a pool, now and at their highest since the last reset.
struct memory_pool_statistics {
  std::size_t reserved = 0;       ///< memory the pool holds from the system
  std::size_t reserved_high = 0;
  std::size_t used = 0;           ///< memory allocated from the pool and not yet free for reuse
  std::size_t used_high = 0;
};

template <class T>
class async_buffer;
class memory_pool_ref;

namespace detail {

// "pool 0x7f... of device 0 memory (max size 33554432 bytes)", for messages.
CURT_COLD inline std::string describe_pool(cudaMemPool_t handle, memory_location where,
                                           cudaMemAllocationType type, std::size_t max_size,
                                           bool imported) {
  std::string text = "new pool";
  if (handle != nullptr) {
    char address[32];
    std::snprintf(address, sizeof address, "%p", static_cast<void*>(handle));
    text = std::string("pool ") + address;
  }
  if (type == cudaMemAllocationTypeManaged)
    text += " of managed memory" +
            (where.is_none() ? std::string(" (no preferred location)") : " on " + where.describe());
  else if (type == cudaMemAllocationTypePinned)
    text += (where.is_device() ? " of " : " of pinned ") + where.describe() + " memory";
  else
    text += " (location unknown)";
  if (imported) text += ", imported from another process";
  if (max_size != 0) text += ", max size " + std::to_string(max_size) + " bytes";
  return text;
}

// "function(pool ..., argument, ...)"
CURT_COLD inline std::string describe_pool_call(const char* function, const std::string& pool,
                                                std::initializer_list<call_argument> arguments) {
  std::string text = describe_call(function, arguments);
  text.insert(text.find('(') + 1, arguments.size() ? pool + ", " : pool);
  return text;
}

[[noreturn]] CURT_COLD inline void throw_pool_call(cudaError_t status, const char* function,
                                                   const std::string& pool,
                                                   std::initializer_list<call_argument> arguments,
                                                   const char* file, int line) {
  throw_error(status, describe_pool_call(function, pool, arguments), file, line);
}

/// The work of a pool call runs in a context: the one current, else the primary context of the
/// pool's device; for pools of host or managed memory, which need no particular device, a
/// primary context that is active already (current_device_scope's any_context), so that a
/// process working on device 1 gets none on device 0 from them. A pushed context is popped at the
/// end. (The runtime would otherwise make device 0's primary context current and leave it so.)
/// One cuCtxGetCurrent when a context is current.
class pool_context_scope {
 public:
  explicit pool_context_scope(memory_location where) {
    if (CURT_LIKELY(current_context() != nullptr)) return;
    enter(where);
  }

 private:
  CURT_COLD void enter(memory_location where) {
    if (where.is_device())
      scope_.enter(where.id());
    else
      scope_.enter_any();
  }
  current_device_scope scope_{current_device_scope::deferred{}};
};

/// The streams of curt's synchronous pool allocations, one per context: waiting for it waits for
/// the allocation alone, not for the user's work. Keyed by the context's process-unique id, so a
/// reset context gets a new one; made on first use and never destroyed (a stream destroyed at
/// exit may outlive its context), except in curt's own green contexts, which destroy theirs
/// before they go (green_contexts(): the driver would leak it).
class allocation_streams {
 public:
  /// The stream of the current context (one must be current).
  cudaStream_t for_current_context() {
    const CUcontext context = current_context();
    unsigned long long id = 0;
    CURT_DETAIL_DRIVER_CALL(cuCtxGetId, 12000, context, &id);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const entry& e : table_)
      if (e.context_id == id) return e.stream;
    entry fresh{id, nullptr};
    check(cudaStreamCreateWithFlags(&fresh.stream, cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags(allocation stream)", __FILE__, __LINE__);
    try {
      table_.push_back(fresh);
      (void)green_contexts().keep(id, context, fresh.stream, &destroy, /*shared=*/true);
    } catch (...) {  // no memory for an entry
      if (table_.size() != 0 && table_.back().context_id == id) table_.remove(&table_.back());
      check_noexcept(cudaStreamDestroy(fresh.stream), "cudaStreamDestroy(allocation stream)",
                     __FILE__, __LINE__);
      throw;
    }
    return fresh.stream;
  }

 private:
  struct entry {
    unsigned long long context_id = 0;
    cudaStream_t stream = nullptr;
  };
  // green_registry's destroy_fn: the green context of `id` is about to be destroyed.
  static void destroy(CUcontext context, unsigned long long id, void* stream) noexcept;

  std::mutex mutex_;
  entries<entry> table_;
};

// Never destroyed, as the streams.
inline allocation_streams& allocation_stream_table() {
  static allocation_streams* table = new allocation_streams;
  return *table;
}
inline cudaStream_t allocation_stream() { return allocation_stream_table().for_current_context(); }

inline void allocation_streams::destroy(CUcontext context, unsigned long long id,
                                        void* stream) noexcept {
  allocation_streams& self = allocation_stream_table();
  {
    std::lock_guard<std::mutex> lock(self.mutex_);
    for (entry& e : self.table_)
      if (e.context_id == id) {
        self.table_.remove(&e);
        break;
      }
  }
  destroy_in_context(context, id, "cudaStreamDestroy(allocation stream)",
                     [stream] { return cudaStreamDestroy(static_cast<cudaStream_t>(stream)); });
}

/// CCCL's rule for the alignment of pool allocations: a power of two no larger than 256 (what
/// every pool allocation is aligned to).
inline void check_pool_alignment(std::size_t alignment, const char* operation) {
  if (CURT_UNLIKELY(alignment == 0 || alignment > 256 || (alignment & (alignment - 1)) != 0))
    raise(cudaErrorInvalidValue, std::string("curt::memory_pool_ref::") + operation,
          "alignment " + std::to_string(alignment) +
              " is not a power of two no larger than 256 (pool allocations are 256-byte aligned)",
          __FILE__, __LINE__);
}

/// count * element bytes; throws, naming the numbers, when it overflows std::size_t.
inline std::size_t pool_bytes(std::size_t count, std::size_t element, const char* operation) {
  if (CURT_UNLIKELY(element != 0 && count > ~std::size_t(0) / element))
    raise(cudaErrorInvalidValue, operation,
          std::to_string(count) + " elements of " + std::to_string(element) +
              " bytes overflow std::size_t",
          __FILE__, __LINE__);
  return count * element;
}

/// Where a stream-ordered allocation is freed: its stream and, for a default stream (a
/// pseudo-handle that names no context), the context it was allocated in. The free then goes to
/// that context's default stream whatever is current when the owner dies (with no context
/// current, the runtime would pick its current device's, which may be another device's stream,
/// not ordered after the work that used the memory).
struct free_place {
  cudaStream_t stream = nullptr;
  CUcontext context = nullptr;  // only for a default stream
};

/// The place to free an allocation just made on `stream` from this thread. For a default
/// stream: the current context, or else the one stream_context_scope used for the allocation
/// (the primary context of the runtime's current device). Refuses a default stream while one of
/// curt's green contexts is current, naming `operation`: curt may destroy that context before
/// the buffer goes, and nothing would be left to free it in.
inline free_place free_place_for(cudaStream_t stream, const char* operation) {
  if (CURT_LIKELY(stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread))
    return {stream, nullptr};
  if (CUcontext context = current_context()) {
    if (CURT_UNLIKELY(is_curts_green_context(context)))
      raise(cudaErrorNotSupported, std::string(operation) + " on a default stream",
            "a curt::green_context's context is current: the buffer would be freed in it, and "
            "curt destroys a green context when its owner and streams are gone, maybe before "
            "the buffer; allocate on a stream of the green context (make_stream()), which keeps "
            "it alive",
            __FILE__, __LINE__);
    return {stream, context};
  }
  current_device_scope in_context;
  return {stream, current_context()};
}

/// Runs `free` in the context a stream-ordered allocation is freed in: its stream's, or for a
/// default stream the allocation's.
template <class Free>
void in_free_context(const free_place& place, Free&& free) {
  if (CURT_UNLIKELY(place.context != nullptr)) {
    context_scope in_context(place.context);
    free();
  } else {
    stream_context_scope in_context(place.stream);
    free();
  }
}

/// Frees a stream-ordered allocation (null: nothing) on its stream; throws on failure.
inline void free_async(void* p, const free_place& place, const char* call) {
  if (p == nullptr) return;
  in_free_context(place, [&] { check(cudaFreeAsync(p, place.stream), call, __FILE__, __LINE__); });
}

/// As free_async, for destructors: never throws; a failure goes to the error handler (once for a
/// lost context, as every destructor's does).
inline void free_async_noexcept(void* p, const free_place& place, const char* call) noexcept {
  try {
    in_free_context(place,
                    [&] { check_noexcept(cudaFreeAsync(p, place.stream), call, __FILE__, __LINE__); });
  } catch (const std::exception& error) {  // the context could not be made current
    report_caught(error);
  }
}

}  // namespace detail

/// A non-owning view of a memory pool: a default or current pool, a curt::memory_pool, or any
/// cudaMemPool_t. Copyable; carries the pool's location, kind and maximum size where they are
/// known (refs made from a bare cudaMemPool_t know none of them). Every operation on a ref made
/// from an empty, moved-from or released curt::memory_pool throws a cuda_error that says which.
class memory_pool_ref {
 public:
  /// Any pool, its location and kind unknown.
  memory_pool_ref(cudaMemPool_t handle) noexcept  // NOLINT: implicit, as stream_ref's
      : handle_(handle) {}
  /// A pool whose location and kind the caller knows (its properties, or where it came from).
  memory_pool_ref(cudaMemPool_t handle, const memory_pool_properties& properties) noexcept
      : handle_(handle),
        where_(properties.location()),
        type_(properties.allocation_type()),
        max_size_(properties.max_size()) {}
  /// A pool of `type` (cudaMemAllocationTypePinned or ...Managed) at `where`.
  memory_pool_ref(cudaMemPool_t handle, memory_location where, cudaMemAllocationType type) noexcept
      : handle_(handle), where_(where), type_(type) {}
  memory_pool_ref(int) = delete;             ///< 0 is not a pool
  memory_pool_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The native handle; throws for a ref to an empty, moved-from or released owner.
  cudaMemPool_t get() const { return native("get()"); }
  /// False for a ref to an empty, moved-from or released owner.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }

  /// Where the pool's memory lives (none for managed memory without a preferred location).
  /// Meaningful when kind_known().
  memory_location location() const noexcept { return where_; }
  /// cudaMemAllocationTypePinned (device or pinned host memory) or ...Managed; ...Invalid when
  /// this ref was made from a bare cudaMemPool_t.
  cudaMemAllocationType allocation_type() const noexcept { return type_; }
  bool kind_known() const noexcept { return type_ != cudaMemAllocationTypeInvalid; }
  bool is_device_pool() const noexcept {
    return type_ == cudaMemAllocationTypePinned && where_.is_device();
  }
  bool is_host_pool() const noexcept {
    return type_ == cudaMemAllocationTypePinned && where_.is_host();
  }
  bool is_managed_pool() const noexcept { return type_ == cudaMemAllocationTypeManaged; }
  /// True for a pool imported from another process: it cannot allocate.
  bool is_imported() const noexcept { return imported_; }
  /// The maximum size the pool was created with (before CUDA's rounding); 0 when it is the
  /// system's default or not known to this ref.
  std::size_t max_size() const noexcept { return max_size_; }

  // ---- Attributes -------------------------------------------------------------------------

  /// Bytes the pool keeps from the system after a synchronization before it releases more;
  /// never_release keeps everything.
  std::size_t release_threshold() const { return get_size(cudaMemPoolAttrReleaseThreshold); }
  void set_release_threshold(std::size_t bytes) const {
    set_size(cudaMemPoolAttrReleaseThreshold, bytes, "set_release_threshold()");
  }
  static constexpr std::size_t never_release = ~std::size_t(0);

  /// Reuse memory freed on another stream once an event orders the two (default on).
  bool reuse_follow_event_dependencies() const {
    return get_flag(cudaMemPoolReuseFollowEventDependencies);
  }
  void set_reuse_follow_event_dependencies(bool on) const {
    set_flag(cudaMemPoolReuseFollowEventDependencies, on, "set_reuse_follow_event_dependencies()");
  }
  /// Reuse memory whose free the GPU has already passed, without an ordering (default on).
  bool reuse_allow_opportunistic() const { return get_flag(cudaMemPoolReuseAllowOpportunistic); }
  void set_reuse_allow_opportunistic(bool on) const {
    set_flag(cudaMemPoolReuseAllowOpportunistic, on, "set_reuse_allow_opportunistic()");
  }
  /// When the system has no more memory, make the allocating stream wait for a pending free on
  /// another stream (default on).
  bool reuse_allow_internal_dependencies() const {
    return get_flag(cudaMemPoolReuseAllowInternalDependencies);
  }
  void set_reuse_allow_internal_dependencies(bool on) const {
    set_flag(cudaMemPoolReuseAllowInternalDependencies, on,
             "set_reuse_allow_internal_dependencies()");
  }

  /// Memory the pool holds from the system, now and at its highest.
  std::size_t reserved_memory() const { return get_size(cudaMemPoolAttrReservedMemCurrent); }
  std::size_t reserved_memory_high() const { return get_size(cudaMemPoolAttrReservedMemHigh); }
  /// Memory allocated from the pool and not yet free for reuse, now and at its highest.
  std::size_t used_memory() const { return get_size(cudaMemPoolAttrUsedMemCurrent); }
  std::size_t used_memory_high() const { return get_size(cudaMemPoolAttrUsedMemHigh); }
  memory_pool_statistics statistics() const {
    return {reserved_memory(), reserved_memory_high(), used_memory(), used_memory_high()};
  }
  /// Both high watermarks take on the current values.
  void reset_high_watermarks() const {
    set_size(cudaMemPoolAttrReservedMemHigh, 0, "reset_high_watermarks()");
    set_size(cudaMemPoolAttrUsedMemHigh, 0, "reset_high_watermarks()");
  }
  /// Releases memory the pool holds but does not use, keeping at least `bytes_to_keep`.
  /// (Synchronize first: a free is known to be done only then.)
  void trim_to(std::size_t bytes_to_keep) const {
    cudaMemPool_t pool = native("trim_to()");
    detail::pool_context_scope in(where_);
    cudaError_t status = cudaMemPoolTrimTo(pool, bytes_to_keep);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolTrimTo", {{"bytes to keep", static_cast<long long>(bytes_to_keep)}});
  }

  // ---- Access ------------------------------------------------------------------------------

  /// Gives device `d` this access to all of the pool's memory, present and future. Host and
  /// managed pools give devices none until this is called; a device pool's own device always has
  /// read-write access.
  void set_access(curt::device d, pool_access access) const { set_access({d}, access); }
  void set_access(std::initializer_list<curt::device> devices, pool_access access) const {
    cudaMemAccessDesc descriptions[16];
    if (CURT_UNLIKELY(devices.size() > 16)) {
      for (curt::device d : devices) set_access({d}, access);
      return;
    }
    std::size_t n = 0;
    for (curt::device d : devices) {
      descriptions[n].location = memory_location::device(d).native();
      descriptions[n].flags = static_cast<cudaMemAccessFlags>(access);
      ++n;
    }
    cudaMemPool_t pool = native("set_access()");
    detail::pool_context_scope in(where_);
    cudaError_t status = cudaMemPoolSetAccess(pool, descriptions, n);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolSetAccess",
           {{"devices", static_cast<long long>(n)},
            {"first device", n ? descriptions[0].location.id : -1},
            {"access", static_cast<long long>(access)}});
  }
  /// The access device `d` has to the pool's memory.
  pool_access access(curt::device d) const { return access(memory_location::device(d)); }
  /// The access the host has (read-write for host pools, none for device pools).
  pool_access host_access() const { return access(memory_location::host()); }
  pool_access access(memory_location from) const {
    cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
    cudaMemLocation location = from.native();
    cudaMemPool_t pool = native("access()");
    detail::pool_context_scope in(where_);
    cudaError_t status = cudaMemPoolGetAccess(&flags, pool, &location);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolGetAccess",
           {{"location type", static_cast<long long>(location.type)}, {"id", location.id}});
    return static_cast<pool_access>(flags);
  }

  // ---- Stream-ordered allocation -----------------------------------------------------------

  /// `count` elements of T from this pool, usable by work on `stream` after this call and by
  /// other streams once ordered after it (an event); freed on `stream` when the buffer is
  /// destroyed. 0 elements allocate nothing. Throws curt::out_of_memory past the pool's maximum
  /// size. Under stream capture the allocation becomes a node of the graph.
  template <class T>
  async_buffer<T> allocate(std::size_t count, stream_ref stream) const;

  // ---- cuda::mr: CCCL 3.0.1 names ----------------------------------------------------------
  // Untyped allocations for CCCL resources (see <curt/memory_resource.hpp>). The synchronous
  // ones allocate on a stream of their own (one per context) and wait for it alone.

  /// Synchronous: the memory is ready for any stream when this returns.
  void* allocate(std::size_t bytes, std::size_t alignment) const {
    return allocate_sync(bytes, alignment);
  }
  /// Synchronous free: no stream may still use the memory. Reports a failure to the error
  /// handler instead of throwing (CCCL calls it as noexcept).
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) const noexcept {
    deallocate_sync(p, bytes, alignment);
  }
  /// Stream-ordered, as allocate<T>.
  void* allocate_async(std::size_t bytes, std::size_t alignment, stream_ref stream) const {
    detail::check_pool_alignment(alignment, "allocate_async()");
    return allocate_bytes(bytes, stream.get(), "allocate_async()");
  }
  /// Stream-ordered free on `stream`, which must be ordered after every use of the memory.
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment,
                        stream_ref stream) const noexcept {
    (void)bytes;
    (void)alignment;
    if (p == nullptr) return;  // 0 bytes allocate nothing
    cudaStream_t s = stream.valid() ? static_cast<cudaStream_t>(stream) : nullptr;
    if (s == nullptr) return report_no_stream("deallocate_async()");
    detail::free_async_noexcept(p, detail::free_place{s, nullptr},
                                "cudaFreeAsync(pool memory, stream)");
  }

  // ---- cuda::mr: CCCL 3.1+ names -----------------------------------------------------------

  void* allocate_sync(std::size_t bytes, std::size_t alignment = 256) const {
    detail::check_pool_alignment(alignment, "allocate_sync()");
    (void)native("allocate_sync()");
    if (bytes == 0) return nullptr;
    detail::pool_context_scope in(where_);
    cudaStream_t s = detail::allocation_stream();
    void* p = allocate_bytes(bytes, s, "allocate_sync()");
    cudaError_t status = cudaStreamSynchronize(s);
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      (void)cudaGetLastError();
      (void)cudaFreeAsync(p, s);
      fail(status, "cudaStreamSynchronize", {"allocation stream"});
    }
    return p;
  }
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment = 256) const noexcept {
    (void)bytes;
    (void)alignment;
    if (p == nullptr) return;
    try {
      detail::pool_context_scope in(where_);
      // No wait: the caller promises that nothing uses the memory any more (as CCCL's does).
      detail::check_noexcept(cudaFreeAsync(p, detail::allocation_stream()),
                             "cudaFreeAsync(pool memory, allocation stream)", __FILE__, __LINE__);
    } catch (const std::exception& error) {  // no context, or no allocation stream
      detail::report_caught(error);
    }
  }
  void* allocate(stream_ref stream, std::size_t bytes, std::size_t alignment = 256) const {
    return allocate_async(bytes, alignment, stream);
  }
  void deallocate(stream_ref stream, void* p, std::size_t bytes,
                  std::size_t alignment = 256) const noexcept {
    deallocate_async(p, bytes, alignment, stream);
  }

  /// Export to another process (needs <curt/memory_pool_ipc.hpp>): a POSIX file descriptor,
  /// owned. Only pools made with memory_pool_properties::exportable() can be exported.
  template <class Self = memory_pool_ref>
  auto export_handle() const {
    return export_memory_pool(static_cast<const Self&>(*this));  // ADL: memory_pool_ipc.hpp
  }

  /// Same pool. (Refs to owners that hold none compare by their state.)
  friend bool operator==(const memory_pool_ref& a, const memory_pool_ref& b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(const memory_pool_ref& a, const memory_pool_ref& b) noexcept {
    return a.handle_ != b.handle_;
  }

  /// "pool 0x... of device 0 memory (max size ...)": for messages.
  std::string describe() const {
    return detail::describe_pool(handle_, where_, type_, max_size_, imported_);
  }

 protected:
  struct from_state_t {};
  memory_pool_ref(detail::handle_state state, from_state_t) noexcept
      : handle_(detail::state_handle<cudaMemPool_t>(state)) {}

  cudaMemPool_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::memory_pool", operation);
  }

  cudaMemPool_t handle_;
  memory_location where_;
  cudaMemAllocationType type_ = cudaMemAllocationTypeInvalid;
  bool imported_ = false;
  std::size_t max_size_ = 0;

 private:
  [[noreturn]] CURT_COLD void fail(cudaError_t status, const char* function,
                                   std::initializer_list<detail::call_argument> arguments) const {
    detail::throw_pool_call(status, function, describe(), arguments, __FILE__, __LINE__);
  }

  std::size_t get_size(cudaMemPoolAttr attribute) const {
    cudaMemPool_t pool = native("attribute()");
    detail::pool_context_scope in(where_);
    cuuint64_t value = 0;
    cudaError_t status = cudaMemPoolGetAttribute(pool, attribute, &value);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolGetAttribute", {{"attribute", attribute}});
    return static_cast<std::size_t>(value);
  }
  void set_size(cudaMemPoolAttr attribute, std::size_t bytes, const char* operation) const {
    cudaMemPool_t pool = native(operation);
    detail::pool_context_scope in(where_);
    cuuint64_t value = bytes;
    cudaError_t status = cudaMemPoolSetAttribute(pool, attribute, &value);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolSetAttribute",
           {{"attribute", attribute}, {"value", static_cast<long long>(value)}});
  }
  bool get_flag(cudaMemPoolAttr attribute) const {
    cudaMemPool_t pool = native("attribute()");
    detail::pool_context_scope in(where_);
    int value = 0;
    cudaError_t status = cudaMemPoolGetAttribute(pool, attribute, &value);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolGetAttribute", {{"attribute", attribute}});
    return value != 0;
  }
  void set_flag(cudaMemPoolAttr attribute, bool on, const char* operation) const {
    cudaMemPool_t pool = native(operation);
    detail::pool_context_scope in(where_);
    int value = on ? 1 : 0;
    cudaError_t status = cudaMemPoolSetAttribute(pool, attribute, &value);
    if (CURT_UNLIKELY(status != cudaSuccess))
      fail(status, "cudaMemPoolSetAttribute", {{"attribute", attribute}, {"value", value}});
  }

  // cudaMallocFromPoolAsync in the stream's context; the hot path of every allocation.
  void* allocate_bytes(std::size_t bytes, cudaStream_t stream, const char* operation) const {
    cudaMemPool_t pool = native(operation);
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    detail::stream_context_scope in_context(stream);
    cudaError_t status = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
    if (CURT_UNLIKELY(status != cudaSuccess)) allocation_failed(status, bytes);
    return p;
  }

  // Says why an allocation failed: the pool's limit (CUDA 13.0 rounds it up to 32 MiB), what it
  // uses, or that an imported pool cannot allocate. The driver log is taken first.
  [[noreturn]] CURT_COLD void allocation_failed(cudaError_t status, std::size_t bytes) const {
    std::string log = detail::take_driver_log();
    std::string why;
    if (imported_) {
      why = "a pool imported from another process cannot allocate; allocate in the exporting "
            "process and import the pointer (curt::import_pointer)";
    } else if (status == cudaErrorMemoryAllocation) {
      constexpr std::size_t granule = std::size_t(32) << 20;
      cuuint64_t used = 0;
      bool known = cudaMemPoolGetAttribute(handle_, cudaMemPoolAttrUsedMemCurrent, &used) ==
                   cudaSuccess;
      (void)cudaGetLastError();
      why = std::to_string(bytes) + " bytes did not fit";
      if (max_size_ != 0)
        why += ": the pool's maximum size is " + std::to_string(max_size_) +
               " bytes, which CUDA rounds up to " +
               std::to_string((max_size_ + granule - 1) / granule * granule) +
               " bytes (a multiple of 32 MiB)";
      else if (!kind_known())
        why += " (this ref does not know the pool's maximum size)";
      if (known) why += "; " + std::to_string(used) + " bytes of it are in use";
    }
    detail::throw_error_with_log(
        make_error_code(status),
        detail::describe_pool_call("cudaMallocFromPoolAsync", describe(),
                                   {{"bytes", static_cast<long long>(bytes)}, "stream"}),
        detail::location(__FILE__, __LINE__), std::move(why), std::move(log));
  }

  CURT_COLD static void report_no_stream(const char* operation) noexcept {
    try {
      detail::report_error(make_error_code(cudaErrorInvalidResourceHandle),
                           (std::string("curt::memory_pool_ref::") + operation +
                            " on a stream that holds none (empty, moved-from or released): the "
                            "memory is not freed")
                               .c_str(),
                           __FILE__, __LINE__);
    } catch (...) {
    }
  }

  friend class memory_pool;
};

/// An owning memory pool (cudaMemPoolCreate). Move-only; destroying it releases its memory once
/// every allocation from it is freed. Keeps the properties it was made with (properties()).
class memory_pool : public memory_pool_ref {
 public:
  /// Creates a pool (for device memory, in a context of that device). Host and managed pools
  /// give devices no access: name them in `accessible_from` (read-write) or call set_access().
  explicit memory_pool(const memory_pool_properties& properties)
      : memory_pool_ref(detail::handle_state::empty, from_state_t{}), properties_(properties) {
    const memory_location where = properties.location();
    if (where.type() == cudaMemLocationTypeHost && properties.handle_types() != 0)
      detail::raise(cudaErrorInvalidValue, "curt::memory_pool(pinned host memory, exportable)",
                    "pools of cudaMemLocationTypeHost cannot be exported (CUDA's rule); use "
                    "memory_pool_properties::host_numa(node) for an exportable host pool",
                    __FILE__, __LINE__);
    cudaMemPool_t created = nullptr;
    cudaError_t status = cudaSuccess;
    if (where.is_device()) {
      device_guard guard(curt::device::from_ordinal_unchecked(where.id()));
      status = cudaMemPoolCreate(&created, &properties.native());
    } else {
      detail::pool_context_scope in(where);
      status = cudaMemPoolCreate(&created, &properties.native());
    }
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_pool_call(
          status, "cudaMemPoolCreate",
          detail::describe_pool(nullptr, where, properties.allocation_type(),
                                properties.max_size(), false),
          {{"handle types", static_cast<long long>(properties.handle_types())},
           {"usage", properties.usage()}},
          __FILE__, __LINE__);
    adopt_handle(created);
  }
  memory_pool(const memory_pool_properties& properties,
              std::initializer_list<curt::device> accessible_from)
      : memory_pool(properties) {
    if (accessible_from.size() != 0) set_access(accessible_from, pool_access::read_write);
  }
  /// An empty owner: every use throws until a pool is assigned.
  explicit memory_pool(no_handle_t) noexcept
      : memory_pool_ref(detail::handle_state::empty, from_state_t{}) {}

  /// Takes ownership of a pool the caller created with these properties.
  static memory_pool from_native_handle(cudaMemPool_t handle,
                                        const memory_pool_properties& properties) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::memory_pool::from_native_handle",
                    "only a created pool can be owned, not null", __FILE__, __LINE__);
    memory_pool pool(no_handle);
    pool.properties_ = properties;
    pool.adopt_handle(handle);
    return pool;
  }

  /// Imports a pool another process exported (needs <curt/memory_pool_ipc.hpp>; `fd` is a
  /// curt::posix_fd). `where` is its location and kind as the exporter made it, if known. An
  /// imported pool cannot allocate: import the exporter's pointers (curt::import_pointer).
  template <class Fd>
  static memory_pool import(const Fd& fd,
                            const memory_pool_properties& where = memory_pool_properties()) {
    cudaMemPool_t handle = import_memory_pool_handle(fd, where.location());  // ADL: ipc header
    memory_pool pool(no_handle);
    pool.properties_ = where;
    pool.adopt_handle(handle);
    pool.imported_ = true;
    return pool;
  }

  memory_pool(memory_pool&& other) noexcept
      : memory_pool_ref(other), properties_(other.properties_) {
    other.handle_ = detail::state_handle<cudaMemPool_t>(detail::handle_state::moved_from);
  }
  memory_pool& operator=(memory_pool&& other) noexcept {
    if (this != &other) {
      destroy();
      static_cast<memory_pool_ref&>(*this) = other;
      properties_ = other.properties_;
      other.handle_ = detail::state_handle<cudaMemPool_t>(detail::handle_state::moved_from);
    }
    return *this;
  }
  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;
  ~memory_pool() { destroy(); }

  /// The properties the pool was made with (CUDA cannot read them back).
  const memory_pool_properties& properties() const noexcept { return properties_; }

  /// Gives up ownership; the caller destroys the returned pool. The owner is then "released".
  cudaMemPool_t release() {
    cudaMemPool_t h = native("release()");
    handle_ = detail::state_handle<cudaMemPool_t>(detail::handle_state::released);
    return h;
  }

 private:
  void adopt_handle(cudaMemPool_t handle) noexcept {
    handle_ = handle;
    where_ = properties_.location();
    type_ = properties_.allocation_type();
    max_size_ = properties_.max_size();
  }
  void destroy() noexcept {
    if (detail::is_state_handle(handle_)) return;
    const cudaMemPool_t h = handle_;
    detail::destroy_through_driver(
        [h] { return CURT_DETAIL_DRIVER_FUNCTION(cuMemPoolDestroy, 11020)(h); },
        "cuMemPoolDestroy(pool)", __FILE__, __LINE__);
    handle_ = detail::state_handle<cudaMemPool_t>(detail::handle_state::empty);
  }

  memory_pool_properties properties_;
};

// ---- Default and current pools ---------------------------------------------------------------

namespace detail {

enum class pool_query { default_pool, current_pool };

inline memory_pool_ref location_pool(memory_location where, cudaMemAllocationType type,
                                     pool_query which) {
  cudaMemPool_t pool = nullptr;
  cudaMemLocation location = where.native();
  cudaError_t status = cudaSuccess;
  const char* function =
      which == pool_query::default_pool ? "cudaMemGetDefaultMemPool" : "cudaMemGetMemPool";
  {
    // A device's pools through device_guard; host and managed pools in any context.
    if (where.is_device()) {
      device_guard guard(curt::device::from_ordinal_unchecked(where.id()));
      status = which == pool_query::default_pool ? cudaMemGetDefaultMemPool(&pool, &location, type)
                                                 : cudaMemGetMemPool(&pool, &location, type);
    } else {
      pool_context_scope in(where);
      status = which == pool_query::default_pool ? cudaMemGetDefaultMemPool(&pool, &location, type)
                                                 : cudaMemGetMemPool(&pool, &location, type);
    }
  }
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_pool_call(status, function,
                    (type == cudaMemAllocationTypeManaged ? "managed memory at " : "pinned memory at ") +
                        where.describe(),
                    {}, __FILE__, __LINE__);
  return memory_pool_ref(pool, where, type);
}

}  // namespace detail

/// Device d's default pool (device memory; what cudaMallocAsync on d's streams uses unless the
/// current pool was changed).
inline memory_pool_ref default_memory_pool(curt::device d) {
  return detail::location_pool(memory_location::device(d), cudaMemAllocationTypePinned,
                               detail::pool_query::default_pool);
}
/// The default pool of pinned memory at `where`: a device, the host (memory_location::host()) or
/// a host NUMA node. Host pools give devices no access until set_access().
inline memory_pool_ref default_memory_pool(memory_location where) {
  return detail::location_pool(where, cudaMemAllocationTypePinned,
                               detail::pool_query::default_pool);
}
/// The default pool of managed memory preferring `where` (a device, the host or none). Gives
/// devices no access until set_access().
inline memory_pool_ref default_managed_memory_pool(memory_location where = memory_location::none()) {
  return detail::location_pool(where, cudaMemAllocationTypeManaged,
                               detail::pool_query::default_pool);
}
/// The current pool of device d (what cudaMallocAsync on d's streams allocates from).
inline memory_pool_ref current_memory_pool(curt::device d) {
  return detail::location_pool(memory_location::device(d), cudaMemAllocationTypePinned,
                               detail::pool_query::current_pool);
}
/// The current pool of pinned memory at `where`.
inline memory_pool_ref current_memory_pool(memory_location where) {
  return detail::location_pool(where, cudaMemAllocationTypePinned,
                               detail::pool_query::current_pool);
}
/// The current pool of managed memory preferring `where`.
inline memory_pool_ref current_managed_memory_pool(memory_location where = memory_location::none()) {
  return detail::location_pool(where, cudaMemAllocationTypeManaged,
                               detail::pool_query::current_pool);
}
/// Makes `pool` the current pool of its own location and kind (cudaMemSetMemPool): for a device
/// pool, what cudaMallocAsync (and curt::allocate_async) on that device's streams use. The ref
/// must know its location (a curt::memory_pool or a ref from the functions above).
inline void set_current_memory_pool(memory_pool_ref pool) {
  cudaMemPool_t handle = pool.get();
  if (!pool.kind_known())
    detail::raise(cudaErrorInvalidValue, "curt::set_current_memory_pool(" + pool.describe() + ")",
                  "the ref does not know the pool's location: make it from the pool's "
                  "properties (memory_pool_ref(handle, properties))",
                  __FILE__, __LINE__);
  cudaMemLocation location = pool.location().native();
  cudaError_t status = cudaSuccess;
  if (pool.location().is_device()) {
    device_guard guard(curt::device::from_ordinal_unchecked(pool.location().id()));
    status = cudaMemSetMemPool(&location, pool.allocation_type(), handle);
  } else {
    detail::pool_context_scope in(pool.location());
    status = cudaMemSetMemPool(&location, pool.allocation_type(), handle);
  }
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_pool_call(status, "cudaMemSetMemPool", pool.describe(), {}, __FILE__, __LINE__);
}

// ---- async_buffer ----------------------------------------------------------------------------

namespace detail {
struct async_memory_kind {
  static constexpr const char* name = "async_buffer";
  static constexpr bool host_iterable = false;
  using place = free_place;  // the stream it frees on (and a default stream's context)
  static void free(void* p, const free_place& where) noexcept {
    free_async_noexcept(p, where, "cudaFreeAsync(async_buffer, stream)");
  }
};
}  // namespace detail

/// One stream-ordered allocation of `size()` elements of T, freed on its stream (cudaFreeAsync,
/// in the stream's context) when destroyed, so the free is ordered after the work submitted to
/// that stream before it. Move-only. An empty (curt::no_handle), moved-from, released or freed
/// buffer holds nothing: data(), views, stream() and free() throw a cuda_error saying which;
/// size() is 0. The memory is not initialized. A buffer allocated on a default stream frees on
/// that default stream of the context it was allocated in, whatever context is current (or none)
/// when it dies; the per-thread default stream is the destroying thread's, so a buffer of it
/// destroyed on another thread should be freed explicitly (free(stream)). While the context of
/// one of curt's green contexts is current, allocating (or adopting) on a default stream is
/// refused with cudaErrorNotSupported: the buffer would be freed in that context, which curt
/// destroys once its owner and streams are gone, maybe first; use a stream made by
/// green_context::make_stream(), which keeps the green context alive.
template <class T>
class async_buffer : public detail::memory_owner<T, detail::async_memory_kind> {
  using base = detail::memory_owner<T, detail::async_memory_kind>;

 public:
  /// An empty owner: every use throws until a buffer is assigned.
  explicit async_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

  /// Takes ownership of `count` elements the caller allocated with cudaMallocAsync or
  /// cudaMallocFromPoolAsync; freed on `stream`. A null pointer only with a count of 0.
  static async_buffer adopt(T* data, std::size_t count, stream_ref stream) {
    (void)detail::pool_bytes(count, sizeof(T), "curt::async_buffer::adopt");
    if (data == nullptr && count != 0)
      detail::raise(cudaErrorInvalidValue, "curt::async_buffer::adopt(null, " +
                                               std::to_string(count) + ", stream)",
                    "a null pointer can only be adopted with a count of 0", __FILE__, __LINE__);
    return async_buffer(data, count,
                        detail::free_place_for(stream.get(), "curt::async_buffer::adopt"));
  }

  async_buffer(async_buffer&&) noexcept = default;
  async_buffer& operator=(async_buffer&&) noexcept = default;

  /// The stream the buffer frees on.
  stream_ref stream() const {
    (void)this->usable("stream()");
    return this->place().stream;
  }

  /// Frees now, on the buffer's stream (after the work submitted to it so far).
  void free() {
    detail::free_place where = this->place();
    detail::free_async(this->take_for_free("free()"), where, "cudaFreeAsync(async_buffer, stream)");
  }
  /// Frees now on `other`, which the caller has ordered after every use of the memory (an
  /// event, or `other` waiting on the buffer's stream).
  void free(stream_ref other) {
    cudaStream_t s = other.get();
    detail::free_async(this->take_for_free("free(stream)"), detail::free_place{s, nullptr},
                       "cudaFreeAsync(async_buffer, stream)");
  }

 private:
  friend class memory_pool_ref;
  template <class U>
  friend async_buffer<U> allocate_async(std::size_t count, stream_ref stream);

  async_buffer(T* data, std::size_t count, detail::free_place where) noexcept
      : base(data, count, where) {}

};

template <class T>
async_buffer<T> memory_pool_ref::allocate(std::size_t count, stream_ref stream) const {
  cudaStream_t s = stream.get();
  std::size_t bytes = detail::pool_bytes(count, sizeof(T), "curt::memory_pool_ref::allocate<T>");
  detail::free_place where =  // before: the owner is made noexcept
      detail::free_place_for(s, "curt::memory_pool_ref::allocate<T>");
  void* p = allocate_bytes(bytes, s, "allocate<T>()");
  return async_buffer<T>(static_cast<T*>(p), count, where);
}

/// `count` elements of T from the current pool of the stream's device (cudaMallocAsync), freed
/// on `stream`. As memory_pool_ref::allocate<T>.
template <class T>
async_buffer<T> allocate_async(std::size_t count, stream_ref stream) {
  cudaStream_t s = stream.get();
  std::size_t bytes = detail::pool_bytes(count, sizeof(T), "curt::allocate_async<T>");
  detail::free_place where =  // before: the owner is made noexcept
      detail::free_place_for(s, "curt::allocate_async<T>");
  if (bytes == 0) return async_buffer<T>(nullptr, 0, where);
  void* p = nullptr;
  {
    detail::stream_context_scope in_context(s);
    detail::check_call(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync",
                       {{"bytes", static_cast<long long>(bytes)},
                        "stream (its device's current pool)"},
                       __FILE__, __LINE__);
  }
  return async_buffer<T>(static_cast<T*>(p), count, where);
}

}  // namespace curt
