// examples/vec_add/vec_add_kernels.cuh: the kernels of the vec_add example and their launches
// (one thread per element, a device lambda, float4 grid-stride, float4 tiles, the main path:
// one float4 tile per block through bulk copies, and thrust::transform as the yardstick), shared
// by examples/vec_add/main.cu and benchmarks/kernel_bench.cu. See main.cu for what each variant
// does and how it is checked.
#pragma once

#include <curt/curt.hpp>

#include <cuda/ptx>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>
#include <cuda/std/functional>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

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

// ---- 3. float4 loads, grid-stride, a grid that fills the device. ---------------------------
// (The example's main path until issue 27: 0.934x Thrust at 2^28 on an H200; see 3c.)
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
inline void add_with_float4_grid(curt::stream_ref stream, unsigned fill_blocks, const float* a,
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

// ---- 3c. The main path: one tile per block, bulk copies into shared memory (sm_90). --------
// What thrust::transform does on sm_90 (CUB's DeviceTransform, "ublkcp"), in float4s: block b
// takes the floats [b * tile, (b + 1) * tile) of each input, tile = kTileThreads * Vectors * 4.
// One thread starts a bulk copy of each input's tile (cp.async.bulk: the SM's copy engine moves
// the bytes, no registers are held while they travel) that completes on a shared-memory barrier
// (mbarrier, one arrival plus the bytes expected); then every thread adds its Vectors float4s
// from shared memory and stores them. Many small blocks, each with its own short load-add-store
// life, rather than a few long-lived ones: the SM keeps 8 of them resident (2048 threads), and
// one ending while its neighbours wait for their bytes keeps the memory busy.
//   main path  Vectors = 1: a 4 KiB tile of each input, 8 KiB of shared memory per block, 64 KiB
//              in flight per SM (CUB's tuning asks 48 KiB on sm_90 and picks 768 floats per tile
//              of 256 threads for float + float: about this); plain stores, as Thrust's.
//   bulk       Vectors = 4: 16 KiB of each input per tile, evict-first stores (__stcs), 6 blocks
//              per SM (measured 0.979x Thrust at 2^28 on an H200, float4 grid-stride 0.934x).
//   BulkCopy = false: the same tiles with plain float4 loads (a comparison in kernel_bench, and
//              the path on GPUs before sm_90).
// The last tile, when partial (n not a multiple of the tile), is added one float per thread per
// step: nothing reaches past element n - 1, and the bulk copies always move whole tiles.
constexpr unsigned kTileThreads = 256;

template <unsigned Vectors>
constexpr std::size_t tile_floats = std::size_t(kTileThreads) * Vectors * 4;

template <unsigned Vectors, bool BulkCopy, bool Streaming>
__global__ void __launch_bounds__(kTileThreads)
    vec_add_tile(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                 std::size_t n) {
  constexpr std::size_t tile = tile_floats<Vectors>;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * tile;
  if (base + tile <= n) {
    const float4* a4 = reinterpret_cast<const float4*>(a + base);
    const float4* b4 = reinterpret_cast<const float4*>(b + base);
    float4* c4 = reinterpret_cast<float4*>(c + base);
    float4 x[Vectors], y[Vectors];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (BulkCopy) {
      __shared__ alignas(128) float4 tile_a[kTileThreads * Vectors];
      __shared__ alignas(128) float4 tile_b[kTileThreads * Vectors];
      __shared__ std::uint64_t arrived;
      if (threadIdx.x == 0) {
        namespace ptx = cuda::ptx;
        ptx::mbarrier_init(&arrived, 1);
        ptx::fence_proxy_async(ptx::space_shared);  // the copies see the initialized barrier
        constexpr std::uint32_t bytes = sizeof tile_a;
        ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, tile_a, a4, bytes, &arrived);
        ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, tile_b, b4, bytes, &arrived);
        (void)ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared,
                                             &arrived, 2 * bytes);
      }
      __syncthreads();  // the barrier is initialized before anyone waits on it
      while (!cuda::ptx::mbarrier_try_wait_parity(&arrived, 0)) {
      }
#pragma unroll
      for (unsigned k = 0; k < Vectors; ++k) {
        x[k] = tile_a[k * kTileThreads + threadIdx.x];
        y[k] = tile_b[k * kTileThreads + threadIdx.x];
      }
    } else
#endif
    {
#pragma unroll
      for (unsigned k = 0; k < Vectors; ++k) {  // every load before any store
        x[k] = a4[k * kTileThreads + threadIdx.x];
        y[k] = b4[k * kTileThreads + threadIdx.x];
      }
    }
#pragma unroll
    for (unsigned k = 0; k < Vectors; ++k) {
      const float4 sum =
          make_float4(x[k].x + y[k].x, x[k].y + y[k].y, x[k].z + y[k].z, x[k].w + y[k].w);
      if constexpr (Streaming)
        __stcs(c4 + k * kTileThreads + threadIdx.x, sum);
      else
        c4[k * kTileThreads + threadIdx.x] = sum;
    }
    return;
  }
  for (std::size_t i = base + threadIdx.x; i < n; i += kTileThreads) c[i] = a[i] + b[i];
}

template <unsigned Vectors, bool BulkCopy, bool Streaming>
void launch_tiles(curt::stream_ref stream, const float* a, const float* b, float* c, std::size_t n,
                  const char* what) {
  const auto misaligned = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % alignof(float4) != 0;
  };
  if (misaligned(a) || misaligned(b) || misaligned(c))
    throw std::invalid_argument(std::string(what) + " needs 16-byte aligned a, b and c");
  if (n == 0) return;
  const std::size_t tiles = curt::ceil_div(n, tile_floats<Vectors>);
  if (tiles > 0x7fffffffu) throw std::invalid_argument(std::string(what) + ": too many tiles");
  curt::launch(stream, curt::launch_config(static_cast<unsigned>(tiles), kTileThreads),
               vec_add_tile<Vectors, BulkCopy, Streaming>, a, b, c, n);
}

// The example's main path (kernel_bench's "float4"): 1 float4 of each input per thread, bulk
// copies, plain stores.
inline void add_fast(curt::stream_ref stream, const float* a, const float* b, float* c,
                     std::size_t n) {
  launch_tiles<1, true, false>(stream, a, b, c, n, "vec_add (main path)");
}

// The same tiles with plain float4 loads.
inline void add_with_float4_block(curt::stream_ref stream, const float* a, const float* b, float* c,
                                  std::size_t n) {
  launch_tiles<1, false, false>(stream, a, b, c, n, "vec_add_float4_block");
}

// 16 KiB of each input per tile, streaming stores.
inline void add_with_bulk(curt::stream_ref stream, const float* a, const float* b, float* c,
                          std::size_t n) {
  launch_tiles<4, true, true>(stream, a, b, c, n, "vec_add_bulk");
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
