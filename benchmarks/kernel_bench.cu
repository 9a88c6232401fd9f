// kernel_bench: the examples' kernels against the best alternative, in one run (issue #11, item
// 3). The kernels are the examples' own, from the headers they share with the examples
// (examples/*/..._kernels.cuh); nothing is copied here.
//
//   kernel/vec_add/<kernel|float4|float4_grid|float4_tiles|float4_block|bulk|thrust>/<N>,
//       N = 2^20, 2^28: c = a + b over N floats; bytes: 3 * N * 4 (two read, one written);
//       float4 is the example's main path (vec_add_example::add_fast: a tile of 1024 floats per
//       block through bulk copies), float4_grid the grid-stride float4 kernel it replaced;
//       thrust is thrust::transform, the yardstick (goal: float4 >= 0.97x thrust).
//   kernel/reduce_<sum|max>_float/<two_pass|last_block|grid_sync|cub>/<N>, N = 2^16 .. 2^28
//       bytes: N * 4 read; cub is cub::DeviceReduce (goals: >= 0.97x CUB's bandwidth at 2^28,
//       <= 1.2x CUB's time at 2^16).
//   kernel/histogram/<auto|per_block|per_warp|per_lane|per_lane_prefetch|per_lane32|cub>/
//       <uniform|skewed|image-like>/<N>, N = 2^22, 2^30: 256 bins of N bytes; bytes: N + 1 KiB;
//       auto is histogram_auto (its label and counter auto_pick say what it counted with: 0
//       per_warp without a look, 1 per_warp after the look, 2 per_lane32), cub is
//       cub::DeviceHistogram::HistogramEven (goals: auto >= 1.7x CUB on uniform, >= 1.15x on
//       skewed, at 2^30; within 5% of the best variant at both sizes).
//   kernel/transpose/<copy_kernel|naive|tiled32|tiled32_padded|tiled64>/8192x8192
//       bytes: 2 * 8192^2 * 4; copy_kernel is the tiled copy with the transposes' tiles and
//       threads, the yardstick (goal: tiled64 >= 0.9x copy_kernel).
//
// Timing: GPU time from two CUDA events around `launches` back-to-back launches (16 for inputs
// under 256 MiB, 2 above: the host's next launch overlaps a kernel instead of counting as GPU
// time), reported per launch (UseManualTime); one untimed warm-up launch per call of the
// benchmark function. Google Benchmark counts that per-launch time against MinTime, so MinTime is
// 0.1 s / launches: every run times at least 0.1 s of GPU work. (MinTime 0.1 s itself made a run
// of 16 launches per iteration last over 16 x 0.1 s, about 2.7 s for a reduction of 2^16, 4 s
// for its first repetition, which also finds the iteration count: 24 such benchmarks with 3
// repetitions come to about three and a half minutes.)
// Counters (medians over the run's iterations): gb_per_s, the achieved bandwidth; copy_gb_per_s,
// the device-to-device cudaMemcpy bandwidth (read plus written) of a copy that moves the same
// number of bytes, measured once per byte count in this run (examples/common/example.hpp's
// copy_gb_per_s); of_copy = gb_per_s / copy_gb_per_s. bytes_per_second (Google Benchmark's) is
// set from the declared bytes too.
//
// Outside the timed regions, each paid once per process and only by the benchmarks that need it
// (--benchmark_filter=vec_add, say, makes only vec_add's input):
// - the inputs, made on first use and kept on the host and the device: random in the examples'
//   distributions, each one splitmix64 stream (curt_bench::random_word) seeded from the run's
//   seed (curt_example::rng(), which prints it; CURT_EXAMPLE_SEED repeats a run) and the input's
//   name, so that an input is the same for a seed whatever the filter and the order of the runs;
//   made on every core (2 x 2^28 floats, 2^28, 3 x 2^30 bytes, 2^26: about 6 GiB in all); the
//   smaller sizes of vec_add and the histogram use the first N elements of the largest input;
// - the CPU references, on every core: the histograms with their input, the reductions' sums
//   (the reduction example's float-sum bound) and maxima once per length;
// - each variant's check, before its first timed run: its result read back and compared with the
//   CPU's on every core (exactly, or within that bound); the verdict is kept, and a mismatch
//   fails every run of the benchmark (SkipWithError);
// - the copy bandwidth, once per byte count.
//
//   kernel_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// How long, estimated for the H200 machine (not yet measured there): the timed runs of every
// benchmark take about 10 s for one repetition, 25 s for 3 and 40 s for 5 (with random
// interleaving or without), plus a few seconds per process for the inputs, their copies to and
// from the device and the checks; issue 27's rows (histogram: 2 sizes x 3 inputs x 7 variants,
// vec_add: 2 sizes x 7) add about as much again (an estimate, not measured). MinTime is set per benchmark: --benchmark_min_time does not
// change it. Exit code 77 when there is no device.
#include "harness.hpp"

#include "example.hpp"
#include "histogram_kernels.cuh"
#include "reduction_kernels.cuh"
#include "transpose_kernels.cuh"
#include "vec_add_kernels.cuh"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/occupancy.hpp>
#include <curt/span.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kVecAddN = std::size_t(1) << 28;  // the largest; also 2^20
constexpr std::size_t kVecAddSizes[] = {std::size_t(1) << 20, kVecAddN};
constexpr std::size_t kReduceSizes[] = {std::size_t(1) << 16, std::size_t(1) << 20,
                                        std::size_t(1) << 24, std::size_t(1) << 28};
constexpr std::size_t kReduceMax = kReduceSizes[std::size(kReduceSizes) - 1];
constexpr std::size_t kHistogramN = std::size_t(1) << 30;  // the largest; also 2^22
constexpr std::size_t kHistogramSizes[] = {std::size_t(1) << 22, kHistogramN};
constexpr int kTransposeSide = 8192;
constexpr std::size_t kTransposeN = std::size_t(kTransposeSide) * kTransposeSide;
constexpr double kMinTime = 0.1;  // seconds of GPU time per benchmark run (see add())
constexpr std::size_t kChunk = std::size_t(1) << 20;  // elements per chunk of host-side work

// Bytes read + written per launch of each benchmark.
constexpr std::size_t vec_add_bytes(std::size_t n) { return 3 * n * sizeof(float); }
constexpr std::size_t reduce_bytes(std::size_t n) { return n * sizeof(float); }
constexpr std::size_t histogram_bytes(std::size_t n) {
  return n + histogram_example::kBins * sizeof(unsigned);
}
constexpr std::size_t kTransposeBytes = 2 * kTransposeN * sizeof(float);

curt::device* g_device = nullptr;
curt::stream* g_stream = nullptr;

// Launches per timed region: 16 for inputs under 256 MiB, 2 above.
int launches_for(std::size_t bytes) { return bytes < (std::size_t(256) << 20) ? 16 : 2; }

// The device-to-device copy bandwidth (read plus written, GB/s) of a copy that moves `bytes` in
// all (bytes / 2 read, bytes / 2 written), measured once per byte count.
double copy_gb_per_s(std::size_t bytes) {
  static std::map<std::size_t, double> measured;
  auto it = measured.find(bytes);
  if (it == measured.end())
    it = measured
             .emplace(bytes, curt_example::copy_gb_per_s(*g_device, *g_stream,
                                                         std::max<std::size_t>(bytes / 2, 1)))
             .first;
  return it->second;
}

// Times `launch(stream)` (one launch of the variant), launches_for(bytes) at a time between two
// events, and reports the GPU time per launch; sets the bandwidth counters for `bytes` per launch.
void time_launches(benchmark::State& state, std::size_t bytes,
                   const std::function<void(curt::stream_ref)>& launch) {
  const curt::stream_ref stream = *g_stream;
  const int launches = launches_for(bytes);
  curt::event start(*g_device, curt::event_flags::timing),
      stop(*g_device, curt::event_flags::timing);
  launch(stream);  // warm-up
  stream.synchronize();
  std::vector<double> per_launch;
  for (auto _ : state) {
    (void)_;
    start.record(stream);
    for (int i = 0; i < launches; ++i) launch(stream);
    stop.record(stream);
    stop.synchronize();
    const double seconds = curt::elapsed(start, stop).count() / 1e3 / launches;
    state.SetIterationTime(seconds);
    per_launch.push_back(seconds);
  }
  if (!curt_bench::ok(state, cudaGetLastError())) return;
  curt_bench::set_bandwidth(state, bytes);
  const double gb_per_s = static_cast<double>(bytes) / curt_bench::median_of(per_launch) / 1e9;
  const double copy = copy_gb_per_s(bytes);
  state.counters["gb_per_s"] = gb_per_s;
  state.counters["copy_gb_per_s"] = copy;
  state.counters["of_copy"] = copy > 0 ? gb_per_s / copy : 0.0;
}

// Each (benchmark, input) is checked once: the first run remembers the verdict (empty: passed).
bool checked_ok(benchmark::State& state, const std::string& key,
                const std::function<std::string()>& check) {
  static std::map<std::string, std::string> verdicts;
  auto it = verdicts.find(key);
  if (it == verdicts.end()) it = verdicts.emplace(key, check()).first;
  if (it->second.empty()) return true;
  state.SkipWithError(it->second.c_str());
  return false;
}

// ---- Host-side work: random inputs, CPU references, checks, on every core -------------------

using curt_bench::host_array;

// The seed of one input: from this run's seed (curt_example::rng(), which prints it;
// CURT_EXAMPLE_SEED repeats a run) and the input's name, so that an input is the same for a seed
// whichever benchmarks the filter selects and in whatever order they run.
std::uint64_t input_seed(const std::string& input) {
  static const std::uint64_t run_seed = curt_example::rng()();
  std::uint64_t name = 0xcbf29ce484222325ull;  // FNV-1a
  for (const char c : input) name = (name ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return curt_bench::random_word(run_seed, name);
}

// [0, 1) in steps of 2^-24, from a word's top 24 bits.
float unit_float(std::uint64_t word) { return static_cast<float>(word >> 40) * 0x1p-24f; }

// `count` floats uniform in [low, high] (curt_example::random_values' distribution): element i
// from word i of the input's stream.
host_array<float> uniform_floats(std::size_t count, float low, float high,
                                 const std::string& input) {
  host_array<float> values(count);
  float* out = values.data();
  const std::uint64_t seed = input_seed(input);
  curt_bench::for_chunks(count, kChunk, [=](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      out[i] = low + (high - low) * unit_float(curt_bench::random_word(seed, i));
  });
  return values;
}

// The reduction example's float input (reduction_example::random_input<float>): uniform in
// [-1, 2), times 2^e for e uniform in -8..8 (exact: a power of two); e from the word's low 32
// bits, the uniform value from its top 24.
host_array<float> reduction_floats(std::size_t count, const std::string& input) {
  std::array<float, 17> scale{};
  for (int e = -8; e <= 8; ++e) scale[static_cast<std::size_t>(e + 8)] = std::ldexp(1.0f, e);
  host_array<float> values(count);
  float* out = values.data();
  const std::uint64_t seed = input_seed(input);
  curt_bench::for_chunks(count, kChunk, [=](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t word = curt_bench::random_word(seed, i);
      const std::size_t e = static_cast<std::size_t>(((word & 0xFFFFFFFFull) * 17) >> 32);
      out[i] = (-1.0f + 3.0f * unit_float(word)) * scale[e];
    }
  });
  return values;
}

// The histogram example's samples (histogram_example::generate), into `out`: uniform, the 8 bytes
// of each word; skewed, 4 pieces of 16 bits per word, a piece whose high byte is under 230
// (89.8%) the input's dominant value, another its low byte; image-like, a clamped random walk of
// 16 steps per word (each the popcount of a nibble, minus 2: -2..2, binomial), restarted at a
// random level every kChunk words (16 Mi samples) so that the chunks are made in parallel.
void histogram_samples(histogram_example::input_kind kind, unsigned char* out, std::size_t n) {
  using histogram_example::input_kind;
  const std::string name = std::string("histogram/") + histogram_example::name_of(kind);
  const std::uint64_t seed = input_seed(name);
  if (kind == input_kind::image) {
    constexpr std::size_t per_word = 16;
    const std::uint64_t start_seed = input_seed(name + "/start");
    const auto walk = [&](std::size_t begin, std::size_t end) {  // words [begin, end)
      int level = static_cast<int>(curt_bench::random_word(start_seed, begin / kChunk) % 256);
      const std::size_t last = std::min(end * per_word, n);
      std::uint64_t word = 0;
      for (std::size_t i = begin * per_word; i < last; ++i) {
        if (i % per_word == 0) word = curt_bench::random_word(seed, i / per_word);
        level += __builtin_popcountll((word >> (4 * (i % per_word))) & 0xFu) - 2;
        level = std::clamp(level, 0, 255);
        out[i] = static_cast<unsigned char>(level);
      }
    };
    curt_bench::for_chunks((n + per_word - 1) / per_word, kChunk, walk);
    return;
  }
  const auto dominant = static_cast<unsigned char>(input_seed(name + "/dominant"));
  const auto skew = [dominant](std::uint64_t word, unsigned k) {  // without a branch
    const unsigned piece = static_cast<unsigned>(word >> (16 * k)) & 0xFFFFu;
    const unsigned mask = 0u - static_cast<unsigned>((piece >> 8) < 230);  // all ones: dominant
    return static_cast<unsigned char>((dominant & mask) | (piece & ~mask));
  };
  const std::size_t per_word = kind == input_kind::uniform ? 8 : 4;
  const std::size_t words = (n + per_word - 1) / per_word;
  curt_bench::for_chunks(words, kChunk, [&](std::size_t begin, std::size_t end) {
    const std::size_t whole = std::min(end, n / per_word);  // words whose samples all fit
    for (std::size_t w = begin; w < whole; ++w) {
      const std::uint64_t word = curt_bench::random_word(seed, w);
      if (kind == input_kind::uniform) {
        std::memcpy(out + 8 * w, &word, 8);
      } else {
        const unsigned char four[4] = {skew(word, 0), skew(word, 1), skew(word, 2), skew(word, 3)};
        std::memcpy(out + 4 * w, four, 4);
      }
    }
    for (std::size_t w = std::max(begin, whole); w < end; ++w) {  // the last word, in part
      const std::uint64_t word = curt_bench::random_word(seed, w);
      for (std::size_t i = w * per_word; i < n; ++i) {
        const auto k = static_cast<unsigned>(i - w * per_word);
        out[i] = kind == input_kind::uniform ? static_cast<unsigned char>(word >> (8 * k))
                                             : skew(word, k);
      }
    }
  });
}

// The CPU's histogram: histogram_example::cpu_histogram, chunk by chunk on every core.
std::array<unsigned, histogram_example::kBins> cpu_histogram(const unsigned char* data,
                                                             std::size_t n) {
  constexpr unsigned bins = histogram_example::kBins;
  constexpr std::size_t chunk = std::size_t(1) << 22;
  std::vector<std::array<unsigned, bins>> partial(n / chunk + 1);
  curt_bench::for_chunks(n, chunk, [&](std::size_t begin, std::size_t end) {
    partial[begin / chunk] = histogram_example::cpu_histogram(data + begin, end - begin);
  });
  std::array<unsigned, bins> total{};
  for (const auto& p : partial)
    for (unsigned b = 0; b < bins; ++b) total[b] += p[b];
  return total;
}

// The reduction example's CPU reference (reduction_example::reference<float, Op>: the same
// expected value, and for the float sum the same bound, reduction_example::float_sum_bound),
// chunk by chunk on every core: partial sums in double
// combined in chunk order (so the same for a seed on any machine), maxima and minima exact.
template <class Op>
reduction_example::expected<typename Op::acc> cpu_reduction(const float* x, std::size_t n,
                                                            std::size_t full_grid_threads) {
  using acc = typename Op::acc;
  constexpr std::size_t chunk = std::size_t(1) << 16;
  const std::size_t chunks = n == 0 ? 0 : (n - 1) / chunk + 1;
  reduction_example::expected<acc> e;
  e.exact = Op::identity();
  if constexpr (Op::kind == reduction_example::op_kind::sum) {
    std::vector<double> sums(chunks), sums_abs(chunks);
    curt_bench::for_chunks(n, chunk, [&](std::size_t begin, std::size_t end) {
      double sum = 0.0, sum_abs = 0.0;
      for (std::size_t i = begin; i < end; ++i) {
        sum += x[i];
        sum_abs += std::fabs(x[i]);
      }
      sums[begin / chunk] = sum;
      sums_abs[begin / chunk] = sum_abs;
    });
    double sum_abs = 0.0;
    for (std::size_t k = 0; k < chunks; ++k) {
      e.sum += sums[k];
      sum_abs += sums_abs[k];
    }
    e.bound = reduction_example::float_sum_bound(n, full_grid_threads, sum_abs);
  } else {
    std::vector<acc> results(chunks, Op::identity());
    curt_bench::for_chunks(n, chunk, [&](std::size_t begin, std::size_t end) {
      acc r = Op::identity();
      for (std::size_t i = begin; i < end; ++i) {
        if constexpr (Op::kind == reduction_example::op_kind::min) r = std::min(r, x[i]);
        if constexpr (Op::kind == reduction_example::op_kind::max) r = std::max(r, x[i]);
      }
      results[begin / chunk] = r;
    });
    for (const acc r : results) {
      if constexpr (Op::kind == reduction_example::op_kind::min) e.exact = std::min(e.exact, r);
      if constexpr (Op::kind == reduction_example::op_kind::max) e.exact = std::max(e.exact, r);
    }
  }
  return e;
}

// The lowest i in [0, n) for which bad(i), or n when there is none; checked on every core.
template <class Bad>
std::size_t first_bad(std::size_t n, std::size_t chunk, const Bad& bad) {
  std::atomic<std::size_t> first{n};
  curt_bench::for_chunks(n, chunk, [&](std::size_t begin, std::size_t end) {
    if (begin >= first.load(std::memory_order_relaxed)) return;
    for (std::size_t i = begin; i < end; ++i)
      if (bad(i)) {
        std::size_t seen = first.load();
        while (i < seen && !first.compare_exchange_weak(seen, i)) {
        }
        return;
      }
  });
  return first.load();
}

// Host memory for a result read back from the device, its pages touched once, in parallel.
template <class T>
host_array<T> result_buffer(std::size_t count) {
  host_array<T> buffer(count);
  T* data = buffer.data();
  curt_bench::for_chunks(count, kChunk, [=](std::size_t begin, std::size_t end) {
    std::memset(static_cast<void*>(data + begin), 0, (end - begin) * sizeof(T));
  });
  return buffer;
}

// ---- vec_add -------------------------------------------------------------------------------

struct vec_add_problem {
  vec_add_problem()
      : a(uniform_floats(kVecAddN, -1000.0f, 1000.0f, "vec_add/a")),
        b(uniform_floats(kVecAddN, -1000.0f, 1000.0f, "vec_add/b")),
        device_a(*g_device, kVecAddN),
        device_b(*g_device, kVecAddN),
        device_c(*g_device, kVecAddN),
        fill_blocks(curt::grid_to_fill_device(*g_device, vec_add_example::vec_add_float4,
                                              vec_add_example::kBlockThreads)),
        tile_blocks(curt::grid_to_fill_device(*g_device, vec_add_example::vec_add_float4_tiles,
                                              vec_add_example::kBlockThreads)) {
    curt::copy(device_a, a, *g_stream);
    curt::copy(device_b, b, *g_stream);
    g_stream->synchronize();
  }
  // c poisoned with NaN, one run over the first n elements, c[0, n) compared with the CPU's
  // a + b exactly (see the example).
  std::string check(const std::function<void(curt::stream_ref)>& launch, std::size_t n) {
    if (c.size() == 0) c = result_buffer<float>(kVecAddN);
    curt::fill(device_c, std::numeric_limits<float>::quiet_NaN(), *g_stream);
    launch(*g_stream);
    curt::copy(curt::span(c, 0, n), curt::span(std::as_const(device_c), 0, n), *g_stream);
    g_stream->synchronize();
    const std::size_t bad =
        first_bad(n, kChunk, [this](std::size_t i) { return !(c[i] == a[i] + b[i]); });
    if (bad < n) return "vec_add: c[" + std::to_string(bad) + "] is wrong";
    return {};
  }
  host_array<float> a, b;
  host_array<float> c;  // a variant's result, read back for its check (made at the first)
  curt::device_buffer<float> device_a, device_b, device_c;
  unsigned fill_blocks, tile_blocks;
};

vec_add_problem& vec_add_data() {
  static std::unique_ptr<vec_add_problem> p = std::make_unique<vec_add_problem>();
  return *p;
}

enum class vec_add_variant { kernel, fast, float4_grid, float4_tiles, float4_block, bulk, thrust };

void vec_add_bench(benchmark::State& state, vec_add_variant v, std::size_t n,
                   const std::string& name) {
  vec_add_problem& p = vec_add_data();
  const float* a = p.device_a.data();
  const float* b = p.device_b.data();
  float* c = p.device_c.data();
  const std::function<void(curt::stream_ref)> launch = [&p, v, a, b, c, n](curt::stream_ref s) {
    switch (v) {
      case vec_add_variant::kernel:
        return vec_add_example::add_with_kernel(s, a, b, c, n);
      case vec_add_variant::fast:
        return vec_add_example::add_fast(s, a, b, c, n);
      case vec_add_variant::float4_grid:
        return vec_add_example::add_with_float4_grid(s, p.fill_blocks, a, b, c, n);
      case vec_add_variant::float4_tiles:
        return vec_add_example::add_with_float4_tiles(s, p.tile_blocks, a, b, c, n);
      case vec_add_variant::float4_block:
        return vec_add_example::add_with_float4_block(s, a, b, c, n);
      case vec_add_variant::bulk:
        return vec_add_example::add_with_bulk(s, a, b, c, n);
      case vec_add_variant::thrust:
        return vec_add_example::add_with_thrust(s, a, b, c, n);
    }
  };
  if (!checked_ok(state, name, [&] { return p.check(launch, n); })) return;
  time_launches(state, vec_add_bytes(n), launch);
}

// ---- Reductions ----------------------------------------------------------------------------

// One random float input of the largest size (the reduction example's inputs: positive mean,
// exponents -8..8); the smaller sizes reduce its first N elements.
struct reduce_input {
  reduce_input() : host(reduction_floats(kReduceMax, "reduce")), device(*g_device, host.size()) {
    curt::copy(device, host, *g_stream);
    g_stream->synchronize();
  }
  host_array<float> host;
  curt::device_buffer<float> device;
};

reduce_input& reduce_data() {
  static std::unique_ptr<reduce_input> p = std::make_unique<reduce_input>();
  return *p;
}

template <class Op>
struct reduce_state {
  reduce_state() : reducer(*g_device, *g_stream, kReduceMax), result(*g_device, 1) {}
  reduction_example::reducer<float, Op> reducer;
  curt::device_buffer<typename Op::acc> result;
  std::map<std::size_t, reduction_example::expected<typename Op::acc>> want;  // per length
};

template <class Op>
reduce_state<Op>& reduce_of() {
  static std::unique_ptr<reduce_state<Op>> p = std::make_unique<reduce_state<Op>>();
  return *p;
}

template <class Op>
void reduce_bench(benchmark::State& state, reduction_example::variant v, std::size_t n,
                  const std::string& name) {
  const reduce_input& in = reduce_data();
  reduce_state<Op>& r = reduce_of<Op>();
  const float* x = in.device.data();
  const auto launch = [&r, v, x, n](curt::stream_ref s) {
    r.reducer.run(v, s, x, n, r.result.data());
  };
  const bool good = checked_ok(state, name, [&]() -> std::string {
    reduction_example::poison(r.result, *g_stream);
    launch(*g_stream);
    std::array<typename Op::acc, 1> got{};
    curt::copy(got, r.result, *g_stream);
    g_stream->synchronize();
    auto want = r.want.find(n);  // the CPU's answer, once per length for every variant
    if (want == r.want.end())
      want = r.want
                 .emplace(n, cpu_reduction<Op>(in.host.data(), n, r.reducer.full_grid_threads()))
                 .first;
    std::string detail;
    if (reduction_example::compare<float, Op>(got[0], want->second, detail)) return {};
    return name + ": " + detail;
  });
  if (!good) return;
  time_launches(state, reduce_bytes(n), launch);
}

// ---- Histogram -----------------------------------------------------------------------------

// One input of each kind, 2^30 samples on the device; the smaller size counts its first N.
struct histogram_input {
  explicit histogram_input(histogram_example::input_kind kind) : device(*g_device, kHistogramN) {
    static host_array<unsigned char> host(kHistogramN);  // the inputs, one after the other
    histogram_samples(kind, host.data(), kHistogramN);
    for (std::size_t n : kHistogramSizes) want[n] = cpu_histogram(host.data(), n);
    curt::copy(device, host, *g_stream);
    g_stream->synchronize();
  }
  curt::device_buffer<unsigned char> device;
  std::map<std::size_t, std::array<unsigned, histogram_example::kBins>> want;  // per size
};

histogram_input& histogram_data(histogram_example::input_kind kind) {
  static std::map<int, std::unique_ptr<histogram_input>> inputs;
  auto& p = inputs[static_cast<int>(kind)];
  if (!p) p = std::make_unique<histogram_input>(kind);
  return *p;
}

struct histogram_state {
  histogram_state() : plan(*g_device), cub(*g_device), bins(*g_device, histogram_example::kBins) {}
  histogram_example::histogram_plan plan;
  histogram_example::cub_histogram cub;
  curt::device_buffer<unsigned> bins;
};

histogram_state& histogram_of() {
  static std::unique_ptr<histogram_state> p = std::make_unique<histogram_state>();
  return *p;
}

enum class histogram_variant {
  automatic,
  per_block,
  per_warp,
  per_lane,
  per_lane_prefetch,
  per_lane32,
  cub
};

void histogram_bench(benchmark::State& state, histogram_variant v,
                     histogram_example::input_kind kind, std::size_t n, const std::string& name) {
  using histogram_example::bins_view;
  using histogram_example::samples_view;
  histogram_input& in = histogram_data(kind);
  histogram_state& h = histogram_of();
  const samples_view samples = curt::span(std::as_const(in.device), 0, n);
  const bins_view bins = curt::span(h.bins);
  const auto launch = [&h, v, samples, bins](curt::stream_ref s) {
    switch (v) {
      case histogram_variant::automatic:
        return histogram_example::histogram_auto(h.plan, s, samples, bins);
      case histogram_variant::per_block:
        return histogram_example::histogram_per_block(h.plan, s, samples, bins);
      case histogram_variant::per_warp:
        return histogram_example::histogram_per_warp(h.plan, s, samples, bins);
      case histogram_variant::per_lane:
        return histogram_example::histogram_per_lane(h.plan, s, samples, bins);
      case histogram_variant::per_lane_prefetch:
        return histogram_example::histogram_per_lane_prefetch(h.plan, s, samples, bins);
      case histogram_variant::per_lane32:
        return histogram_example::histogram_per_lane32(h.plan, s, samples, bins);
      case histogram_variant::cub:
        return h.cub(s, samples, bins);
    }
  };
  const std::array<unsigned, histogram_example::kBins>& want = in.want.at(n);
  const bool good = checked_ok(state, name, [&]() -> std::string {
    curt::fill(h.bins, 0xFFFFFFFFu, *g_stream);
    launch(*g_stream);
    std::array<unsigned, histogram_example::kBins> got{};
    curt::copy(got, h.bins, *g_stream);
    g_stream->synchronize();
    for (unsigned b = 0; b < histogram_example::kBins; ++b)
      if (got[b] != want[b])
        return name + ": bin " + std::to_string(b) + " is " + std::to_string(got[b]) +
               ", expected " + std::to_string(want[b]);
    return {};
  });
  if (!good) return;
  std::string pick;
  if (v == histogram_variant::automatic) {  // what it counted with (the same on every run)
    launch(*g_stream);
    pick = histogram_example::auto_pick(h.plan, *g_stream);
  }
  time_launches(state, histogram_bytes(n), launch);
  if (!pick.empty()) {
    state.SetLabel("picked " + pick);
    double code = 1.0;  // per_warp after the look
    if (pick.rfind("per_lane32", 0) == 0) code = 2.0;
    if (pick.find("no look") != std::string::npos) code = 0.0;
    state.counters["auto_pick"] = code;
  }
}

// ---- Transpose -----------------------------------------------------------------------------

struct transpose_problem {
  transpose_problem()
      : in(uniform_floats(kTransposeN, -1.0f, 1.0f, "transpose")),
        device_in(*g_device, kTransposeN),
        device_out(*g_device, kTransposeN) {
    curt::copy(device_in, in, *g_stream);
    g_stream->synchronize();
  }
  host_array<float> in;
  host_array<float> out;  // a variant's result, read back for its check (made at the first)
  curt::device_buffer<float> device_in, device_out;
};

transpose_problem& transpose_data() {
  static std::unique_ptr<transpose_problem> p = std::make_unique<transpose_problem>();
  return *p;
}

void transpose_bench(benchmark::State& state, transpose_example::variant v,
                     const std::string& name) {
  transpose_problem& p = transpose_data();
  const int side = kTransposeSide;
  const auto launch = [&p, v, side](curt::stream_ref s) {
    curt::launch(s, v.config(side, side), v.kernel, p.device_in.data(), p.device_out.data(), side,
                 side);
  };
  const bool good = checked_ok(state, name, [&]() -> std::string {
    if (p.out.size() == 0) p.out = result_buffer<float>(kTransposeN);
    curt::fill(p.device_out, std::numeric_limits<float>::quiet_NaN(), *g_stream);
    launch(*g_stream);
    curt::copy(p.out, p.device_out, *g_stream);
    g_stream->synchronize();
    // Bit for bit, in 64 x 64 tiles (a transposed tile's reads stay in the cache), 64 rows of
    // tiles per chunk; the first wrong element of the row-major order, if any.
    constexpr std::size_t tile = 64;
    const std::size_t n = std::size_t(side);
    const float* in = p.in.data();
    const float* out = p.out.data();
    const bool transposes = v.transposes;
    std::atomic<std::size_t> first{kTransposeN};
    curt_bench::for_chunks(n, tile, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t c0 = 0; c0 < n; c0 += tile)
        for (std::size_t r = r0; r < r1; ++r)
          for (std::size_t c = c0; c < std::min(n, c0 + tile); ++c) {
            const float want = in[r * n + c];
            const float got = transposes ? out[c * n + r] : out[r * n + c];
            if (std::memcmp(&got, &want, sizeof got) != 0) {
              std::size_t seen = first.load();
              const std::size_t at = r * n + c;
              while (at < seen && !first.compare_exchange_weak(seen, at)) {
              }
            }
          }
    });
    const std::size_t at = first.load();
    if (at == kTransposeN) return {};
    return name + ": element (" + std::to_string(at / n) + ", " + std::to_string(at % n) +
           ") is wrong";
  });
  if (!good) return;
  time_launches(state, kTransposeBytes, launch);
}

// ---- Registration --------------------------------------------------------------------------

// A benchmark whose launches move `bytes` each. Google Benchmark counts the time reported per
// iteration, one launch's, against MinTime, while an iteration runs launches_for(bytes) of them:
// MinTime kMinTime / launches makes every run time at least kMinTime of GPU work.
void add(const std::string& name, std::size_t bytes,
         std::function<void(benchmark::State&)> body) {
  curt_bench::add(name, std::move(body), true)->MinTime(kMinTime / launches_for(bytes));
}

template <class Op>
void add_reductions(const char* op_name) {
  using reduction_example::variant;
  const std::pair<variant, const char*> variants[] = {{variant::two_pass, "two_pass"},
                                                      {variant::last_block, "last_block"},
                                                      {variant::grid_sync, "grid_sync"},
                                                      {variant::cub, "cub"}};
  for (std::size_t n : kReduceSizes)
    for (const auto& [v, v_name] : variants) {
      const std::string name =
          std::string("kernel/reduce_") + op_name + "_float/" + v_name + "/" + std::to_string(n);
      const variant chosen = v;
      add(name, reduce_bytes(n),
          [chosen, n, name](benchmark::State& s) { reduce_bench<Op>(s, chosen, n, name); });
    }
}

void setup(curt::device d) {
  static curt::device device = d;
  static curt::stream stream(d);
  g_device = &device;
  g_stream = &stream;

  const std::pair<vec_add_variant, const char*> vec_add_variants[] = {
      {vec_add_variant::kernel, "kernel"},
      {vec_add_variant::fast, "float4"},  // the example's main path: the goal's row
      {vec_add_variant::float4_grid, "float4_grid"},
      {vec_add_variant::float4_tiles, "float4_tiles"},
      {vec_add_variant::float4_block, "float4_block"},
      {vec_add_variant::bulk, "bulk"},
      {vec_add_variant::thrust, "thrust"}};
  for (std::size_t n : kVecAddSizes)
    for (const auto& [v, v_name] : vec_add_variants) {
      const std::string name = std::string("kernel/vec_add/") + v_name + "/" + std::to_string(n);
      const vec_add_variant chosen = v;
      add(name, vec_add_bytes(n),
          [chosen, n, name](benchmark::State& s) { vec_add_bench(s, chosen, n, name); });
    }

  add_reductions<reduction_example::sum_of<float>>("sum");
  add_reductions<reduction_example::max_of<float>>("max");

  using histogram_example::input_kind;
  const std::pair<histogram_variant, const char*> histogram_variants[] = {
      {histogram_variant::automatic, "auto"},
      {histogram_variant::per_block, "per_block"},
      {histogram_variant::per_warp, "per_warp"},
      {histogram_variant::per_lane, "per_lane"},
      {histogram_variant::per_lane_prefetch, "per_lane_prefetch"},
      {histogram_variant::per_lane32, "per_lane32"},
      {histogram_variant::cub, "cub"}};
  for (std::size_t n : kHistogramSizes)
    for (input_kind kind : {input_kind::uniform, input_kind::skewed, input_kind::image})
      for (const auto& [v, v_name] : histogram_variants) {
        const std::string name = std::string("kernel/histogram/") + v_name + "/" +
                                 histogram_example::name_of(kind) + "/" + std::to_string(n);
        const histogram_variant chosen = v;
        add(name, histogram_bytes(n), [chosen, kind, n, name](benchmark::State& s) {
          histogram_bench(s, chosen, kind, n, name);
        });
      }

  using transpose_example::copy_tiles;
  using transpose_example::tile_config;
  using transpose_example::transpose_naive;
  using transpose_example::transpose_tiled;
  const std::pair<transpose_example::variant, const char*> transpose_variants[] = {
      {{"copy kernel", false, copy_tiles<64>, tile_config<64>}, "copy_kernel"},
      {{"naive", true, transpose_naive<32>, tile_config<32>}, "naive"},
      {{"tiled 32x32", true, transpose_tiled<32, 0>, tile_config<32>}, "tiled32"},
      {{"tiled 32x32 padded", true, transpose_tiled<32, 1>, tile_config<32>}, "tiled32_padded"},
      {{"tiled 64x64 padded", true, transpose_tiled<64, 1>, tile_config<64>}, "tiled64"}};
  const std::string shape = std::to_string(kTransposeSide) + "x" + std::to_string(kTransposeSide);
  for (const auto& [v, v_name] : transpose_variants) {
    const std::string name = std::string("kernel/transpose/") + v_name + "/" + shape;
    const transpose_example::variant chosen = v;
    add(name, kTransposeBytes,
        [chosen, name](benchmark::State& s) { transpose_bench(s, chosen, name); });
  }
}

}  // namespace

int main(int argc, char** argv) { return curt_bench::run(argc, argv, "kernel_bench", setup); }
