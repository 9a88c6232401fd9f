// Virtual memory management without a GPU (include/curt/memory/virtual_memory.hpp): the refusals
// curt makes before it calls the driver (sizes, alignments, granularity multiples, locations),
// owners that hold nothing, the owners' types, and the driver types the header declares itself
// (it does not include <cuda.h>; this file does, to compare). None of these paths may reach CUDA:
// on this machine there is no driver, so a path that did would fail with another message.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/driver.hpp>  // <cuda.h>: the VMM types, to compare layouts
#include <curt/virtual_memory.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

namespace {

using curt_test::require_cuda_error;
using prop = curt::detail::driver_fn::mem_allocation_prop;
using access_desc = curt::detail::driver_fn::mem_access_desc;

curt::device device0() { return curt::device::from_ordinal_unchecked(0); }

// A minimal span-like view (an element_type, a (pointer, size) constructor).
template <class T>
struct view {
  using element_type = T;
  view(T* p, std::size_t n) : data(p), size(n) {}
  T* data;
  std::size_t size;
};

}  // namespace

// The layouts the header declares must be <cuda.h>'s: the driver reads them as its own.
static_assert(sizeof(prop) == sizeof(CUmemAllocationProp));
static_assert(offsetof(prop, requested_handle_types) ==
              offsetof(CUmemAllocationProp, requestedHandleTypes));
static_assert(offsetof(prop, location) == offsetof(CUmemAllocationProp, location));
static_assert(offsetof(prop, win32_metadata) == offsetof(CUmemAllocationProp, win32HandleMetaData));
static_assert(offsetof(prop, compression_type) == offsetof(CUmemAllocationProp, allocFlags));
static_assert(offsetof(prop, usage) ==
              offsetof(CUmemAllocationProp, allocFlags) +
                  offsetof(decltype(CUmemAllocationProp::allocFlags), usage));
static_assert(sizeof(cudaMemLocation) == sizeof(CUmemLocation));
static_assert(sizeof(access_desc) == sizeof(CUmemAccessDesc));
static_assert(offsetof(access_desc, flags) == offsetof(CUmemAccessDesc, flags));
static_assert(sizeof(curt::fabric_handle) == sizeof(CUmemFabricHandle));
static_assert(sizeof(CUmemGenericAllocationHandle) == sizeof(unsigned long long));
static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long));
// The enums' values are the driver's.
static_assert(int(curt::memory_access::read) == CU_MEM_ACCESS_FLAGS_PROT_READ);
static_assert(int(curt::memory_access::read_write) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
static_assert(int(curt::shareable_handle::posix_fd) == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
static_assert(int(curt::shareable_handle::fabric) == CU_MEM_HANDLE_TYPE_FABRIC);
static_assert(int(curt::compression::generic) == CU_MEM_ALLOCATION_COMP_GENERIC);
static_assert(int(curt::granularity_kind::recommended) == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
static_assert(prop().type == CU_MEM_ALLOCATION_TYPE_PINNED);
static_assert(curt::detail::vmm_support.attribute ==
              CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
static_assert(curt::detail::posix_fd_support.attribute ==
              CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
static_assert(curt::detail::compression_support.attribute ==
              CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED);
static_assert(curt::detail::fabric_support.attribute ==
              CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED);

// Owners: move-only, like every curt owner.
template <class T>
constexpr bool move_only =
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
    std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;
static_assert(move_only<curt::physical_memory>);
static_assert(move_only<curt::address_range>);
static_assert(move_only<curt::mapping>);
static_assert(move_only<curt::growable_buffer<float>>);
// A growable buffer is a range for curt::copy, a view for kernels, and gives no view as a
// temporary.
using growable = curt::growable_buffer<float>;
static_assert(curt::detail::is_range_v<growable&>);
static_assert(std::is_same_v<growable::kernel_view, curt::detail::element_view<float>>);
static_assert(std::is_convertible_v<growable&, view<float>>);
static_assert(std::is_convertible_v<const growable&, view<const float>>);
static_assert(!std::is_convertible_v<const growable&, view<float>>);
static_assert(!std::is_convertible_v<growable&&, view<float>>);

TEST_CASE("granularity errors name the numbers", "[vmm]") {
  require_cuda_error(
      [] { curt::detail::check_mapping(8 << 20, 0, 4 << 20, 0, 1000000, 2097152); },
      cudaErrorInvalidValue,
      {"curt::mapping", "size 1000000 is not a multiple of the granularity 2097152"});
  require_cuda_error(
      [] { curt::detail::check_mapping(8 << 20, 4096, 4 << 20, 0, 2 << 20, 2 << 20); },
      cudaErrorInvalidValue, {"offset 4096 is not a multiple of the granularity 2097152"});
  require_cuda_error(
      [] { curt::detail::check_mapping(8 << 20, 0, 4 << 20, 1 << 20, 2 << 20, 2 << 20); },
      cudaErrorInvalidValue,
      {"memory offset 1048576 is not a multiple of the granularity 2097152"});
  require_cuda_error(
      [] { curt::detail::check_mapping(8 << 20, 0, 4 << 20, 2 << 20, 4 << 20, 2 << 20); },
      cudaErrorInvalidValue,
      {"4194304 bytes from offset 2097152 pass the end of the 4194304 bytes"});
  require_cuda_error(
      [] { curt::detail::check_mapping(4 << 20, 4 << 20, 4 << 20, 0, 2 << 20, 2 << 20); },
      cudaErrorInvalidValue,
      {"2097152 bytes at offset 4194304 pass the end of the 4194304-byte address range"});
  require_cuda_error([] { curt::detail::check_mapping(4 << 20, 0, 4 << 20, 0, 0, 2 << 20); },
                     cudaErrorInvalidValue, {"size 0: nothing to map"});
  // The rest of the memory from an offset at or past its end: the offset is named.
  require_cuda_error([] { curt::detail::check_mapping(8 << 20, 0, 4 << 20, 4 << 20, 0, 2 << 20); },
                     cudaErrorInvalidValue,
                     {"memory offset 4194304 is not inside the 4194304 bytes of physical memory"});
  // What fits passes.
  curt::detail::check_mapping(8 << 20, 2 << 20, 4 << 20, 0, 4 << 20, 2 << 20);
  curt::detail::check_mapping(4 << 20, 0, 4 << 20, 0, 4 << 20, 2 << 20);
  CHECK(curt::detail::round_up("t", 1, 2 << 20) == std::size_t(2 << 20));
  CHECK(curt::detail::round_up("t", 2 << 20, 2 << 20) == std::size_t(2 << 20));
  require_cuda_error(
      [] { (void)curt::detail::round_up("t", std::numeric_limits<std::size_t>::max(), 4096); },
      cudaErrorInvalidValue, {"overflows"});
}

TEST_CASE("address ranges: size, alignment and hint refused before the driver", "[vmm]") {
  require_cuda_error([] { curt::address_range r(0); }, cudaErrorInvalidValue,
                     {"curt::address_range", "size 0"});
  require_cuda_error([] { curt::address_range r(std::size_t(2) << 20, 3); }, cudaErrorInvalidValue,
                     {"alignment 3 is not a power of two"});
  require_cuda_error([] { curt::address_range r(std::size_t(2) << 20, 3 << 20); },
                     cudaErrorInvalidValue, {"alignment 3145728 is not a power of two"});
  require_cuda_error([] { curt::address_range r(1000); }, cudaErrorInvalidValue,
                     {"size 1000 is not a multiple of the host page size"});
  const void* odd_hint = reinterpret_cast<const void*>(std::uintptr_t(0x100000000ull + 100));
  require_cuda_error([&] { curt::address_range r(std::size_t(2) << 20, 0, odd_hint); },
                     cudaErrorInvalidValue, {"hint address 4294967396 is not a multiple"});
}

TEST_CASE("physical memory: size and location refused before the driver", "[vmm]") {
  const curt::memory_location gpu = curt::memory_location::device(device0());
  require_cuda_error([&] { curt::physical_memory m(gpu, 0); }, cudaErrorInvalidValue,
                     {"curt::physical_memory", "size 0"});
  require_cuda_error([] { curt::physical_memory m(curt::memory_location::none(), 4096); },
                     cudaErrorInvalidValue, {"not at \"no location\""});
  require_cuda_error(
      [] { curt::physical_memory m(curt::memory_location::host_numa_current(), 4096); },
      cudaErrorInvalidValue, {"a device, the host or a host NUMA node"});
  require_cuda_error(
      [] {
        curt::physical_memory m(curt::memory_location::host(), 4096,
                                curt::shareable_handle::posix_fd);
      },
      cudaErrorInvalidValue, {"cannot be shared", "host_numa"});
  require_cuda_error([] { (void)curt::granularity(curt::memory_location::none()); },
                     cudaErrorInvalidValue, {"curt::granularity"});
  curt::posix_fd fd(curt::no_handle);
  require_cuda_error([&] { (void)curt::physical_memory::import(fd, 0); },
                     cudaErrorInvalidResourceHandle, {"posix_fd", "empty"});
  curt::fabric_handle fabric{};
  require_cuda_error([&] { (void)curt::physical_memory::import(fabric, 0); }, cudaErrorInvalidValue,
                     {"import", "size 0"});
  // A growable buffer's maximum that overflows in bytes, before any driver call.
  require_cuda_error(
      [] { curt::growable_buffer<double> b(device0(), std::numeric_limits<std::size_t>::max()); },
      cudaErrorInvalidValue, {"growable_buffer<double>", "overflow"});
}

TEST_CASE("VMM owners that hold nothing say so", "[vmm]") {
  curt::physical_memory memory(curt::no_handle);
  CHECK_FALSE(memory.valid());
  CHECK(memory.size() == 0);
  require_cuda_error([&] { (void)memory.get(); }, cudaErrorInvalidResourceHandle,
                     {"curt::physical_memory::get()", "empty"});
  require_cuda_error([&] { (void)memory.export_posix_fd(); }, cudaErrorInvalidResourceHandle,
                     {"curt::physical_memory", "empty"});
  curt::physical_memory moved = std::move(memory);
  require_cuda_error([&] { (void)memory.get(); }, cudaErrorInvalidResourceHandle, {"moved-from"});

  curt::address_range range(curt::no_handle);
  CHECK(range.size() == 0);
  require_cuda_error([&] { (void)range.data(); }, cudaErrorInvalidResourceHandle,
                     {"curt::address_range::data()", "empty"});
  require_cuda_error([&] { curt::mapping m(range, 0, moved); }, cudaErrorInvalidResourceHandle,
                     {"curt::address_range", "empty"});

  curt::mapping map(curt::no_handle);
  require_cuda_error([&] { map.set_access(device0(), curt::memory_access::read_write); },
                     cudaErrorInvalidResourceHandle, {"curt::mapping::set_access()", "empty"});
  require_cuda_error([&] { (void)map.access(device0()); }, cudaErrorInvalidResourceHandle,
                     {"curt::mapping::access()", "empty"});

  curt::growable_buffer<float> buffer(curt::no_handle);
  CHECK(buffer.size() == 0);
  CHECK(buffer.capacity() == 0);
  CHECK(buffer.max_size() == 0);
  require_cuda_error([&] { buffer.resize(10); }, cudaErrorInvalidResourceHandle,
                     {"curt::growable_buffer<float>::resize()", "empty"});
  require_cuda_error([&] { buffer.set_access(device0(), curt::memory_access::read); },
                     cudaErrorInvalidResourceHandle, {"set_access()", "empty"});
  curt::growable_buffer<float> other = std::move(buffer);
  require_cuda_error([&] { (void)buffer.data(); }, cudaErrorInvalidResourceHandle,
                     {"growable_buffer<float>::data()", "moved-from"});
  require_cuda_error([&] { other.shrink_to_fit(); }, cudaErrorInvalidResourceHandle,
                     {"shrink_to_fit()", "empty"});
}
