// launch_features: the launch attributes curt::launch_config names, each shown at work and checked
// against the CPU:
//   1. a cluster launch whose blocks read each other's shared memory (distributed shared memory,
//      cooperative_groups::this_cluster() and map_shared_rank);
//   2. programmatic dependent launch: a consumer kernel that starts while its producer, the kernel
//      before it on the same stream, is still running, and waits for the producer's results with
//      cudaGridDependencySynchronize();
//   3. a cooperative launch, sized by curt::grid_to_fill_device, that synchronizes the whole grid
//      (grid.sync()) between two phases.
// Each part prints PASSED or FAILED (or SKIPPED where the device lacks the feature). Exit code: 0
// when no part failed, 1 otherwise, 77 when there is no device.
#include <curt/curt.hpp>

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

// Device memory for `count` elements of T, freed when it goes out of scope. (curt has no memory
// header yet, so the example keeps its own.)
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t count) : count_(count) {
    CURT_CHECK(cudaMalloc(&data_, bytes()));
  }
  ~device_array() {
    if (!data_) return;
    cudaError_t status = cudaFree(data_);
    if (status != cudaSuccess && status != cudaErrorCudartUnloading)
      std::fprintf(stderr, "launch_features: cudaFree failed: %s\n", cudaGetErrorString(status));
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;

  T* get() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host, curt::stream_ref stream) const {
    CURT_CHECK(cudaMemcpyAsync(data_, host.data(), bytes(), cudaMemcpyHostToDevice, stream));
  }
  // Copies back and waits for the stream.
  std::vector<T> download(curt::stream_ref stream) const {
    std::vector<T> host(count_);
    CURT_CHECK(cudaMemcpyAsync(host.data(), data_, bytes(), cudaMemcpyDeviceToHost, stream));
    stream.synchronize();
    return host;
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

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
  std::vector<int> in(n);
  for (unsigned i = 0; i < n; ++i) in[i] = static_cast<int>((i * 37u) % 2001u) - 1000;
  std::vector<long long> expected(kClusterCount, 0);
  for (unsigned i = 0; i < n; ++i) expected[i / (kClusterBlocks * kItemsPerBlock)] += in[i];

  device_array<int> d_in(n);
  device_array<long long> d_sums(kClusterCount);
  d_in.upload(in, stream);
  CURT_CHECK(cudaMemsetAsync(d_sums.get(), 0, d_sums.bytes(), stream));
  const curt::launch_config config =
      curt::launch_config(dim3(blocks), dim3(kBlockThreads)).cluster_dims(dim3(kClusterBlocks));
  curt::launch(stream, config, cluster_sum_kernel, d_in.get(), d_sums.get(), n);
  const std::vector<long long> sums = d_sums.download(stream);

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
  std::vector<float> x(n), z(n);
  for (unsigned i = 0; i < n; ++i) {
    x[i] = static_cast<float>(static_cast<int>(i % 1999u) - 999);
    z[i] = static_cast<float>(static_cast<int>((i * 7u) % 101u) - 50);
  }
  // The CPU reference; every step is exact in float, so the GPU must agree exactly.
  std::vector<float> expected = x;
  for (int r = 0; r < rounds; ++r)
    for (unsigned i = 0; i < n; ++i) expected[i] = (2.0f * expected[i] + 1.0f) + 0.5f * z[i];

  device_array<float> d_a(n), d_b(n), d_y(n), d_z(n);
  d_a.upload(x, stream);
  d_z.upload(z, stream);
  const curt::launch_config producer{dim3(curt::ceil_div(n, kBlockThreads)), dim3(kBlockThreads)};
  curt::launch_config consumer = producer;
  consumer.programmatic_stream_serialization();
  // Each round: producer (a -> y) then consumer (y, z -> b), which overlaps the producer; the next
  // round's producer is an ordinary launch, so it waits for the consumer to finish.
  float* in = d_a.get();
  float* out = d_b.get();
  for (int r = 0; r < rounds; ++r) {
    curt::launch(stream, producer, pdl_producer, in, d_y.get(), n);
    curt::launch(stream, consumer, pdl_consumer, d_y.get(), d_z.get(), out, n);
    std::swap(in, out);
  }
  std::vector<float> result(n);
  CURT_CHECK(cudaMemcpyAsync(result.data(), in, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  stream.synchronize();

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
  std::vector<int> in(n);
  long long total = 0;
  for (unsigned i = 0; i < n; ++i) {
    in[i] = static_cast<int>((i * 2654435761u) % 1000u) - 400;
    total += in[i];
  }

  // Every block must be resident at once: as many as fill the device, no more.
  const unsigned blocks = curt::grid_to_fill_device(device, center_kernel, kBlockThreads);
  device_array<int> d_in(n);
  device_array<long long> d_block_sums(blocks);
  device_array<long long> d_out(n);
  d_in.upload(in, stream);
  curt::launch_config config{dim3(blocks), dim3(kBlockThreads)};
  config.cooperative();
  curt::launch(stream, config, center_kernel, d_in.get(), d_block_sums.get(), d_out.get(), n);
  const std::vector<long long> out = d_out.download(stream);

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
