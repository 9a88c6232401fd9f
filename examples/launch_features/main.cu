// launch_features: the launch attributes curt::launch_config names, each shown at work and checked
// against the CPU:
//   1. a cluster launch whose blocks read each other's shared memory (distributed shared memory,
//      cooperative_groups::this_cluster() and map_shared_rank);
//   2. programmatic dependent launch: a consumer kernel that starts while its producer, the kernel
//      before it on the same stream, is still running, and waits for the producer's results with
//      cudaGridDependencySynchronize();
//   3. a cooperative launch, sized by curt::grid_to_fill_device, that synchronizes the whole grid
//      (grid.sync()) between two phases.
// Inputs are random each run (the seed is printed; CURT_EXAMPLE_SEED repeats a run), outputs are
// poisoned first. Each part prints PASSED or FAILED (or SKIPPED where the device lacks the
// feature). Exit code: 0 when no part failed, 1 otherwise, 77 when there is no device.
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <utility>
#include <vector>

namespace cg = cooperative_groups;

namespace {

// A device buffer holding `host`'s elements, copied on `stream`.
template <class T>
curt::device_buffer<T> to_device(curt::device device, const std::vector<T>& host,
                                 curt::stream_ref stream) {
  curt::device_buffer<T> buffer(device, host.size());
  curt::copy(buffer, host, stream);
  return buffer;
}
// A buffer's elements, copied back once the stream has done its work.
template <class T>
std::vector<T> to_host(const curt::device_buffer<T>& buffer, curt::stream_ref stream) {
  std::vector<T> host(buffer.size());
  curt::copy(host, buffer, stream);
  stream.synchronize();
  return host;
}

constexpr unsigned kBlockThreads = 256;  // a power of two: block_sum halves it

// The sum of `value` over the calling block (blockDim.x == kBlockThreads); every thread gets it.
// `scratch` is shared memory of kBlockThreads elements, free for reuse when this returns.
__device__ long long block_sum(long long* scratch, long long value) {
  const unsigned t = threadIdx.x;
  scratch[t] = value;
  __syncthreads();
  for (unsigned half = kBlockThreads / 2; half > 0; half /= 2) {
    if (t < half) scratch[t] += scratch[t + half];
    __syncthreads();
  }
  const long long sum = scratch[0];
  __syncthreads();
  return sum;
}

// ---------------------------------------------------------------------------------------------
// 1. Cluster launch with distributed shared memory

constexpr unsigned kClusterBlocks = 4;
constexpr unsigned kClusterCount = 16;
constexpr unsigned kItemsPerThread = 4;
constexpr unsigned kItemsPerBlock = kBlockThreads * kItemsPerThread;

// Each block sums its kItemsPerBlock inputs into its shared memory; block 0 of each cluster then
// adds up the cluster's block sums by reading the other blocks' shared memory directly.
__global__ void cluster_sum_kernel(const int* in, long long* cluster_sums, unsigned n) {
  __shared__ long long scratch[kBlockThreads];
  __shared__ long long block_total;
  cg::cluster_group cluster = cg::this_cluster();

  long long sum = 0;
  for (unsigned k = 0; k < kItemsPerThread; ++k) {
    const unsigned i = blockIdx.x * kItemsPerBlock + k * kBlockThreads + threadIdx.x;
    if (i < n) sum += in[i];
  }
  sum = block_sum(scratch, sum);
  if (threadIdx.x == 0) block_total = sum;

  cluster.sync();  // every block of the cluster has written its block_total
  if (cluster.block_rank() == 0 && threadIdx.x == 0) {
    long long total = 0;
    for (unsigned rank = 0; rank < cluster.num_blocks(); ++rank)
      total += *cluster.map_shared_rank(&block_total, static_cast<int>(rank));
    cluster_sums[blockIdx.x / cluster.num_blocks()] = total;  // clusters tile the grid along x
  }
  cluster.sync();  // no block exits (freeing its shared memory) before block 0 has read it
}

bool cluster_part(curt::device device, curt::stream_ref stream) {
  const char* name = "cluster launch + distributed shared memory";
  if (!device.supports_cluster_launch()) {
    std::printf("%s: SKIPPED (the device has no cluster launch)\n", name);
    return true;
  }
  const unsigned blocks = kClusterCount * kClusterBlocks;
  const unsigned n = blocks * kItemsPerBlock;
  const std::vector<int> in = curt_example::random_values<int>(n, -1000, 1000);
  std::vector<long long> expected(kClusterCount, 0);
  for (unsigned i = 0; i < n; ++i) expected[i / (kClusterBlocks * kItemsPerBlock)] += in[i];

  const curt::device_buffer<int> d_in = to_device(device, in, stream);
  curt::device_buffer<long long> d_sums(device, kClusterCount);
  curt::memset(d_sums, 0x5A, stream);  // poisoned: a sum not written shows
  const curt::launch_config config =
      curt::launch_config(dim3(blocks), dim3(kBlockThreads)).cluster_dims(dim3(kClusterBlocks));
  curt::launch(stream, config, cluster_sum_kernel, d_in.data(), d_sums.data(), n);
  const std::vector<long long> sums = to_host(d_sums, stream);

  unsigned wrong = 0;
  for (unsigned c = 0; c < kClusterCount; ++c) wrong += sums[c] != expected[c];
  std::printf("%s: %u clusters of %u blocks, %u wrong cluster sums: %s\n", name, kClusterCount,
              kClusterBlocks, wrong, wrong == 0 ? "PASSED" : "FAILED");
  return wrong == 0;
}

// ---------------------------------------------------------------------------------------------
// 2. Programmatic dependent launch

__global__ void pdl_producer(const float* x, float* y, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + 1.0f;
  // Lets the consumer start launching. That gives no memory visibility by itself: the consumer's
  // cudaGridDependencySynchronize() waits for this whole grid to finish and its writes to show.
  cudaTriggerProgrammaticLaunchCompletion();
}

__global__ void pdl_consumer(const float* y, const float* z, float* out, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  // The part that does not need the producer overlaps with the producer's tail.
  const float own = i < n ? 0.5f * z[i] : 0.0f;
  cudaGridDependencySynchronize();  // from here on the producer's results are complete and visible
  if (i < n) out[i] = y[i] + own;
}

bool pdl_part(curt::device device, curt::stream_ref stream) {
  const char* name = "programmatic dependent launch";
  if (device.compute_capability().major < 9) {
    std::printf("%s: SKIPPED (needs compute capability 9.0 or newer)\n", name);
    return true;
  }
  constexpr unsigned n = 1u << 20;
  constexpr int rounds = 4;
  // Whole numbers (random each run): every step below is exact in float (|values| stay under
  // 2^15), so the GPU must agree with the CPU exactly.
  std::vector<float> x(n), z(n);
  const std::vector<int> xs = curt_example::random_values<int>(n, -999, 999);
  const std::vector<int> zs = curt_example::random_values<int>(n, -50, 50);
  for (unsigned i = 0; i < n; ++i) {
    x[i] = static_cast<float>(xs[i]);
    z[i] = static_cast<float>(zs[i]);
  }
  std::vector<float> expected = x;
  for (int r = 0; r < rounds; ++r)
    for (unsigned i = 0; i < n; ++i) expected[i] = (2.0f * expected[i] + 1.0f) + 0.5f * z[i];

  curt::device_buffer<float> d_a = to_device(device, x, stream);
  const curt::device_buffer<float> d_z = to_device(device, z, stream);
  curt::device_buffer<float> d_b(device, n), d_y(device, n);
  curt::fill(d_b, std::nanf(""), stream);  // poisoned: an element not computed shows
  curt::fill(d_y, std::nanf(""), stream);
  const curt::launch_config producer{dim3(curt::ceil_div(n, kBlockThreads)), dim3(kBlockThreads)};
  curt::launch_config consumer = producer;
  consumer.programmatic_stream_serialization();
  // Each round: producer (a -> y) then consumer (y, z -> b), which overlaps the producer; the next
  // round's producer is an ordinary launch, so it waits for the consumer to finish.
  curt::device_buffer<float>* in = &d_a;
  curt::device_buffer<float>* out = &d_b;
  for (int r = 0; r < rounds; ++r) {
    curt::launch(stream, producer, pdl_producer, in->data(), d_y.data(), n);
    curt::launch(stream, consumer, pdl_consumer, d_y.data(), d_z.data(), out->data(), n);
    std::swap(in, out);
  }
  const std::vector<float> result = to_host(*in, stream);

  unsigned wrong = 0;
  for (unsigned i = 0; i < n; ++i) wrong += !(result[i] == expected[i]);
  std::printf("%s: %d producer/consumer pairs over %u elements, %u wrong: %s\n", name, rounds, n,
              wrong, wrong == 0 ? "PASSED" : "FAILED");
  return wrong == 0;
}

// ---------------------------------------------------------------------------------------------
// 3. Cooperative launch with a grid-wide barrier

// out[i] = in[i] * n - sum(in): phase 1 sums the input per block, phase 2 needs every block's sum,
// so the grid waits at grid.sync() in between.
__global__ void center_kernel(const int* in, long long* block_sums, long long* out, unsigned n) {
  __shared__ long long scratch[kBlockThreads];
  cg::grid_group grid = cg::this_grid();

  long long sum = 0;
  for (unsigned long long i = grid.thread_rank(); i < n; i += grid.num_threads()) sum += in[i];
  sum = block_sum(scratch, sum);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;

  grid.sync();  // every block's sum is written and visible

  long long total = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) total += block_sums[b];
  total = block_sum(scratch, total);
  for (unsigned long long i = grid.thread_rank(); i < n; i += grid.num_threads())
    out[i] = static_cast<long long>(in[i]) * n - total;
}

bool cooperative_part(curt::device device, curt::stream_ref stream) {
  const char* name = "cooperative launch + grid.sync()";
  if (!device.supports_cooperative_launch()) {
    std::printf("%s: SKIPPED (the device has no cooperative launch)\n", name);
    return true;
  }
  constexpr unsigned n = 1u << 20;
  const std::vector<int> in = curt_example::random_values<int>(n, -400, 599);
  long long total = 0;
  for (int v : in) total += v;

  // Every block must be resident at once: as many as fill the device, no more.
  const unsigned blocks = curt::grid_to_fill_device(device, center_kernel, kBlockThreads);
  const curt::device_buffer<int> d_in = to_device(device, in, stream);
  curt::device_buffer<long long> d_block_sums(device, blocks), d_out(device, n);
  curt::memset(d_block_sums, 0x5A, stream);  // poisoned
  curt::memset(d_out, 0x5A, stream);
  curt::launch_config config{dim3(blocks), dim3(kBlockThreads)};
  config.cooperative();
  curt::launch(stream, config, center_kernel, d_in.data(), d_block_sums.data(), d_out.data(), n);
  const std::vector<long long> out = to_host(d_out, stream);

  unsigned wrong = 0;
  for (unsigned i = 0; i < n; ++i) wrong += out[i] != static_cast<long long>(in[i]) * n - total;
  std::printf("%s: %u blocks of %u threads on %d multiprocessors, %u wrong: %s\n", name, blocks,
              kBlockThreads, device.multiprocessor_count(), wrong,
              wrong == 0 ? "PASSED" : "FAILED");
  return wrong == 0;
}

// Runs one part; a CUDA error fails that part and is reported.
bool run_part(bool (*part)(curt::device, curt::stream_ref), const char* name, curt::device device,
              curt::stream_ref stream) {
  try {
    return part(device, stream);
  } catch (const std::exception& e) {
    std::printf("%s: FAILED (%s)\n", name, e.what());
    return false;
  }
}

}  // namespace

int main() {
  if (curt::device_count() == 0) {
    std::printf("no CUDA device: skipped (%s)\n", curt::no_device_reason().c_str());
    return 77;  // the skip code CTest expects
  }
  try {
    const curt::device device(0);
    curt::set_current_device(device);
    curt::stream stream(device);
    bool passed = run_part(cluster_part, "cluster launch", device, stream);
    passed = run_part(pdl_part, "programmatic dependent launch", device, stream) && passed;
    passed = run_part(cooperative_part, "cooperative launch", device, stream) && passed;
    std::printf("launch_features: %s\n", passed ? "PASSED" : "FAILED");
    return passed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_features: %s\n", e.what());
    std::printf("launch_features: FAILED\n");
    return 1;
  }
}
