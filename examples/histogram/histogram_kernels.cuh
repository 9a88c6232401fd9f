// examples/histogram/histogram_kernels.cuh: the histogram example's kernels (global atomics,
// per-block, per-warp, per-lane 16-bit counters, per-lane 32-bit copies, cluster, and the probe
// of histogram_auto), their launches, the CUB HistogramEven wrapper, and the inputs (uniform,
// skewed, image-like) with the CPU histogram; shared by examples/histogram/main.cu and
// benchmarks/kernel_bench.cu. See main.cu for the design and the checks.
#pragma once

#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>

#include <cooperative_groups.h>
#include <cub/device/device_histogram.cuh>
#include <cuda/std/span>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>

namespace histogram_example {

namespace cg = cooperative_groups;

constexpr unsigned kBins = 256;
constexpr unsigned kVectorBytes = 16;  // samples are read as uint4: 16 per load
constexpr unsigned kUnroll = 4;        // uint4 loads in flight per thread per pass
constexpr unsigned kWarp = 32;

using samples_view = cuda::std::span<const unsigned char>;
using bins_view = cuda::std::span<unsigned>;

// ---- Reading the samples ----------------------------------------------------------------------

template <class Count>
__device__ __forceinline__ void count_word(unsigned word, Count& count) {
  count(word & 0xFFu);
  count((word >> 8) & 0xFFu);
  count((word >> 16) & 0xFFu);
  count(word >> 24);
}

// Calls count(sample) for this block's share of the samples, and after_pass() after each pass of
// the loop. The body is read as 16-byte vectors, kUnroll per thread per pass, in a grid-stride
// loop that every thread of a block runs the same number of times, so after_pass may hold a
// __syncthreads(). Block 0 then counts the head (the samples before the first 16-byte boundary)
// and the tail (after the last whole vector): fewer than 16 samples each, at most one of each
// per thread (blocks have at least 16 threads).
// Prefetch: the next pass's vectors are loaded before this pass's are counted, so that a thread
// keeps loads in flight while it counts (for kernels whose occupancy is low: the per-lane one).
template <bool Prefetch = false, class Count, class AfterPass>
__device__ __forceinline__ void for_each_sample(samples_view samples, Count&& count,
                                                AfterPass&& after_pass) {
  const unsigned char* data = samples.data();
  const std::size_t n = samples.size();
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(data) % kVectorBytes;
  const std::size_t to_boundary = misaligned == 0 ? 0 : kVectorBytes - misaligned;
  const std::size_t head = n < to_boundary ? n : to_boundary;
  const uint4* vectors = reinterpret_cast<const uint4*>(data + head);
  const std::size_t vector_count = (n - head) / kVectorBytes;
  const unsigned char* tail = data + head + vector_count * kVectorBytes;
  const std::size_t tail_count = n - head - vector_count * kVectorBytes;

  const std::size_t threads = blockDim.x;
  const std::size_t stride = threads * gridDim.x * kUnroll;
  const auto load = [&](std::size_t base, uint4(&v)[kUnroll]) {
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) {  // all loads first: kUnroll requests in flight
      const std::size_t i = base + u * threads + threadIdx.x;
      v[u] = i < vector_count ? __ldg(&vectors[i]) : make_uint4(0, 0, 0, 0);  // read-only path
    }
  };
  const auto count_pass = [&](std::size_t base, const uint4(&v)[kUnroll]) {
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) {
      if (base + u * threads + threadIdx.x < vector_count) {
        count_word(v[u].x, count);
        count_word(v[u].y, count);
        count_word(v[u].z, count);
        count_word(v[u].w, count);
      }
    }
  };
  std::size_t base = blockIdx.x * threads * kUnroll;
  if constexpr (Prefetch) {
    uint4 v[kUnroll];
    load(base, v);  // past the end: zeros, never counted
    for (; base < vector_count; base += stride) {
      uint4 next[kUnroll];
      load(base + stride, next);  // in flight while this pass counts
      count_pass(base, v);
      after_pass();
#pragma unroll
      for (unsigned u = 0; u < kUnroll; ++u) v[u] = next[u];
    }
  } else {
    for (; base < vector_count; base += stride) {
      uint4 v[kUnroll];
      load(base, v);
      count_pass(base, v);
      after_pass();
    }
  }
  if (blockIdx.x == 0) {
    if (threadIdx.x < head) count(data[threadIdx.x]);
    if (threadIdx.x < tail_count) count(tail[threadIdx.x]);
  }
}

// ---- (1) Global atomics -----------------------------------------------------------------------

constexpr unsigned kBlockThreads = 512;  // global, per-block and per-warp kernels

__global__ void __launch_bounds__(kBlockThreads)
    global_atomics_kernel(samples_view samples, bins_view bins) {
  for_each_sample(
      samples, [&](unsigned s) { atomicAdd(&bins[s], 1u); }, [] {});
}

// ---- (2) Privatized shared-memory histograms --------------------------------------------------

// Adds a block's totals to the bins: one global atomic per non-empty bin. Call after a barrier.
__device__ void publish_block(const unsigned* block_total, bins_view bins) {
  for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x)
    if (block_total[b] != 0) atomicAdd(&bins[b], block_total[b]);
}

__global__ void __launch_bounds__(kBlockThreads)
    per_block_kernel(samples_view samples, bins_view bins) {
  __shared__ unsigned block_bins[kBins];
  for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x) block_bins[b] = 0;
  __syncthreads();
  for_each_sample(
      samples, [&](unsigned s) { atomicAdd(&block_bins[s], 1u); }, [] {});
  __syncthreads();
  publish_block(block_bins, bins);
}

constexpr unsigned kWarpsPerBlock = kBlockThreads / kWarp;

// `gate`: histogram_auto launches this kernel and the per-lane one after a look at the data that
// writes its choice to *gate; the kernel not chosen returns at once. nullptr: always count.
__global__ void __launch_bounds__(kBlockThreads)
    per_warp_kernel(samples_view samples, bins_view bins, const unsigned* gate,
                    unsigned gate_value) {
  if (gate != nullptr && *gate != gate_value) return;    // the same for every thread of the grid
  __shared__ unsigned warp_bins[kWarpsPerBlock][kBins];  // bin b of every warp in bank b % 32
  for (unsigned i = threadIdx.x; i < kWarpsPerBlock * kBins; i += blockDim.x)
    warp_bins[i / kBins][i % kBins] = 0;
  __syncthreads();
  unsigned* mine = warp_bins[threadIdx.x / kWarp];
  for_each_sample(
      samples, [&](unsigned s) { atomicAdd(&mine[s], 1u); }, [] {});
  __syncthreads();
  for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x) {
    unsigned sum = 0;
    for (unsigned w = 0; w < kWarpsPerBlock; ++w) sum += warp_bins[w][b];
    if (sum != 0) atomicAdd(&bins[b], sum);
  }
}

// Per lane: every thread has 256 counters of 16 bits, two to a 32-bit word; word w of thread t
// lies at counters[w * kLaneThreads + t], so the 32 lanes of a warp always touch 32 different
// banks, whatever the data. A thread updates only its own words: no conflicts and no contention,
// on any input. The update is still an atomicAdd: one fire-and-forget shared-memory instruction.
// (A plain load, add and store makes each sample wait for the previous one's load, since the
// compiler cannot tell two samples' counters apart: one-byte counters updated that way, tried on
// the H200, ran at 1.7 TB/s on every input, against 2.2 for these.)
constexpr unsigned kLaneThreads = 128;
constexpr unsigned kLaneWords = kBins / 2;
static_assert(kLaneWords == kLaneThreads, "the flush adds up one word of counters per thread");
constexpr std::size_t kLaneSharedBytes =
    (std::size_t(kLaneWords) * kLaneThreads + kBins) * sizeof(unsigned);  // 64 KiB + 1 KiB
// A 16-bit counter holds 65535. Between two flushes a thread counts at most kUnroll * 16 samples
// per pass, plus one head and one tail sample after the loop: a flush every 1023 passes keeps
// every counter at most 65474, even when all samples are the same value.
constexpr unsigned kLaneFlushPasses = (65535u - 2u) / (kUnroll * kVectorBytes);
static_assert(kLaneFlushPasses * kUnroll * kVectorBytes + 2 <= 65535u, "16-bit counters overflow");

// Adds every thread's counters into block_total and zeroes them. Every thread of the block calls
// it. Thread t adds up word t (bins 2t and 2t + 1) of all threads, starting at its own column so
// that a warp's 32 reads fall in 32 banks.
__device__ void flush_lane_counters(unsigned* counters, unsigned* block_total) {
  __syncthreads();  // every thread has counted
  const unsigned t = threadIdx.x;
  unsigned low = 0, high = 0;  // at most 128 x 65535 each: no overflow
  for (unsigned i = 0; i < kLaneThreads; ++i) {
    unsigned& word = counters[t * kLaneThreads + (i + t) % kLaneThreads];
    low += word & 0xFFFFu;
    high += word >> 16;
    word = 0;
  }
  block_total[2 * t] += low;
  block_total[2 * t + 1] += high;
  __syncthreads();  // counters zeroed before counting resumes; block_total complete
}

// ---- (3) Cluster: merge through distributed shared memory -------------------------------------

constexpr unsigned kClusterBlocks = 8;  // the portable maximum

// Block r of the cluster adds bins [r * 256 / C, (r + 1) * 256 / C) of every block's totals, read
// from their shared memory (one remote read per bin per block, no remote atomics), and makes one
// global add per bin.
__device__ void publish_cluster(unsigned* block_total, bins_view bins) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block has its totals (and has started, so its shared memory is there)
  const unsigned blocks = cluster.num_blocks();
  const unsigned share = (kBins + blocks - 1) / blocks;
  const unsigned begin = cluster.block_rank() * share;
  const unsigned end = begin + share < kBins ? begin + share : kBins;
  for (unsigned b = begin + threadIdx.x; b < end; b += blockDim.x) {
    unsigned sum = 0;
    for (unsigned r = 0; r < blocks; ++r) sum += cluster.map_shared_rank(block_total, r)[b];
    if (sum != 0) atomicAdd(&bins[b], sum);
  }
  cluster.sync();  // no block exits, freeing its shared memory, while another still reads it
}

// Per-lane counting; InCluster: merge the cluster's histograms before the global adds; Prefetch:
// see for_each_sample.
template <bool InCluster, bool Prefetch = false>
__global__ void __launch_bounds__(kLaneThreads)
    per_lane_kernel(samples_view samples, bins_view bins, const unsigned* gate,
                    unsigned gate_value) {
  if (gate != nullptr && *gate != gate_value) return;  // the same for every thread of the grid
  extern __shared__ unsigned lane_shared[];            // kLaneSharedBytes
  unsigned* counters = lane_shared;
  unsigned* block_total = lane_shared + kLaneWords * kLaneThreads;
  const unsigned t = threadIdx.x;
  unsigned* mine = counters + t;  // this thread's word w: mine[w * kLaneThreads]
  for (unsigned w = 0; w < kLaneWords; ++w) mine[w * kLaneThreads] = 0;
  for (unsigned b = t; b < kBins; b += kLaneThreads) block_total[b] = 0;
  // (No barrier yet: until the first flush, which starts with one, a thread touches only its own
  // words.)
  unsigned passes = 0;
  for_each_sample<Prefetch>(
      samples,
      [&](unsigned s) { atomicAdd(&mine[(s >> 1) * kLaneThreads], 1u << ((s & 1u) * 16)); },
      [&] {
        if (++passes == kLaneFlushPasses) {  // the same pass for the whole block
          flush_lane_counters(counters, block_total);
          passes = 0;
        }
      });
  flush_lane_counters(counters, block_total);
  if constexpr (InCluster)
    publish_cluster(block_total, bins);
  else
    publish_block(block_total, bins);
}

// ---- (3b) Per lane, 32-bit: one copy of the histogram per lane of a warp ---------------------

// One block per SM of up to kLane32MaxWarps warps (7 on sm_90: 224 KiB of shared memory, the
// most a block may have is 227 KiB; lane32_warps() fits fewer on other GPUs). Each warp has 32
// copies of the 256 32-bit counters, interleaved: copy L of bin b is word b * 32 + L of the
// warp's 32 KiB, so lane L counts bin b at warp_base + b * 32 + L. Every lane of a warp lies in
// its own bank (L), whatever the data: the shared atomics never conflict and no two threads ever
// share a counter, on any input (a raw probe on an H200: 3977 GB/s on uniform bytes, 1.83x CUB,
// and 3974 with 90% of them one value). With so few warps per SM, the loads must be in flight
// while the SM counts: each thread loads a tile of kLane32Vectors uint4 (16 samples each) and
// issues the next tile's loads before it counts the current one (two register buffers). A 32-bit
// counter holds any count a bin holds (at most 2^32 - 1 samples in all), so nothing is flushed;
// at the end the block adds the 32 copies of each warp, reading them as uint4 with a start
// rotated by the bin (8 neighbouring bins of a quarter-warp read 8 different quads of their
// copies: 32 banks), and adds its 256 totals to global memory, one atomicAdd each. The copies are
// zeroed by their own lane while the first tile's loads travel: until the end, no thread reads
// or writes a word another thread writes.
constexpr unsigned kLane32Vectors = 8;  // uint4 per thread per tile: 128 samples
constexpr unsigned kLane32MaxWarps = 7;
constexpr unsigned kLane32WarpWords = kBins * kWarp;  // 32 KiB of counters per warp
constexpr std::size_t kLane32WarpBytes = kLane32WarpWords * sizeof(unsigned);

// The block's warps on this device: 7 where 224 KiB fit in a block (sm_90), fewer elsewhere.
inline unsigned lane32_warps(curt::device d) {
  const std::size_t fit = d.max_shared_memory_per_block_optin() / kLane32WarpBytes;
  return static_cast<unsigned>(std::clamp<std::size_t>(fit, 1, kLane32MaxWarps));
}

__device__ __forceinline__ void count_lane32_word(unsigned* mine, unsigned word) {
  atomicAdd(mine + ((word & 0xFFu) << 5), 1u);  // bin * kWarp: this lane's copy of the bin
  atomicAdd(mine + (((word >> 8) & 0xFFu) << 5), 1u);
  atomicAdd(mine + (((word >> 16) & 0xFFu) << 5), 1u);
  atomicAdd(mine + ((word >> 24) << 5), 1u);
}

__device__ __forceinline__ void count_lane32_vector(unsigned* mine, const uint4& v) {
  count_lane32_word(mine, v.x);
  count_lane32_word(mine, v.y);
  count_lane32_word(mine, v.z);
  count_lane32_word(mine, v.w);
}

// `gate`: as for per_warp_kernel (histogram_auto launches both after its look at the data).
__global__ void __launch_bounds__(kLane32MaxWarps * kWarp, 1)
    per_lane32_kernel(samples_view samples, bins_view bins, const unsigned* gate,
                      unsigned gate_value) {
  if (gate != nullptr && *gate != gate_value) return;  // the same for every thread of the grid
  extern __shared__ uint4 lane32_shared[];             // blockDim.x / 32 * 32 KiB
  const unsigned threads = blockDim.x;
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  unsigned* mine = reinterpret_cast<unsigned*>(lane32_shared) + warp * kLane32WarpWords + lane;

  // The samples as for_each_sample splits them: a head before the first 16-byte boundary, whole
  // uint4s, a tail after the last.
  const unsigned char* data = samples.data();
  const std::size_t n = samples.size();
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(data) % kVectorBytes;
  const std::size_t to_boundary = misaligned == 0 ? 0 : kVectorBytes - misaligned;
  const std::size_t head = n < to_boundary ? n : to_boundary;
  const uint4* vectors = reinterpret_cast<const uint4*>(data + head);
  const std::size_t vector_count = (n - head) / kVectorBytes;
  const unsigned char* tail = data + head + vector_count * kVectorBytes;
  const std::size_t tail_count = n - head - vector_count * kVectorBytes;

  // Whole tiles of threads * kLane32Vectors uint4s, tile t to block t % gridDim.x; a thread's
  // uint4 u of a tile is u * threads + threadIdx.x (each load instruction of a warp: 512
  // contiguous bytes).
  const std::size_t tile = std::size_t(threads) * kLane32Vectors;
  const std::size_t tiles = vector_count / tile;
  const auto load = [&](std::size_t t, uint4(&v)[kLane32Vectors]) {
    const uint4* from = vectors + t * tile + threadIdx.x;
#pragma unroll
    for (unsigned u = 0; u < kLane32Vectors; ++u) v[u] = __ldg(from + u * threads);
  };
  const auto count = [&](const uint4(&v)[kLane32Vectors]) {
#pragma unroll
    for (unsigned u = 0; u < kLane32Vectors; ++u) count_lane32_vector(mine, v[u]);
  };
  uint4 first[kLane32Vectors], second[kLane32Vectors];
  std::size_t t = blockIdx.x;
  if (t < tiles) load(t, first);
  for (unsigned b = 0; b < kBins; ++b) mine[b * kWarp] = 0;  // while the first tile travels
  while (t < tiles) {  // the same trips for every thread of the block
    std::size_t next = t + gridDim.x;
    if (next < tiles) load(next, second);  // in flight while `first` is counted
    count(first);
    t = next;
    if (t >= tiles) break;
    next = t + gridDim.x;
    if (next < tiles) load(next, first);
    count(second);
    t = next;
  }
  // The uint4s after the last whole tile (fewer than one tile): one per thread of the grid.
  const std::size_t grid_threads = std::size_t(gridDim.x) * threads;
  for (std::size_t i = tiles * tile + std::size_t(blockIdx.x) * threads + threadIdx.x;
       i < vector_count; i += grid_threads)
    count_lane32_vector(mine, __ldg(vectors + i));
  if (blockIdx.x == 0) {  // head and tail: fewer than 16 samples each, a block has 32 or more
    if (threadIdx.x < head) atomicAdd(mine + (unsigned(data[threadIdx.x]) << 5), 1u);
    if (threadIdx.x < tail_count) atomicAdd(mine + (unsigned(tail[threadIdx.x]) << 5), 1u);
  }

  __syncthreads();  // every copy complete
  const unsigned warps = threads / kWarp;
  for (unsigned b = threadIdx.x; b < kBins; b += threads) {
    unsigned sum = 0;  // at most n: no overflow
#pragma unroll
    for (unsigned q = 0; q < kWarp / 4; ++q) {
      const unsigned quad = (q + b) % (kWarp / 4);  // the rotated start
      for (unsigned w = 0; w < warps; ++w) {
        const uint4 v = lane32_shared[(w * kLane32WarpWords + b * kWarp) / 4 + quad];
        sum += v.x + v.y + v.z + v.w;
      }
    }
    if (sum != 0) atomicAdd(&bins[b], sum);
  }
}

// ---- (4) The automatic choice -----------------------------------------------------------------

// The look: 128 windows spread over the data, each the 32 samples, 16 bytes apart, that one
// shared atomic instruction of the per-warp kernel updates together. Lanes on the same counter are
// served together; distinct counters in one bank (bin % 32) take a pass each. So the mean over the
// windows of the most distinct bins in one bank is what that instruction costs on this data:
// measured 3.1-3.2 for uniform bytes, 1.2 when 90% are one value, 1.35 for the image-like input.
// Where it is low, the per-warp kernel's one atomic per sample ran at memory speed on the H200
// (3.8 TB/s, 4.4 with 90% of the samples one value); where it is high, the per-lane 32-bit
// kernel, which costs the same on any data (4.0 TB/s), is chosen.
// The look and the gated launches cost a few microseconds, and the per-lane kernel's 224 KiB of
// copies per block as much again (zeroed, then added up): on a small input that is most of the
// time (at 4,194,301 samples the look plus the 16-bit per-lane kernel took 0.0234 ms, the
// per-warp kernel alone about 0.009: 1.6x CUB's 0.0147), so histogram_auto looks only at
// kAutoLookFrom samples or more, and below counts with the per-warp kernel (the fastest there
// on every input: 1.6x CUB at 2^22).
// Where the two paths cross: per-warp on uniform bytes (2.4 TB/s) against the look, the gated
// launches and the per-lane kernel (4 TB/s): about 8 us more fixed cost against 0.17 ns less per
// sample, 2^25 samples or so (an estimate from the H200's figures above, not a measurement).
constexpr std::size_t kAutoLookFrom = std::size_t(1) << 25;
constexpr unsigned kProbeThreads = 1024;
constexpr unsigned kProbeWarps = kProbeThreads / kWarp;
constexpr unsigned kProbeWindows = 128;  // x 32 = 4096 samples looked at
constexpr unsigned kWindowsPerWarp = kProbeWindows / kProbeWarps;
constexpr unsigned kPerLaneFromBinsPerBank = 2;  // mean at or above: per-lane
enum strategy : unsigned { use_per_warp = 0, use_per_lane = 1 };

// choice[0] = the strategy, choice[1] = the sum over windows of the most distinct bins in one
// bank, choice[2] = the windows looked at. Also zeroes the bins, for the kernels that follow.
__global__ void __launch_bounds__(kProbeThreads)
    probe_kernel(samples_view samples, bins_view bins, unsigned* choice) {
  for (unsigned b = threadIdx.x; b < kBins; b += blockDim.x) bins[b] = 0;
  const std::size_t n = samples.size();
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  constexpr std::size_t span = kWarp * kVectorBytes;
  bool in[kWindowsPerWarp];
  unsigned bin[kWindowsPerWarp];
#pragma unroll
  for (unsigned k = 0; k < kWindowsPerWarp; ++k) {  // all loads first: one memory latency in all
    const unsigned g = warp * kWindowsPerWarp + k;
    const std::size_t start = n > span ? (n - span) / (kProbeWindows - 1) * g : 0;
    const std::size_t i = start + lane * kVectorBytes;  // < n when n > span
    in[k] = i < n;
    bin[k] = in[k] ? samples[i] : 0;
  }
  unsigned worst_sum = 0, windows = 0;  // meaningful in lane 0
#pragma unroll
  for (unsigned k = 0; k < kWindowsPerWarp; ++k) {
    const unsigned valid = __ballot_sync(~0u, in[k]);  // lanes 0.. (all when n > span)
    if (in[k]) {
      const unsigned same_bin = __match_any_sync(valid, bin[k]);
      const bool first =
          __ffs(same_bin) - 1 == static_cast<int>(lane);  // one lane per distinct bin
      const unsigned firsts = __ballot_sync(valid, first);
      unsigned in_bank = 0;  // in the first lane of each bin: the distinct bins in its bank
      if (first) in_bank = __popc(__match_any_sync(firsts, bin[k] % kWarp));
      const unsigned worst = __reduce_max_sync(valid, in_bank);
      if (lane == 0) {  // lane 0 is valid whenever any lane is
        worst_sum += worst;
        ++windows;
      }
    }
  }
  __shared__ unsigned warp_worst[kProbeWarps], warp_windows[kProbeWarps];
  if (lane == 0) {
    warp_worst[warp] = worst_sum;
    warp_windows[warp] = windows;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned total = 0, count = 0;
    for (unsigned w = 0; w < kProbeWarps; ++w) {
      total += warp_worst[w];
      count += warp_windows[w];
    }
    choice[0] = total >= kPerLaneFromBinsPerBank * count ? use_per_lane : use_per_warp;
    choice[1] = total;
    choice[2] = count;
  }
}

// ---- Host side: the launches ------------------------------------------------------------------

// What histogram_auto did last: counted with per-warp without a look (small input), or looked.
enum class auto_path { none, small, looked };

// Per device: the grids that fill it, found once. Kernel attributes (the per-lane kernels' dynamic
// shared memory: 65 KiB for the 16-bit counters, 224 KiB for the 32-bit copies) are set here too.

struct histogram_plan {
  explicit histogram_plan(curt::device d)
      : gpu(d),
        lane32_threads(lane32_warps(d) * kWarp),
        lane32_bytes(lane32_warps(d) * kLane32WarpBytes),
        choice(d, 3) {
    curt::set_max_dynamic_shared_memory(gpu, per_lane_kernel<false>, kLaneSharedBytes);
    curt::set_max_dynamic_shared_memory(gpu, per_lane_kernel<true>, kLaneSharedBytes);
    curt::set_max_dynamic_shared_memory(gpu, per_lane_kernel<false, true>, kLaneSharedBytes);
    curt::set_max_dynamic_shared_memory(gpu, per_lane32_kernel, lane32_bytes);
    global_blocks = curt::grid_to_fill_device(gpu, global_atomics_kernel, kBlockThreads);
    block_blocks = curt::grid_to_fill_device(gpu, per_block_kernel, kBlockThreads);
    warp_blocks = curt::grid_to_fill_device(gpu, per_warp_kernel, kBlockThreads);
    lane_blocks =
        curt::grid_to_fill_device(gpu, per_lane_kernel<false>, kLaneThreads, kLaneSharedBytes);
    lane32_blocks = curt::grid_to_fill_device(gpu, per_lane32_kernel,
                                              static_cast<int>(lane32_threads), lane32_bytes);
    const auto config = curt::launch_config(kClusterBlocks, kLaneThreads, kLaneSharedBytes)
                            .cluster_dims(kClusterBlocks);
    const int clusters = curt::max_active_clusters(gpu, per_lane_kernel<true>, config);
    cluster_blocks = static_cast<unsigned>(std::max(clusters, 1)) * kClusterBlocks;
  }
  curt::device gpu;
  unsigned lane32_threads;   // 224 on sm_90
  std::size_t lane32_bytes;  // 224 KiB on sm_90
  unsigned global_blocks = 0, block_blocks = 0, warp_blocks = 0, lane_blocks = 0,
           lane32_blocks = 0, cluster_blocks = 0;
  curt::device_buffer<unsigned> choice;  // histogram_auto's look: one plan per stream
  auto_path last_auto = auto_path::none;
};

// Blocks of `threads` for `samples`: enough for one pass of the loop, at most `fill` (the
// device-filling grid; the loop strides over the rest).
inline curt::launch_config config_for(std::size_t samples, unsigned threads, unsigned fill,
                                      std::size_t shared_bytes = 0) {
  const std::size_t wanted = curt::ceil_div(samples, std::size_t(threads) * kUnroll * kVectorBytes);
  const auto blocks = static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, fill));
  return curt::launch_config(blocks, threads, shared_bytes);
}

inline void require_bins(bins_view bins) {
  if (bins.size() != kBins) throw std::invalid_argument("histogram: the bins must be 256 counters");
}

inline void launch_per_warp(const histogram_plan& plan, curt::stream_ref stream,
                            samples_view samples, bins_view bins, const unsigned* gate) {
  curt::launch(stream, config_for(samples.size(), kBlockThreads, plan.warp_blocks), per_warp_kernel,
               samples, bins, gate, unsigned{use_per_warp});
}

inline void launch_per_lane(const histogram_plan& plan, curt::stream_ref stream,
                            samples_view samples, bins_view bins, const unsigned* gate,
                            unsigned max_blocks = 0) {
  const unsigned fill = max_blocks != 0 ? std::min(max_blocks, plan.lane_blocks) : plan.lane_blocks;
  curt::launch(stream, config_for(samples.size(), kLaneThreads, fill, kLaneSharedBytes),
               per_lane_kernel<false>, samples, bins, gate, unsigned{use_per_lane});
}

// The per-lane 32-bit kernel: one block per SM (plan.lane32_blocks), fewer when the samples make
// fewer tiles.
inline void launch_per_lane32(const histogram_plan& plan, curt::stream_ref stream,
                              samples_view samples, bins_view bins, const unsigned* gate) {
  const std::size_t tile_samples = std::size_t(plan.lane32_threads) * kLane32Vectors * kVectorBytes;
  const std::size_t wanted = curt::ceil_div(samples.size(), tile_samples);
  const auto blocks = static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, plan.lane32_blocks));
  curt::launch(stream, curt::launch_config(blocks, plan.lane32_threads, plan.lane32_bytes),
               per_lane32_kernel, samples, bins, gate, unsigned{use_per_lane});
}

// Each variant zeroes the bins first (its kernels add to them), as part of its work.
inline void histogram_global_atomics(const histogram_plan& plan, curt::stream_ref stream,
                                     samples_view samples, bins_view bins) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  curt::launch(stream, config_for(samples.size(), kBlockThreads, plan.global_blocks),
               global_atomics_kernel, samples, bins);
}

inline void histogram_per_block(const histogram_plan& plan, curt::stream_ref stream,
                                samples_view samples, bins_view bins) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  curt::launch(stream, config_for(samples.size(), kBlockThreads, plan.block_blocks),
               per_block_kernel, samples, bins);
}

inline void histogram_per_warp(const histogram_plan& plan, curt::stream_ref stream,
                               samples_view samples, bins_view bins) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  launch_per_warp(plan, stream, samples, bins, nullptr);
}

// max_blocks (0: fill the device) exists for the overflow check: one block, every thread
// counting more samples than a 16-bit counter holds.
inline void histogram_per_lane(const histogram_plan& plan, curt::stream_ref stream,
                               samples_view samples, bins_view bins, unsigned max_blocks = 0) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  launch_per_lane(plan, stream, samples, bins, nullptr, max_blocks);
}

// The per-lane 16-bit kernel with the next pass's loads in flight while it counts (measured in
// kernel_bench only).
inline void histogram_per_lane_prefetch(const histogram_plan& plan, curt::stream_ref stream,
                                        samples_view samples, bins_view bins) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  curt::launch(stream, config_for(samples.size(), kLaneThreads, plan.lane_blocks, kLaneSharedBytes),
               per_lane_kernel<false, true>, samples, bins, nullptr, unsigned{use_per_lane});
}

inline void histogram_cluster(const histogram_plan& plan, curt::stream_ref stream,
                              samples_view samples, bins_view bins) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  // A whole number of clusters (plan.cluster_blocks is one): the grid rounded up to one.
  curt::launch_config config =
      config_for(samples.size(), kLaneThreads, plan.cluster_blocks, kLaneSharedBytes);
  config.grid(curt::ceil_div(config.grid_dims().x, kClusterBlocks) * kClusterBlocks)
      .cluster_dims(kClusterBlocks);
  curt::launch(stream, config, per_lane_kernel<true>, samples, bins, nullptr,
               unsigned{use_per_lane});
}

inline void histogram_per_lane32(const histogram_plan& plan, curt::stream_ref stream,
                                 samples_view samples, bins_view bins) {
  require_bins(bins);
  curt::memset(bins, 0, stream);
  launch_per_lane32(plan, stream, samples, bins, nullptr);
}

// histogram_auto's path for large inputs, at any size (the example checks it on small ones
// too): a look at the data, then the kernel that suits it: three launches, all stream-ordered:
// the look (which also zeroes the bins) and both kernels, of which the one not chosen returns at
// once. No copy to the host, no synchronization. plan.choice holds what the look found.
inline void histogram_auto_look(histogram_plan& plan, curt::stream_ref stream, samples_view samples,
                                bins_view bins) {
  require_bins(bins);
  plan.last_auto = auto_path::looked;
  curt::launch(stream, curt::launch_config(1, kProbeThreads), probe_kernel, samples, bins,
               plan.choice.data());
  launch_per_warp(plan, stream, samples, bins, plan.choice.data());
  launch_per_lane32(plan, stream, samples, bins, plan.choice.data());
}

// The one entry point, for any input: below kAutoLookFrom samples, the per-warp kernel (after a
// memset of the bins: two launches, as CUB's); from there, histogram_auto_look. plan.last_auto
// says which path ran.
inline void histogram_auto(histogram_plan& plan, curt::stream_ref stream, samples_view samples,
                           bins_view bins) {
  require_bins(bins);
  if (samples.size() >= kAutoLookFrom) return histogram_auto_look(plan, stream, samples, bins);
  plan.last_auto = auto_path::small;
  curt::memset(bins, 0, stream);
  launch_per_warp(plan, stream, samples, bins, nullptr);
}

// What histogram_auto's last run counted with, as text: "per_warp" (small input), or the look's
// pick and its measure. Reads plan.choice back: synchronizes the stream.
inline std::string auto_pick(histogram_plan& plan, curt::stream_ref stream) {
  if (plan.last_auto == auto_path::none) return "not run";
  if (plan.last_auto == auto_path::small) return "per_warp (under 2^25 samples, no look)";
  std::array<unsigned, 3> c{};
  curt::copy(c, plan.choice, stream);
  stream.synchronize();
  char text[96];
  std::snprintf(text, sizeof text, "%s (look: %.2f bins per bank)",
                c[0] == use_per_lane ? "per_lane32" : "per_warp",
                c[2] != 0 ? static_cast<double>(c[1]) / c[2] : 0.0);
  return text;
}

// CUB's histogram of the same samples (it zeroes the bins itself), with its scratch memory kept
// between calls. 32-bit sample counts where they fit, as a typical caller passes them.
class cub_histogram {
 public:
  explicit cub_histogram(curt::device gpu) : gpu_(gpu), scratch_(gpu, 1) {}
  void operator()(curt::stream_ref stream, samples_view samples, bins_view bins) {
    require_bins(bins);
    if (samples.size() <= static_cast<std::size_t>(INT_MAX))
      run(stream, samples, bins, static_cast<int>(samples.size()));
    else
      run(stream, samples, bins, static_cast<long long>(samples.size()));
  }

 private:
  template <class Count>
  void run(curt::stream_ref stream, samples_view samples, bins_view bins, Count count) {
    std::size_t bytes = 0;  // a null scratch pointer asks for the size and does nothing else
    CURT_CHECK(cub::DeviceHistogram::HistogramEven(nullptr, bytes, samples.data(), bins.data(),
                                                   int{kBins + 1}, 0, int{kBins}, count,
                                                   stream.get()));
    if (bytes > scratch_.size())  // (the old scratch's cudaFree waits for the device)
      scratch_ = curt::device_buffer<unsigned char>(gpu_, bytes);
    CURT_CHECK(cub::DeviceHistogram::HistogramEven(scratch_.data(), bytes, samples.data(),
                                                   bins.data(), int{kBins + 1}, 0, int{kBins},
                                                   count, stream.get()));
  }
  curt::device gpu_;
  curt::device_buffer<unsigned char> scratch_;
};

// ---- Host side: inputs, reference, checks -----------------------------------------------------

enum class input_kind { uniform, skewed, image };
inline const char* name_of(input_kind kind) {
  return kind == input_kind::uniform  ? "uniform"
         : kind == input_kind::skewed ? "skewed"
                                      : "image-like";
}

// Fresh random samples of each kind, several from each 64-bit draw (2^30 samples take seconds).
inline void generate(input_kind kind, unsigned char* out, std::size_t n) {
  std::mt19937_64& rng = curt_example::rng();
  const unsigned char dominant = static_cast<unsigned char>(rng());
  int level = static_cast<int>(rng() % kBins);
  std::uint64_t bits = 0;
  for (std::size_t i = 0; i < n; ++i) {
    switch (kind) {
      case input_kind::uniform:  // 8 samples per draw
        if (i % 8 == 0) bits = rng();
        out[i] = static_cast<unsigned char>(bits >> (8 * (i % 8)));
        break;
      case input_kind::skewed: {  // 4 per draw: 230 of 256 (89.8%) the dominant value
        if (i % 4 == 0) bits = rng();
        const unsigned piece = static_cast<unsigned>(bits >> (16 * (i % 4))) & 0xFFFFu;
        out[i] = (piece >> 8) < 230 ? dominant : static_cast<unsigned char>(piece);
        break;
      }
      case input_kind::image: {  // a random walk, steps -2..2 (binomial, no drift), clamped
        if (i % 16 == 0) bits = rng();
        level += __builtin_popcountll((bits >> (4 * (i % 16))) & 0xFu) - 2;
        level = std::clamp(level, 0, 255);
        out[i] = static_cast<unsigned char>(level);
        break;
      }
    }
  }
}

inline std::array<unsigned, kBins> cpu_histogram(const unsigned char* data, std::size_t n) {
  std::array<unsigned, kBins> counts{};
  for (std::size_t i = 0; i < n; ++i) ++counts[data[i]];
  return counts;
}

}  // namespace histogram_example
