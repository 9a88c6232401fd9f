// Host test of benchmarks/harness.hpp (no GPU needed): the summary is printed only where Google
// Benchmark prints the console format (BENCHMARK_FORMAT in the environment counts, and the last
// --benchmark_format= wins), and a failed benchmark is counted for the exit code, also when
// --benchmark_report_aggregates_only hides the failed repetition from every reporter.
#include "harness.hpp"

#include <catch.hpp>

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace {

bool console(std::vector<const char*> args) {
  args.insert(args.begin(), "bench");
  return curt_bench::detail::console_format(static_cast<int>(args.size()), args.data());
}

// Counts the failed runs the reporters see, printing nothing.
class silent_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs)
      if (curt_bench::detail::run_failed(run, 0)) ++failed_runs;
  }
  int failed_runs = 0;
};

}  // namespace

TEST_CASE("the summary goes with the console format only, as Google Benchmark picks it") {
  ::unsetenv("BENCHMARK_FORMAT");
  CHECK(console({}));
  CHECK(console({"--benchmark_repetitions=3"}));
  CHECK_FALSE(console({"--benchmark_format=json"}));
  CHECK_FALSE(console({"--benchmark_format=csv"}));
  CHECK(console({"--benchmark_format=json", "--benchmark_format=console"}));  // the last wins
  CHECK(console({"--benchmark_out_format=json", "--benchmark_out=x.json"}));  // a file: stdout stays
  ::setenv("BENCHMARK_FORMAT", "json", 1);  // the library's default comes from the environment
  CHECK_FALSE(console({}));
  CHECK(console({"--benchmark_format=console"}));
  ::unsetenv("BENCHMARK_FORMAT");
}

TEST_CASE("every failed benchmark run is counted, also one the aggregates hide") {
  curt_bench::failures() = 0;
  benchmark::RegisterBenchmark("harness_test/passes", curt_bench::guarded([](benchmark::State& s) {
    for (auto _ : s) (void)_;
  }))->Iterations(1);
  benchmark::RegisterBenchmark("harness_test/throws", curt_bench::guarded([](benchmark::State& s) {
    for (auto _ : s) {
      (void)_;
      throw std::runtime_error("a curt call failed");
    }
  }))->Iterations(1);
  static int repetition = 0;
  repetition = 0;
  benchmark::RegisterBenchmark("harness_test/first_repetition_fails",
                               curt_bench::guarded([](benchmark::State& s) {
                                 const bool fail = repetition++ == 0;
                                 for (auto _ : s) {
                                   (void)_;
                                   if (fail) {
                                     s.SkipWithError("failed once");
                                     break;
                                   }
                                 }
                               }))
      ->Iterations(1)
      ->Repetitions(3)
      ->ReportAggregatesOnly(true);
  silent_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter, "harness_test/.*");
  benchmark::ClearRegisteredBenchmarks();
  CHECK(curt_bench::failures().load() == 2);  // "throws" and the first repetition
  CHECK(reporter.failed_runs == 1);           // what a reporter alone would have counted
}
