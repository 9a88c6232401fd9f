// histogram: the 256-bin histogram of 8-bit samples (unsigned char in, unsigned int counts out),
// counted six ways plus an automatic choice, each checked exactly against a CPU histogram and
// timed next to CUB's:
//   global atomics   one atomicAdd on global memory per sample (the baseline)
//   per-block        one shared-memory histogram per block, shared atomics, then one global add
//                    per bin per block
//   per-warp         one shared-memory histogram per warp: warps of a block never share a counter
//   per-lane 16-bit  16-bit counters of each thread's own (two to a word, laid out so that a warp
//                    never has a bank conflict, whatever the data), added up before they can
//                    overflow; no two threads ever update the same counter
//   per-lane 32-bit  one block of 7 warps per SM, 32 copies of the 256 32-bit counters per warp
//                    (224 KiB), lane L counting into copy L (its own bank: never a conflict, on
//                    any data); 8 uint4 loads per thread per tile, the next tile's loads in
//                    flight while the current one is counted; the copies added up at the end
//   cluster          per-lane 16-bit counting, then the blocks of a thread-block cluster merge
//                    their histograms through distributed shared memory: one global add per bin
//                    per cluster instead of per block
//   auto             histogram_auto, the entry point a user calls: below 2^25 samples the
//                    per-warp kernel (launch and set-up costs decide there); from 2^25 a
//                    one-block look at 4096 samples decides, on the device, between per-warp (one
//                    value dominates, or smooth data) and per-lane 32-bit (spread data); no copy
//                    to the host, no synchronization ("histogram_auto's look": that path
//                    at any size, so that it is checked on small inputs too)
//   CUB              cub::DeviceHistogram::HistogramEven, the reference to beat
// Inputs, each through every variant: uniform random bytes; skewed (about 90% one value, the rest
// uniform); image-like (a clamped random walk: neighbours have similar values). Every variant
// also runs on edge cases: 0, 1, 15 and 17 samples, starts that are not 16-byte aligned, and
// 2^23 + 5 equal samples (which one block of the per-lane 16-bit kernel also counts: 65536 or
// more per thread, more than a 16-bit counter holds, so it passes only if the counters are
// flushed). Before each checked run the bins are poisoned with 0xFFFFFFFF; a variant zeroes them
// itself (after the poison) where it adds to them, so a bin it never writes fails. Each row says
// its bandwidth as a fraction of CUB's on the same input.
//
// Usage: histogram [SAMPLES [REPETITIONS [EQUAL]]]   SAMPLES: default 4194301 = 2^22 - 3, not a
// multiple of 16; at most 2^32 - 1, the largest count a bin holds. REPETITIONS: timed runs per
// variant and input (default 5; 0: check only). EQUAL: the equal samples of the edge cases
// (default 2^23 + 5; fewer leave the 16-bit flush untested). Under compute-sanitizer, e.g.
// histogram 100003 0 70001. Performance: histogram 1073741824 (2^30 samples). Bandwidth counts the
// samples read (plus the 1 KiB of bins written); the table's yardstick is a device-to-device copy
// of SAMPLES bytes. Exit code 0 when every check passed, 1 on a mismatch or CUDA failure, 2 on bad
// arguments, 77 without a CUDA device. CURT_EXAMPLE_SEED repeats a run.
#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/span.hpp>

#include "example.hpp"
#include "histogram_kernels.cuh"

#include <cooperative_groups.h>
#include <cub/device/device_histogram.cuh>
#include <cuda/std/span>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace histogram_example;  // the kernels and their launches: histogram_kernels.cuh

using run_function = std::function<void(curt::stream_ref, samples_view, bins_view)>;
struct variant {
  std::string name;
  run_function run;
  std::string detail;    // launch geometry, for the table
  bool is_auto = false;  // the table says what histogram_auto chose instead
};

// Poisons the bins, runs the variant once, and compares with `want`; says what differs on stderr.
bool check(const variant& v, curt::stream_ref stream, samples_view samples,
           curt::device_buffer<unsigned>& bins, const std::array<unsigned, kBins>& want,
           const std::string& what) {
  curt::fill(bins, 0xFFFFFFFFu, stream);
  v.run(stream, samples, bins);
  std::array<unsigned, kBins> got{};
  curt::copy(got, bins, stream);
  stream.synchronize();
  int wrong = 0;
  for (unsigned b = 0; b < kBins; ++b)
    if (got[b] != want[b] && ++wrong <= 3)
      std::fprintf(stderr, "histogram: %s, %s: bin %u is %u, expected %u\n", v.name.c_str(),
                   what.c_str(), b, got[b], want[b]);
  return wrong == 0;
}

int run(int argc, char** argv) {
  const std::size_t n =
      curt_example::size_argument(argc, argv, 1, (std::size_t(1) << 22) - 3, 1, UINT_MAX);
  const int repetitions = static_cast<int>(curt_example::size_argument(argc, argv, 2, 5, 0, 1000));
  constexpr std::size_t overflowing = std::size_t(kLaneThreads) * 65536 + 5;  // 2^23 + 5
  const std::size_t equal_count =
      curt_example::size_argument(argc, argv, 3, overflowing, 1, UINT_MAX);

  const curt::device gpu(0);
  curt::stream stream(gpu);
  histogram_plan plan(gpu);
  cub_histogram cub(gpu);
  std::printf("histogram: %zu samples on %s (%d multiprocessors)\n", n, gpu.name().c_str(),
              gpu.multiprocessor_count());

  auto grid = [](unsigned blocks, unsigned threads) {  // the launch geometry for large inputs
    return std::to_string(blocks) + " blocks x " + std::to_string(threads);
  };
  const std::vector<variant> variants = {
      {"global atomics",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_global_atomics(plan, s, in, out);
       },
       grid(plan.global_blocks, kBlockThreads)},
      {"per-block shared",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_per_block(plan, s, in, out);
       },
       grid(plan.block_blocks, kBlockThreads)},
      {"per-warp shared",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_per_warp(plan, s, in, out);
       },
       grid(plan.warp_blocks, kBlockThreads)},
      {"per-lane 16-bit counters",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_per_lane(plan, s, in, out);
       },
       grid(plan.lane_blocks, kLaneThreads)},
      {"per-lane 32-bit copies",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_per_lane32(plan, s, in, out);
       },
       grid(plan.lane32_blocks, plan.lane32_threads) + ", " +
           std::to_string(plan.lane32_bytes / 1024) + " KiB"},
      {"cluster of 8, DSMEM merge",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_cluster(plan, s, in, out);
       },
       grid(plan.cluster_blocks, kLaneThreads)},
      {"histogram_auto",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_auto(plan, s, in, out);
       },
       "", true},
      {"histogram_auto's look, any size",
       [&](curt::stream_ref s, samples_view in, bins_view out) {
         histogram_auto_look(plan, s, in, out);
       },
       "", true},
      {"CUB HistogramEven",
       [&](curt::stream_ref s, samples_view in, bins_view out) { cub(s, in, out); }, "reference"},
  };

  curt::device_buffer<unsigned> bins(gpu, kBins);
  curt_example::table table("histogram", curt_example::copy_gb_per_s(gpu, stream, n));

  // The three inputs, each through every variant: checked once, then timed (CUB last, so each
  // row's fraction of CUB is known when the rows are written).
  curt::pinned_buffer<unsigned char> host(gpu, n);
  curt::device_buffer<unsigned char> input(gpu, n);
  for (input_kind kind : {input_kind::uniform, input_kind::skewed, input_kind::image}) {
    generate(kind, host.data(), n);
    const std::array<unsigned, kBins> want = cpu_histogram(host.data(), n);
    curt::copy(input, host, stream);
    const samples_view samples = curt::span(std::as_const(input));
    std::vector<bool> passed(variants.size());
    std::vector<double> ms(variants.size(), 0.0);
    std::vector<std::string> details(variants.size());
    for (std::size_t k = 0; k < variants.size(); ++k) {
      const variant& v = variants[k];
      passed[k] = check(v, stream, samples, bins, want, name_of(kind));
      details[k] = v.is_auto ? "chose " + auto_pick(plan, stream) : v.detail;
      if (repetitions > 0)
        ms[k] = curt_example::median_ms(stream, repetitions,
                                        [&](curt::stream_ref s) { v.run(s, samples, bins); });
    }
    const double cub_ms = ms.back();
    for (std::size_t k = 0; k < variants.size(); ++k) {
      char of_cub[32] = "not timed; ";
      if (ms[k] > 0) std::snprintf(of_cub, sizeof of_cub, "%.2fx CUB; ", cub_ms / ms[k]);
      table.row(variants[k].name, std::string(name_of(kind)) + " " + std::to_string(n), passed[k],
                ms[k], static_cast<double>(n) + kBins * sizeof(unsigned), of_cub + details[k]);
    }
  }

  // Edge cases, each checked (not timed): tiny counts, unaligned starts, and equal samples.
  constexpr std::size_t edge_bytes = 8192;
  std::vector<unsigned char> edge_host(edge_bytes);
  generate(input_kind::uniform, edge_host.data(), edge_bytes);
  curt::device_buffer<unsigned char> edge(gpu, edge_bytes);
  curt::copy(edge, edge_host, stream);
  struct edge_case {
    std::size_t offset, count;
  };
  const edge_case edge_cases[] = {
      {0, 0}, {0, 1}, {0, 15}, {0, 17}, {5, 17}, {5, 4099}, {3, edge_bytes - 3}};

  const unsigned char equal_value = static_cast<unsigned char>(curt_example::rng()());
  curt::device_buffer<unsigned char> equal(gpu, equal_count);
  curt::memset(equal, equal_value, stream);
  std::array<unsigned, kBins> equal_want{};
  equal_want[equal_value] = static_cast<unsigned>(equal_count);

  for (const variant& v : variants) {
    bool passed = true;
    for (const edge_case& e : edge_cases) {
      const samples_view part = curt::span(std::as_const(edge), e.offset, e.count);
      passed &= check(v, stream, part, bins, cpu_histogram(edge_host.data() + e.offset, e.count),
                      std::to_string(e.count) + " samples from byte " + std::to_string(e.offset));
    }
    passed &= check(v, stream, curt::span(std::as_const(equal)), bins, equal_want, "equal samples");
    table.row(v.name, "edge cases", passed, 0.0, 0.0,
              "0,1,15,17 B; +5: 17,4099 B; +3; " + std::to_string(equal_count) + " equal");
  }
  // One block of the per-lane 16-bit kernel: each thread counts 65536 equal samples (threads 0-4
  // one more), one more than a 16-bit counter holds: this passes only if the counters are flushed.
  const variant one_block{"per-lane, one block",
                          [&](curt::stream_ref s, samples_view in, bins_view out) {
                            histogram_per_lane(plan, s, in, out, 1);
                          },
                          ""};
  table.row(
      one_block.name, std::to_string(equal_count) + " equal",
      check(one_block, stream, curt::span(std::as_const(equal)), bins, equal_want, "equal samples"),
      0.0, 0.0,
      equal_count >= overflowing ? "65536 per thread: 16-bit counters must flush"
                                 : "fewer than 2^23 + 5: the flush is not tested (EQUAL)");
  return table.print();
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run("histogram",
                           "histogram [SAMPLES [REPETITIONS [EQUAL]]]   (SAMPLES 1 to 2^32 - 1, "
                           "default 4194301; REPETITIONS 0 to 1000, default 5, 0: check only; "
                           "EQUAL 1 to 2^32 - 1, default 2^23 + 5)",
                           [&] { return run(argc, argv); });
}
