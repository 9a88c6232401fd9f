// Memory pools without a GPU: the properties builder, what a ref knows, and every refusal curt
// makes before calling CUDA (owners that hold nothing, overflowing counts, bad alignments,
// unexportable host pools, unknown pool kinds, accessibility claims), named in the message.
// Handles here are made up: none of these paths may reach CUDA.
#include <curt/memory_resource.hpp>

#include <catch.hpp>
#include <expect.hpp>

#include <curt/memory_pool.hpp>
#include <curt/memory_pool_ipc.hpp>

#include <cuda/std/span>

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

cudaMemPool_t fake_pool() { return reinterpret_cast<cudaMemPool_t>(std::uintptr_t(0x1000)); }
curt::stream_ref fake_stream() {
  return curt::stream_ref(reinterpret_cast<cudaStream_t>(std::uintptr_t(0x2000)));
}
curt::device device0() { return curt::device::from_ordinal_unchecked(0); }

}  // namespace

TEST_CASE("memory_pool_properties hold what was set", "[memory_pool]") {
  auto device = curt::memory_pool_properties::device(device0()).max_size(100 << 20).exportable();
  CHECK(device.location() == curt::memory_location::device(device0()));
  CHECK(device.allocation_type() == cudaMemAllocationTypePinned);
  CHECK(device.max_size() == std::size_t(100) << 20);
  CHECK(device.is_exportable());
  CHECK(device.native().handleTypes == cudaMemHandleTypePosixFileDescriptor);

  auto numa = curt::memory_pool_properties::host_numa(1).usage(cudaMemPoolCreateUsageHwDecompress);
  CHECK(numa.location() == curt::memory_location::host_numa(1));
  CHECK(numa.usage() == cudaMemPoolCreateUsageHwDecompress);
  CHECK_FALSE(numa.is_exportable());

  auto managed = curt::memory_pool_properties::managed();
  CHECK(managed.is_managed());
  CHECK(managed.location().is_none());
  CHECK(curt::memory_pool_properties::managed(device0()).location().is_device());
  CHECK(curt::memory_pool_properties::pinned_host().location() == curt::memory_location::host());
}

TEST_CASE("a pool ref knows the kind it was told", "[memory_pool]") {
  curt::memory_pool_ref bare(fake_pool());
  CHECK_FALSE(bare.kind_known());
  CHECK_FALSE(bare.is_device_pool());

  curt::memory_pool_ref host(fake_pool(), curt::memory_pool_properties::pinned_host().max_size(1 << 25));
  CHECK(host.is_host_pool());
  CHECK(host.max_size() == std::size_t(1) << 25);
  CHECK_THAT(host.describe(), ContainsSubstring("pinned host memory"));
  curt::memory_pool_ref managed(fake_pool(), curt::memory_location::none(),
                                cudaMemAllocationTypeManaged);
  CHECK(managed.is_managed_pool());
  CHECK_THAT(managed.describe(), ContainsSubstring("no preferred location"));
  CHECK(bare == host);
  // What an async_buffer learns at its allocation: does the host address the pool's memory?
  CHECK_FALSE(bare.host_addressable());
  CHECK(host.host_addressable());
  CHECK(managed.host_addressable());
  CHECK(curt::memory_pool_ref(fake_pool(), curt::memory_pool_properties::host_numa(0))
            .host_addressable());
  CHECK(curt::memory_pool_ref(fake_pool(), curt::memory_pool_properties::managed(device0()))
            .host_addressable());
  CHECK_FALSE(curt::memory_pool_ref(fake_pool(), curt::memory_pool_properties::device(device0()))
                  .host_addressable());
}

TEST_CASE("refusals before CUDA name the numbers", "[memory_pool]") {
  curt::memory_pool_ref pool(fake_pool(), curt::memory_pool_properties::device(device0()));
  curt_test::require_cuda_error([&] { (void)pool.allocate<double>(~std::size_t(0) / 4, fake_stream()); },
                                cudaErrorInvalidValue, {"allocate<T>", "overflow"});
  curt_test::require_cuda_error([&] { (void)pool.allocate_sync(64, 3); }, cudaErrorInvalidValue,
                                {"allocate_sync()", "alignment 3"});
  curt_test::require_cuda_error([&] { (void)pool.allocate_async(64, 512, fake_stream()); },
                                cudaErrorInvalidValue, {"allocate_async()", "alignment 512"});
  curt_test::require_cuda_error(
      [&] { curt::memory_pool p(curt::memory_pool_properties::pinned_host().exportable()); },
      cudaErrorInvalidValue, {"cannot be exported", "host_numa"});
  curt_test::require_cuda_error([&] { curt::set_current_memory_pool(curt::memory_pool_ref(fake_pool())); },
                                cudaErrorInvalidValue, {"does not know the pool's location"});
}

TEST_CASE("pool owners and buffers that hold nothing say which", "[memory_pool]") {
  curt::memory_pool empty(curt::no_handle);
  CHECK_FALSE(empty.valid());
  curt_test::require_cuda_error([&] { (void)empty.used_memory(); }, cudaErrorInvalidResourceHandle,
                                {"curt::memory_pool", "empty"});
  curt_test::require_cuda_error([&] { (void)empty.allocate<int>(4, fake_stream()); },
                                cudaErrorInvalidResourceHandle, {"empty"});
  curt::memory_pool moved = std::move(empty);
  curt_test::require_cuda_error([&] { (void)empty.get(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from"});

  curt::async_buffer<float> none(curt::no_handle);
  CHECK_FALSE(none.valid());
  CHECK(none.size() == 0);
  curt_test::require_cuda_error([&] { (void)none.data(); }, cudaErrorInvalidResourceHandle,
                                {"curt::async_buffer<float>::data()", "empty"});
  curt::async_buffer<float> zero = curt::async_buffer<float>::adopt(nullptr, 0, fake_stream());
  CHECK(zero.valid());
  CHECK(zero.data() == nullptr);
  curt::async_buffer<float> taken = std::move(zero);
  curt_test::require_cuda_error([&] { (void)zero.stream(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from"});
  CHECK(taken.release() == nullptr);
  curt_test::require_cuda_error([&] { taken.free(); }, cudaErrorInvalidResourceHandle,
                                {"released"});
  curt_test::require_cuda_error(
      [&] { (void)curt::async_buffer<int>::adopt(nullptr, 3, fake_stream()); },
      cudaErrorInvalidValue, {"adopt(null, 3", "count of 0"});

}

// Every way to make an async_buffer on a curt::stream owner takes the owner too, so that the
// buffer keeps the stream when the owner dies first (found by review: import_pointer took only a
// stream_ref, and an owner passed to it converted silently).
template <class T, class Signature, class = void>
struct takes_owner : std::false_type {};
template <class T, class Signature>
struct takes_owner<T, Signature,
                   std::void_t<decltype(static_cast<Signature*>(&curt::import_pointer<T>))>>
    : std::true_type {};
template <class T>
using import_on_owner = curt::async_buffer<T>(curt::memory_pool_ref,
                                              const cudaMemPoolPtrExportData&, std::size_t,
                                              const curt::stream&);
template <class T>
using allocate_on_owner = curt::async_buffer<T>(std::size_t, const curt::stream&);

TEST_CASE("async_buffers made on a stream owner take the owner", "[memory_pool]") {
  CHECK(takes_owner<int, import_on_owner<int>>::value);
  CHECK(takes_owner<float, import_on_owner<float>>::value);
  // The control: a signature no overload has is not found.
  CHECK_FALSE(takes_owner<int, allocate_on_owner<int>>::value);
  CHECK(static_cast<allocate_on_owner<int>*>(&curt::allocate_async<int>) != nullptr);
}

// An async_buffer converts to views as other owners do; host access is host_view() alone, so a
// loop over a device pool's buffer does not compile (tests/compile/async_buffer_host_iteration).
template <class B, class = void>
struct has_begin : std::false_type {};
template <class B>
struct has_begin<B, std::void_t<decltype(std::declval<B&>().begin())>> : std::true_type {};
template <class B, class = void>
struct has_index : std::false_type {};
template <class B>
struct has_index<B, std::void_t<decltype(std::declval<B&>()[0])>> : std::true_type {};
template <class B, class = void>
struct has_host_view : std::false_type {};
template <class B>
struct has_host_view<B, std::void_t<decltype(std::declval<B>().host_view())>> : std::true_type {};
static_assert(!has_begin<curt::async_buffer<float>>::value);
static_assert(!has_begin<const curt::async_buffer<float>>::value);
static_assert(!has_index<curt::async_buffer<float>>::value);
static_assert(has_begin<curt::host_view<float>>::value);
static_assert(std::is_same_v<decltype(std::declval<const curt::async_buffer<float>&>().host_view()),
                             curt::host_view<const float>>);
// A buffer never becomes a host_view without host_view()'s check, nor a temporary's.
static_assert(!std::is_convertible_v<curt::async_buffer<float>&, curt::host_view<float>>);
static_assert(!has_host_view<curt::async_buffer<float>&&>::value);
static_assert(has_host_view<curt::async_buffer<float>&>::value);
static_assert(sizeof(curt::async_buffer<float>) == sizeof(void*) * 7);  // the flag adds no byte
static_assert(std::is_convertible_v<curt::async_buffer<float>&, cuda::std::span<float>>);
static_assert(std::is_convertible_v<const curt::async_buffer<float>&,
                                    cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<const curt::async_buffer<float>&, cuda::std::span<float>>);
static_assert(!std::is_convertible_v<curt::async_buffer<float>&&, cuda::std::span<const float>>);

TEST_CASE("an async_buffer of a pool the host cannot address refuses host access",
          "[memory_pool]") {
  std::vector<int> elements = curt_test::random_ints(16, -100, 100);
  curt::async_buffer<int> adopted =
      curt::async_buffer<int>::adopt(elements.data(), elements.size(), fake_stream());
  CHECK_FALSE(adopted.host_accessible());  // adopt() cannot tell the pool
  curt_test::require_cuda_error([&] { (void)adopted.host_view(); }, cudaErrorInvalidValue,
                                {"curt::async_buffer<int>::host_view()", "host cannot address",
                                 "host or managed pool"});
  const curt::async_buffer<int>& view = adopted;
  curt_test::require_cuda_error([&] { (void)view.host_view(); }, cudaErrorInvalidValue,
                                {"async_buffer<int>::host_view()"});
  // Views stay views: no host access is asked for.
  cuda::std::span<const int> span = view;
  CHECK(span.data() == elements.data());
  CHECK(span.size() == elements.size());
  CHECK(adopted.release() == elements.data());  // the vector's memory: nothing to free
  CHECK_FALSE(adopted.host_accessible());
}

TEST_CASE("posix_fd owns a descriptor and fails loudly without one", "[memory_pool][ipc]") {
  curt_test::require_cuda_error([&] { (void)curt::posix_fd::adopt(-1); }, cudaErrorInvalidValue,
                                {"posix_fd::adopt(-1)"});
  int ends[2] = {-1, -1};
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, ends) == 0);
  {
    curt::posix_fd a = curt::posix_fd::adopt(ends[0]);
    curt::posix_fd b = std::move(a);
    CHECK(b.get() == ends[0]);
    curt_test::require_cuda_error([&] { (void)a.get(); }, cudaErrorInvalidResourceHandle,
                                  {"moved-from"});
  }  // closed
  char byte = 0;
  CHECK(recv(ends[1], &byte, 1, 0) == 0);  // end of stream: the owner closed the other end
  CHECK(close(ends[1]) == 0);
}

TEST_CASE("accessibility claims are checked against the pool's kind", "[memory_resource]") {
  curt::memory_pool_ref device_pool(fake_pool(), curt::memory_pool_properties::device(device0()));
  curt::pool_resource<cuda::mr::device_accessible> ok(device_pool);  // no CUDA call needed
  CHECK(ok == device_pool);
  curt_test::require_cuda_error(
      [&] { curt::pool_resource<cuda::mr::host_accessible> r(device_pool); },
      cudaErrorInvalidValue, {"pool_resource<host_accessible>", "is not host_accessible"});
  curt::memory_pool_ref host_pool(fake_pool(), curt::memory_pool_properties::pinned_host());
  curt::pool_resource<cuda::mr::host_accessible> host_ok(host_pool);
  CHECK(host_ok.is_host_pool());
  curt_test::require_cuda_error(
      [&] { curt::pool_resource<cuda::mr::device_accessible> r{curt::memory_pool_ref(fake_pool())}; },
      cudaErrorInvalidValue, {"does not know the pool's kind"});
}
