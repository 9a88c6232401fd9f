// examples/transpose/transpose_kernels.cuh: the transpose example's kernels (the tiled copy
// kernel that is the yardstick, naive, tiled with and without padding, tiled 64x64) and their
// launch configuration, shared by examples/transpose/main.cu and benchmarks/kernel_bench.cu.
// See main.cu for the design and the checks.
#pragma once

#include <curt/curt.hpp>

namespace transpose_example {

// Every kernel runs blocks of 32 x 8 threads over square tiles of the matrix. A warp is one
// threadIdx.y row of the block: its 32 threads touch 32 consecutive floats of a matrix row, one
// 128-byte segment, whichever matrix it reads or writes (the tiled kernels arrange that).
constexpr int kThreadsX = 32;
constexpr int kThreadsY = 8;

// The grid for Tile x Tile tiles: x walks the columns, y the rows (at most 65535 tiles, which
// main's limit on ROWS keeps).
template <int Tile>
curt::launch_config tile_config(int rows, int cols) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(cols, Tile)),
                                  static_cast<unsigned>(curt::ceil_div(rows, Tile))),
                             dim3(kThreadsX, kThreadsY));
}

// ---- 1. The yardstick: a copy with the transposes' tiles and threads. -------------------------
// Thread (x, y) of the block handles tile elements (y + j, x + i) for j a multiple of 8 and i a
// multiple of 32, below Tile; every guard keeps ragged tiles at the matrix's right and bottom
// edges inside it.
template <int Tile>
__global__ void __launch_bounds__(kThreadsX* kThreadsY)
    copy_tiles(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int row0 = blockIdx.y * Tile, col0 = blockIdx.x * Tile;
#pragma unroll
  for (int j = 0; j < Tile; j += kThreadsY)
#pragma unroll
    for (int i = 0; i < Tile; i += kThreadsX) {
      const int r = row0 + threadIdx.y + j, c = col0 + threadIdx.x + i;
      if (r < rows && c < cols) out[std::size_t(r) * cols + c] = in[std::size_t(r) * cols + c];
    }
}

// ---- 2. Naive: each element straight to its place. -------------------------------------------
template <int Tile>
__global__ void __launch_bounds__(kThreadsX* kThreadsY)
    transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int row0 = blockIdx.y * Tile, col0 = blockIdx.x * Tile;
#pragma unroll
  for (int j = 0; j < Tile; j += kThreadsY)
#pragma unroll
    for (int i = 0; i < Tile; i += kThreadsX) {
      const int r = row0 + threadIdx.y + j, c = col0 + threadIdx.x + i;
      if (r < rows && c < cols) out[std::size_t(c) * rows + r] = in[std::size_t(r) * cols + c];
    }
}

// ---- 3, 4, 5. Tiled: through shared memory, coalesced on both sides. -------------------------
// The block reads its tile of `in` row by row into tile[y][x], then writes it row by row of `out`:
// out row col0 + y, column row0 + x, is tile[x][y]. In that second phase a warp reads tile[x][y]
// for 32 consecutive x: words x * (Tile + Pad) + y. With Pad = 0 the stride is a multiple of 32,
// so all 32 words sit in one of the 32 banks and the reads are served one at a time; with Pad = 1
// the stride is 1 mod 32 and the 32 words sit in 32 different banks.
// A thread reads tile[x][y] only when (row0 + x, col0 + y) is inside the matrix, the same test
// under which tile[x][y] was written: no uninitialized shared memory is ever read.
template <int Tile, int Pad>
__global__ void __launch_bounds__(kThreadsX* kThreadsY)
    transpose_tiled(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[Tile][Tile + Pad];
  const int row0 = blockIdx.y * Tile, col0 = blockIdx.x * Tile;
#pragma unroll
  for (int j = 0; j < Tile; j += kThreadsY)
#pragma unroll
    for (int i = 0; i < Tile; i += kThreadsX) {
      const int y = threadIdx.y + j, x = threadIdx.x + i;
      if (row0 + y < rows && col0 + x < cols)
        tile[y][x] = in[std::size_t(row0 + y) * cols + col0 + x];
    }
  __syncthreads();  // the tile is complete; each block uses it once, so no second barrier
#pragma unroll
  for (int j = 0; j < Tile; j += kThreadsY)
#pragma unroll
    for (int i = 0; i < Tile; i += kThreadsX) {
      const int y = threadIdx.y + j, x = threadIdx.x + i;
      if (col0 + y < cols && row0 + x < rows)
        out[std::size_t(col0 + y) * rows + row0 + x] = tile[x][y];
    }
}

struct variant {
  const char* name;
  bool transposes;  // false for the copy kernel, whose output is its input
  void (*kernel)(const float*, float*, int, int);
  curt::launch_config (*config)(int rows, int cols);  // tile_config<its tile side>
};

}  // namespace transpose_example
