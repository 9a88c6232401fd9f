// Kernel attributes and occupancy against the raw runtime calls for the same kernel and arguments,
// and the attribute setters against what cudaFuncGetAttributes reads back.
#include <catch.hpp>
#include <device_array.hpp>
#include <expect.hpp>

#include <curt/launch.hpp>
#include <curt/occupancy.hpp>
#include <curt/stream.hpp>

#include <cooperative_groups.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cg = cooperative_groups;

namespace {

using curt_test::device_array;

int random_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(curt_test::rng()); }

// 4 KiB of static shared memory and some registers.
__global__ void tiled_sum(const float* in, float* out, int n) {
  __shared__ float tile[1024];
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  for (int k = static_cast<int>(threadIdx.x); k < 1024; k += static_cast<int>(blockDim.x))
    tile[k] = i < n ? in[i] : 0.0f;
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < 1024; k += 7) acc += tile[(k + threadIdx.x) % 1024] * float(k);
  if (i < n) out[i] = acc;
}

__global__ void __launch_bounds__(256) bounded(float* out) {
  out[blockIdx.x * blockDim.x + threadIdx.x] = float(threadIdx.x);
}

// Dynamic shared memory only: its attributes are changed by the tests below.
__global__ void dynamic_shared(float* out, int count) {
  extern __shared__ float smem[];
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    smem[i] = float(i);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = smem[count - 1];
}

__global__ void cluster_size(unsigned* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = cg::this_cluster().num_blocks();
}

// Only for the carveout setting.
__global__ void carveout_probe(float* out) { out[threadIdx.x] = 1.0f; }

curt::device test_device() {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  return curt::device(0);
}

template <class Kernel>
cudaFuncAttributes raw_attributes(Kernel kernel) {
  cudaFuncAttributes a{};
  REQUIRE(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(kernel)) == cudaSuccess);
  return a;
}

template <class Kernel>
int raw_blocks_per_sm(Kernel kernel, int threads, std::size_t smem) {
  int blocks = -1;
  REQUIRE(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &blocks, reinterpret_cast<const void*>(kernel), threads, smem) == cudaSuccess);
  return blocks;
}

void check_same(const cudaFuncAttributes& a, const cudaFuncAttributes& b) {
  CHECK(a.sharedSizeBytes == b.sharedSizeBytes);
  CHECK(a.constSizeBytes == b.constSizeBytes);
  CHECK(a.localSizeBytes == b.localSizeBytes);
  CHECK(a.maxThreadsPerBlock == b.maxThreadsPerBlock);
  CHECK(a.numRegs == b.numRegs);
  CHECK(a.ptxVersion == b.ptxVersion);
  CHECK(a.binaryVersion == b.binaryVersion);
  CHECK(a.cacheModeCA == b.cacheModeCA);
  CHECK(a.maxDynamicSharedSizeBytes == b.maxDynamicSharedSizeBytes);
  CHECK(a.preferredShmemCarveout == b.preferredShmemCarveout);
  CHECK(a.clusterDimMustBeSet == b.clusterDimMustBeSet);
  CHECK(a.requiredClusterWidth == b.requiredClusterWidth);
  CHECK(a.requiredClusterHeight == b.requiredClusterHeight);
  CHECK(a.requiredClusterDepth == b.requiredClusterDepth);
  CHECK(a.clusterSchedulingPolicyPreference == b.clusterSchedulingPolicyPreference);
  CHECK(a.nonPortableClusterSizeAllowed == b.nonPortableClusterSizeAllowed);
}

}  // namespace

// Device lambdas need an enclosing function that nvcc can name: not a TEST_CASE's body.
namespace occupancy_test {

void check_device_lambda(curt::device dev) {
  const int n = random_int(1000, 100000);
  const float offset = curt_test::random_floats(1, 1.0f, 2.0f)[0];
  auto fill = [=] __device__(float* out, int count) {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < count) out[i] = offset + float(i % 7);
  };
  using F = decltype(fill);
  auto kernel = curt::functor_kernel<F, float*, int>();
  // The kernel curt::launch uses for an lvalue lambda and argument lvalues is this one.
  CHECK(curt::functor_kernel<F&, float*&, int&>() == kernel);
  CHECK(curt::functor_kernel<const F&, float* const&, const int&>() == kernel);

  check_same(curt::kernel_attributes(dev, kernel), raw_attributes(kernel));
  for (int threads : {32, 128, 256, 1024}) {
    INFO(threads << " threads");
    int blocks = curt::max_active_blocks_per_multiprocessor(dev, kernel, threads);
    CHECK(blocks == raw_blocks_per_sm(kernel, threads, 0));
    CHECK(blocks > 0);
  }
  CHECK(curt::grid_to_fill_device(dev, kernel, 128) ==
        static_cast<unsigned>(raw_blocks_per_sm(kernel, 128, 0) * dev.multiprocessor_count()));

  // And it runs.
  device_array<float> out(static_cast<std::size_t>(n));
  float* p = out.get();
  curt::stream s(dev);
  curt::launch(s, curt::launch_config(dim3((n + 127) / 128), dim3(128)), fill, p, n);
  s.synchronize();
  std::vector<float> got = out.download();
  for (int i = 0; i < n; ++i) REQUIRE(curt_test::close(got[std::size_t(i)], offset + float(i % 7)));
}

}  // namespace occupancy_test

TEST_CASE("kernel_attributes equals cudaFuncGetAttributes") {
  curt::device dev = test_device();
  cudaFuncAttributes tiled = curt::kernel_attributes(dev, tiled_sum);
  check_same(tiled, raw_attributes(tiled_sum));
  CHECK(tiled.sharedSizeBytes == 1024 * sizeof(float));
  CHECK(tiled.binaryVersion == dev.compute_capability().as_int());
  check_same(curt::kernel_attributes(dev, bounded), raw_attributes(bounded));
  CHECK(curt::kernel_attributes(dev, bounded).maxThreadsPerBlock <= 256);
}

TEST_CASE("max_active_blocks_per_multiprocessor equals the raw call") {
  curt::device dev = test_device();
  const std::size_t static_bytes = raw_attributes(tiled_sum).sharedSizeBytes;
  const std::size_t dynamic_limit = 48 * 1024 - static_bytes;
  for (int threads : {32, 64, 96, 128, 256, 512, 768, 1024}) {
    for (std::size_t smem : {std::size_t(0), std::size_t(1000), std::size_t(8192), std::size_t(20000),
                             dynamic_limit}) {
      INFO(threads << " threads, " << smem << " B dynamic shared memory");
      CHECK(curt::max_active_blocks_per_multiprocessor(dev, tiled_sum, threads, smem) ==
            raw_blocks_per_sm(tiled_sum, threads, smem));
    }
  }
  for (int threads : {32, 64, 128, 256}) {
    INFO(threads << " threads (bounded kernel)");
    CHECK(curt::max_active_blocks_per_multiprocessor(dev, bounded, threads) ==
          raw_blocks_per_sm(bounded, threads, 0));
  }
  // Less shared memory per block never fits fewer blocks.
  CHECK(curt::max_active_blocks_per_multiprocessor(dev, tiled_sum, 128, 0) >=
        curt::max_active_blocks_per_multiprocessor(dev, tiled_sum, 128, 20000));
}

TEST_CASE("max_potential_block_size equals cudaOccupancyMaxPotentialBlockSize") {
  curt::device dev = test_device();
  for (std::size_t smem : {std::size_t(0), std::size_t(4096), std::size_t(16384)}) {
    for (int limit : {0, 128, 256}) {
      INFO(smem << " B, block size limit " << limit);
      int min_grid = -1, block = -1;
      REQUIRE(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, tiled_sum, smem, limit) ==
              cudaSuccess);
      curt::block_size_suggestion s = curt::max_potential_block_size(dev, tiled_sum, smem, limit);
      CHECK(s.min_grid_size == min_grid);
      CHECK(s.block_size == block);
      CHECK(s.block_size > 0);
      if (limit > 0) CHECK(s.block_size <= limit);
    }
  }
  int min_grid = -1, block = -1;
  REQUIRE(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block, bounded, 0, 0) == cudaSuccess);
  curt::block_size_suggestion s = curt::max_potential_block_size(dev, bounded);
  CHECK(s.min_grid_size == min_grid);
  CHECK(s.block_size == block);
  CHECK(s.block_size <= 256);
}

TEST_CASE("max_active_clusters equals cudaOccupancyMaxActiveClusters") {
  curt::device dev = test_device();
  REQUIRE(dev.supports_cluster_launch());
  for (unsigned size : {1u, 2u, 4u, 8u}) {
    for (unsigned threads : {64u, 256u}) {
      INFO("cluster of " << size << ", " << threads << " threads per block");
      curt::launch_config config(dim3(8 * size), dim3(threads));
      config.cluster_dims(dim3(size));
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = size;
      attribute.val.clusterDim.y = 1;
      attribute.val.clusterDim.z = 1;
      cudaLaunchConfig_t raw{};
      raw.gridDim = dim3(8 * size);
      raw.blockDim = dim3(threads);
      raw.attrs = &attribute;
      raw.numAttrs = 1;
      int clusters = -1;
      REQUIRE(cudaOccupancyMaxActiveClusters(
                  &clusters, reinterpret_cast<const void*>(&tiled_sum), &raw) == cudaSuccess);
      int got = curt::max_active_clusters(dev, tiled_sum, config);
      CHECK(got == clusters);
      CHECK(got > 0);
    }
  }
  // A 2D cluster shape.
  curt::launch_config config(dim3(4, 4), dim3(128));
  config.cluster_dims(dim3(2, 2));
  cudaLaunchConfig_t raw = config.native(nullptr);
  int clusters = -1;
  REQUIRE(cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(&tiled_sum),
                                         &raw) == cudaSuccess);
  CHECK(curt::max_active_clusters(dev, tiled_sum, config) == clusters);
}

TEST_CASE("grid_to_fill_device is blocks per multiprocessor times multiprocessors") {
  curt::device dev = test_device();
  int sms = 0;
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  for (int threads : {32, 128, 256, 1024}) {
    for (std::size_t smem : {std::size_t(0), std::size_t(12000)}) {
      INFO(threads << " threads, " << smem << " B");
      unsigned expected = static_cast<unsigned>(raw_blocks_per_sm(tiled_sum, threads, smem) * sms);
      CHECK(curt::grid_to_fill_device(dev, tiled_sum, threads, smem) == expected);
      CHECK(expected > 0);
    }
  }
  // No block of 2048 threads fits anywhere.
  try {
    (void)curt::grid_to_fill_device(dev, tiled_sum, 2048);
    FAIL("grid_to_fill_device(2048 threads) did not throw");
  } catch (const curt::cuda_error& error) {
    INFO("what(): " << error.what());
    CHECK_THAT(error.what(), ContainsSubstring("2048 threads"));
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("set_max_dynamic_shared_memory changes the kernel's limit, within the device's") {
  curt::device dev = test_device();
  const cudaFuncAttributes before = raw_attributes(dynamic_shared);
  const std::size_t optin = dev.max_shared_memory_per_block_optin();
  REQUIRE(before.sharedSizeBytes == 0);
  REQUIRE(optin > 48 * 1024);

  const std::size_t wanted = static_cast<std::size_t>(random_int(48 * 1024 + 1, static_cast<int>(optin)));
  curt::set_max_dynamic_shared_memory(dev, dynamic_shared, wanted);
  CHECK(static_cast<std::size_t>(raw_attributes(dynamic_shared).maxDynamicSharedSizeBytes) == wanted);
  CHECK(static_cast<std::size_t>(curt::kernel_attributes(dev, dynamic_shared).maxDynamicSharedSizeBytes) ==
        wanted);
  // The occupancy calls see the new limit.
  CHECK(curt::max_active_blocks_per_multiprocessor(dev, dynamic_shared, 256, wanted) ==
        raw_blocks_per_sm(dynamic_shared, 256, wanted));
  CHECK(curt::max_active_blocks_per_multiprocessor(dev, dynamic_shared, 256, wanted) >= 1);

  // The launch that needs it now works: the last element written by the block comes back.
  const int count = static_cast<int>(wanted / sizeof(float));
  const unsigned blocks = static_cast<unsigned>(random_int(1, 4));
  device_array<float> out(blocks);
  curt::stream s(dev);
  curt::launch(s, curt::launch_config(dim3(blocks), dim3(256), wanted), dynamic_shared, out.get(),
               count);
  s.synchronize();
  for (float v : out.download()) CHECK(v == float(count - 1));

  // Above the device's limit: refused by curt, and the kernel keeps its setting.
  std::string limit = "exceeds the device's limit of " + std::to_string(optin) + " B per block";
  curt_test::require_cuda_error(
      [&] { curt::set_max_dynamic_shared_memory(dev, dynamic_shared, optin + 1); },
      cudaErrorInvalidValue,
      {"exceeds the device's limit", limit.c_str(), "curt::set_max_dynamic_shared_memory"});
  CHECK(static_cast<std::size_t>(raw_attributes(dynamic_shared).maxDynamicSharedSizeBytes) == wanted);
  CHECK(cudaGetLastError() == cudaSuccess);
  // A size whose sum with a kernel's static shared memory wraps around is refused too.
  const int tiled_before = raw_attributes(tiled_sum).maxDynamicSharedSizeBytes;
  REQUIRE(raw_attributes(tiled_sum).sharedSizeBytes > 0);
  for (std::size_t huge : {SIZE_MAX, SIZE_MAX - 1, std::size_t(1) << 63}) {
    INFO(huge << " B");
    curt_test::require_cuda_error(
        [&] { curt::set_max_dynamic_shared_memory(dev, tiled_sum, huge); },
        cudaErrorInvalidValue, {"exceeds the device's limit", limit.c_str()});
  }
  CHECK(raw_attributes(tiled_sum).maxDynamicSharedSizeBytes == tiled_before);

  // Back to what it was.
  curt::set_max_dynamic_shared_memory(dev, dynamic_shared,
                                      static_cast<std::size_t>(before.maxDynamicSharedSizeBytes));
  CHECK(raw_attributes(dynamic_shared).maxDynamicSharedSizeBytes == before.maxDynamicSharedSizeBytes);
}

TEST_CASE("allow_non_portable_cluster_size lets a 16-block cluster launch") {
  curt::device dev = test_device();
  REQUIRE(dev.supports_cluster_launch());
  curt::stream s(dev);
  const unsigned clusters = static_cast<unsigned>(random_int(1, 4));
  const curt::launch_config config =
      curt::launch_config(dim3(16 * clusters), dim3(32)).cluster_dims(dim3(16));
  device_array<unsigned> out(16 * clusters);

  REQUIRE(raw_attributes(cluster_size).nonPortableClusterSizeAllowed == 0);
  auto error = curt_test::require_cuda_error(
      [&] { curt::launch(s, config, cluster_size, out.get()); }, cudaErrorInvalidClusterSize,
      {"cluster of 16 blocks exceeds the portable maximum of 8",
       "curt::allow_non_portable_cluster_size", "cluster 16x1x1", "cluster_size"});
  INFO("status: " << cudaGetErrorName(error.status()));
  CHECK(cudaGetLastError() == cudaSuccess);

  curt::allow_non_portable_cluster_size(dev, cluster_size);
  CHECK(raw_attributes(cluster_size).nonPortableClusterSizeAllowed == 1);
  CHECK(curt::kernel_attributes(dev, cluster_size).nonPortableClusterSizeAllowed == 1);
  CHECK(curt::max_active_clusters(dev, cluster_size, config) > 0);
  curt::launch(s, config, cluster_size, out.get());
  s.synchronize();
  for (unsigned v : out.download()) CHECK(v == 16u);

  curt::allow_non_portable_cluster_size(dev, cluster_size, false);
  CHECK(raw_attributes(cluster_size).nonPortableClusterSizeAllowed == 0);
}

TEST_CASE("set_preferred_shared_memory_carveout round-trips through cudaFuncGetAttributes") {
  curt::device dev = test_device();
  const int before = raw_attributes(carveout_probe).preferredShmemCarveout;
  for (int percent : {random_int(0, 100), 0, 50, 100, -1}) {
    INFO("carveout " << percent << "%");
    curt::set_preferred_shared_memory_carveout(dev, carveout_probe, percent);
    CHECK(raw_attributes(carveout_probe).preferredShmemCarveout == percent);
    CHECK(curt::kernel_attributes(dev, carveout_probe).preferredShmemCarveout == percent);
  }
  // Out of range: the runtime refuses it and curt names the call, the value and the device.
  const std::string named = "cudaFuncSetAttribute(kernel, preferred shared memory carveout 101, "
                            "device " + std::to_string(dev.ordinal()) + ")";
  curt_test::require_cuda_error(
      [&] { curt::set_preferred_shared_memory_carveout(dev, carveout_probe, 101); },
      cudaErrorInvalidValue, {named.c_str(), "Requested preferred shared mem carveout invalid"});
  CHECK(cudaGetLastError() == cudaSuccess);
  curt::set_preferred_shared_memory_carveout(dev, carveout_probe, before);
}

TEST_CASE("functor_kernel of a device lambda works with the occupancy calls") {
  occupancy_test::check_device_lambda(test_device());
}
