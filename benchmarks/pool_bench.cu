// pool_bench: what curt's stream-ordered allocation costs over the raw runtime calls, host time
// per allocate + free pair of 1 MiB, measured side by side in one run:
//   paired/pool      cudaMallocFromPoolAsync + cudaFreeAsync from a pool (raw)
//                    vs pool.allocate<char>(1 MiB, stream) + ~async_buffer (curt)
//   paired/current   cudaMallocAsync + cudaFreeAsync (the device's current pool)
//                    vs curt::allocate_async<char>(1 MiB, stream) + ~async_buffer
//   paired/owner     the same on a curt::stream owner: its buffers share the owner's end block
//                    (one atomic increment and decrement each), so they may outlive the owner
// and, in both, cudaMalloc + cudaFree of the same size as context (its cost swings from about 2 to
// 80 µs with the process's state; pool allocation is about 1 µs on an H200).
//
// Each iteration times one batch of kPairs pairs of each variant, in a rotating order (so drift
// in the machine hits all alike), synchronizing the stream between batches untimed. Reported per
// pair: raw_ns, curt_ns, malloc_ns (medians over the batches), curt_over_raw (median of the
// per-iteration ratios; the goal is within 1.05) and malloc_over_raw. Run, for instance:
//   pool_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// Exit code 77 when there is no device.

#include "harness.hpp"

#include <curt/device.hpp>
#include <curt/memory_pool.hpp>
#include <curt/stream.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace bench {

constexpr std::size_t kBytes = std::size_t(1) << 20;
constexpr int kPairs = 32;  // allocate + free pairs per timed batch

struct context {
  curt::device device;
  curt::stream stream;
  curt::memory_pool pool;
  explicit context(curt::device d)
      : device(d), stream(d), pool(curt::memory_pool_properties::device(d)) {
    // Freed blocks stay in the pool across synchronizations, as in a program that reuses them.
    pool.set_release_threshold(curt::memory_pool_ref::never_release);
    curt::default_memory_pool(d).set_release_threshold(curt::memory_pool_ref::never_release);
  }
};

context* g = nullptr;

using curt_bench::median_of;

// Host ns per pair of one batch; the stream is synchronized afterwards, untimed.
template <class Batch>
double timed(Batch&& batch) {
  const auto start = std::chrono::steady_clock::now();
  batch();
  const auto stop = std::chrono::steady_clock::now();
  g->stream.synchronize();
  return std::chrono::duration<double, std::nano>(stop - start).count() / kPairs;
}

template <class Raw, class Curt>
void paired(benchmark::State& state, Raw raw_batch, Curt curt_batch) {
  auto malloc_batch = [] {
    for (int i = 0; i < kPairs; ++i) {
      void* p = nullptr;
      if (cudaMalloc(&p, kBytes) == cudaSuccess) (void)cudaFree(p);
    }
  };
  std::vector<double> raw_ns, curt_ns, malloc_ns, ratio, malloc_ratio;
  int turn = 0;
  for (auto _ : state) {
    (void)_;
    double r = 0.0, c = 0.0, m = 0.0;
    switch (turn) {  // rotate the order
      case 0: r = timed(raw_batch); c = timed(curt_batch); m = timed(malloc_batch); break;
      case 1: c = timed(curt_batch); m = timed(malloc_batch); r = timed(raw_batch); break;
      default: m = timed(malloc_batch); r = timed(raw_batch); c = timed(curt_batch); break;
    }
    turn = (turn + 1) % 3;
    if (cudaGetLastError() != cudaSuccess) {
      state.SkipWithError("a CUDA call failed");
      return;
    }
    raw_ns.push_back(r);
    curt_ns.push_back(c);
    malloc_ns.push_back(m);
    ratio.push_back(c / r);
    malloc_ratio.push_back(m / r);
  }
  state.SetItemsProcessed(state.iterations() * 3 * kPairs);
  state.counters["raw_ns"] = median_of(raw_ns);
  state.counters["curt_ns"] = median_of(curt_ns);
  state.counters["malloc_ns"] = median_of(malloc_ns);
  state.counters["curt_over_raw"] = median_of(ratio);
  state.counters["malloc_over_raw"] = median_of(malloc_ratio);
}

void paired_pool(benchmark::State& state) {
  const cudaStream_t stream = g->stream;
  const cudaMemPool_t pool = g->pool.get();
  const curt::memory_pool_ref curt_pool = g->pool;
  const curt::stream_ref curt_stream = g->stream;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          void* p = nullptr;
          if (cudaMallocFromPoolAsync(&p, kBytes, pool, stream) == cudaSuccess)
            (void)cudaFreeAsync(p, stream);
        }
      },
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          curt::async_buffer<char> b = curt_pool.allocate<char>(kBytes, curt_stream);
          benchmark::DoNotOptimize(b.data());
        }
      });
}

// curt::allocate_async on `curt_stream` (a stream_ref or the curt::stream owner itself).
template <class CurtStream>
void paired_current(benchmark::State& state, const CurtStream& curt_stream) {
  const cudaStream_t stream = g->stream;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          void* p = nullptr;
          if (cudaMallocAsync(&p, kBytes, stream) == cudaSuccess) (void)cudaFreeAsync(p, stream);
        }
      },
      [&] {
        for (int i = 0; i < kPairs; ++i) {
          curt::async_buffer<char> b = curt::allocate_async<char>(kBytes, curt_stream);
          benchmark::DoNotOptimize(b.data());
        }
      });
}

}  // namespace bench

int main(int argc, char** argv) {
  std::unique_ptr<bench::context> context;
  return curt_bench::run(argc, argv, "pool_bench", [&](curt::device device) {
    context = std::make_unique<bench::context>(device);
    bench::g = context.get();
    {  // warm-up: the pools' first blocks, the runtime's first allocation
      curt::async_buffer<char> a = context->pool.allocate<char>(bench::kBytes, context->stream);
      curt::async_buffer<char> b = curt::allocate_async<char>(bench::kBytes, context->stream);
      void* p = nullptr;
      CURT_CHECK(cudaMalloc(&p, bench::kBytes));
      CURT_CHECK(cudaFree(p));
    }
    context->stream.synchronize();
    curt_bench::add("paired/pool", bench::paired_pool);
    curt_bench::add("paired/current", [](benchmark::State& state) {
      bench::paired_current(state, curt::stream_ref(bench::g->stream));
    });
    curt_bench::add("paired/owner", [](benchmark::State& state) {
      bench::paired_current(state, bench::g->stream);
    });
    benchmark::AddCustomContext("curt_bytes", std::to_string(bench::kBytes));
    benchmark::AddCustomContext("curt_pairs_per_batch", std::to_string(bench::kPairs));
  });
}
