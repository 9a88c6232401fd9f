// curt/memory/virtual_memory.hpp: CUDA's virtual memory management (VMM): physical memory, address
// ranges and mappings as owners (growable_buffer<T>, built on them: memory/growable.hpp).
//
//   curt::physical_memory memory(curt::memory_location::device(gpu), bytes);  // rounded up
//   curt::address_range range(memory.size());
//   curt::mapping map(range, 0, memory);                      // all of it, at the range's start
//   map.set_access(gpu, curt::memory_access::read_write);     // no device may touch it before
//
// Sharing: shareable_handle::posix_fd memory exports a posix_fd that another process imports
// (physical_memory::import(fd, size)), maps and sets access to; ::fabric exports a fabric_handle
// (NVLink fabric, IMEX channels). CUDA's rules: mappings' sizes, offsets and addresses are
// multiples of curt::granularity(location); no device may access a mapping before set_access();
// a range outlives its mappings; physical memory may go once mapped (the mapping keeps it).
// The VMM calls act on the process's address space and on devices by ordinal: curt makes no
// context current and wakes no primary context for them. Driver functions come through entry
// points (the 10.2 ABI); no <cuda.h>: the few types below are laid out as it declares them.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>
#include <curt/memory/location.hpp>
#include <curt/memory/owner.hpp>
#include <curt/memory/posix_fd.hpp>

#include <cuda_runtime_api.h>
#include <unistd.h>  // sysconf: the host page size

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace curt::detail::driver_fn {
struct mem_allocation_prop {  // CUmemAllocationProp, its allocFlags flattened
  int type = 1;               // CU_MEM_ALLOCATION_TYPE_PINNED
  int requested_handle_types = 0;
  cudaMemLocation location{};  // CUmemLocation has the same layout
  void* win32_metadata = nullptr;
  unsigned char compression_type = 0, gpu_direct_rdma_capable = 0;
  unsigned short usage = 0;
  unsigned char reserved[4] = {};
};
struct mem_access_desc {  // CUmemAccessDesc
  cudaMemLocation location;
  int flags;
};
// Addresses (CUdeviceptr) and allocations (CUmemGenericAllocationHandle) are u64; enums int.
using u64 = unsigned long long;
using std::size_t;
CURT_DETAIL_DRIVER_TYPE(cuMemCreate_v10020, u64*, size_t, const mem_allocation_prop*, u64 flags);
CURT_DETAIL_DRIVER_TYPE(cuMemRelease_v10020, u64 handle);
CURT_DETAIL_DRIVER_TYPE(cuMemAddressReserve_v10020, u64*, size_t, size_t alignment, u64 hint,
                        u64 flags);
CURT_DETAIL_DRIVER_TYPE(cuMemAddressFree_v10020, u64 address, size_t size);
CURT_DETAIL_DRIVER_TYPE(cuMemMap_v10020, u64 address, size_t, size_t offset, u64 handle, u64);
CURT_DETAIL_DRIVER_TYPE(cuMemUnmap_v10020, u64 address, size_t size);
CURT_DETAIL_DRIVER_TYPE(cuMemSetAccess_v10020, u64, size_t, const mem_access_desc*, size_t);
CURT_DETAIL_DRIVER_TYPE(cuMemGetAccess_v10020, u64* flags, const cudaMemLocation*, u64 address);
CURT_DETAIL_DRIVER_TYPE(cuMemGetAllocationGranularity_v10020, size_t*, const mem_allocation_prop*,
                        int option);
CURT_DETAIL_DRIVER_TYPE(cuMemGetAllocationPropertiesFromHandle_v10020, mem_allocation_prop*, u64);
CURT_DETAIL_DRIVER_TYPE(cuMemExportToShareableHandle_v10020, void* out, u64, int type, u64 flags);
CURT_DETAIL_DRIVER_TYPE(cuMemImportFromShareableHandle_v10020, u64*, void* shared, int type);
CURT_DETAIL_DRIVER_TYPE(cuDeviceGetAttribute_v2000, int* value, int attribute, CUdevice device);
}  // namespace curt::detail::driver_fn

namespace curt {

/// What a device may do with mapped memory (CUmemAccess_flags).
enum class memory_access : int { none = 0, read = 1, read_write = 3 };
/// How physical memory may be shared with other processes (CUmemAllocationHandleType).
enum class shareable_handle : int { none = 0, posix_fd = 1, fabric = 8 };
/// Compressible memory (CUmemAllocationCompType), where the device supports it.
enum class compression : unsigned char { none = 0, generic = 1 };
/// CU_MEM_ALLOC_GRANULARITY_MINIMUM (what CUDA requires) or _RECOMMENDED (what performs best).
enum class granularity_kind : int { minimum = 0, recommended = 1 };
/// What shareable_handle::fabric exports: 64 opaque bytes to send any way (CUmemFabricHandle).
struct fabric_handle {
  unsigned char data[64];  ///< CUDA's bytes, as exported
};

namespace detail {
using driver_fn::u64;
inline u64 address_value(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }
inline void* address_pointer(u64 a) noexcept { return reinterpret_cast<void*>(std::uintptr_t(a)); }

// Checks before the driver, whose refusals say only "invalid argument"; none calls CUDA.
[[noreturn]] CURT_COLD inline void refuse(const char* call, const std::string& why) {
  raise(cudaErrorInvalidValue, call, why, __FILE__, __LINE__);
}
inline void check_multiple(const char* call, const char* what, std::size_t value,
                           std::size_t step, const char* of = "granularity") {
  if (CURT_UNLIKELY(value % step != 0))
    refuse(call, fmt("%s %zu is not a multiple of the %s %zu", what, value, of, step));
}
inline std::size_t round_up(const char* call, std::size_t value, std::size_t step) {
  if (CURT_UNLIKELY(value > ~std::size_t(0) - step))
    refuse(call, fmt("size %zu rounded up to the granularity %zu overflows", value, step));
  return (value + step - 1) / step * step;
}
inline void check_range(std::size_t bytes, std::size_t alignment, const void* hint) {
  const char* call = "curt::address_range";
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes == 0) refuse(call, "size 0: a range holds at least one page");
  if (alignment & (alignment - 1))
    refuse(call, fmt("alignment %zu is not a power of two (0: CUDA's default)", alignment));
  check_multiple(call, "size", bytes, page, "host page size");
  check_multiple(call, "hint address", std::size_t(address_value(hint)), page, "host page size");
}
inline void check_mapping(std::size_t range_size, std::size_t offset, std::size_t memory_size,
                          std::size_t memory_offset, std::size_t bytes, std::size_t granularity) {
  const char* call = "curt::mapping";
  if (bytes == 0 && memory_offset >= memory_size)
    refuse(call, fmt("memory offset %zu is not inside the %zu bytes of physical memory",
                     memory_offset, memory_size));
  if (bytes == 0) refuse(call, "size 0: nothing to map");
  check_multiple(call, "offset", offset, granularity);
  check_multiple(call, "size", bytes, granularity);
  check_multiple(call, "memory offset", memory_offset, granularity);
  if (memory_offset > memory_size || bytes > memory_size - memory_offset)
    refuse(call, fmt("%zu bytes from offset %zu pass the end of the %zu bytes of physical memory",
                     bytes, memory_offset, memory_size));
  if (offset > range_size || bytes > range_size - offset)
    refuse(call, fmt("%zu bytes at offset %zu pass the end of the %zu-byte address range", bytes,
                     offset, range_size));
}
inline void check_location(const char* call, memory_location where, shareable_handle handle) {
  const cudaMemLocationType t = where.type();
  if (t != cudaMemLocationTypeDevice && t != cudaMemLocationTypeHost &&
      t != cudaMemLocationTypeHostNuma)
    refuse(call, fmt("physical memory lives on a device, the host or a host NUMA node, not at "
                     "\"%s\"", where.describe().c_str()));
  if (t == cudaMemLocationTypeHost && handle != shareable_handle::none)
    refuse(call, "memory_location::host() memory cannot be shared (CUDA 13.0); use host_numa(n)");
}

// The device attribute (CU_DEVICE_ATTRIBUTE_*) that says whether a VMM feature is supported.
struct vmm_feature {
  int attribute;
  const char* name;
  const char* what;
};
inline constexpr vmm_feature vmm_support{
    102, "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED", "virtual memory management"};
inline constexpr vmm_feature posix_fd_support{
    103, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED", "POSIX fd handles"};
inline constexpr vmm_feature compression_support{
    107, "CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED", "compressible memory"};
inline constexpr vmm_feature fabric_support{
    128, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED", "fabric handles"};
inline std::string unsupported(int ordinal, const vmm_feature& f) {
  int value = 0;
  CURT_DETAIL_DRIVER_CALL(cuDeviceGetAttribute, 2000, &value, f.attribute, driver_device(ordinal));
  return value ? std::string() : fmt("unsupported: %s on device %d (%s is 0)", f.what, ordinal,
                                     f.name);
}
inline void require(const char* call, int ordinal, const vmm_feature& f) {
  const std::string why = unsupported(ordinal, f);
  if (!why.empty()) raise(cudaErrorNotSupported, call, why, __FILE__, __LINE__);
}
// What a failure at `where` says: an unsupported device names the attribute; 800 is IMEX's.
CURT_COLD inline std::string vmm_reason(int status, memory_location where) {
  if (status == 800) return "no IMEX channel is open to this process (fabric handles need one)";
  if (status == cudaErrorNotSupported && where.is_device())
    return unsupported(where.id(), vmm_support);
  return {};
}
template <class Call, class Why>
[[noreturn]] CURT_COLD void vmm_failed(int status, const Call& call, const Why& why,
                                       const char* file, int line) {
  throw_error(std::error_code(status, driver_category()), call(), file, line, why);
}
// Calls driver function `name` (10.2) with `args`; a failure throws, described by `call` and
// explained by `why` (which may read `status`), both built on that path only.
#define CURT_DETAIL_VMM_CALL(name, args, call, why)                     \
  if (const int status = CURT_DETAIL_DRIVER_FUNCTION(name, 10020) args; \
      CURT_UNLIKELY(status != 0))                                       \
  ::curt::detail::vmm_failed(                                           \
      status, [&] { return call; }, [&]() -> std::string { return why; }, __FILE__, __LINE__)

inline driver_fn::mem_allocation_prop allocation_prop(memory_location where, shareable_handle h,
                                                      compression c) {
  driver_fn::mem_allocation_prop prop;
  prop.requested_handle_types = static_cast<int>(h);
  prop.location = where.native();
  prop.compression_type = static_cast<unsigned char>(c);
  return prop;
}
inline std::size_t prop_granularity(const driver_fn::mem_allocation_prop& prop,
                                    granularity_kind kind) {
  std::size_t value = 0;
  const auto where = memory_location::from_native(prop.location);
  CURT_DETAIL_VMM_CALL(cuMemGetAllocationGranularity, (&value, &prop, static_cast<int>(kind)),
                       fmt("cuMemGetAllocationGranularity(%s)", where.describe().c_str()),
                       vmm_reason(status, where));
  return value;
}

// cuMemSetAccess of `count` descriptions; of a list of devices, 32 at a time (no heap).
inline void set_access(u64 address, std::size_t size, const driver_fn::mem_access_desc* desc,
                       std::size_t count) {
  CURT_DETAIL_VMM_CALL(cuMemSetAccess, (address, size, desc, count),
                       fmt("cuMemSetAccess(%zu bytes, device %d first of %zu, access %d)", size,
                           desc->location.id, count, desc->flags),
                       status == 2 ? ""  // out of memory: no peer question
                                   : "every device given access must reach the memory's "
                                     "(can_access_peer)");
}
inline void set_access(u64 address, std::size_t size, std::initializer_list<curt::device> devices,
                       memory_access access) {
  driver_fn::mem_access_desc desc[32];
  for (auto d = devices.begin(); d != devices.end();) {
    std::size_t n = 0;
    for (; n < 32 && d != devices.end(); ++d)
      desc[n++] = {memory_location::device(*d).native(), static_cast<int>(access)};
    set_access(address, size, desc, n);
  }
}
inline memory_access get_access(u64 address, curt::device d) {
  u64 flags = 0;
  const cudaMemLocation where = memory_location::device(d).native();
  CURT_DETAIL_DRIVER_CALL(cuMemGetAccess, 10020, &flags, &where, address);
  return static_cast<memory_access>(flags);
}

// The ref half of the three owners: an address or handle (or an owner state) and a size.
template <class Traits>
class vmm_ref {
 public:
  explicit vmm_ref(void* handle) noexcept : handle_(handle) {}
  void* get() const { return native("get()"); }
  bool valid() const noexcept { return !is_state_handle(handle_); }
  std::size_t size() const noexcept { return valid() ? size_ : 0; }

 protected:
  void* native(const char* operation) const {
    return usable_handle(handle_, Traits::name, operation);
  }
  void* handle_;
  std::size_t size_ = 0;
};
#define CURT_DETAIL_VMM_TRAITS(kind, owner, ...)                                  \
  struct kind {                                                                   \
    static constexpr const char* name = "curt::" #owner;                          \
    template <class Ref, class State>                                             \
    static void destroy(Ref& r, State&) { CURT_DETAIL_DRIVER_CALL(__VA_ARGS__); } \
    template <class State>                                                        \
    static void release(State&) noexcept {}                                       \
  }
CURT_DETAIL_VMM_TRAITS(physical_traits, physical_memory, cuMemRelease, 10020,
                       address_value(r.get()));
CURT_DETAIL_VMM_TRAITS(range_traits, address_range, cuMemAddressFree, 10020,
                       address_value(r.get()), r.size());
CURT_DETAIL_VMM_TRAITS(mapping_traits, mapping, cuMemUnmap, 10020, address_value(r.get()),
                       r.size());
#undef CURT_DETAIL_VMM_TRAITS

// What address_range and mapping share: they own addresses, data() the first.
template <class Traits>
class address_owner : public unique_handle<vmm_ref<Traits>, Traits> {
 public:
  /// The first address; throws when the owner holds none.
  void* data() const { return this->native("data()"); }
  template <class T>
  T* data() const { return static_cast<T*>(data()); }

 protected:
  address_owner() noexcept : unique_handle<vmm_ref<Traits>, Traits>(no_handle) {}
};

/// What physical memory keeps besides its handle and size.
struct physical_info {
  std::size_t granularity = 0;  // the minimum granularity of its properties
  memory_location location;
  shareable_handle handle_type = shareable_handle::none;
  bool compressed = false;
};
}  // namespace detail

/// The granularity of physical memory at `where` made with these options: sizes, offsets and
/// addresses of mappings are multiples of the minimum; the recommended one performs best.
inline std::size_t granularity(memory_location where,
                               granularity_kind kind = granularity_kind::minimum,
                               shareable_handle handle = shareable_handle::none,
                               compression c = compression::none) {
  detail::check_location("curt::granularity", where, handle);
  return detail::prop_granularity(detail::allocation_prop(where, handle, c), kind);
}

/// Physical memory (cuMemCreate), released when destroyed (cuMemRelease); mapped memory stays
/// until its mappings go. Move-only. Its size is rounded up to the minimum granularity.
class physical_memory
    : public detail::unique_handle<detail::vmm_ref<detail::physical_traits>,
                                   detail::physical_traits, detail::physical_info> {
  using base = detail::unique_handle<detail::vmm_ref<detail::physical_traits>,
                                     detail::physical_traits, detail::physical_info>;

 public:
  /// `bytes` (at least 1) at `where`: a device, host() or host_numa(node); shareable with other
  /// processes through `handle`; compressible where the device supports it (is_compressed()).
  physical_memory(memory_location where, std::size_t bytes,
                  shareable_handle handle = shareable_handle::none,
                  compression c = compression::none)
      : base(no_handle) {
    const char* call = "curt::physical_memory";
    if (bytes == 0) detail::refuse(call, "size 0: physical memory holds at least one granule");
    detail::check_location(call, where, handle);
    if (where.is_device()) {  // what the request needs, asked first: the refusal names it
      const int id = where.id();
      if (handle == shareable_handle::posix_fd) detail::require(call, id, detail::posix_fd_support);
      if (handle == shareable_handle::fabric) detail::require(call, id, detail::fabric_support);
      if (c == compression::generic) detail::require(call, id, detail::compression_support);
    }
    const auto prop = detail::allocation_prop(where, handle, c);
    create(prop, bytes, detail::prop_granularity(prop, granularity_kind::minimum));
  }
  explicit physical_memory(no_handle_t) noexcept : base(no_handle) {}  ///< Holds none.

  /// Memory another process exported (export_posix_fd()); `bytes`: its size(), sent along (CUDA
  /// does not tell). `fd` stays open.
  static physical_memory import(const posix_fd& fd, std::size_t bytes) {
    void* shared = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get()));  // by value
    return imported(shared, shareable_handle::posix_fd, bytes);
  }
  /// Memory another process of the fabric exported (export_fabric()), of `bytes`.
  static physical_memory import(const fabric_handle& handle, std::size_t bytes) {
    return imported(const_cast<unsigned char*>(handle.data), shareable_handle::fabric, bytes);
  }

  /// The CUmemGenericAllocationHandle; throws when the owner holds none.
  detail::u64 get() const { return detail::address_value(native("get()")); }
  /// The minimum granularity of memory made as this was: mappings' sizes and offsets are multiples.
  std::size_t granularity() const noexcept { return state_.granularity; }
  memory_location location() const noexcept { return state_.location; }  ///< Where it is.
  /// How it may be shared (shareable_handle::none: not at all).
  shareable_handle handle_type() const noexcept { return state_.handle_type; }
  /// Whether CUDA made it compressible (it may not, even where asked and supported).
  bool is_compressed() const noexcept { return state_.compressed; }
  /// A descriptor another process imports; for memory made with shareable_handle::posix_fd.
  posix_fd export_posix_fd() const {
    int fd = -1;
    export_as(&fd, shareable_handle::posix_fd);
    return posix_fd::adopt(fd);
  }
  /// What any process of the NVLink fabric imports; for memory made with shareable_handle::fabric.
  fabric_handle export_fabric() const {
    fabric_handle handle{};
    export_as(&handle, shareable_handle::fabric);
    return handle;
  }
  /// Gives up ownership: the caller releases the returned handle (cuMemRelease).
  detail::u64 release() { return detail::address_value(base::release()); }

 private:
  template <class T>
  friend class growable_buffer;
  // Creates `bytes` rounded up to the granularity; the owner holds nothing if it throws.
  void create(const detail::driver_fn::mem_allocation_prop& prop, std::size_t bytes,
              std::size_t granularity) {
    const std::size_t size = detail::round_up("curt::physical_memory", bytes, granularity);
    const auto where = memory_location::from_native(prop.location);
    detail::u64 h = 0;
    CURT_DETAIL_VMM_CALL(cuMemCreate, (&h, size, &prop, 0),
                         detail::fmt("cuMemCreate(%s, %zu bytes, handle type %d, compression %d)",
                                     where.describe().c_str(), size, prop.requested_handle_types,
                                     prop.compression_type),
                         detail::vmm_reason(status, where));
    handle_ = detail::address_pointer(h);
    size_ = size;
    state_ = {granularity, where, shareable_handle(prop.requested_handle_types), false};
    if (prop.compression_type != 0) read_properties();  // CUDA may have made it uncompressed
  }
  detail::driver_fn::mem_allocation_prop read_properties() {
    detail::driver_fn::mem_allocation_prop prop;
    CURT_DETAIL_DRIVER_CALL(cuMemGetAllocationPropertiesFromHandle, 10020, &prop, get());
    state_.compressed = prop.compression_type != 0;
    return prop;
  }
  void export_as(void* out, shareable_handle type) const {
    const detail::u64 h = get();  // an owner that holds none says so before any lookup
    CURT_DETAIL_VMM_CALL(cuMemExportToShareableHandle, (out, h, static_cast<int>(type), 0),
                         detail::fmt("cuMemExportToShareableHandle(%s, handle type %d)",
                                     location().describe().c_str(), int(type)),
                         handle_type() != type ? "it was not made with that shareable_handle"
                                               : detail::vmm_reason(status, location()));
  }
  static physical_memory imported(void* shared, shareable_handle type, std::size_t bytes) {
    const char* call = "curt::physical_memory::import";
    if (bytes == 0) detail::refuse(call, "size 0: give the exporter's size()");
    detail::u64 h = 0;
    CURT_DETAIL_VMM_CALL(cuMemImportFromShareableHandle, (&h, shared, static_cast<int>(type)),
                         detail::fmt("cuMemImportFromShareableHandle(handle type %d)", int(type)),
                         detail::vmm_reason(status, memory_location()));
    physical_memory memory(no_handle);
    memory.handle_ = detail::address_pointer(h);  // owned from here: released if a query throws
    const auto prop = memory.read_properties();
    memory.state_ = {detail::prop_granularity(prop, granularity_kind::minimum),
                     memory_location::from_native(prop.location), type, prop.compression_type != 0};
    detail::check_multiple(call, "size", bytes, memory.state_.granularity);
    memory.size_ = bytes;
    return memory;
  }
};

/// A reserved range of virtual addresses (cuMemAddressReserve), freed when destroyed
/// (cuMemAddressFree), after its mappings. Move-only.
class address_range : public detail::address_owner<detail::range_traits> {
 public:
  /// `bytes` of addresses (a multiple of the host page size; of the granularity, to be mapped),
  /// aligned to `alignment` (a power of two; 0: CUDA's default), at `hint` if free (a hint only).
  explicit address_range(std::size_t bytes, std::size_t alignment = 0, const void* hint = nullptr) {
    detail::check_range(bytes, alignment, hint);
    detail::u64 at = 0;
    const detail::u64 hint_at = detail::address_value(hint);
    CURT_DETAIL_VMM_CALL(
        cuMemAddressReserve, (&at, bytes, alignment, hint_at, 0),
        detail::fmt("cuMemAddressReserve(%zu bytes, alignment %zu)", bytes, alignment), "");
    handle_ = detail::address_pointer(at);
    size_ = bytes;
  }
  explicit address_range(no_handle_t) noexcept {}  ///< Holds none.
};

/// Physical memory mapped into an address range (cuMemMap), unmapped when destroyed (cuMemUnmap).
/// No device may access it until set_access(). Move-only; the range must outlive it.
class mapping : public detail::address_owner<detail::mapping_traits> {
 public:
  /// `bytes` of `memory` from `memory_offset` (bytes 0: the rest of it) at `offset` in `range`;
  /// all multiples of memory.granularity(). (CUDA 13.0's header: memory_offset "must be zero".)
  mapping(const address_range& range, std::size_t offset, const physical_memory& memory,
          std::size_t bytes = 0, std::size_t memory_offset = 0) {
    const detail::u64 at = detail::address_value(range.get()) + offset;
    const detail::u64 handle = memory.get();  // one that holds none says so (granularity 0)
    if (bytes == 0 && memory_offset < memory.size()) bytes = memory.size() - memory_offset;
    detail::check_mapping(range.size(), offset, memory.size(), memory_offset, bytes,
                          memory.granularity());
    map(at, bytes, memory_offset, handle);
  }
  explicit mapping(no_handle_t) noexcept {}  ///< Holds none.

  /// Gives devices this access to the whole mapping (none before the first call).
  void set_access(curt::device d, memory_access access) const { set_access({d}, access); }
  /// Gives each of `devices` this access to the whole mapping, in one driver call.
  void set_access(std::initializer_list<curt::device> devices, memory_access access) const {
    detail::set_access(detail::address_value(native("set_access()")), size_, devices, access);
  }
  /// The access device d has now (memory_access::none before set_access()).
  memory_access access(curt::device d) const {
    return detail::get_access(detail::address_value(native("access()")), d);
  }

 private:
  template <class T>
  friend class growable_buffer;
  void map(detail::u64 at, std::size_t bytes, std::size_t memory_offset, detail::u64 h) {
    CURT_DETAIL_VMM_CALL(
        cuMemMap, (at, bytes, memory_offset, h, 0),
        detail::fmt("cuMemMap(%zu bytes, memory offset %zu)", bytes, memory_offset), "");
    handle_ = detail::address_pointer(at);
    size_ = bytes;
  }
};

}  // namespace curt

#undef CURT_DETAIL_VMM_CALL
