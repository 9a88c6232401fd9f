// curt::launch against CPU references: kernels, functors and device lambdas, clusters and
// distributed shared memory, programmatic dependent launch, cooperative grids, refused
// configurations and their messages, and the other launch attributes.
#include <catch.hpp>
#include <isolation.hpp>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>

#include <curt/copy.hpp>
#include <curt/event.hpp>
#include <curt/green_context.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/occupancy.hpp>
#include <curt/stream.hpp>

#include <cuda/std/span>

#include <cooperative_groups.h>
#include <cuda.h>
#include <unistd.h>  // environ

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cg = cooperative_groups;

namespace {

using curt_test::device_array;

int random_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(curt_test::rng()); }

// ---------------------------------------------------------------------------------------------
// Kernels

__global__ void saxpy(float a, const float* x, const float* y, float* out, std::size_t n) {
  std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

__device__ unsigned zero_parameter_hits;

__global__ void no_parameters() { atomicAdd(&zero_parameter_hits, 1u); }

struct affine {
  float scale;
  float offset;
  __device__ void operator()(const float* x, float* out, int n) const {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = scale * x[i] + offset;
  }
};

// Per block: cluster dims (3), rank, number of blocks, block index in the cluster (3).
constexpr int shape_fields = 8;

__global__ void cluster_shape(unsigned* out) {
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x != 0) return;
  unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned* o = out + shape_fields * block;
  dim3 dims = cluster.dim_blocks();
  dim3 index = cluster.block_index();
  o[0] = dims.x;
  o[1] = dims.y;
  o[2] = dims.z;
  o[3] = cluster.block_rank();
  o[4] = cluster.num_blocks();
  o[5] = index.x;
  o[6] = index.y;
  o[7] = index.z;
}

constexpr unsigned exchange_threads = 128;

// Each block puts its slice of `in` into its shared memory; each then reads its neighbour's
// (rank + 1) through distributed shared memory.
__global__ void cluster_exchange(const float* in, float* out, unsigned* ranks) {
  __shared__ float mine[exchange_threads];
  cg::cluster_group cluster = cg::this_cluster();
  std::size_t base = std::size_t(blockIdx.x) * exchange_threads;
  mine[threadIdx.x] = in[base + threadIdx.x];
  cluster.sync();
  unsigned rank = cluster.block_rank();
  const float* theirs =
      cluster.map_shared_rank(&mine[0], static_cast<int>((rank + 1) % cluster.num_blocks()));
  out[base + threadIdx.x] = theirs[threadIdx.x];
  if (threadIdx.x == 0) ranks[blockIdx.x] = rank;
  cluster.sync();  // no block leaves while a neighbour still reads its shared memory
}

__device__ __forceinline__ unsigned long long global_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Writes its results, lets dependents launch, then keeps running for spin_ns.
__global__ void pdl_primary(const float* in, float* mid, int n, unsigned long long spin_ns,
                            unsigned long long* end_times) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x))
    mid[i] = 2.0f * in[i] + 1.0f;
  __syncthreads();
  cudaTriggerProgrammaticLaunchCompletion();
  if (threadIdx.x == 0) {
    unsigned long long start = global_timer();
    unsigned long long now = start;
    while (now - start < spin_ns) now = global_timer();
    end_times[blockIdx.x] = now;
  }
}

// saxpy held back until the host releases it: with `trigger` every thread first calls
// cudaTriggerProgrammaticLaunchCompletion(); then thread 0 of each block spins on flags[0] (mapped
// pinned memory, written by the host) until it is nonzero, or sets flags[1] after timeout_ns.
__global__ void gated_saxpy(float a, const float* x, const float* y, float* out, std::size_t n,
                            volatile unsigned* flags, unsigned long long timeout_ns, bool trigger) {
  if (trigger) cudaTriggerProgrammaticLaunchCompletion();
  if (threadIdx.x == 0) {
    unsigned long long start = global_timer();
    while (flags[0] == 0u) {
      if (global_timer() - start > timeout_ns) {
        flags[1] = 1u;
        break;
      }
    }
  }
  __syncthreads();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = a * x[i] + y[i];
}

// Two flags in mapped pinned memory for gated_saxpy. (At namespace scope: a Catch2 v3 assertion
// in a member of a class local to a TEST_CASE makes cudafe++ 13.0 hang in g++ 13 mode.)
struct mapped_flags {
  unsigned* host = nullptr;
  mapped_flags() {
    if (cudaHostAlloc(reinterpret_cast<void**>(&host), 2 * sizeof(unsigned),
                      cudaHostAllocMapped) != cudaSuccess)
      throw std::runtime_error("cudaHostAlloc of the mapped flags failed");
  }
  ~mapped_flags() {
    if (host) (void)cudaFreeHost(host);
  }
  mapped_flags(const mapped_flags&) = delete;
  mapped_flags& operator=(const mapped_flags&) = delete;
};

// Records when it started, waits for the primary, then transforms its results.
__global__ void pdl_secondary(const float* mid, float* out, int n,
                              unsigned long long* start_times) {
  if (threadIdx.x == 0) start_times[blockIdx.x] = global_timer();
  cudaGridDependencySynchronize();
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x))
    out[i] = mid[i] * mid[i] - 3.0f;
}

constexpr int coop_threads = 256;

// Phase 1: one partial sum per block. grid.sync(). Phase 2: block 0 adds the partial sums.
__global__ void cooperative_sum(const int* in, int n, long long* partial, long long* total,
                                int* grid_valid) {
  __shared__ long long s[coop_threads];
  cg::grid_group grid = cg::this_grid();
  const unsigned t = threadIdx.x;
  long long acc = 0;
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + t); i < n;
       i += static_cast<int>(gridDim.x * blockDim.x))
    acc += in[i];
  s[t] = acc;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
  if (blockIdx.x == 0 && t == 0) *grid_valid = grid.is_valid() ? 1 : 0;
  grid.sync();
  if (blockIdx.x != 0) return;
  acc = 0;
  for (unsigned b = t; b < gridDim.x; b += blockDim.x) acc += partial[b];
  s[t] = acc;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) *total = s[0];
}

// out[b] = b for every block b (thread 0); no grid sync, so an accepted cooperative grid of any
// size finishes.
__global__ void block_index_out(unsigned* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x;
}

// launch.hpp reads the SM count of a green context through its own copy of CUdevResource.
using curt_sm_resource = curt::detail::driver_fn::dev_resource;
static_assert(sizeof(curt_sm_resource) == sizeof(CUdevResource));
static_assert(offsetof(curt_sm_resource, sm_count) ==
              offsetof(CUdevResource, sm) + offsetof(CUdevSmResource, smCount));
static_assert(CU_DEV_RESOURCE_TYPE_SM == 1);

// Fills `count` floats of dynamic shared memory from `in`, then writes them out rotated by
// `shift`, so every element crosses shared memory.
__global__ void shared_rotate(const float* in, float* out, int count, int shift) {
  extern __shared__ float smem[];
  std::size_t base = std::size_t(blockIdx.x) * count;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    smem[i] = in[base + i];
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    out[base + i] = smem[(i + shift) % count];
}

// ---------------------------------------------------------------------------------------------
// Host helpers

// Random saxpy inputs with x, y in [1, 2] and a in [0.5, 2]: results lie in [1.5, 6], far from 0.
struct saxpy_case {
  std::size_t n;
  float a;
  std::vector<float> x, y, expected;
  explicit saxpy_case(std::size_t count) : n(count) {
    a = curt_test::random_floats(1, 0.5f, 2.0f)[0];
    x = curt_test::random_floats(n, 1.0f, 2.0f);
    y = curt_test::random_floats(n, 1.0f, 2.0f);
    expected.resize(n);
    for (std::size_t i = 0; i < n; ++i) expected[i] = a * x[i] + y[i];
  }
};

void require_close(const std::vector<float>& got, const std::vector<float>& expected,
                   double tolerance = 1e-5) {
  REQUIRE(got.size() == expected.size());
  std::size_t bad = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!curt_test::close(got[i], expected[i], tolerance)) {
      if (bad++ == 0) first = i;
    }
  INFO(bad << " of " << got.size() << " differ; first at " << first << ": got "
            << (first < got.size() ? got[first] : 0.0f) << ", expected "
            << (first < got.size() ? expected[first] : 0.0f));
  REQUIRE(bad == 0);
}

// A plain saxpy launch on `s` with a fresh random problem, checked against the CPU.
void require_saxpy_works(curt::stream_ref s, const curt::launch_config& base = {}) {
  saxpy_case c(static_cast<std::size_t>(random_int(1000, 5000)));
  device_array<float> x(c.x), y(c.y), out(c.n);
  curt::launch_config config = base;
  config.grid(dim3(curt::ceil_div(c.n, 128))).block(dim3(128));
  curt::launch(s, config, saxpy, c.a, x.get(), y.get(), out.get(), c.n);
  s.synchronize();
  require_close(out.download(), c.expected);
}

std::vector<unsigned> run_cluster_shape(curt::stream_ref s, dim3 grid, dim3 cluster) {
  device_array<unsigned> out(shape_fields * curt::detail::volume(grid));
  curt::launch(s, curt::launch_config(grid, dim3(32)).cluster_dims(cluster), cluster_shape,
               out.get());
  s.synchronize();
  return out.download();
}

void check_cluster_shape(const std::vector<unsigned>& out, dim3 grid, dim3 cluster) {
  const unsigned size = cluster.x * cluster.y * cluster.z;
  std::map<std::vector<unsigned>, std::vector<unsigned>> ranks_by_cluster;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        unsigned block = x + grid.x * (y + grid.y * z);
        const unsigned* o = &out[shape_fields * block];
        INFO("block (" << x << ", " << y << ", " << z << ")");
        CHECK(o[0] == cluster.x);
        CHECK(o[1] == cluster.y);
        CHECK(o[2] == cluster.z);
        CHECK(o[4] == size);
        CHECK(o[5] == x % cluster.x);
        CHECK(o[6] == y % cluster.y);
        CHECK(o[7] == z % cluster.z);
        ranks_by_cluster[{x / cluster.x, y / cluster.y, z / cluster.z}].push_back(o[3]);
      }
  CHECK(ranks_by_cluster.size() == curt::detail::volume(grid) / size);
  std::vector<unsigned> all_ranks(size);
  std::iota(all_ranks.begin(), all_ranks.end(), 0u);
  for (auto& entry : ranks_by_cluster) {
    std::sort(entry.second.begin(), entry.second.end());
    CHECK(entry.second == all_ranks);
  }
}

void check_cluster_exchange(curt::stream_ref s, unsigned cluster_size) {
  const unsigned clusters = static_cast<unsigned>(random_int(3, 12));
  const unsigned blocks = clusters * cluster_size;
  std::vector<float> in = curt_test::random_floats(std::size_t(blocks) * exchange_threads, 1.0f, 2.0f);
  device_array<float> d_in(in), d_out(in.size());
  device_array<unsigned> d_ranks(blocks);
  curt::launch(s,
               curt::launch_config(dim3(blocks), dim3(exchange_threads))
                   .cluster_dims(dim3(cluster_size)),
               cluster_exchange, d_in.get(), d_out.get(), d_ranks.get());
  s.synchronize();
  std::vector<float> out = d_out.download();
  std::vector<unsigned> ranks = d_ranks.download();
  for (unsigned c = 0; c < clusters; ++c) {
    INFO("cluster " << c << " of size " << cluster_size);
    // block of each rank in this cluster (the clusters are runs of consecutive blocks)
    std::vector<unsigned> block_of_rank(cluster_size, blocks);
    for (unsigned b = c * cluster_size; b < (c + 1) * cluster_size; ++b) {
      REQUIRE(ranks[b] < cluster_size);
      CHECK(block_of_rank[ranks[b]] == blocks);  // each rank once
      block_of_rank[ranks[b]] = b;
    }
    for (unsigned b = c * cluster_size; b < (c + 1) * cluster_size; ++b) {
      unsigned neighbour = block_of_rank[(ranks[b] + 1) % cluster_size];
      REQUIRE(neighbour < blocks);
      for (unsigned t = 0; t < exchange_threads; ++t)
        REQUIRE(out[std::size_t(b) * exchange_threads + t] ==
                in[std::size_t(neighbour) * exchange_threads + t]);
    }
  }
}

// After a refused launch: no error is left behind and the next launch works.
void check_after_failed_launch(curt::stream_ref s) {
  CHECK(cudaGetLastError() == cudaSuccess);
  require_saxpy_works(s);
}

using curt_test::under_compute_sanitizer;

curt::device test_device() {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  return curt::device(0);
}

}  // namespace

// Device lambdas need an enclosing function that nvcc can name: not a TEST_CASE's body.
namespace launch_test {

void run_device_lambda(curt::stream_ref s, const float* x, float* out, int n, float scale,
                       float offset) {
  auto kernel = [=] __device__(float* o, int count) {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < count) o[i] = scale * x[i] + offset;
  };
  curt::launch(s, curt::launch_config(dim3(curt::ceil_div(std::size_t(n), 96)), dim3(96)), kernel,
               out, n);
}

// Buffers handed to a device lambda whose parameters are spans (read-only from a const buffer),
// and to a generic lambda, which gets the buffer's view itself.
void run_span_lambdas(curt::stream_ref s, const curt::device_buffer<float>& x,
                      curt::device_buffer<float>& out, float scale, float offset) {
  const auto n = static_cast<unsigned>(out.size());
  const curt::launch_config config(curt::ceil_div(n, 128u), 128);
  curt::launch(s, config,
               [=] __device__(cuda::std::span<const float> in, cuda::std::span<float> result) {
                 const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
                 if (i < result.size()) result[i] = scale * in[i] + offset;
               },
               x, out);
  curt::launch(s, config, [] __device__(auto result) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < result.size()) result[i] += 1.0f;
  }, out);
}

}  // namespace launch_test

TEST_CASE("a device lambda taking spans is launched with curt buffers") {
  curt::device dev = test_device();
  curt::stream s(dev);
  const int n = random_int(5000, 50000);
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  const float scale = curt_test::random_floats(1, 0.5f, 2.0f)[0];
  const float offset = curt_test::random_floats(1, 1.0f, 3.0f)[0];
  curt::device_buffer<float> in(dev, x.size()), out(dev, x.size());
  curt::copy(in, x, s);
  curt::fill(out, std::numeric_limits<float>::quiet_NaN(), s);  // poisoned
  launch_test::run_span_lambdas(s, in, out, scale, offset);
  std::vector<float> back(x.size(), -1.0f);
  curt::copy(back, out, s);
  s.synchronize();
  std::vector<float> expected(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = scale * x[i] + offset + 1.0f;
  require_close(back, expected);
}

TEST_CASE("a __global__ kernel computes saxpy, with converting arguments") {
  curt::device dev = test_device();
  curt::stream s(dev);
  // N is not a multiple of the block: the tail is handled by the bounds check.
  saxpy_case c(static_cast<std::size_t>(random_int(10000, 20000)) * 256 + 1 +
               static_cast<std::size_t>(random_int(0, 254)));
  REQUIRE(c.n % 256 != 0);
  device_array<float> x(c.x), y(c.y), out(c.n);
  const unsigned grid = curt::ceil_div(c.n, 256);
  curt::launch(s, curt::launch_config(dim3(grid), dim3(256)), saxpy, c.a, x.get(), y.get(),
               out.get(), c.n);
  s.synchronize();
  require_close(out.download(), c.expected);

  // double -> float and int -> std::size_t, as <<<>>> would convert them.
  out.poison();
  double a = static_cast<double>(c.a);
  int n = static_cast<int>(c.n);
  const float* cx = x.get();
  curt::launch(s, curt::launch_config(dim3(grid), dim3(256)), saxpy, a, cx, y.get(), out.get(), n);
  s.synchronize();
  require_close(out.download(), c.expected);
}

TEST_CASE("a kernel without parameters runs on every thread") {
  curt::device dev = test_device();
  curt::stream s(dev);
  unsigned zero = 0;
  CURT_CHECK(cudaMemcpyToSymbol(zero_parameter_hits, &zero, sizeof zero));
  const unsigned grid = static_cast<unsigned>(random_int(1, 64));
  const unsigned block = static_cast<unsigned>(random_int(1, 512));
  curt::launch(s, curt::launch_config(dim3(grid), dim3(block)), no_parameters);
  s.synchronize();
  unsigned hits = 0;
  CURT_CHECK(cudaMemcpyFromSymbol(&hits, zero_parameter_hits, sizeof hits));
  CHECK(hits == grid * block);
}

TEST_CASE("a device lambda and a functor run as kernels") {
  curt::device dev = test_device();
  curt::stream s(dev);
  const int n = random_int(5000, 50000);
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  const float scale = curt_test::random_floats(1, 0.5f, 2.0f)[0];
  const float offset = curt_test::random_floats(1, 1.0f, 3.0f)[0];
  std::vector<float> expected(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) expected[i] = scale * x[i] + offset;
  device_array<float> d_x(x), out(x.size());

  launch_test::run_device_lambda(s, d_x.get(), out.get(), n, scale, offset);
  s.synchronize();
  require_close(out.download(), expected);

  out.poison();
  curt::launch(s, curt::launch_config(dim3(curt::ceil_div(std::size_t(n), 128)), dim3(128)),
               affine{scale, offset}, d_x.get(), out.get(), n);
  s.synchronize();
  require_close(out.download(), expected);

  // An lvalue functor and a const one work the same.
  out.poison();
  const affine f{scale, offset};
  curt::launch(s, curt::launch_config(dim3(curt::ceil_div(std::size_t(n), 64)), dim3(64)), f,
               static_cast<const float*>(d_x.get()), out.get(), n);
  s.synchronize();
  require_close(out.download(), expected);
}

TEST_CASE("cluster launches give each block the configured cluster shape and rank") {
  curt::device dev = test_device();
  REQUIRE(dev.supports_cluster_launch());
  curt::stream s(dev);

  const dim3 line(2, 1, 1);
  const dim3 line_grid(2 * static_cast<unsigned>(random_int(2, 20)), 1, 1);
  check_cluster_shape(run_cluster_shape(s, line_grid, line), line_grid, line);

  const dim3 square(2, 2, 1);
  const dim3 square_grid(2 * static_cast<unsigned>(random_int(1, 6)),
                         2 * static_cast<unsigned>(random_int(1, 6)), 1);
  check_cluster_shape(run_cluster_shape(s, square_grid, square), square_grid, square);

  const dim3 cube(2, 2, 2);
  const dim3 cube_grid(4, 2, 6);
  check_cluster_shape(run_cluster_shape(s, cube_grid, cube), cube_grid, cube);
}

TEST_CASE("blocks of a cluster read each other's shared memory") {
  curt::device dev = test_device();
  REQUIRE(dev.supports_cluster_launch());
  curt::stream s(dev);
  check_cluster_exchange(s, 2);
  check_cluster_exchange(s, 4);
}

namespace {

struct pdl_run {
  std::vector<unsigned long long> primary_end, secondary_start;
  std::vector<float> out;
};

// The primary kernel, then the secondary on the same stream with `secondary_config`.
pdl_run run_pdl(curt::stream_ref s, const device_array<float>& in, curt::launch_config secondary,
                unsigned long long spin_ns) {
  const int n = static_cast<int>(in.size());
  const unsigned primary_blocks = 8, secondary_blocks = 16;
  device_array<float> mid(in.size()), out(in.size());
  device_array<unsigned long long> end_times(primary_blocks), start_times(secondary_blocks);
  curt::launch(s, curt::launch_config(dim3(primary_blocks), dim3(128)), pdl_primary, in.get(),
               mid.get(), n, spin_ns, end_times.get());
  secondary.grid(dim3(secondary_blocks)).block(dim3(128));
  curt::launch(s, secondary, pdl_secondary, mid.get(), out.get(), n, start_times.get());
  s.synchronize();
  return {end_times.download(), start_times.download(), out.download()};
}

}  // namespace

TEST_CASE("programmatic dependent launch overlaps the secondary with the primary's tail") {
  curt::device dev = test_device();
  curt::stream s(dev);
  const int n = random_int(20000, 40000);
  std::vector<float> in = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  std::vector<float> expected(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    float mid = 2.0f * in[i] + 1.0f;
    expected[i] = mid * mid - 3.0f;
  }
  device_array<float> d_in(in);
  const curt::launch_config pdl = curt::launch_config().programmatic_stream_serialization();
  REQUIRE(pdl.attribute_count() == 1);

  // Both kernels loaded and run once, so that no lazy loading falls into the measured runs.
  require_close(run_pdl(s, d_in, pdl, 0).out, expected);

  const unsigned long long spin_ns = 20'000'000;  // 20 ms
  pdl_run overlapped = run_pdl(s, d_in, pdl, spin_ns);
  require_close(overlapped.out, expected);  // read after cudaGridDependencySynchronize()
  unsigned long long first_end = *std::min_element(overlapped.primary_end.begin(),
                                                   overlapped.primary_end.end());
  unsigned long long last_start = *std::max_element(overlapped.secondary_start.begin(),
                                                    overlapped.secondary_start.end());
  INFO("secondary's last block started " << (double(first_end) - double(last_start)) / 1e6
                                         << " ms before the primary's first block ended");
  if (under_compute_sanitizer()) {
    // The sanitizers run kernels one after another: no overlap to see there.
    if (last_start >= first_end) WARN("no overlap under compute-sanitizer (expected)");
  } else {
    CHECK(last_start < first_end);
  }

  // Without the attribute (the default) the secondary starts only after the primary is done.
  pdl_run serial = run_pdl(s, d_in, curt::launch_config(), spin_ns);
  require_close(serial.out, expected);
  unsigned long long last_end = *std::max_element(serial.primary_end.begin(),
                                                  serial.primary_end.end());
  unsigned long long first_start = *std::min_element(serial.secondary_start.begin(),
                                                     serial.secondary_start.end());
  INFO("secondary's first block started " << (double(first_start) - double(last_end)) / 1e6
                                          << " ms after the primary's last block ended");
  CHECK(first_start >= last_end);
}

TEST_CASE("a cooperative grid that fills the device synchronizes across blocks") {
  curt::device dev = test_device();
  REQUIRE(dev.supports_cooperative_launch());
  curt::stream s(dev);
  const unsigned fit = curt::grid_to_fill_device(dev, cooperative_sum, coop_threads);
  REQUIRE(fit >= static_cast<unsigned>(dev.multiprocessor_count()));

  const int n = (1 << 20) + random_int(1, 100000);
  std::vector<int> in = curt_test::random_ints(std::size_t(n), -1000000, 1000000);
  const long long expected = std::accumulate(in.begin(), in.end(), 0LL);
  device_array<int> d_in(in);
  device_array<long long> partial(fit), total(1);
  device_array<int> valid(1);
  curt::launch(s, curt::launch_config(dim3(fit), dim3(coop_threads)).cooperative(),
               cooperative_sum, d_in.get(), n, partial.get(), total.get(), valid.get());
  s.synchronize();
  CHECK(valid.download()[0] == 1);
  CHECK(total.download()[0] == expected);
  // Also the partial sums, each of its block's grid-stride share.
  std::vector<long long> partial_expected(fit, 0);
  for (int i = 0; i < n; ++i)
    partial_expected[(static_cast<unsigned>(i) / coop_threads) % fit] += in[std::size_t(i)];
  CHECK(partial.download() == partial_expected);

  for (unsigned blocks : {fit + 1, 10 * fit}) {
    INFO("cooperative grid of " << blocks << " blocks; " << fit << " fit");
    std::string fragment = "cooperative grid of " + std::to_string(blocks) + " blocks exceeds the " +
                           std::to_string(fit) + " that can be resident at once";
    curt_test::require_cuda_error(
        [&] {
          curt::launch(s, curt::launch_config(dim3(blocks), dim3(coop_threads)).cooperative(),
                       cooperative_sum, d_in.get(), n, partial.get(), total.get(), valid.get());
        },
        cudaErrorCooperativeLaunchTooLarge,
        {fragment.c_str(), "cooperative_sum", "cooperative", "exceeds"});
    check_after_failed_launch(s);
  }
}

TEST_CASE("a cooperative grid that fits the device but not a green context's SMs is refused on "
          "its stream, naming the green context's SM count") {
  curt::device dev = test_device();
  REQUIRE(dev.supports_cooperative_launch());
  const unsigned device_sms = static_cast<unsigned>(dev.multiprocessor_count());
  curt::sm_resource all = curt::device_sm_resource(dev);
  curt::sm_split split = all.split(1, all.min_partition_size());
  const unsigned partition = split.group_sm_count();  // read from the split (8 on the H200)
  INFO("a green context of " << partition << " of the device's " << device_sms << " SMs");
  REQUIRE(partition > 0);
  REQUIRE(partition < device_sms);
  curt::green_context gc(dev, split.group(0));
  REQUIRE(gc.resources().sm_count() == partition);
  curt::stream green = gc.make_stream();
  curt::stream plain(dev);

  constexpr int threads = 128;
  const int per_sm = curt::max_active_blocks_per_multiprocessor(dev, block_index_out, threads);
  REQUIRE(per_sm > 0);
  const unsigned green_fit = static_cast<unsigned>(per_sm) * partition;
  const unsigned device_fit = static_cast<unsigned>(per_sm) * device_sms;
  const unsigned blocks = static_cast<unsigned>(
      random_int(static_cast<int>(green_fit) + 1, static_cast<int>(device_fit)));
  INFO(per_sm << " blocks per SM; a grid of " << blocks << " blocks: " << green_fit
              << " fit the green context, " << device_fit << " the device");
  device_array<unsigned> out(device_fit + 1);
  auto config = [](unsigned grid) {
    return curt::launch_config(dim3(grid), dim3(threads)).cooperative();
  };
  // Blocks [0, grid) wrote their index; the rest of `out` kept its poison.
  auto require_ran = [&](unsigned grid, const char* what) {
    INFO(what << ": a cooperative grid of " << grid << " blocks");
    std::vector<unsigned> want(out.size(), 0xFFFFFFFFu);
    std::iota(want.begin(), want.begin() + grid, 0u);
    CHECK(out.download() == want);
  };

  // Accepted: the grid on an ordinary stream (it fits the device), and the green context's fit on
  // its stream.
  out.poison();
  curt::launch(plain, config(blocks), block_index_out, out.get());
  plain.synchronize();
  require_ran(blocks, "an ordinary stream");
  out.poison();
  curt::launch(green, config(green_fit), block_index_out, out.get());
  green.synchronize();
  require_ran(green_fit, "the green stream");

  // Refused on the green stream, with the green context's numbers.
  out.poison();
  const std::string fragment =
      "cooperative grid of " + std::to_string(blocks) + " blocks exceeds the " +
      std::to_string(green_fit) + " that can be resident at once on the stream's green context (" +
      std::to_string(per_sm) + " per multiprocessor x " + std::to_string(partition) +
      " SMs; the device has " + std::to_string(device_sms) + ")";
  curt_test::require_any_cuda_error(
      [&] { curt::launch(green, config(blocks), block_index_out, out.get()); },
      {fragment.c_str(), "block_index_out", "cooperative"});
  green.synchronize();
  require_ran(0, "the refused launch on the green stream");
  check_after_failed_launch(plain);

  // On an ordinary stream the device's SMs still count, and no green context is named.
  const std::string device_fragment =
      "cooperative grid of " + std::to_string(device_fit + 1) + " blocks exceeds the " +
      std::to_string(device_fit) + " that can be resident at once (" + std::to_string(per_sm) +
      " per multiprocessor x " + std::to_string(device_sms) + ")";
  curt::cuda_error refused = curt_test::require_cuda_error(
      [&] { curt::launch(plain, config(device_fit + 1), block_index_out, out.get()); },
      cudaErrorCooperativeLaunchTooLarge, {device_fragment.c_str()});
  CHECK_THAT(refused.what(), !ContainsSubstring("green context"));
  check_after_failed_launch(plain);
}

TEST_CASE("refused launches say why, name the configuration and leave no error behind") {
  curt::device dev = test_device();
  curt::stream s(dev);
  device_array<float> buffer(1 << 16);

  SECTION("a block larger than the device allows") {
    std::string limit = "block of 1025 threads exceeds the device's limit of " +
                        std::to_string(dev.max_threads_per_block());
    auto error = curt_test::require_cuda_error(
        [&] {
          curt::launch(s, curt::launch_config(dim3(1), dim3(1025)), saxpy, 1.0f, buffer.get(),
                       buffer.get(), buffer.get(), std::size_t(0));
        },
        cudaErrorInvalidValue,  // what cuLaunchKernelEx returns (<<<>>> would say InvalidConfiguration)
        {"block of 1025 threads exceeds the device's limit of 1024", limit.c_str(),
         "grid 1x1x1", "block 1025x1x1", "saxpy"});
    INFO("status: " << cudaGetErrorName(error.status()));
    check_after_failed_launch(s);
  }

  SECTION("a grid that is not a multiple of the cluster") {
    auto error = curt_test::require_cuda_error(
        [&] {
          curt::launch(s, curt::launch_config(dim3(3), dim3(32)).cluster_dims(dim3(2)),
                       cluster_shape, reinterpret_cast<unsigned*>(buffer.get()));
        },
        cudaErrorInvalidClusterSize,
        {"grid 3x1x1 is not a multiple of the cluster 2x1x1", "grid 3x1x1", "block 32x1x1",
         "cluster 2x1x1", "cluster_shape"});
    INFO("status: " << cudaGetErrorName(error.status()));
    check_after_failed_launch(s);
  }

  SECTION("more dynamic shared memory than the device has") {
    const std::size_t optin = dev.max_shared_memory_per_block_optin();
    const std::size_t bytes = optin + 1024;
    std::string limit = std::to_string(bytes) +
                        " B of dynamic shared memory (+ 0 B static) exceeds the device's limit of " +
                        std::to_string(optin) + " B per block";
    std::string described = std::to_string(bytes) + " B dynamic shared memory";
    auto error = curt_test::require_cuda_error(
        [&] {
          curt::launch(s, curt::launch_config(dim3(1), dim3(64), bytes), shared_rotate,
                       buffer.get(), buffer.get(), 16, 1);
        },
        cudaErrorInvalidValue,
        {"exceeds the device's limit of", limit.c_str(), described.c_str(), "grid 1x1x1",
         "block 64x1x1", "shared_rotate"});
    INFO("status: " << cudaGetErrorName(error.status()));
    check_after_failed_launch(s);
  }

  SECTION("a dynamic shared memory size past 32 bits, which the driver would take cut short") {
    const std::size_t bytes = (std::size_t(1) << 32) + 1024;  // 1024 once cut to 32 bits
    std::string described = std::to_string(bytes) + " B dynamic shared memory";
    curt_test::require_cuda_error(
        [&] {
          curt::launch(s, curt::launch_config(dim3(1), dim3(64), bytes), shared_rotate,
                       buffer.get(), buffer.get(), 16, 1);
        },
        cudaErrorInvalidValue, {"exceeds the device's limit of", described.c_str()});
    check_after_failed_launch(s);
  }
}

TEST_CASE("64 KiB of dynamic shared memory needs the opt-in, then works") {
  curt::device dev = test_device();
  curt::stream s(dev);
  const int count = 64 * 1024 / static_cast<int>(sizeof(float));
  const std::size_t bytes = 64 * 1024;
  REQUIRE(dev.max_shared_memory_per_block_optin() >= bytes);
  const unsigned blocks = static_cast<unsigned>(random_int(2, 8));
  const int shift = random_int(1, count - 1);
  std::vector<float> in = curt_test::random_floats(std::size_t(blocks) * count);
  std::vector<float> expected(in.size());
  for (unsigned b = 0; b < blocks; ++b)
    for (int i = 0; i < count; ++i)
      expected[std::size_t(b) * count + i] = in[std::size_t(b) * count + (i + shift) % count];
  device_array<float> d_in(in), d_out(in.size());
  const curt::launch_config config(dim3(blocks), dim3(256), bytes);

  cudaFuncAttributes before{};
  REQUIRE(cudaFuncGetAttributes(&before, reinterpret_cast<const void*>(&shared_rotate)) ==
          cudaSuccess);
  REQUIRE(static_cast<std::size_t>(before.maxDynamicSharedSizeBytes) < bytes);
  std::string limit = "65536 B of dynamic shared memory exceeds this kernel's limit of " +
                      std::to_string(before.maxDynamicSharedSizeBytes) + " B";
  auto error = curt_test::require_cuda_error(
      [&] { curt::launch(s, config, shared_rotate, d_in.get(), d_out.get(), count, shift); },
      cudaErrorInvalidValue,
      {limit.c_str(), "curt::set_max_dynamic_shared_memory", "65536 B dynamic shared memory",
       "shared_rotate"});
  INFO("status: " << cudaGetErrorName(error.status()));
  CHECK(cudaGetLastError() == cudaSuccess);

  curt::set_max_dynamic_shared_memory(dev, shared_rotate, bytes);
  curt::launch(s, config, shared_rotate, d_in.get(), d_out.get(), count, shift);
  s.synchronize();
  std::vector<float> out = d_out.download();
  REQUIRE(out.size() == expected.size());
  CHECK(std::equal(out.begin(), out.end(), expected.begin()));
}

TEST_CASE("the other launch attributes are accepted by real launches") {
  curt::device dev = test_device();
  curt::stream s(dev);

  SECTION("priority") {
    require_saxpy_works(s, curt::launch_config().priority(dev.stream_priority_range().first));
    require_saxpy_works(s, curt::launch_config().priority(dev.stream_priority_range().second));
  }
  SECTION("memory synchronization domain") {
    require_saxpy_works(s, curt::launch_config().memory_sync_domain(cudaLaunchMemSyncDomainRemote));
    require_saxpy_works(s, curt::launch_config().memory_sync_domain(cudaLaunchMemSyncDomainDefault));
  }
  SECTION("preferred shared memory carveout") {
    require_saxpy_works(s, curt::launch_config().preferred_shared_memory_carveout(50));
  }
  SECTION("access policy window over the input") {
    saxpy_case c(static_cast<std::size_t>(random_int(100000, 200000)));
    device_array<float> x(c.x), y(c.y), out(c.n);
    curt::access_policy_window window;
    window.base = x.get();
    window.bytes = std::min(x.bytes(), static_cast<std::size_t>(dev.access_policy_max_window_size()));
    window.hit_ratio = 0.6f;
    REQUIRE(window.bytes > 0);
    curt::launch_config config(dim3(curt::ceil_div(c.n, 256)), dim3(256));
    config.access_policy_window(window);
    REQUIRE(config.find(cudaLaunchAttributeAccessPolicyWindow) != nullptr);
    curt::launch(s, config, saxpy, c.a, x.get(), y.get(), out.get(), c.n);
    s.synchronize();
    require_close(out.download(), c.expected);
  }
  SECTION("launch completion and programmatic events") {
    // The stream is held at a host gate before the launch, so the kernel has certainly not
    // started when the event is first asked: an event the launch did not record (the attribute
    // dropped) would read ready there. Once the gate opens the kernel's blocks start and spin on
    // a host flag: the event fires while the stream is still busy. Then the kernel is released
    // and its result checked against the CPU.
    using namespace std::chrono_literals;
    saxpy_case c(static_cast<std::size_t>(random_int(100000, 200000)));
    device_array<float> x(c.x), y(c.y), out(c.n);
    mapped_flags flags;
    volatile unsigned* host_flags = flags.host;
    unsigned* device_flags = nullptr;
    REQUIRE(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flags), flags.host, 0) ==
            cudaSuccess);
    // One block per multiprocessor: all of them resident at once, so all can start and spin.
    const unsigned grid = static_cast<unsigned>(dev.multiprocessor_count());
    const unsigned long long kernel_timeout_ns = 20'000'000'000ull;  // 20 s: never hang

    enum variant { completion, programmatic_at_block_start, programmatic_triggered };
    for (variant v : {completion, programmatic_at_block_start, programmatic_triggered}) {
      const char* name = v == completion                    ? "launch completion event"
                         : v == programmatic_at_block_start ? "programmatic event, at block start"
                                                            : "programmatic event, triggered";
      INFO(name);
      out.poison();  // waits for the device: before the gate
      host_flags[0] = 0u;
      host_flags[1] = 0u;
      curt::event e(dev);  // fresh, never recorded: it reads ready until a launch records it
      REQUIRE(e.ready());
      curt::launch_config config(dim3(grid), dim3(256));
      if (v == completion) {
        config.launch_completion_event(e);
        REQUIRE(config.find(cudaLaunchAttributeLaunchCompletionEvent) != nullptr);
      } else {
        config.programmatic_event(e, v == programmatic_at_block_start);
        const cudaLaunchAttribute* set = config.find(cudaLaunchAttributeProgrammaticEvent);
        REQUIRE(set != nullptr);
        CHECK(set->val.programmaticEvent.triggerAtBlockStart ==
              (v == programmatic_at_block_start ? 1 : 0));
      }

      if (under_compute_sanitizer()) {
        // A launch may block there until its kernel has run: behind a closed gate, or with the
        // kernel waiting for the host, it would wait for the timeouts. The kernel is released
        // before the launch and only the result and the recorded event are checked.
        host_flags[0] = 1u;
        curt::launch(s, config, gated_saxpy, c.a, x.get(), y.get(), out.get(), c.n, device_flags,
                     kernel_timeout_ns, v == programmatic_triggered);
        s.synchronize();
        CHECK(host_flags[1] == 0u);
        CHECK(e.ready());
        require_close(out.download(), c.expected);
        WARN("under compute-sanitizer: the event's timing against the stream is not checked");
        continue;
      }
      // A launch completion event reaches the host while the kernel runs (seen on the H200). A
      // programmatic event need not: the host "may only observe the event trigger long after the
      // associated kernel has completed" (driver_types.h), and on the H200 it does. For it, only
      // "not before the kernel starts" and "ready once it is done" are checked.
      const bool host_sees_it_early = v == completion;
      bool ready_before_start = true, fired = false, stream_busy_when_fired = false;
      {
        curt_test::host_gate gate;
        gate.block(s);
        curt::launch(s, config, gated_saxpy, c.a, x.get(), y.get(), out.get(), c.n, device_flags,
                     kernel_timeout_ns, v == programmatic_triggered);
        ready_before_start = e.ready();
        gate.open();
        auto deadline = std::chrono::steady_clock::now() + (host_sees_it_early ? 10s : 100ms);
        while (!(fired = e.ready()) && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(100us);
        stream_busy_when_fired = !s.ready();  // the kernel still spins: it waits for us
        host_flags[0] = 1u;                   // release the kernel
        s.synchronize();
      }
      CHECK_FALSE(ready_before_start);
      if (host_sees_it_early) {
        CHECK(fired);
        CHECK(stream_busy_when_fired);
      }
      CHECK(host_flags[1] == 0u);  // released by the host, not by the kernel's timeout
      CHECK(e.ready());
      require_close(out.download(), c.expected);
    }
  }
  SECTION("a preferred cluster shape beside the required one") {
    const dim3 grid(4 * static_cast<unsigned>(random_int(2, 16)));
    device_array<unsigned> out(shape_fields * grid.x);
    curt::launch(s,
                 curt::launch_config(grid, dim3(32))
                     .cluster_dims(dim3(2))
                     .preferred_cluster_dims(dim3(4)),
                 cluster_shape, out.get());
    s.synchronize();
    std::vector<unsigned> o = out.download();
    unsigned preferred = 0;
    for (unsigned b = 0; b < grid.x; ++b) {
      const unsigned* f = &o[shape_fields * b];
      INFO("block " << b << ": cluster " << f[0] << "x" << f[1] << "x" << f[2]);
      REQUIRE((f[0] == 2 || f[0] == 4));
      CHECK(f[1] == 1);
      CHECK(f[2] == 1);
      CHECK(f[4] == f[0]);
      CHECK(f[3] < f[4]);
      CHECK(f[5] == b % f[0]);
      if (f[0] == 4) ++preferred;
    }
    INFO(preferred << " of " << grid.x << " blocks ran in clusters of the preferred shape");
    SUCCEED();
  }
}

TEST_CASE("launch_config keeps one entry per attribute, with the last value") {
  curt::launch_config config(dim3(7, 2, 1), dim3(64, 2, 1), 4096);
  CHECK(config.attribute_count() == 0);
  CHECK(config.find(cudaLaunchAttributePriority) == nullptr);
  CHECK(config.grid_dims().x == 7);
  CHECK(config.grid_dims().y == 2);
  CHECK(config.block_dims().x == 64);
  CHECK(config.block_dims().y == 2);
  CHECK(config.dynamic_shared_memory_bytes() == 4096);

  const int first = random_int(-5, 0), last = random_int(-5, 0);
  config.priority(first).cooperative().priority(last);
  CHECK(config.attribute_count() == 2);
  REQUIRE(config.find(cudaLaunchAttributePriority) != nullptr);
  CHECK(config.find(cudaLaunchAttributePriority)->val.priority == last);
  REQUIRE(config.find(cudaLaunchAttributeCooperative) != nullptr);
  CHECK(config.find(cudaLaunchAttributeCooperative)->val.cooperative == 1);

  config.cluster_dims(dim3(2)).cluster_dims(dim3(4, 2, 1)).cooperative(false);
  CHECK(config.attribute_count() == 3);
  const cudaLaunchAttribute* cluster = config.find(cudaLaunchAttributeClusterDimension);
  REQUIRE(cluster != nullptr);
  CHECK(cluster->val.clusterDim.x == 4);
  CHECK(cluster->val.clusterDim.y == 2);
  CHECK(cluster->val.clusterDim.z == 1);
  CHECK(config.find(cudaLaunchAttributeCooperative)->val.cooperative == 0);

  // Ten attributes at once still fit, and native() hands them all to the runtime.
  curt::event e(test_device());
  config.preferred_cluster_dims(dim3(8, 2, 1))
      .programmatic_stream_serialization()
      .programmatic_event(e)
      .launch_completion_event(e)
      .memory_sync_domain(cudaLaunchMemSyncDomainRemote)
      .access_policy_window(curt::access_policy_window{})
      .preferred_shared_memory_carveout(25)
      .priority(first);
  CHECK(config.attribute_count() == 10);
  cudaLaunchConfig_t native = config.native(nullptr);
  CHECK(native.numAttrs == 10);
  CHECK(native.attrs == config.attributes());
  CHECK(native.dynamicSmemBytes == 4096);
  CHECK(native.gridDim.x == 7);
  CHECK(native.blockDim.y == 2);
  CHECK(config.find(cudaLaunchAttributePriority)->val.priority == first);
  CHECK(config.find(cudaLaunchAttributeProgrammaticEvent)->val.programmaticEvent.event == e.get());
}
