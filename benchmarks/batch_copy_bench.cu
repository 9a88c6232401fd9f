// batch_copy_bench: 1000 small copies (4 KiB each) enqueued four ways, side by side in one run:
//   loop        1000 cudaMemcpyAsync calls
//   raw_batch   one cudaMemcpyBatchAsync (runtime, arrays built once)
//   curt        one curt::copy_batch::submit (batch built once; it calls the driver's
//               cuMemcpyBatchAsync of the 12.8 ABI, for the failing index, after asking whether
//               the stream is capturing)
//   curt_build  clear() + 1000 add_bytes() + submit(): the builder's cost as well (storage kept)
// for pinned host -> device and device -> device.
//
// Each benchmark iteration runs every variant once, in an order that rotates from iteration to
// iteration (so machine drift hits all alike), each between two CUDA events on an idle stream:
//   host_us  host time of the submission alone (the calls above; not the synchronize)
//   gpu_us   GPU time between the events (the copies and the gaps between them)
// Reported per direction: the medians of each variant, curt_over_raw (host and GPU: median of the
// per-iteration ratios curt / raw_batch) and raw_over_loop. A summary table follows the run.
//   batch_copy_bench --benchmark_repetitions=5 --benchmark_min_time=2
// Exit code 77 when there is no device.

#include "harness.hpp"

#include <curt/batch_copy.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kCopies = 1000;
constexpr std::size_t kBytes = 4096;

enum variant { loop = 0, raw_batch, curt_batch, curt_build, variant_count };
const char* variant_names[variant_count] = {"loop", "raw_batch", "curt", "curt_build"};

using curt_bench::median_of;

// Every sample of every run, by direction: the summary's medians cover all repetitions.
struct samples {
  std::vector<double> host_us[variant_count];
  std::vector<double> gpu_us[variant_count];
  std::vector<double> host_ratio, gpu_ratio;  // curt / raw_batch, per iteration
};
std::map<std::string, samples>& all_samples() {
  static std::map<std::string, samples> table;
  return table;
}

// Memory freed on destruction.
struct pinned_memory {
  void* p = nullptr;
  explicit pinned_memory(std::size_t n) { CURT_CHECK(cudaMallocHost(&p, n)); }
  ~pinned_memory() { (void)cudaFreeHost(p); }
  pinned_memory(const pinned_memory&) = delete;
  pinned_memory& operator=(const pinned_memory&) = delete;
};
struct device_memory {
  void* p = nullptr;
  explicit device_memory(std::size_t n) {
    CURT_CHECK(cudaMalloc(&p, n));
    CURT_CHECK(cudaMemset(p, 0, n));
  }
  ~device_memory() { (void)cudaFree(p); }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
};

struct setup {
  curt::device device{0};
  curt::stream stream{device};
  pinned_memory pinned_source{kCopies * kBytes};
  device_memory device_source{kCopies * kBytes};
  device_memory destination{kCopies * kBytes};
  cudaEvent_t start = nullptr, stop = nullptr;
  setup() {
    CURT_CHECK(cudaEventCreate(&start));
    CURT_CHECK(cudaEventCreate(&stop));
  }
  ~setup() {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
  }
};
setup* g = nullptr;

void run_direction(benchmark::State& state, const char* name, void* source_base) {
  const cudaStream_t stream = g->stream;
  auto* dst = static_cast<unsigned char*>(g->destination.p);
  auto* src = static_cast<unsigned char*>(source_base);
  // The raw arrays, built once.
  std::vector<void*> dsts(kCopies);
  std::vector<const void*> srcs(kCopies);
  std::vector<std::size_t> sizes(kCopies, kBytes);
  for (std::size_t i = 0; i < kCopies; ++i) {
    dsts[i] = dst + i * kBytes;
    srcs[i] = src + i * kBytes;
  }
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t attribute_index = 0;
  // The curt batch, built once; and one refilled each time.
  curt::copy_batch batch(kCopies), rebuilt(kCopies);
  for (std::size_t i = 0; i < kCopies; ++i) batch.add_bytes(dsts[i], srcs[i], kBytes);

  auto submit = [&](int v) {
    switch (v) {
      case loop:
        for (std::size_t i = 0; i < kCopies; ++i)
          CURT_CHECK(cudaMemcpyAsync(dsts[i], srcs[i], kBytes, cudaMemcpyDefault, stream));
        break;
      case raw_batch:
        CURT_CHECK(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), kCopies,
                                        &attributes, &attribute_index, 1, stream));
        break;
      case curt_batch:
        batch.submit(g->stream);
        break;
      case curt_build:
        rebuilt.clear();
        for (std::size_t i = 0; i < kCopies; ++i) rebuilt.add_bytes(dsts[i], srcs[i], kBytes);
        rebuilt.submit(g->stream);
        break;
    }
  };
  // Measures one variant: host time of the submission, GPU time between the events.
  auto measure = [&](int v, double& host_us, double& gpu_us) {
    CURT_CHECK(cudaEventRecord(g->start, stream));
    const auto t0 = std::chrono::steady_clock::now();
    submit(v);
    const auto t1 = std::chrono::steady_clock::now();
    CURT_CHECK(cudaEventRecord(g->stop, stream));
    CURT_CHECK(cudaEventSynchronize(g->stop));
    float ms = 0.0f;
    CURT_CHECK(cudaEventElapsedTime(&ms, g->start, g->stop));
    host_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    gpu_us = ms * 1e3;
  };

  for (int v = 0; v < variant_count; ++v) {  // warm-up: first-use costs out of the way
    double h = 0, d = 0;
    measure(v, h, d);
  }
  samples& s = all_samples()[name];
  std::vector<double> host[variant_count], gpu[variant_count], host_ratio, gpu_ratio;
  int first = 0;
  for (auto _ : state) {
    (void)_;
    double h[variant_count], d[variant_count];
    for (int k = 0; k < variant_count; ++k) {
      const int v = (first + k) % variant_count;
      measure(v, h[v], d[v]);
    }
    first = (first + 1) % variant_count;
    for (int v = 0; v < variant_count; ++v) {
      host[v].push_back(h[v]);
      gpu[v].push_back(d[v]);
      s.host_us[v].push_back(h[v]);
      s.gpu_us[v].push_back(d[v]);
    }
    host_ratio.push_back(h[curt_batch] / h[raw_batch]);
    gpu_ratio.push_back(d[curt_batch] / d[raw_batch]);
    s.host_ratio.push_back(host_ratio.back());
    s.gpu_ratio.push_back(gpu_ratio.back());
  }
  for (int v = 0; v < variant_count; ++v) {
    state.counters[std::string(variant_names[v]) + "_host_us"] = median_of(host[v]);
    state.counters[std::string(variant_names[v]) + "_gpu_us"] = median_of(gpu[v]);
  }
  state.counters["curt_over_raw_host"] = median_of(host_ratio);
  state.counters["curt_over_raw_gpu"] = median_of(gpu_ratio);
  state.counters["raw_over_loop_host"] = median_of(host[raw_batch]) / median_of(host[loop]);
  state.counters["raw_over_loop_gpu"] = median_of(gpu[raw_batch]) / median_of(gpu[loop]);
}

void pinned_to_device(benchmark::State& state) {
  run_direction(state, "pinned_to_device", g->pinned_source.p);
}
void device_to_device(benchmark::State& state) {
  run_direction(state, "device_to_device", g->device_source.p);
}

void add(const char* name, void (*function)(benchmark::State&)) {
  benchmark::RegisterBenchmark(name, curt_bench::guarded(function))  // counts failures
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

void print_summary() {
  if (all_samples().empty()) return;
  std::printf("\nSummary: %zu copies of %zu bytes, medians over every iteration of every "
              "repetition\n(host: the submission alone; GPU: between events around it)\n\n",
              kCopies, kBytes);
  std::printf("%-18s | %-10s | %12s | %12s\n", "direction", "variant", "host us", "GPU us");
  for (const auto& [direction, s] : all_samples()) {
    for (int v = 0; v < variant_count; ++v)
      std::printf("%-18s | %-10s | %12.1f | %12.1f\n", direction.c_str(), variant_names[v],
                  median_of(s.host_us[v]), median_of(s.gpu_us[v]));
    std::printf("%-18s | curt / raw_batch: host %.3f, GPU %.3f; raw_batch / loop: host %.3f, "
                "GPU %.3f\n",
                direction.c_str(), median_of(s.host_ratio), median_of(s.gpu_ratio),
                median_of(s.host_us[raw_batch]) / median_of(s.host_us[loop]),
                median_of(s.gpu_us[raw_batch]) / median_of(s.gpu_us[loop]));
  }
}

// The console table, then the summary above.
class summary_reporter : public benchmark::ConsoleReporter {
 public:
  using benchmark::ConsoleReporter::ConsoleReporter;
  void print() const { print_summary(); }
};

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<setup> s;
  return curt_bench::run<summary_reporter>(argc, argv, "batch_copy_bench", [&](curt::device) {
    s = std::make_unique<setup>();
    g = s.get();
    add("batch_copy/pinned_to_device", pinned_to_device);
    add("batch_copy/device_to_device", device_to_device);
  });
}
