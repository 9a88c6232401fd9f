// vec_add: c = a + b on the GPU, four ways, each checked against the CPU and timed:
//   1. __global__ kernel   one thread per element, launched through curt::launch
//   2. device lambda       the same as a __device__ lambda (nvcc --extended-lambda)
//   3. float4 grid-stride  16-byte loads and stores, several per thread, a grid that fills the
//                          device once, and a scalar tail for lengths that are not multiples of 4
//      float4 tiles        the same in contiguous per-block tiles, with streaming loads and stores
//   4. thrust::transform   the yardstick the fast kernel is measured against
// Every variant runs at N and at the edge lengths 1, 3, 4, 5 and 1023 (fresh random inputs for
// each), into an output poisoned with NaN first, and must match the CPU's a[i] + b[i] exactly.
// Bandwidth counts 3 * N * 4 bytes (two floats read, one written, per element); the fast kernel's
// goal at N = 2^28 is at least 0.97 times Thrust's.
// Prints the result table last; its last line is "vec_add: PASSED" (exit 0) or "vec_add: FAILED"
// (exit 1); 2 for bad arguments, 77 when there is no CUDA device.
// Usage: vec_add [N]   (default 4194301, not a multiple of 4; 268435456 = 2^28 for bandwidth)
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/occupancy.hpp>

#include <cuda/std/functional>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr unsigned kBlockThreads = 256;

// ---- 1. The hello world: one thread per element. -------------------------------------------

__global__ void vec_add_kernel(const float* a, const float* b, float* c, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Blocks of kBlockThreads threads that give every item a thread.
unsigned blocks_for(std::size_t items) {
  return static_cast<unsigned>(curt::ceil_div(items, std::size_t(kBlockThreads)));
}

void add_with_kernel(curt::stream_ref stream, const float* a, const float* b, float* c,
                     std::size_t n) {
  curt::launch(stream, curt::launch_config(blocks_for(n), kBlockThreads), vec_add_kernel, a, b, c,
               n);
}

// ---- 2. The same as a device lambda. -------------------------------------------------------
// An extended lambda must live in a named function (not in main, not in another lambda).
void add_with_lambda(curt::stream_ref stream, const float* a, const float* b, float* c,
                     std::size_t n) {
  curt::launch(
      stream, curt::launch_config(blocks_for(n), kBlockThreads),
      [n] __device__(const float* x, const float* y, float* z) {
        const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
        if (i < n) z[i] = x[i] + y[i];
      },
      a, b, c);
}

// ---- 3. Fast: float4 loads, grid-stride, a grid that fills the device. ---------------------
// Each thread loads kUnroll float4s of a and of b before it stores any: 128 bytes in flight per
// thread, about 192 KiB per SM at the 6 blocks of 256 threads that fit (34 registers on sm_90),
// well over the 48 KiB per SM that CUB's tuning asks for to cover the memory latency on an H200.
// The float4s left over (fewer than kUnroll per thread) go one at a time, and the elements past
// the last whole float4 (n % 4 of them, at most 3) are a scalar tail: no access reaches past
// element n - 1.
constexpr int kUnroll = 4;

__global__ void vec_add_float4(const float* __restrict__ a, const float* __restrict__ b,
                               float* __restrict__ c, std::size_t n) {
  // The caller checks that a, b and c are 16-byte aligned (cudaMalloc gives 256).
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* c4 = reinterpret_cast<float4*>(c);
  const std::size_t vectors = n / 4;  // whole float4s
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;

  // This thread's float4s are first, first + stride, first + 2 * stride, ...: kUnroll of them
  // per trip while all kUnroll exist, then the rest one by one.
  std::size_t i = first;
  for (; i + (kUnroll - 1) * stride < vectors; i += kUnroll * stride) {
    float4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      x[k] = a4[i + k * stride];
      y[k] = b4[i + k * stride];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      c4[i + k * stride] =
          make_float4(x[k].x + y[k].x, x[k].y + y[k].y, x[k].z + y[k].z, x[k].w + y[k].w);
  }
  for (; i < vectors; i += stride) {
    const float4 x = a4[i], y = b4[i];
    c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }

  // The scalar tail: threads 0 .. n % 4 - 1 of block 0.
  if (first < n - vectors * 4) {
    const std::size_t t = vectors * 4 + first;
    c[t] = a[t] + b[t];
  }
}

// `fill_blocks` is the grid that fills the device once (curt::grid_to_fill_device); small
// inputs get fewer blocks, one thread per float4 at most.
void add_with_float4(curt::stream_ref stream, unsigned fill_blocks, const float* a,
                     const float* b, float* c, std::size_t n) {
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float4) != 0;
  };
  if (misaligned(a) || misaligned(b) || misaligned(c))
    throw std::invalid_argument("vec_add_float4 needs 16-byte aligned a, b and c");
  const unsigned blocks = std::min(fill_blocks, blocks_for(curt::ceil_div(n, std::size_t(4))));
  curt::launch(stream, curt::launch_config(blocks, kBlockThreads), vec_add_float4, a, b, c, n);
}

// ---- 3b. float4 tiles, streaming loads and stores. -----------------------------------------
// A second take on the fast kernel: each block takes whole tiles of kBlockThreads * kUnroll
// consecutive float4s (a block's accesses of one trip are contiguous, 16 KiB of each array,
// rather than spread over the whole grid's stride), with __ldcs / __stcs (evict-first: every
// byte is touched once, so it should not push other data out of L2). The float4s past the last
// whole tile go through the grid one at a time, then the scalar tail as above.
__global__ void vec_add_float4_tiles(const float* __restrict__ a, const float* __restrict__ b,
                                     float* __restrict__ c, std::size_t n) {
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* c4 = reinterpret_cast<float4*>(c);
  constexpr std::size_t tile = std::size_t(kBlockThreads) * kUnroll;  // float4s
  const std::size_t vectors = n / 4;
  const std::size_t tiles = vectors / tile;
  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::size_t base = t * tile + threadIdx.x;
    float4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      x[k] = __ldcs(a4 + base + k * kBlockThreads);
      y[k] = __ldcs(b4 + base + k * kBlockThreads);
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      __stcs(c4 + base + k * kBlockThreads,
             make_float4(x[k].x + y[k].x, x[k].y + y[k].y, x[k].z + y[k].z, x[k].w + y[k].w));
  }
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = tiles * tile + first; i < vectors; i += stride) {
    const float4 x = a4[i], y = b4[i];
    c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  if (first < n - vectors * 4) {
    const std::size_t t = vectors * 4 + first;
    c[t] = a[t] + b[t];
  }
}

void add_with_float4_tiles(curt::stream_ref stream, unsigned fill_blocks, const float* a,
                           const float* b, float* c, std::size_t n) {
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float4) != 0;
  };
  if (misaligned(a) || misaligned(b) || misaligned(c))
    throw std::invalid_argument("vec_add_float4_tiles needs 16-byte aligned a, b and c");
  const unsigned blocks = std::min(fill_blocks, blocks_for(curt::ceil_div(n, std::size_t(4))));
  curt::launch(stream, curt::launch_config(blocks, kBlockThreads), vec_add_float4_tiles, a, b, c,
               n);
}

// ---- 4. The yardstick: thrust::transform on the same stream. --------------------------------
// cuda::std::plus<float> tells CUB that the operator may take copies of its arguments, which
// lets it pick its fastest algorithm (bulk copies into shared memory on sm_90). par_nosync: no
// synchronization after the call, like a kernel launch.
void add_with_thrust(curt::stream_ref stream, const float* a, const float* b, float* c,
                     std::size_t n) {
  thrust::transform(thrust::cuda::par_nosync.on(stream.get()), a, a + n, b, c,
                    cuda::std::plus<float>());
}

// ---- Checking. -------------------------------------------------------------------------------

using add_function =
    std::function<void(curt::stream_ref, const float*, const float*, float*, std::size_t)>;

// Random inputs of n floats on the host and the device, the CPU's sum, and the output buffer.
// Each buffer holds exactly n floats, so that the sanitizer sees any access past the end.
struct problem {
  problem(curt::device device, curt::stream_ref stream, std::size_t n)
      : a(curt_example::random_values(n, -1000.0f, 1000.0f)),
        b(curt_example::random_values(n, -1000.0f, 1000.0f)),
        sum(n),
        device_a(device, n),
        device_b(device, n),
        device_c(device, n) {
    for (std::size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
    curt::copy(device_a, a, stream);
    curt::copy(device_b, b, stream);
  }
  std::size_t size() const { return sum.size(); }
  void add(const add_function& f, curt::stream_ref stream) {
    f(stream, device_a.data(), device_b.data(), device_c.data(), size());
  }

  std::vector<float> a, b, sum;
  curt::device_buffer<float> device_a, device_b, device_c;
};

// One checked run: c poisoned with NaN (an element the variant leaves alone stays NaN, which
// equals nothing), one launch, c back on the host and compared with the CPU's sum. The
// comparison is exact: a + b is one IEEE-754 single-precision addition, correctly rounded to
// nearest-even on the GPU and on the host alike (x86-64 adds floats in SSE registers, not in
// x87's wider ones), so both give the same float. (No sum of these inputs is subnormal, so even
// a GPU build with -ftz=true or --use_fast_math would agree.)
// Returns the first mismatch, described; empty when every element matches.
std::string check(const add_function& f, curt::stream_ref stream, problem& p) {
  curt::fill(p.device_c, std::numeric_limits<float>::quiet_NaN(), stream);
  p.add(f, stream);
  std::vector<float> c(p.size());
  curt::copy(c, p.device_c, stream);
  stream.synchronize();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!(c[i] == p.sum[i])) {
      char text[160];
      std::snprintf(text, sizeof text, "n = %zu: c[%zu] = %.9g, expected %.9g", p.size(), i,
                    static_cast<double>(c[i]), static_cast<double>(p.sum[i]));
      return text;
    }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run("vec_add", "vec_add [N]   (1 <= N <= 2^30, default 4194301)", [&] {
    const std::size_t n =
        curt_example::size_argument(argc, argv, 1, 4194301, 1, std::size_t(1) << 30);
    const curt::device device(0);
    curt::set_current_device(device);  // Thrust works on the current device
    curt::stream stream(device);

    // The fast kernel's grid: as many blocks as can be resident at once, on every SM.
    const unsigned fill_blocks = curt::grid_to_fill_device(device, vec_add_float4, kBlockThreads);
    const unsigned tile_blocks =
        curt::grid_to_fill_device(device, vec_add_float4_tiles, kBlockThreads);
    std::printf("vec_add: n = %zu floats; float4 kernel grid %u blocks of %u threads (%u per SM "
                "on %d SMs)\n",
                n, fill_blocks, kBlockThreads, fill_blocks / device.multiprocessor_count(),
                device.multiprocessor_count());

    struct variant {
      const char* name;
      add_function add;
    };
    const variant variants[] = {
        {"__global__ kernel", add_with_kernel},
        {"device lambda", add_with_lambda},
        {"float4 grid-stride", [fill_blocks](curt::stream_ref s, const float* a, const float* b,
                                             float* c, std::size_t count) {
           add_with_float4(s, fill_blocks, a, b, c, count);
         }},
        {"float4 tiles, streaming", [tile_blocks](curt::stream_ref s, const float* a,
                                                  const float* b, float* c, std::size_t count) {
           add_with_float4_tiles(s, tile_blocks, a, b, c, count);
         }},
        {"thrust::transform (yardstick)", add_with_thrust},
    };
    // Edge lengths: no whole float4 (1, 3), one and no tail (4), one and a tail of 1 (5),
    // 255 and a tail of 3 (1023).
    const std::size_t edge_sizes[] = {1, 3, 4, 5, 1023};
    std::string checked = "exact; also n =";
    for (std::size_t size : edge_sizes) checked += " " + std::to_string(size);

    // The yardstick copy moves as many bytes as one vec_add (n floats read twice, written once).
    curt_example::table table(
        "vec_add", curt_example::copy_gb_per_s(device, stream, 3 * n * sizeof(float) / 2));
    problem main_problem(device, stream, n);
    const double bytes = 3.0 * static_cast<double>(n) * sizeof(float);

    for (const variant& v : variants) {
      std::string mismatch = check(v.add, stream, main_problem);
      for (std::size_t size : edge_sizes) {
        if (!mismatch.empty()) break;
        problem edge(device, stream, size);
        mismatch = check(v.add, stream, edge);
      }

      // Several launches per timed sample, so that the host's time to launch the next one (a
      // few microseconds, more for Thrust's dispatch) overlaps a kernel instead of counting
      // as GPU time.
      constexpr int launches = 4;
      const double ms = curt_example::median_ms(stream, 5, [&](curt::stream_ref s) {
                          for (int i = 0; i < launches; ++i) main_problem.add(v.add, s);
                        }) /
                        launches;
      table.row(v.name, std::to_string(n), mismatch.empty(), ms, bytes,
                mismatch.empty() ? checked : mismatch);
    }
    return table.print();
  });
}
