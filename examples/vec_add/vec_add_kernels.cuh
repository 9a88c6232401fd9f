// examples/vec_add/vec_add_kernels.cuh: the kernels of the vec_add example and their launches
// (one thread per element, a device lambda, float4 grid-stride, float4 tiles, and
// thrust::transform as the yardstick), shared by examples/vec_add/main.cu and
// benchmarks/kernel_bench.cu. See main.cu for what each variant does and how it is checked.
#pragma once

#include <curt/curt.hpp>

#include <cuda/barrier>
#include <cuda/ptx>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>
#include <cuda/std/functional>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace vec_add_example {

constexpr unsigned kBlockThreads = 256;

// ---- 1. The hello world: one thread per element. -------------------------------------------

__global__ void vec_add_kernel(const float* a, const float* b, float* c, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Blocks of kBlockThreads threads that give every item a thread.
inline unsigned blocks_for(std::size_t items) {
  return static_cast<unsigned>(curt::ceil_div(items, std::size_t(kBlockThreads)));
}

inline void add_with_kernel(curt::stream_ref stream, const float* a, const float* b, float* c,
                            std::size_t n) {
  curt::launch(stream, curt::launch_config(blocks_for(n), kBlockThreads), vec_add_kernel, a, b, c,
               n);
}

// ---- 2. The same as a device lambda. -------------------------------------------------------
// An extended lambda must live in a named function (not in main, not in another lambda).
inline void add_with_lambda(curt::stream_ref stream, const float* a, const float* b, float* c,
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
inline void add_with_float4(curt::stream_ref stream, unsigned fill_blocks, const float* a,
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

inline void add_with_float4_tiles(curt::stream_ref stream, unsigned fill_blocks, const float* a,
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

// ---- 3c. Bulk copies into shared memory (sm_90), as Thrust's transform does there. ----------
// One block per tile of kBulkThreads * kBulkVectors float4s of each input (16 KiB each): one
// thread starts two bulk copies (cp.async.bulk, the copy engine of the SM, no registers held
// while the bytes travel) that complete on a shared-memory barrier; then every thread adds its
// float4s from shared memory and stores them. 32 KiB per block (plus 1 KiB the SM keeps per
// block): 6 blocks share an SM's 228 KiB, 192 KiB in flight. The last, partial tile (and every
// tile on GPUs before sm_90) takes plain loads. Measured in kernel_bench only, not yet in the
// example.
constexpr unsigned kBulkThreads = 256;
constexpr unsigned kBulkVectors = 4;  // float4s of each input per thread
constexpr std::size_t kBulkTile = std::size_t(kBulkThreads) * kBulkVectors * 4;  // floats

__global__ void __launch_bounds__(kBulkThreads)
    vec_add_bulk(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                 std::size_t n) {
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * kBulkTile;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (base + kBulkTile <= n) {
    using barrier = cuda::barrier<cuda::thread_scope_block>;
    __shared__ alignas(128) float4 tile_a[kBulkThreads * kBulkVectors];
    __shared__ alignas(128) float4 tile_b[kBulkThreads * kBulkVectors];
#pragma nv_diag_suppress static_var_with_dynamic_init
    __shared__ barrier arrived;
    if (threadIdx.x == 0) {
      init(&arrived, blockDim.x);
      cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);  // the copies see the barrier
    }
    __syncthreads();
    barrier::arrival_token token;
    if (threadIdx.x == 0) {
      cuda::device::memcpy_async_tx(tile_a, reinterpret_cast<const float4*>(a + base),
                                    cuda::aligned_size_t<16>(sizeof tile_a), arrived);
      cuda::device::memcpy_async_tx(tile_b, reinterpret_cast<const float4*>(b + base),
                                    cuda::aligned_size_t<16>(sizeof tile_b), arrived);
      token = cuda::device::barrier_arrive_tx(arrived, 1, sizeof tile_a + sizeof tile_b);
    } else {
      token = arrived.arrive();
    }
    arrived.wait(std::move(token));
    float4* c4 = reinterpret_cast<float4*>(c + base);
#pragma unroll
    for (unsigned k = 0; k < kBulkVectors; ++k) {
      const unsigned v = k * kBulkThreads + threadIdx.x;
      const float4 x = tile_a[v], y = tile_b[v];
      __stcs(c4 + v, make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w));
    }
    return;
  }
#endif
  const std::size_t end = base + kBulkTile < n ? base + kBulkTile : n;
  for (std::size_t i = base + threadIdx.x; i < end; i += blockDim.x) c[i] = a[i] + b[i];
}

inline void add_with_bulk(curt::stream_ref stream, const float* a, const float* b, float* c,
                          std::size_t n) {
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float4) != 0;
  };
  if (misaligned(a) || misaligned(b) || misaligned(c))
    throw std::invalid_argument("vec_add_bulk needs 16-byte aligned a, b and c");
  const std::size_t tiles = curt::ceil_div(n, kBulkTile);
  if (tiles > 0x7fffffffu) throw std::invalid_argument("vec_add_bulk: too many tiles");
  curt::launch(stream, curt::launch_config(static_cast<unsigned>(tiles), kBulkThreads),
               vec_add_bulk, a, b, c, n);
}

// ---- 4. The yardstick: thrust::transform on the same stream. --------------------------------
// cuda::std::plus<float> tells CUB that the operator may take copies of its arguments, which
// lets it pick its fastest algorithm (bulk copies into shared memory on sm_90). par_nosync: no
// synchronization after the call, like a kernel launch.
inline void add_with_thrust(curt::stream_ref stream, const float* a, const float* b, float* c,
                            std::size_t n) {
  thrust::transform(thrust::cuda::par_nosync.on(stream.get()), a, a + n, b, c,
                    cuda::std::plus<float>());
}

}  // namespace vec_add_example
