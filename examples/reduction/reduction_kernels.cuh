// examples/reduction/reduction_kernels.cuh: the reduction example's operations (sum, min, max),
// its kernels (two-pass, last-block, grid.sync), the reducer that launches them or
// cub::DeviceReduce, the CPU reference with its comparison, the output poison and the random
// inputs, shared by examples/reduction/main.cu and benchmarks/kernel_bench.cu. See
// main.cu for the design and the checks.
#pragma once

#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/device/device_reduce.cuh>
#include <cuda/std/limits>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace reduction_example {

namespace cg = cooperative_groups;

constexpr unsigned kBlockThreads = 256;
constexpr unsigned kUnroll = 4;  // 16-byte loads in flight per thread in the main loop

// ---------------------------------------------------------------------------------------------
// The operations. `acc` is the type results are combined and returned in; `device_op` is a
// cooperative_groups function object, so that cg::reduce can use the warp's redux.sync
// instruction where one exists (int sum, min, max on sm_80 and later).

enum class op_kind { sum, min, max };

template <class T>
struct sum_of {
  using acc = std::conditional_t<std::is_integral_v<T>, long long, T>;
  using device_op = cg::plus<acc>;
  static constexpr op_kind kind = op_kind::sum;
  static constexpr const char* name = "sum";
  __host__ __device__ static constexpr acc identity() { return acc(0); }
};

template <class T>
struct min_of {
  using acc = T;
  using device_op = cg::less<T>;  // (b < a) ? b : a
  static constexpr op_kind kind = op_kind::min;
  static constexpr const char* name = "min";
  __host__ __device__ static constexpr acc identity() {
    using limits = cuda::std::numeric_limits<T>;
    return limits::has_infinity ? limits::infinity() : limits::max();
  }
};

template <class T>
struct max_of {
  using acc = T;
  using device_op = cg::greater<T>;  // (a < b) ? b : a
  static constexpr op_kind kind = op_kind::max;
  static constexpr const char* name = "max";
  __host__ __device__ static constexpr acc identity() {
    using limits = cuda::std::numeric_limits<T>;
    return limits::has_infinity ? -limits::infinity() : limits::lowest();
  }
};

template <class T>
struct vector_of;
template <>
struct vector_of<float> {
  using type = float4;
};
template <>
struct vector_of<int> {
  using type = int4;
};

template <class T>
constexpr const char* type_name();
template <>
constexpr const char* type_name<float>() {
  return "float";
}
template <>
constexpr const char* type_name<int>() {
  return "int";
}

// ---------------------------------------------------------------------------------------------
// Device code

// The four elements of a vector combined, in a small tree.
template <class Op, class Vector>
__device__ typename Op::acc combine_vector(const Vector& v) {
  using acc = typename Op::acc;
  const typename Op::device_op op{};
  return op(op(acc(v.x), acc(v.y)), op(acc(v.z), acc(v.w)));
}

// This thread's share of x[0, n): the grid's threads take the 16-byte vectors in turn
// (grid-stride), kUnroll at a time so that kUnroll loads are in flight before the first is used,
// and the fewer than kUnroll left at the end in one more round, so that no load waits for another.
// The elements before x's first 16-byte boundary (head) and after the last whole vector (tail),
// fewer than 4 each, go to threads 0, 1, 2.
template <class T, class Op>
__device__ typename Op::acc thread_reduce(const T* __restrict__ x, std::size_t n) {
  using acc = typename Op::acc;
  using vector = typename vector_of<T>::type;
  constexpr std::size_t width = sizeof(vector) / sizeof(T);
  static_assert(width == 4, "combine_vector takes four elements");
  const typename Op::device_op op{};
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;  // >= 256

  // cudaMalloc's pointers are aligned (no head); a pointer into the middle of a buffer may not be.
  const std::size_t misalignment = reinterpret_cast<std::uintptr_t>(x) % sizeof(vector);
  std::size_t head = misalignment == 0 ? 0 : (sizeof(vector) - misalignment) / sizeof(T);
  if (head > n) head = n;
  acc value = Op::identity();
  if (thread < head) value = op(value, acc(x[thread]));

  const vector* body = reinterpret_cast<const vector*>(x + head);  // 16-byte aligned
  const std::size_t vectors = (n - head) / width;
  std::size_t i = thread;
  for (; i + (kUnroll - 1) * threads < vectors; i += kUnroll * threads) {
    vector v[kUnroll];
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) v[u] = __ldg(body + i + u * threads);
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) value = op(value, combine_vector<Op>(v[u]));
  }
  // The last round: fewer than kUnroll vectors left for this thread, also loaded together.
  vector rest[kUnroll - 1];
#pragma unroll
  for (unsigned u = 0; u < kUnroll - 1; ++u)
    if (i + u * threads < vectors) rest[u] = __ldg(body + i + u * threads);
#pragma unroll
  for (unsigned u = 0; u < kUnroll - 1; ++u)
    if (i + u * threads < vectors) value = op(value, combine_vector<Op>(rest[u]));

  const std::size_t tail = head + vectors * width + thread;  // < n for at most 3 threads
  if (tail < n) value = op(value, acc(x[tail]));
  return value;
}

// The block's values combined; the result is in thread 0. Every thread of the block must call it
// (it has barriers). Step 1: each warp with cg::reduce (shuffles, or one redux.sync). Step 2: the
// first warp combines the warps' results, here written out with __shfl_down_sync: each step takes
// in the value `offset` lanes up, so after 16, 8, 4, 2, 1 lane 0 has combined all 32. (Lanes whose
// partner is past lane 31 get their own value back; only lane 0's result is used.)
template <class Op>
__device__ typename Op::acc block_reduce(typename Op::acc value) {
  using acc = typename Op::acc;
  const typename Op::device_op op{};
  __shared__ acc warp_results[32];
  const cg::thread_block block = cg::this_thread_block();
  const cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);

  block.sync();  // a previous call's readers of warp_results are done
  const acc warp_value = cg::reduce(warp, value, op);
  if (warp.thread_rank() == 0) warp_results[warp.meta_group_rank()] = warp_value;
  block.sync();

  acc result = Op::identity();
  if (warp.meta_group_rank() == 0) {
    if (warp.thread_rank() < warp.meta_group_size()) result = warp_results[warp.thread_rank()];
    for (unsigned offset = 16; offset > 0; offset /= 2)
      result = op(result, __shfl_down_sync(0xffffffffu, result, offset));
  }
  return result;
}

// partials[0, count) combined by one block; the result is in thread 0. __ldcg reads from L2,
// where the other blocks' stores went, never from this multiprocessor's L1.
template <class Op>
__device__ typename Op::acc combine_partials(const typename Op::acc* partials, unsigned count) {
  const typename Op::device_op op{};
  typename Op::acc value = Op::identity();
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x)
    value = op(value, __ldcg(partials + i));
  return block_reduce<Op>(value);
}

// Two-pass, first kernel: partials[block] = this block's share.
template <class T, class Op>
__global__ void __launch_bounds__(kBlockThreads)
    two_pass_blocks(const T* x, std::size_t n, typename Op::acc* partials) {
  const typename Op::acc value = block_reduce<Op>(thread_reduce<T, Op>(x, n));
  if (threadIdx.x == 0) partials[blockIdx.x] = value;
}

// Two-pass, second kernel (one block): *result = all partials combined.
template <class Op>
__global__ void __launch_bounds__(kBlockThreads)
    two_pass_final(const typename Op::acc* partials, unsigned count, typename Op::acc* result) {
  const typename Op::acc value = combine_partials<Op>(partials, count);
  if (threadIdx.x == 0) *result = value;
}

// Single pass, last block: each block publishes its partial, then takes a ticket; the block with
// the last ticket knows every partial is written and combines them. `ticket` must be 0 at the
// launch; the kernel leaves it 0. One launch at a time per (partials, ticket) pair.
template <class T, class Op>
__global__ void __launch_bounds__(kBlockThreads)
    last_block(const T* x, std::size_t n, typename Op::acc* partials, unsigned* ticket,
               typename Op::acc* result) {
  const typename Op::acc value = block_reduce<Op>(thread_reduce<T, Op>(x, n));
  __shared__ bool is_last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = value;
    __threadfence();  // the partial is visible to the whole device before the ticket is taken
    // atomicInc returns the old count and stores old + 1, or 0 once old reaches gridDim.x - 1:
    // the last block takes ticket gridDim.x - 1 and leaves 0 for the next launch.
    is_last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
    if (is_last) __threadfence();  // pairs with the writers' fences: their partials are seen
  }
  __syncthreads();
  if (is_last) {  // the same in the whole block, so the barriers inside are safe
    const typename Op::acc total = combine_partials<Op>(partials, gridDim.x);
    if (threadIdx.x == 0) *result = total;
  }
}

// Single pass, cooperative launch: the grid waits for every partial at grid.sync().
template <class T, class Op>
__global__ void __launch_bounds__(kBlockThreads)
    grid_sync(const T* x, std::size_t n, typename Op::acc* partials, typename Op::acc* result) {
  const cg::grid_group grid = cg::this_grid();
  const typename Op::acc value = block_reduce<Op>(thread_reduce<T, Op>(x, n));
  if (threadIdx.x == 0) partials[blockIdx.x] = value;
  grid.sync();  // every partial is written and visible
  if (blockIdx.x == 0) {
    const typename Op::acc total = combine_partials<Op>(partials, gridDim.x);
    if (threadIdx.x == 0) *result = total;
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

enum class variant { two_pass, last_block, grid_sync, cub };
constexpr variant kVariants[] = {variant::two_pass, variant::last_block, variant::grid_sync,
                                 variant::cub};

inline const char* variant_name(variant v) {
  switch (v) {
    case variant::two_pass:
      return "two-pass";
    case variant::last_block:
      return "last-block";
    case variant::grid_sync:
      return "grid.sync";
    case variant::cub:
      return "cub::DeviceReduce";
  }
  return "?";
}

template <class T, class Op>
cudaError_t cub_reduce(void* temp, std::size_t& temp_bytes, const T* x, typename Op::acc* result,
                       int n, cudaStream_t stream) {
  if constexpr (Op::kind == op_kind::sum)
    return cub::DeviceReduce::Sum(temp, temp_bytes, x, result, n, stream);
  else if constexpr (Op::kind == op_kind::min)
    return cub::DeviceReduce::Min(temp, temp_bytes, x, result, n, stream);
  else
    return cub::DeviceReduce::Max(temp, temp_bytes, x, result, n, stream);
}

// Blocks for n elements: one per kBlockThreads * kUnroll vectors (so that a small input gets a
// small grid, and a small combine at the end), at least one (length 0 still writes the identity),
// at most what fills the device once.
inline unsigned blocks_for(std::size_t n, unsigned fill) {
  const std::size_t per_block = std::size_t(kBlockThreads) * kUnroll * 4;
  return static_cast<unsigned>(std::clamp<std::size_t>(curt::ceil_div(n, per_block), 1, fill));
}

// What one (type, operation) needs on the device: grid sizes per kernel, the partials, the
// ticket counter and CUB's temporary storage; run() puts one reduction on a stream.
template <class T, class Op>
class reducer {
 public:
  using acc = typename Op::acc;

  reducer(curt::device gpu, curt::stream_ref stream, std::size_t max_n)
      : two_pass_fill_(curt::grid_to_fill_device(gpu, two_pass_blocks<T, Op>, kBlockThreads)),
        last_block_fill_(curt::grid_to_fill_device(gpu, last_block<T, Op>, kBlockThreads)),
        grid_sync_fill_(curt::grid_to_fill_device(gpu, grid_sync<T, Op>, kBlockThreads)),
        partials_(gpu, std::max({two_pass_fill_, last_block_fill_, grid_sync_fill_})),
        ticket_(gpu, 1),
        cub_temp_(gpu, cub_temp_bytes(max_n)) {
    curt::memset(ticket_, 0, stream);  // from here on, each launch leaves it 0
  }

  unsigned fill(variant v) const {
    return v == variant::two_pass     ? two_pass_fill_
           : v == variant::last_block ? last_block_fill_
                                      : grid_sync_fill_;
  }
  // The fewest threads any of our kernels runs with when its grid fills the device.
  std::size_t full_grid_threads() const {
    return std::size_t(std::min({two_pass_fill_, last_block_fill_, grid_sync_fill_})) *
           kBlockThreads;
  }

  void run(variant v, curt::stream_ref stream, const T* x, std::size_t n, acc* result) {
    const curt::launch_config config(dim3(blocks_for(n, fill(v))), dim3(kBlockThreads));
    const unsigned blocks = config.grid_dims().x;
    switch (v) {
      case variant::two_pass:
        curt::launch(stream, config, two_pass_blocks<T, Op>, x, n, partials_.data());
        curt::launch(stream, curt::launch_config(dim3(1), dim3(kBlockThreads)), two_pass_final<Op>,
                     partials_.data(), blocks, result);
        return;
      case variant::last_block:
        curt::launch(stream, config, last_block<T, Op>, x, n, partials_.data(), ticket_.data(),
                     result);
        return;
      case variant::grid_sync:  // at most one block per slot: all resident, as grid.sync() needs
        curt::launch(stream, curt::launch_config(config).cooperative(), grid_sync<T, Op>, x, n,
                     partials_.data(), result);
        return;
      case variant::cub: {
        std::size_t bytes = cub_temp_.size();
        CURT_CHECK((cub_reduce<T, Op>(cub_temp_.data(), bytes, x, result, static_cast<int>(n),
                                      stream.get())));
        return;
      }
    }
  }

 private:
  // CUB's storage for the longest input (a grid's partials: it does not grow beyond that). The
  // int element count gives CUB its 32-bit-offset kernels, its fastest.
  static std::size_t cub_temp_bytes(std::size_t max_n) {
    std::size_t bytes = 0;
    CURT_CHECK((cub_reduce<T, Op>(nullptr, bytes, nullptr, nullptr, static_cast<int>(max_n), {})));
    return bytes;
  }

  unsigned two_pass_fill_, last_block_fill_, grid_sync_fill_;
  curt::device_buffer<acc> partials_;
  curt::device_buffer<unsigned> ticket_;
  curt::device_buffer<unsigned char> cub_temp_;
};

// What a result must be.
template <class A>
struct expected {
  A exact{};           // an integer result, a float min or max
  double sum = 0.0;    // a float sum: the sum in double,
  double bound = 0.0;  // and how far the GPU's float sum may be from it
};

// The CPU's answer for x[0, n); the identity for n = 0.
//
// Float sums: the GPU adds in another order than the CPU, so the two differ by rounding. Any
// order of additions is a binary tree; when no element passes through more than h additions, the
// float result is within h * u * sum|x| of the exact sum to first order (u = 2^-24; Higham,
// "Accuracy and Stability of Numerical Algorithms", section 4.2). Our kernels: each thread adds
// at most ceil(n / 4T) + 4 values in sequence (T threads in a full grid, vectors of four), then
// about 20 levels of shuffles and partials. CUB's chains are shorter still (its grids are 5 times
// a full one). So h = ceil(n / T) + 64 bounds every variant, and the bound used,
// h * FLT_EPSILON * sum|x| = 2 h u sum|x|, leaves a factor 2 for second-order terms and for the
// double sum's own error (n * 2^-53 * sum|x|). The data has a positive mean (see random_input),
// so |sum| is about sum|x| / 1.7 and the bound is a small part of the sum (1.5e-5 of it at 3M
// elements, 2e-4 at 2^28): a lost block, or a lost vector in a small input, shows. A lost single
// element may not; the int sums, exact, catch that in the same code.
inline double float_sum_bound(std::size_t n, std::size_t full_grid_threads, double sum_abs) {
  const double h = static_cast<double>(curt::ceil_div(n, full_grid_threads) + 64);
  return h * FLT_EPSILON * sum_abs;
}

template <class T, class Op>
expected<typename Op::acc> reference(const T* x, std::size_t n, std::size_t full_grid_threads) {
  expected<typename Op::acc> e;
  e.exact = Op::identity();
  if constexpr (Op::kind == op_kind::sum && std::is_floating_point_v<T>) {
    double sum_abs = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      e.sum += x[i];
      sum_abs += std::fabs(x[i]);
    }
    e.bound = float_sum_bound(n, full_grid_threads, sum_abs);
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (Op::kind == op_kind::sum) e.exact += x[i];  // long long: exact
      if constexpr (Op::kind == op_kind::min) e.exact = std::min(e.exact, x[i]);
      if constexpr (Op::kind == op_kind::max) e.exact = std::max(e.exact, x[i]);
    }
  }
  return e;
}

template <class A>
std::string text(A value) {
  char buffer[64];
  if constexpr (std::is_floating_point_v<A>)
    std::snprintf(buffer, sizeof buffer, "%.9g", static_cast<double>(value));
  else
    std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(value));
  return buffer;
}

// Whether `got` is right; `detail` says how close, or what was wrong. NaN (the poison) fails.
template <class T, class Op>
bool compare(typename Op::acc got, const expected<typename Op::acc>& e, std::string& detail) {
  if constexpr (Op::kind == op_kind::sum && std::is_floating_point_v<T>) {
    const double error = std::fabs(static_cast<double>(got) - e.sum);
    char buffer[96];
    std::snprintf(buffer, sizeof buffer, "error %.1e, bound %.1e (sum %.6g)", error, e.bound,
                  e.sum);
    detail = buffer;
    if (!(error <= e.bound)) detail = "got " + text(got) + ": " + detail;
    return error <= e.bound;
  } else {
    const bool equal = got == e.exact;
    detail = equal ? "exact" : "got " + text(got) + ", expected " + text(e.exact);
    return equal;
  }
}

// A value no variant returns here: NaN for floats; 0x5A bytes for integers (0x5A5A...5A is more
// than any sum of this data, and the odds that 0x5A5A5A5A is an int min or max are 2^-32).
template <class A>
void poison(curt::device_buffer<A>& out, curt::stream_ref stream) {
  if constexpr (std::is_floating_point_v<A>)
    curt::fill(out, std::numeric_limits<A>::quiet_NaN(), stream);
  else
    curt::memset(out, 0x5A, stream);
}
template <class A>
void poison(curt::pinned_buffer<A>& out) {
  if constexpr (std::is_floating_point_v<A>)
    out[0] = std::numeric_limits<A>::quiet_NaN();
  else
    std::memset(out.data(), 0x5A, sizeof(A));
}

// Random data that makes a wrong answer show. Floats: mixed signs (a third negative), magnitudes
// spread over 17 powers of two (up to 2^9), and a positive mean so that the sum does not cancel
// out. Ints: the whole int range, so that nearly every value, the min and the max are unique.
template <class T>
std::vector<T> random_input(std::size_t count) {
  if constexpr (std::is_floating_point_v<T>) {
    std::vector<T> values = curt_example::random_values<T>(count, T(-1), T(2));
    std::uniform_int_distribution<int> exponent(-8, 8);
    for (T& v : values) v = std::ldexp(v, exponent(curt_example::rng()));  // exact
    return values;
  } else {
    return curt_example::random_values<T>(count, std::numeric_limits<T>::min(),
                                          std::numeric_limits<T>::max());
  }
}

}  // namespace reduction_example
