// examples/common/example.hpp: what every example shares, so that each example file is about its
// kernels: the main wrapper (exit codes, no-GPU skip, errors), size arguments, a seeded random
// generator, GPU timing (median of curt::stream_timer runs), bandwidth, the device-to-device copy
// as the yardstick, and the result table every example prints last.
//
// Exit codes: 0 every variant matched the CPU reference, 1 a mismatch or a CUDA failure, 2 bad
// arguments, 77 no CUDA device (CTest's skip code for the examples).
#pragma once

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

namespace curt_example {

constexpr int skipped = 77;

/// Bad command-line arguments: the example prints the message and its usage, and exits with 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs `body()` as an example's main: 77 when there is no CUDA device, 2 on a usage_error, 1
/// with the message of any other exception; otherwise what body returns (0 or 1).
template <class Body>
int run(const char* name, const char* usage, Body&& body) {
  if (curt::device_count() == 0) {
    std::printf("%s: no CUDA device: skipped (%s)\n", name, curt::no_device_reason().c_str());
    return skipped;
  }
  try {
    return body();
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s\nusage: %s\n", name, e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    std::printf("%s: FAILED\n", name);
    return 1;
  }
}

/// Positional argument `index` (1 = the first) as a count in [low, high], or `fallback` when
/// absent. Throws usage_error for anything else (not a number, out of range, trailing junk).
inline std::size_t size_argument(int argc, char** argv, int index, std::size_t fallback,
                                 std::size_t low, std::size_t high) {
  if (index >= argc) return fallback;
  const char* text = argv[index];
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 0);
  if (end == text || *end != '\0' || text[0] == '-' || value < low || value > high)
    throw usage_error("argument " + std::to_string(index) + " (\"" + text + "\") must be a count from " +
                      std::to_string(low) + " to " + std::to_string(high));
  return static_cast<std::size_t>(value);
}

/// The random generator of this run: seeded from std::random_device, or from CURT_EXAMPLE_SEED
/// to repeat a run. The seed is printed once, so that a failure can be reproduced.
inline std::mt19937_64& rng() {
  static std::mt19937_64 generator = [] {
    unsigned long long seed = 0;
    if (const char* text = std::getenv("CURT_EXAMPLE_SEED"))
      seed = std::strtoull(text, nullptr, 0);
    else
      seed = (static_cast<unsigned long long>(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("random seed %llu (set CURT_EXAMPLE_SEED to repeat)\n", seed);
    return std::mt19937_64(seed);
  }();
  return generator;
}

/// `count` values uniform in [low, high] (integers) or [low, high) (floating point).
template <class T>
std::vector<T> random_values(std::size_t count, T low, T high) {
  std::vector<T> values(count);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> distribution(low, high);
    for (T& v : values) v = distribution(rng());
  } else {
    std::uniform_int_distribution<long long> distribution(low, high);
    for (T& v : values) v = static_cast<T>(distribution(rng()));
  }
  return values;
}

/// The median GPU time in milliseconds of `repetitions` runs of `work(stream)`, each timed by a
/// curt::stream_timer, after one untimed warm-up run (the first launch of a kernel loads it).
template <class Work>
double median_ms(curt::stream_ref stream, int repetitions, Work&& work) {
  work(stream);
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(repetitions));
  for (int i = 0; i < repetitions; ++i) {
    curt::stream_timer timer(stream);
    work(stream);
    times.push_back(timer.stop().count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Gigabytes (1e9 bytes) per second for `bytes` moved in `ms` milliseconds.
inline double gb_per_s(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0.0; }

/// The device-to-device copy bandwidth, read plus written, of a `bytes` copy (median of
/// `repetitions`): the practical limit of a kernel that reads and writes memory once, and the
/// yardstick every bandwidth in an example's table is divided by.
inline double copy_gb_per_s(curt::device device, curt::stream_ref stream, std::size_t bytes,
                            int repetitions = 10) {
  curt::device_buffer<unsigned char> from(device, bytes), to(device, bytes);
  curt::memset(from, 1, stream);
  const double ms = median_ms(stream, repetitions, [&](curt::stream_ref s) { curt::copy(to, from, s); });
  return gb_per_s(2.0 * static_cast<double>(bytes), ms);
}

/// The table an example prints last: one row per variant, PASS or FAIL against the CPU
/// reference, its time and bandwidth, and the bandwidth as a fraction of the copy's.
class table {
 public:
  table(std::string example, double copy_gb_per_s)
      : example_(std::move(example)), copy_(copy_gb_per_s) {}

  /// A variant that moved `bytes` (read plus written) in `ms`; `detail` says what was checked.
  void row(std::string variant, std::string size, bool passed, double ms, double bytes,
           std::string detail = {}) {
    rows_.push_back({std::move(variant), std::move(size), passed, ms, gb_per_s(bytes, ms),
                     std::move(detail)});
    all_passed_ = all_passed_ && passed;
  }

  bool all_passed() const noexcept { return all_passed_; }

  /// Prints the table and the verdict line; returns the exit code (0 or 1).
  int print() const {
    std::printf("\n%-34s %-22s %-6s %10s %10s %8s  %s\n", "variant", "size", "result", "ms",
                "GB/s", "of copy", "checked");
    for (const entry& r : rows_)
      std::printf("%-34s %-22s %-6s %10.4f %10.1f %7.2fx  %s\n", r.variant.c_str(),
                  r.size.c_str(), r.passed ? "PASS" : "FAIL", r.ms, r.gb_per_s,
                  copy_ > 0 ? r.gb_per_s / copy_ : 0.0, r.detail.c_str());
    std::printf("(device-to-device copy: %.1f GB/s, read plus written)\n", copy_);
    std::printf("%s: %s\n", example_.c_str(), all_passed_ ? "PASSED" : "FAILED");
    return all_passed_ ? 0 : 1;
  }

 private:
  struct entry {
    std::string variant;
    std::string size;
    bool passed;
    double ms;
    double gb_per_s;
    std::string detail;
  };
  std::string example_;
  double copy_;
  std::vector<entry> rows_;
  bool all_passed_ = true;
};

}  // namespace curt_example
