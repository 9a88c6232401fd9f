// kernel_bench: the examples' kernels against the best alternative, in one run (issue #11, item
// 3). The kernels are the examples' own, from the headers they share with the examples
// (examples/*/..._kernels.cuh); nothing is copied here.
//
//   kernel/vec_add/<kernel|float4|float4_tiles|thrust>/268435456
//       c = a + b over 2^28 floats; bytes: 3 * N * 4 (two read, one written); thrust is
//       thrust::transform, the yardstick (goal: float4 >= 0.97x thrust).
//   kernel/reduce_<sum|max>_float/<two_pass|last_block|grid_sync|cub>/<N>, N = 2^16 .. 2^28
//       bytes: N * 4 read; cub is cub::DeviceReduce (goals: >= 0.97x CUB's bandwidth at 2^28,
//       <= 1.2x CUB's time at 2^16).
//   kernel/histogram/<auto|per_warp|per_lane|cub>/<uniform|skewed>/1073741824
//       256 bins of 2^30 bytes; bytes: N + 1 KiB; auto is histogram_auto, cub is
//       cub::DeviceHistogram::HistogramEven (goals: auto >= 1.7x CUB on uniform, >= 1.15x on
//       skewed).
//   kernel/transpose/<copy_kernel|naive|tiled32|tiled32_padded|tiled64>/8192x8192
//       bytes: 2 * 8192^2 * 4; copy_kernel is the tiled copy with the transposes' tiles and
//       threads, the yardstick (goal: tiled64 >= 0.9x copy_kernel).
//
// Timing: GPU time from two CUDA events around `launches` back-to-back launches (16 for inputs
// under 256 MiB, 2 above: the host's next launch overlaps a kernel instead of counting as GPU
// time), reported per launch (UseManualTime); one untimed warm-up launch per benchmark run.
// Counters (medians over the run's iterations): gb_per_s, the achieved bandwidth; copy_gb_per_s,
// the device-to-device cudaMemcpy bandwidth (read plus written) of a copy that moves the same
// number of bytes, measured once per byte count in this run (examples/common/example.hpp's
// copy_gb_per_s); of_copy = gb_per_s / copy_gb_per_s. bytes_per_second (Google Benchmark's) is
// set from the declared bytes too. Inputs are random (curt_example::rng(): CURT_EXAMPLE_SEED
// repeats a run); each variant's result is checked once per input, outside timing, against the
// CPU (exact, or the reduction example's float-sum bound); a mismatch fails the benchmark.
// Inputs are made on first use and kept: --benchmark_filter=vec_add (say) makes only those.
//
//   kernel_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Every benchmark has MinTime(0.1 s): the defaults finish in about a minute (with 5 repetitions,
// most of it making the inputs). Exit code 77 when there is no device.
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

#include <array>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kVecAddN = std::size_t(1) << 28;
constexpr std::size_t kReduceSizes[] = {std::size_t(1) << 16, std::size_t(1) << 20,
                                        std::size_t(1) << 24, std::size_t(1) << 28};
constexpr std::size_t kHistogramN = std::size_t(1) << 30;
constexpr int kTransposeSide = 8192;
constexpr double kMinTime = 0.1;  // seconds per benchmark run

curt::device* g_device = nullptr;
curt::stream* g_stream = nullptr;

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

// Times `launch(stream)` (one launch of the variant), `launches` at a time between two events,
// and reports the GPU time per launch; sets the bandwidth counters for `bytes` per launch.
void time_launches(benchmark::State& state, std::size_t bytes,
                   const std::function<void(curt::stream_ref)>& launch) {
  const curt::stream_ref stream = *g_stream;
  const int launches = bytes < (std::size_t(256) << 20) ? 16 : 2;
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

// ---- vec_add -------------------------------------------------------------------------------

struct vec_add_problem {
  vec_add_problem()
      : a(curt_example::random_values(kVecAddN, -1000.0f, 1000.0f)),
        b(curt_example::random_values(kVecAddN, -1000.0f, 1000.0f)),
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
  // c poisoned with NaN, one run, c compared with the CPU's a + b exactly (see the example).
  std::string check(const std::function<void(curt::stream_ref)>& launch) {
    curt::fill(device_c, std::numeric_limits<float>::quiet_NaN(), *g_stream);
    launch(*g_stream);
    std::vector<float> c(kVecAddN);
    curt::copy(c, device_c, *g_stream);
    g_stream->synchronize();
    for (std::size_t i = 0; i < kVecAddN; ++i)
      if (!(c[i] == a[i] + b[i])) return "vec_add: c[" + std::to_string(i) + "] is wrong";
    return {};
  }
  std::vector<float> a, b;
  curt::device_buffer<float> device_a, device_b, device_c;
  unsigned fill_blocks, tile_blocks;
};

vec_add_problem& vec_add_data() {
  static std::unique_ptr<vec_add_problem> p = std::make_unique<vec_add_problem>();
  return *p;
}

enum class vec_add_variant { kernel, float4, float4_tiles, thrust };

void vec_add_bench(benchmark::State& state, vec_add_variant v, const std::string& name) {
  vec_add_problem& p = vec_add_data();
  const float* a = p.device_a.data();
  const float* b = p.device_b.data();
  float* c = p.device_c.data();
  const std::function<void(curt::stream_ref)> launch = [&p, v, a, b, c](curt::stream_ref s) {
    switch (v) {
      case vec_add_variant::kernel:
        return vec_add_example::add_with_kernel(s, a, b, c, kVecAddN);
      case vec_add_variant::float4:
        return vec_add_example::add_with_float4(s, p.fill_blocks, a, b, c, kVecAddN);
      case vec_add_variant::float4_tiles:
        return vec_add_example::add_with_float4_tiles(s, p.tile_blocks, a, b, c, kVecAddN);
      case vec_add_variant::thrust:
        return vec_add_example::add_with_thrust(s, a, b, c, kVecAddN);
    }
  };
  if (!checked_ok(state, name, [&] { return p.check(launch); })) return;
  time_launches(state, 3 * kVecAddN * sizeof(float), launch);
}

// ---- Reductions ----------------------------------------------------------------------------

// One random float input of the largest size (the reduction example's inputs: positive mean,
// exponents -8..8); the smaller sizes reduce its first N elements.
struct reduce_input {
  reduce_input()
      : host(reduction_example::random_input<float>(kReduceSizes[std::size(kReduceSizes) - 1])),
        device(*g_device, host.size()) {
    curt::copy(device, host, *g_stream);
    g_stream->synchronize();
  }
  std::vector<float> host;
  curt::device_buffer<float> device;
};

reduce_input& reduce_data() {
  static std::unique_ptr<reduce_input> p = std::make_unique<reduce_input>();
  return *p;
}

template <class Op>
struct reduce_state {
  reduce_state()
      : reducer(*g_device, *g_stream, kReduceSizes[std::size(kReduceSizes) - 1]),
        result(*g_device, 1) {}
  reduction_example::reducer<float, Op> reducer;
  curt::device_buffer<typename Op::acc> result;
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
    std::string detail;
    const auto want =
        reduction_example::reference<float, Op>(in.host.data(), n, r.reducer.full_grid_threads());
    if (reduction_example::compare<float, Op>(got[0], want, detail)) return {};
    return name + ": " + detail;
  });
  if (!good) return;
  time_launches(state, n * sizeof(float), launch);
}

// ---- Histogram -----------------------------------------------------------------------------

struct histogram_input {
  explicit histogram_input(histogram_example::input_kind kind) : device(*g_device, kHistogramN) {
    curt::pinned_buffer<unsigned char> host(*g_device, kHistogramN);
    histogram_example::generate(kind, host.data(), kHistogramN);
    want = histogram_example::cpu_histogram(host.data(), kHistogramN);
    curt::copy(device, host, *g_stream);
    g_stream->synchronize();
  }
  curt::device_buffer<unsigned char> device;
  std::array<unsigned, histogram_example::kBins> want{};
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

enum class histogram_variant { automatic, per_warp, per_lane, cub };

void histogram_bench(benchmark::State& state, histogram_variant v,
                     histogram_example::input_kind kind, const std::string& name) {
  using histogram_example::bins_view;
  using histogram_example::samples_view;
  histogram_input& in = histogram_data(kind);
  histogram_state& h = histogram_of();
  const samples_view samples = curt::span(std::as_const(in.device));
  const bins_view bins = curt::span(h.bins);
  const auto launch = [&h, v, samples, bins](curt::stream_ref s) {
    switch (v) {
      case histogram_variant::automatic:
        return histogram_example::histogram_auto(h.plan, s, samples, bins);
      case histogram_variant::per_warp:
        return histogram_example::histogram_per_warp(h.plan, s, samples, bins);
      case histogram_variant::per_lane:
        return histogram_example::histogram_per_lane(h.plan, s, samples, bins);
      case histogram_variant::cub:
        return h.cub(s, samples, bins);
    }
  };
  const bool good = checked_ok(state, name, [&]() -> std::string {
    curt::fill(h.bins, 0xFFFFFFFFu, *g_stream);
    launch(*g_stream);
    std::array<unsigned, histogram_example::kBins> got{};
    curt::copy(got, h.bins, *g_stream);
    g_stream->synchronize();
    for (unsigned b = 0; b < histogram_example::kBins; ++b)
      if (got[b] != in.want[b])
        return name + ": bin " + std::to_string(b) + " is " + std::to_string(got[b]) +
               ", expected " + std::to_string(in.want[b]);
    return {};
  });
  if (!good) return;
  time_launches(state, kHistogramN + histogram_example::kBins * sizeof(unsigned), launch);
}

// ---- Transpose -----------------------------------------------------------------------------

struct transpose_problem {
  static constexpr std::size_t size = std::size_t(kTransposeSide) * kTransposeSide;
  transpose_problem()
      : in(curt_example::random_values(size, -1.0f, 1.0f)),
        device_in(*g_device, size),
        device_out(*g_device, size) {
    curt::copy(device_in, in, *g_stream);
    g_stream->synchronize();
  }
  std::vector<float> in;
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
    curt::fill(p.device_out, std::numeric_limits<float>::quiet_NaN(), *g_stream);
    launch(*g_stream);
    std::vector<float> out(transpose_problem::size);
    curt::copy(out, p.device_out, *g_stream);
    g_stream->synchronize();
    for (std::size_t r = 0; r < std::size_t(side); ++r)
      for (std::size_t c = 0; c < std::size_t(side); ++c) {
        const float want = p.in[r * side + c];
        const float got = v.transposes ? out[c * side + r] : out[r * side + c];
        if (std::memcmp(&got, &want, sizeof got) != 0)
          return name + ": element (" + std::to_string(r) + ", " + std::to_string(c) + ") is wrong";
      }
    return {};
  });
  if (!good) return;
  time_launches(state, 2 * transpose_problem::size * sizeof(float), launch);
}

// ---- Registration --------------------------------------------------------------------------

void add(const std::string& name, std::function<void(benchmark::State&)> body) {
  curt_bench::add(name, std::move(body), true)->MinTime(kMinTime);
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
      add(name, [chosen, n, name](benchmark::State& s) { reduce_bench<Op>(s, chosen, n, name); });
    }
}

void setup(curt::device d) {
  static curt::device device = d;
  static curt::stream stream(d);
  g_device = &device;
  g_stream = &stream;

  const std::pair<vec_add_variant, const char*> vec_add_variants[] = {
      {vec_add_variant::kernel, "kernel"},
      {vec_add_variant::float4, "float4"},
      {vec_add_variant::float4_tiles, "float4_tiles"},
      {vec_add_variant::thrust, "thrust"}};
  for (const auto& [v, v_name] : vec_add_variants) {
    const std::string name =
        std::string("kernel/vec_add/") + v_name + "/" + std::to_string(kVecAddN);
    const vec_add_variant chosen = v;
    add(name, [chosen, name](benchmark::State& s) { vec_add_bench(s, chosen, name); });
  }

  add_reductions<reduction_example::sum_of<float>>("sum");
  add_reductions<reduction_example::max_of<float>>("max");

  using histogram_example::input_kind;
  const std::pair<histogram_variant, const char*> histogram_variants[] = {
      {histogram_variant::automatic, "auto"},
      {histogram_variant::per_warp, "per_warp"},
      {histogram_variant::per_lane, "per_lane"},
      {histogram_variant::cub, "cub"}};
  for (input_kind kind : {input_kind::uniform, input_kind::skewed})
    for (const auto& [v, v_name] : histogram_variants) {
      const std::string name = std::string("kernel/histogram/") + v_name + "/" +
                               histogram_example::name_of(kind) + "/" + std::to_string(kHistogramN);
      const histogram_variant chosen = v;
      add(name,
          [chosen, kind, name](benchmark::State& s) { histogram_bench(s, chosen, kind, name); });
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
    add(name, [chosen, name](benchmark::State& s) { transpose_bench(s, chosen, name); });
  }
}

}  // namespace

int main(int argc, char** argv) { return curt_bench::run(argc, argv, "kernel_bench", setup); }
