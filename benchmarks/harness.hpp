// benchmarks/harness.hpp: what every curt benchmark shares, on top of Google Benchmark (which
// gives repetitions, aggregates, filters and JSON; nothing here redoes that).
//
// - paired(): raw and curt alternate batch by batch inside one benchmark (A/B, then B/A), so drift
//   on a shared machine hits both alike; counters raw_ns, curt_ns (host ns per operation, medians
//   over the iterations) and curt_over_raw (median of the per-pair ratios).
// - gpu_timer: GPU time of a region from two CUDA events, for UseManualTime benchmarks.
// - l2_flush: a cold mode: overwrite a buffer larger than the L2 (60 MiB on the H200) before a
//   sample, so the sample reads from memory.
// - set_bandwidth(): bytes read + written per iteration, reported as bytes_per_second.
// - add(): registers a benchmark; a curt exception fails that benchmark, not the program (but
//   the program's exit code: guarded() counts failures).
// - run(): the common main(): exit code 77 without a device, 1 when a benchmark failed, device
//   and versions in the JSON context, the console table followed by a summary of the paired
//   benchmarks (console format only).
// - Host-side preparation of large inputs, CPU references and result checks, outside any timed
//   region: for_chunks() (a loop over fixed chunks on every core), random_word() (splitmix64 as
//   a counter: any part of a seed's stream, made in parallel, is the same on any machine) and
//   host_array (host memory that its filler touches first, in parallel, instead of a
//   std::vector's zeroing on one thread).
#pragma once

#include <curt/curt.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace curt_bench {

inline double median_of(std::vector<double> values) {
  if (values.empty()) return -1.0;
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  return values.size() % 2 ? values[half] : (values[half - 1] + values[half]) / 2.0;
}

/// Marks the benchmark failed when `status` is an error; true on success.
inline bool ok(benchmark::State& state, cudaError_t status) {
  if (status == cudaSuccess) return true;
  state.SkipWithError(cudaGetErrorName(status));
  return false;
}

/// Raw and curt alternating: each iteration times one batch of each (the order alternates), each
/// batch being `operations` operations, and calls `settle()` untimed after each batch (typically
/// a stream synchronize, so the next batch starts on an idle queue).
template <class Raw, class Curt, class Settle>
void paired(benchmark::State& state, int operations, Raw raw_batch, Curt curt_batch,
            Settle settle) {
  std::vector<double> raw_ns, curt_ns, ratio;
  auto timed = [&](auto&& batch) {
    const auto start = std::chrono::steady_clock::now();
    batch();
    const auto stop = std::chrono::steady_clock::now();
    settle();
    return std::chrono::duration<double, std::nano>(stop - start).count() / operations;
  };
  bool raw_first = true;
  for (auto _ : state) {
    (void)_;
    double r = 0.0, c = 0.0;
    if (raw_first) {
      r = timed(raw_batch);
      c = timed(curt_batch);
    } else {
      c = timed(curt_batch);
      r = timed(raw_batch);
    }
    raw_first = !raw_first;
    if (!ok(state, cudaGetLastError())) return;
    raw_ns.push_back(r);
    curt_ns.push_back(c);
    ratio.push_back(c / r);
  }
  state.SetItemsProcessed(state.iterations() * 2 * operations);
  state.counters["raw_ns"] = median_of(raw_ns);
  state.counters["curt_ns"] = median_of(curt_ns);
  state.counters["curt_over_raw"] = median_of(ratio);
}

/// GPU time of a region on a stream, from two events: start(), enqueue, stop() reports it to
/// Google Benchmark (a UseManualTime benchmark).
class gpu_timer {
 public:
  explicit gpu_timer(curt::stream_ref stream)
      : stream_(stream),
        start_(stream.device(), curt::event_flags::timing),
        stop_(stream.device(), curt::event_flags::timing) {}
  void start() { start_.record(stream_); }
  /// Records the end, waits for it and hands the seconds to `state`; returns them too.
  double stop(benchmark::State& state) {
    stop_.record(stream_);
    stop_.synchronize();
    const double seconds = curt::elapsed(start_, stop_).count() / 1e3;
    state.SetIterationTime(seconds);
    return seconds;
  }

 private:
  curt::stream_ref stream_;
  curt::event start_;
  curt::event stop_;
};

/// Evicts the L2 before a cold sample: writes a buffer twice the L2's size on the stream.
class l2_flush {
 public:
  explicit l2_flush(curt::device d)
      : bytes_(2 * static_cast<std::size_t>(std::max(d.l2_cache_size(), 1 << 20))) {
    curt::device_guard guard(d);
    CURT_CHECK(cudaMalloc(&buffer_, bytes_));
  }
  ~l2_flush() {
    if (buffer_) (void)cudaFree(buffer_);
  }
  l2_flush(const l2_flush&) = delete;
  l2_flush& operator=(const l2_flush&) = delete;
  void operator()(curt::stream_ref stream) {
    CURT_CHECK(cudaMemsetAsync(buffer_, ++pattern_, bytes_, stream));
  }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void* buffer_ = nullptr;
  std::size_t bytes_;
  unsigned char pattern_ = 0;
};

/// Bytes read + written per iteration: Google Benchmark reports bytes_per_second from it.
inline void set_bandwidth(benchmark::State& state, std::size_t bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes_per_iteration));
}

/// How many benchmark runs failed (an exception, or SkipWithError): run() exits with 1 when any
/// did, so that a script sees the failure (with --benchmark_report_aggregates_only a failed
/// repetition does not reach the reporters when two others succeeded).
inline std::atomic<int>& failures() {
  static std::atomic<int> count{0};
  return count;
}

/// `function` as a benchmark body: a curt exception fails that benchmark instead of the program,
/// and every failure is counted in failures(). Every benchmark of a harness program is
/// registered through it (add() does).
inline auto guarded(std::function<void(benchmark::State&)> function) {
  return [function = std::move(function)](benchmark::State& state) {
    try {
      function(state);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
    }
    if (state.error_occurred()) failures().fetch_add(1);
  };
}

/// Registers `function` as `name` (real time, or GPU time with gpu_time); a curt exception fails
/// that benchmark instead of the program.
inline benchmark::internal::Benchmark* add(const std::string& name,
                                           std::function<void(benchmark::State&)> function,
                                           bool gpu_time = false) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), guarded(std::move(function)));
  if (gpu_time)
    b->UseManualTime();
  else
    b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
  return b;
}

// ---- Host-side preparation: inputs, CPU references, checks ----------------------------------

/// Threads for host-side preparation: one per core.
inline unsigned host_threads() {
  static const unsigned count = std::max(1u, std::thread::hardware_concurrency());
  return count;
}

/// Calls f(begin, end) for every chunk [k * chunk, min(n, (k + 1) * chunk)) of [0, n), the chunks
/// handed out in turn to host_threads() threads (this one among them); returns when all are
/// done, rethrowing the first exception f threw (the chunks not started by then are skipped).
/// The chunks do not depend on the number of threads, so whatever is made chunk by chunk (random
/// numbers from random_word, partial sums combined in chunk order) is the same on any machine.
template <class F>
void for_chunks(std::size_t n, std::size_t chunk, const F& f) {
  if (n == 0) return;
  chunk = std::max<std::size_t>(chunk, 1);
  const std::size_t chunks = (n - 1) / chunk + 1;
  std::atomic<std::size_t> next{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&] {
    for (std::size_t k = next.fetch_add(1); k < chunks; k = next.fetch_add(1)) {
      try {
        f(k * chunk, std::min(n, (k + 1) * chunk));
      } catch (...) {
        const std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(chunks);
      }
    }
  };
  std::vector<std::thread> helpers;
  const std::size_t threads = std::min<std::size_t>(host_threads(), chunks);
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
  if (failure) std::rethrow_exception(failure);
}

/// Word `index` of the splitmix64 stream seeded with `seed` (Steele, Lea and Flood, "Fast
/// splittable pseudorandom number generators", 2014): the generator's state after index + 1
/// steps is seed + (index + 1) * gamma, so any word can be made on its own, and a stream split
/// into chunks that for_chunks fills in parallel is the same stream as one made in a loop.
constexpr std::uint64_t random_word(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// `count` elements of host memory, not initialized: what fills them first also touches their
/// pages, in parallel through for_chunks (a std::vector of a GiB spends longer zeroing it on one
/// thread than the filling takes). A range for curt::copy (data(), size()).
template <class T>
class host_array {
 public:
  host_array() = default;
  explicit host_array(std::size_t count) : data_(new T[count]), size_(count) {}
  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t size_ = 0;
};

namespace detail {

// Whether Google Benchmark will print the console format on stdout: as the library decides it,
// from BENCHMARK_FORMAT in the environment, then each --benchmark_format=, the last one winning.
// (The summary goes after a console table only, never into JSON or CSV on stdout.)
inline bool console_format(int argc, const char* const* argv) {
  const char* env = std::getenv("BENCHMARK_FORMAT");
  std::string format = env ? env : "console";
  const std::string flag = "--benchmark_format=";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.compare(0, flag.size(), flag) == 0) format = arg.substr(flag.size());
  }
  return format == "console";
}

// Benchmark 1.7 marks a failed run with error_occurred, 1.8 with skipped.
template <class Run>
auto run_failed(const Run& run, int) -> decltype(static_cast<bool>(run.skipped)) {
  return static_cast<bool>(run.skipped);
}
template <class Run>
auto run_failed(const Run& run, long) -> decltype(static_cast<bool>(run.error_occurred)) {
  return static_cast<bool>(run.error_occurred);
}

inline std::string number(double value, const char* format) {
  if (value < 0.0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// The console reporter, keeping the paired counters (medians over repetitions when they ran) for
// a summary table printed last.
class paired_summary : public benchmark::ConsoleReporter {
 public:
  using benchmark::ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run_failed(run, 0)) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (!median && run.run_type != Run::RT_Iteration) continue;
      for (const char* counter : {"raw_ns", "curt_ns", "curt_over_raw"}) {
        auto it = run.counters.find(counter);
        if (it == run.counters.end()) continue;
        entry& e = results_[run.run_name.function_name][counter];
        if (median)
          e.median = it->second.value;
        else
          e.samples.push_back(it->second.value);
      }
    }
  }

  void print() const {
    if (results_.empty()) return;
    std::size_t width = 9;
    for (const auto& r : results_) width = std::max(width, r.first.size());
    const int w = static_cast<int>(width);
    std::printf("\npaired host cost (raw and curt alternating; medians)\n\n%-*s | %10s | %10s | "
                "%10s\n%s\n",
                w, "operation", "raw ns", "curt ns", "curt / raw",
                std::string(width + 39, '-').c_str());
    for (const auto& r : results_) {
      auto value = [&](const char* counter) {
        auto it = r.second.find(counter);
        return it == r.second.end() ? -1.0 : it->second.value();
      };
      std::printf("%-*s | %10s | %10s | %10s\n", w, r.first.c_str(),
                  number(value("raw_ns"), "%.1f").c_str(), number(value("curt_ns"), "%.1f").c_str(),
                  number(value("curt_over_raw"), "%.3f").c_str());
    }
  }

 private:
  struct entry {
    double median = -1.0;
    std::vector<double> samples;
    double value() const { return median >= 0.0 ? median : median_of(samples); }
  };
  std::map<std::string, std::map<std::string, entry>> results_;
};

}  // namespace detail

/// Runs the registered benchmarks; in the console format (`console`) through a Reporter, whose
/// print() follows the table.
template <class Reporter = detail::paired_summary>
void run_registered(bool console) {
  if (console) {
    Reporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                            : benchmark::ConsoleReporter::OO_Tabular);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    std::fflush(stdout);
    reporter.print();
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
}

/// The common main(): `setup(device)` registers the benchmarks (and may warm up) before they
/// run. Returns the process's exit code (77: no device). Reporter: a ConsoleReporter with
/// print(), called after the run (the console format only).
template <class Reporter = detail::paired_summary>
int run(int argc, char** argv, const char* program,
        const std::function<void(curt::device)>& setup) {
  const bool console = detail::console_format(argc, argv);  // the summary: console format only
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (curt::device_count() == 0) {  // on stderr: stdout may be meant to hold JSON or CSV
    std::fprintf(stderr, "no CUDA device: skipped (%s)\n", curt::no_device_reason().c_str());
    return 77;
  }
  try {
    const curt::device device(0);
    curt::set_current_device(device);
    setup(device);
    benchmark::AddCustomContext("curt_device", device.name());
    benchmark::AddCustomContext("curt_cuda_runtime", curt::runtime_version().to_string());
    benchmark::AddCustomContext("curt_cuda_driver", curt::driver_version().to_string());
    run_registered<Reporter>(console);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  benchmark::Shutdown();
  if (const int failed = failures().load()) {
    std::fprintf(stderr, "%s: %d benchmark run%s failed\n", program, failed,
                 failed == 1 ? "" : "s");
    return 1;
  }
  return 0;
}

}  // namespace curt_bench
