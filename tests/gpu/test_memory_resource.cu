// curt pools as CCCL memory resources (curt/memory_resource.hpp): the installed CCCL 3.0.1's
// cuda::mr concepts checked at compile time, resource refs that allocate through a curt pool,
// the CCCL 3.1+ member names, honest accessibility properties, and Thrust and CUB running on a
// curt stream with temporary storage from a curt pool.
#include <curt/memory_resource.hpp>

#include <catch.hpp>
#include <device_array.hpp>
#include <expect.hpp>

#include <curt/cccl.hpp>
#include <curt/device.hpp>
#include <curt/launch.hpp>
#include <curt/memory_pool.hpp>
#include <curt/stream.hpp>

#include <cub/device/device_reduce.cuh>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using device_accessible = cuda::mr::device_accessible;
using host_accessible = cuda::mr::host_accessible;

// What the concepts of the installed CCCL say about curt's types.
static_assert(cuda::mr::resource<curt::memory_pool_ref>);
static_assert(cuda::mr::async_resource<curt::memory_pool_ref>);
static_assert(cuda::mr::resource<curt::memory_pool>);
static_assert(cuda::mr::async_resource<curt::memory_pool>);
// A bare pool has no property that holds for every pool.
static_assert(!cuda::has_property<curt::memory_pool_ref, device_accessible>);
static_assert(!cuda::has_property<curt::memory_pool_ref, host_accessible>);
// Checked pools have exactly the properties they were checked for.
static_assert(cuda::mr::async_resource_with<curt::pool_resource<device_accessible>, device_accessible>);
static_assert(!cuda::has_property<curt::pool_resource<device_accessible>, host_accessible>);
static_assert(cuda::mr::resource_with<curt::pool_resource<host_accessible>, host_accessible>);
static_assert(!cuda::has_property<curt::pool_resource<host_accessible>, device_accessible>);
static_assert(cuda::mr::async_resource_with<curt::pool_resource<host_accessible, device_accessible>,
                                            host_accessible, device_accessible>);
// Refs of those properties can be made from them.
static_assert(std::is_constructible_v<cuda::mr::async_resource_ref<device_accessible>,
                                      curt::pool_resource<device_accessible>&>);
static_assert(!std::is_constructible_v<cuda::mr::async_resource_ref<host_accessible>,
                                       curt::pool_resource<device_accessible>&>);

__global__ void fill(int* out, int n, int value) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

curt::launch_config config_for(int n) {
  return curt::launch_config(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256));
}

// Thrust's allocator shape (value_type char, allocate/deallocate of bytes), stream-ordered on the
// stream Thrust runs on, through the pool.
struct thrust_pool_allocator {
  using value_type = char;
  curt::memory_pool_ref pool;
  cudaStream_t stream;
  char* allocate(std::ptrdiff_t bytes) {
    return static_cast<char*>(pool.allocate_async(static_cast<std::size_t>(bytes), 256, stream));
  }
  void deallocate(char* p, std::size_t bytes) {
    pool.deallocate_async(p, bytes, 256, stream);
  }
};

struct times_two_plus_one {
  __host__ __device__ int operator()(int x) const { return 2 * x + 1; }
};

}  // namespace

TEST_CASE("cuda::mr refs allocate and deallocate through a curt pool", "[memory_resource]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  curt::pool_resource<device_accessible> resource(pool);
  cuda::mr::async_resource_ref<device_accessible> ref{resource};
  const int n = curt_test::random_ints(1, 1000, 50000)[0];
  const int value = curt_test::random_ints(1, 1, 1000000)[0];
  const std::size_t bytes = std::size_t(n) * sizeof(int);

  void* p = ref.allocate_async(bytes, s.cccl());  // CCCL's default alignment, 256
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % cuda::mr::default_cuda_malloc_alignment == 0);
  CHECK(pool.used_memory() >= bytes);
  curt::launch(s, config_for(n), fill, static_cast<int*>(p), n, value);
  std::vector<int> back(static_cast<std::size_t>(n), 0);
  CURT_CHECK(cudaMemcpyAsync(back.data(), p, bytes, cudaMemcpyDeviceToHost, s));
  ref.deallocate_async(p, bytes, s.cccl());
  s.synchronize();
  CHECK(back == std::vector<int>(std::size_t(n), value));
  CHECK(pool.used_memory() == 0);

  // The synchronous ref (an async ref converts to one): ready for any stream when it returns.
  cuda::mr::resource_ref<device_accessible> sync_ref{ref};
  void* q = sync_ref.allocate(bytes, 256);
  REQUIRE(q != nullptr);
  curt::launch(s, config_for(n), fill, static_cast<int*>(q), n, value + 1);
  CURT_CHECK(cudaMemcpyAsync(back.data(), q, bytes, cudaMemcpyDeviceToHost, s));
  s.synchronize();
  CHECK(back == std::vector<int>(std::size_t(n), value + 1));
  sync_ref.deallocate(q, bytes, 256);
  CHECK(ref == cuda::mr::async_resource_ref<device_accessible>{resource});
}

TEST_CASE("the CCCL 3.1+ member names work on a curt pool", "[memory_resource]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = curt_test::random_ints(1, 1000, 50000)[0];
  const std::size_t bytes = std::size_t(n) * sizeof(int);
  const int value = curt_test::random_ints(1, 1, 1000000)[0];

  void* p = pool.allocate(s.cccl(), bytes, 256);  // stream-ordered
  curt::launch(s, config_for(n), fill, static_cast<int*>(p), n, value);
  std::vector<int> back(static_cast<std::size_t>(n), 0);
  CURT_CHECK(cudaMemcpyAsync(back.data(), p, bytes, cudaMemcpyDeviceToHost, s));
  pool.deallocate(s.cccl(), p, bytes, 256);
  s.synchronize();
  CHECK(back == std::vector<int>(std::size_t(n), value));

  void* q = pool.allocate_sync(bytes);  // synchronous
  curt::launch(s, config_for(n), fill, static_cast<int*>(q), n, value - 1);
  CURT_CHECK(cudaMemcpyAsync(back.data(), q, bytes, cudaMemcpyDeviceToHost, s));
  s.synchronize();
  CHECK(back == std::vector<int>(std::size_t(n), value - 1));
  pool.deallocate_sync(q, bytes);
  s.synchronize();
}

TEST_CASE("accessibility properties are checked when the resource is made", "[memory_resource]") {
  curt::device gpu(0);
  curt::memory_pool device_pool(curt::memory_pool_properties::device(gpu));
  curt_test::require_cuda_error(
      [&] { curt::pool_resource<host_accessible> r(device_pool); }, cudaErrorInvalidValue,
      {"pool_resource<host_accessible>", "is not host_accessible", "device 0"});
  curt::memory_pool_ref bare(device_pool.get());
  curt_test::require_cuda_error([&] { curt::pool_resource<device_accessible> r(bare); },
                                cudaErrorInvalidValue, {"does not know the pool's kind"});

  if (!gpu.attribute<cudaDevAttrHostMemoryPoolsSupported>()) {
    WARN("device 0 does not support host memory pools: the host part is skipped");
    return;
  }
  curt::memory_pool host_pool(curt::memory_pool_properties::pinned_host());
  curt::pool_resource<host_accessible> host_only(host_pool);  // always true of a host pool
  curt_test::require_cuda_error(
      [&] { curt::pool_resource<host_accessible, device_accessible> r(host_pool); },
      cudaErrorInvalidValue, {"is not device_accessible", "set_access"});
  host_pool.set_access(gpu, curt::pool_access::read_write);
  curt::pool_resource<host_accessible, device_accessible> both(host_pool);
  cuda::mr::async_resource_ref<host_accessible, device_accessible> ref{both};

  // Both sides use memory from the ref.
  curt::stream s(gpu);
  const int n = curt_test::random_ints(1, 1000, 20000)[0];
  const int value = curt_test::random_ints(1, 1, 1000000)[0];
  int* p = static_cast<int*>(ref.allocate_async(std::size_t(n) * sizeof(int), s.cccl()));
  curt::launch(s, config_for(n), fill, p, n, value);
  s.synchronize();
  CHECK(std::vector<int>(p, p + n) == std::vector<int>(std::size_t(n), value));
  ref.deallocate_async(p, std::size_t(n) * sizeof(int), s.cccl());
  s.synchronize();
}

TEST_CASE("Thrust sorts and transforms on a curt stream with temporaries from a curt pool",
          "[memory_resource]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = curt_test::random_ints(1, 100000, 1000000)[0];
  std::vector<int> values = curt_test::random_ints(std::size_t(n), -1000000, 1000000);

  curt::async_buffer<int> data = pool.allocate<int>(std::size_t(n), s);
  curt::async_buffer<int> result = pool.allocate<int>(std::size_t(n), s);
  CURT_CHECK(cudaMemcpyAsync(data.data(), values.data(), data.size_bytes(), cudaMemcpyHostToDevice, s));
  CURT_CHECK(cudaMemsetAsync(result.data(), 0xFF, result.size_bytes(), s));  // poison

  thrust_pool_allocator allocator{pool, s};
  auto policy = thrust::cuda::par_nosync(allocator).on(s);
  thrust::device_ptr<int> first = thrust::device_pointer_cast(data.data());
  thrust::sort(policy, first, first + n);
  thrust::transform(policy, first, first + n, thrust::device_pointer_cast(result.data()),
                    times_two_plus_one{});
  std::vector<int> back(static_cast<std::size_t>(n), 0);
  CURT_CHECK(cudaMemcpyAsync(back.data(), result.data(), result.size_bytes(), cudaMemcpyDeviceToHost, s));
  s.synchronize();

  std::vector<int> expected = values;
  std::sort(expected.begin(), expected.end());
  for (int& x : expected) x = 2 * x + 1;
  CHECK(back == expected);
  CHECK(pool.used_memory_high() > 2 * data.size_bytes());  // the sort's temporaries came from it
}

TEST_CASE("CUB reduces on a curt stream with temporary storage from an async_buffer",
          "[memory_resource]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = curt_test::random_ints(1, 100000, 1000000)[0];
  std::vector<int> values = curt_test::random_ints(std::size_t(n), -1000, 1000);

  curt::async_buffer<int> in = pool.allocate<int>(std::size_t(n), s);
  curt::async_buffer<int> sum = pool.allocate<int>(1, s);
  CURT_CHECK(cudaMemcpyAsync(in.data(), values.data(), in.size_bytes(), cudaMemcpyHostToDevice, s));
  CURT_CHECK(cudaMemsetAsync(sum.data(), 0xFF, sum.size_bytes(), s));  // poison

  std::size_t temp_bytes = 0;
  CURT_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, in.data(), sum.data(), n, s.get()));
  REQUIRE(temp_bytes > 0);
  {
    curt::async_buffer<unsigned char> temp = pool.allocate<unsigned char>(temp_bytes, s);
    CURT_CHECK(cub::DeviceReduce::Sum(temp.data(), temp_bytes, in.data(), sum.data(), n, s.get()));
  }  // the temporaries are freed on s, after the reduction
  int result = 0;
  CURT_CHECK(cudaMemcpyAsync(&result, sum.data(), sizeof(int), cudaMemcpyDeviceToHost, s));
  s.synchronize();

  long long expected = 0;
  for (int v : values) expected += v;
  CHECK(static_cast<long long>(result) == expected);
}
