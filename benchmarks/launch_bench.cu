// launch_bench: what curt costs over the raw CUDA runtime, every variant measured in one run.
//
// Host side (wall-clock time, UseRealTime): kBatch submissions, then one synchronize, per
// operation:
//   launch/<group>/<variant>   an empty kernel (group empty), the same with a 2-block cluster
//                              (cluster2) and with programmatic dependent launch (pdl), and a
//                              kernel taking (float*, int, float) (args); variants: <<<>>>
//                              (chevron), cudaLaunchKernelEx with a cudaLaunchConfig_t built once
//                              (launch_kernel_ex, the call curt makes) and curt::launch with a
//                              launch_config built once (curt)
//   event_record/...           cudaEventRecord vs curt::event::record, timing and no-timing events
//   stream_wait_event/...      cudaStreamWaitEvent vs curt::stream::wait(event)
// and, one per iteration: stream_create_destroy/... and event_create_destroy/... (raw vs RAII).
// GPU side (UseManualTime, CUDA events): gpu_time/saxpy/... a 1M-element saxpy through the raw API
// and through curt; the GPU does the same work, so the times should match.
// paired/...: raw and curt alternate batch by batch in one benchmark (see "Paired host cost");
// the most precise measure of curt's host overhead, since machine drift hits both alike.
// paired/launch/library_args[_typed] (where curt::rtc is built, CURT_BENCH_HAS_RTC): the args
// kernel compiled at start-up with NVRTC and loaded as a curt::library; the driver's
// cuLaunchKernelEx of its CUkernel against curt::launch of the library_kernel (argument sizes
// checked against its layout) and of its typed view.
//
// Run the variants interleaved and report medians:
//   launch_bench --benchmark_enable_random_interleaving=true --benchmark_repetitions=10
//                --benchmark_report_aggregates_only=true
//                [--benchmark_out=launch_bench.json --benchmark_out_format=json]
// The batched benchmarks also report submit_ns, the host time of the submissions alone (the
// synchronize left out), per operation. With the console format (the default) a summary follows
// the run: each variant's median time per operation and its ratio to the raw call of its group,
// then the same for submit_ns. Exit code 77 when there is no device.

#include "harness.hpp"

#include <curt/curt.hpp>
#if defined(CURT_BENCH_HAS_RTC)
#  include <curt/driver.hpp>
#  include <curt/library.hpp>
#  include <curt/rtc.hpp>
#endif

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace bench {

constexpr int kBatch = 256;              // submissions per synchronize
constexpr int kSaxpyElements = 1 << 20;  // the GPU-time kernel's size
constexpr unsigned kSaxpyBlockThreads = 256;

__global__ void empty_kernel() {}

// <<<>>> has no way to ask for a cluster at launch: the kernel carries its cluster shape.
__global__ void __cluster_dims__(2, 1, 1) empty_cluster_kernel() {}

__global__ void args_kernel(float* data, int n, float value) {
  if (n < 0) data[0] = value;  // never taken (n >= 0), but keeps every argument alive
}

__global__ void saxpy_kernel(const float* x, float* y, int n, float a) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

// Device memory, freed on destruction.
class device_floats {
 public:
  explicit device_floats(std::size_t count) : bytes_(count * sizeof(float)) {
    CURT_CHECK(cudaMalloc(&data_, bytes_));
    CURT_CHECK(cudaMemset(data_, 0, bytes_));  // everything the GPU reads is initialized
  }
  ~device_floats() {
    if (data_) (void)cudaFree(data_);
  }
  device_floats(const device_floats&) = delete;
  device_floats& operator=(const device_floats&) = delete;
  float* get() const noexcept { return data_; }

 private:
  float* data_ = nullptr;
  std::size_t bytes_;
};

// What every benchmark uses: created once in main, after the device check.
struct context {
  curt::device device;
  curt::stream stream;  // every benchmark submits its work here
  curt::stream other;   // records the event `stream` waits on
  device_floats args_buffer{1};
  device_floats x{kSaxpyElements};
  device_floats y{kSaxpyElements};

#if defined(CURT_BENCH_HAS_RTC)
  // args_kernel's twin, compiled at run time for this device.
  curt::library library{curt::no_handle};
  explicit context(curt::device d) : device(d), stream(d), other(d) {
    const char* source = "extern \"C\" __global__ void args_kernel(float* data, int n, float v) {"
                         " if (n < 0) data[0] = v; }";
    library = curt::library(curt::rtc::program("args_kernel.cu", source)
                                .compile(curt::rtc::options().architecture(d))
                                .image());
  }
#else
  explicit context(curt::device d) : device(d), stream(d), other(d) {}
#endif
};

context* g = nullptr;

// Operations per iteration of each benchmark, by name, for the summary.
std::map<std::string, int>& operations_per_iteration() {
  static std::map<std::string, int> table;
  return table;
}

using curt_bench::ok;

// The raw variants' synchronize: wait, then pick up any launch error.
bool raw_sync(benchmark::State& state, cudaStream_t stream) {
  return ok(state, cudaStreamSynchronize(stream)) && ok(state, cudaGetLastError());
}

// Host time of the submissions alone (the synchronize left out), per operation, reported as the
// counter submit_ns: where the GPU, not the host, limits a batch, this is what tells curt's host
// cost apart from the raw call's.
class submit_timer {
 public:
  void start() noexcept { start_ = std::chrono::steady_clock::now(); }
  void stop() noexcept {
    total_ns_ +=
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start_).count();
  }
  // Items processed and submit_ns, for a benchmark of kBatch operations per iteration.
  void report(benchmark::State& state) const {
    state.SetItemsProcessed(state.iterations() * kBatch);
    state.counters["submit_ns"] =
        benchmark::Counter(total_ns_ / kBatch, benchmark::Counter::kAvgIterations);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  double total_ns_ = 0.0;
};

// ---------------------------------------------------------------------------------------------
// Launches

enum class feature { plain, cluster, pdl };

dim3 grid_for(feature f) { return dim3(f == feature::cluster ? 2u : 1u); }

// A cudaLaunchConfig_t with its attribute, as a user of the raw API writes it. Not copyable:
// config.attrs points into the object.
struct raw_launch {
  cudaLaunchAttribute attribute[1] = {};
  cudaLaunchConfig_t config = {};

  raw_launch(cudaStream_t stream, feature f) {
    config.gridDim = grid_for(f);
    config.blockDim = dim3(1);
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = 0;
    if (f == feature::cluster) {
      attribute[0].id = cudaLaunchAttributeClusterDimension;
      attribute[0].val.clusterDim.x = 2;
      attribute[0].val.clusterDim.y = 1;
      attribute[0].val.clusterDim.z = 1;
      config.numAttrs = 1;
    } else if (f == feature::pdl) {
      attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute[0].val.programmaticStreamSerializationAllowed = 1;
      config.numAttrs = 1;
    }
  }
  raw_launch(const raw_launch&) = delete;
  raw_launch& operator=(const raw_launch&) = delete;
};

curt::launch_config curt_config(feature f) {
  curt::launch_config config(grid_for(f), dim3(1));
  if (f == feature::cluster) config.cluster_dims(dim3(2));
  if (f == feature::pdl) config.programmatic_stream_serialization();
  return config;
}

void launch_chevron_empty(benchmark::State& state) {
  submit_timer submit;
  const cudaStream_t stream = g->stream;
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) empty_kernel<<<1, 1, 0, stream>>>();
    submit.stop();
    if (!raw_sync(state, stream)) break;
  }
  submit.report(state);
}

void launch_chevron_cluster(benchmark::State& state) {
  submit_timer submit;
  const cudaStream_t stream = g->stream;
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) empty_cluster_kernel<<<2, 1, 0, stream>>>();
    submit.stop();
    if (!raw_sync(state, stream)) break;
  }
  submit.report(state);
}

template <feature F>
void launch_ex_empty(benchmark::State& state) {
  submit_timer submit;
  const raw_launch raw(g->stream, F);
  for (auto _ : state) {
    (void)_;
    cudaError_t status = cudaSuccess;
    submit.start();
    for (int i = 0; i < kBatch && status == cudaSuccess; ++i)
      status = cudaLaunchKernelEx(&raw.config, empty_kernel);
    submit.stop();
    if (!ok(state, status) || !raw_sync(state, g->stream)) break;
  }
  submit.report(state);
}

template <feature F>
void launch_curt_empty(benchmark::State& state) {
  submit_timer submit;
  const curt::launch_config config = curt_config(F);
  const curt::stream_ref stream = g->stream;
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) curt::launch(stream, config, empty_kernel);
    submit.stop();
    stream.synchronize();
  }
  submit.report(state);
}

void launch_chevron_args(benchmark::State& state) {
  submit_timer submit;
  const cudaStream_t stream = g->stream;
  float* data = g->args_buffer.get();
  int n = 1;
  float value = 2.0f;
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) args_kernel<<<1, 1, 0, stream>>>(data, n, value);
    submit.stop();
    if (!raw_sync(state, stream)) break;
  }
  submit.report(state);
}

void launch_ex_args(benchmark::State& state) {
  submit_timer submit;
  const raw_launch raw(g->stream, feature::plain);
  float* data = g->args_buffer.get();
  int n = 1;
  float value = 2.0f;
  for (auto _ : state) {
    (void)_;
    cudaError_t status = cudaSuccess;
    submit.start();
    for (int i = 0; i < kBatch && status == cudaSuccess; ++i)
      status = cudaLaunchKernelEx(&raw.config, args_kernel, data, n, value);
    submit.stop();
    if (!ok(state, status) || !raw_sync(state, g->stream)) break;
  }
  submit.report(state);
}

void launch_curt_args(benchmark::State& state) {
  submit_timer submit;
  const curt::launch_config config = curt_config(feature::plain);
  const curt::stream_ref stream = g->stream;
  float* data = g->args_buffer.get();
  int n = 1;
  float value = 2.0f;
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) curt::launch(stream, config, args_kernel, data, n, value);
    submit.stop();
    stream.synchronize();
  }
  submit.report(state);
}

// ---------------------------------------------------------------------------------------------
// Events and streams

template <bool Timing>
void event_record_raw(benchmark::State& state) {
  submit_timer submit;
  const cudaStream_t stream = g->stream;
  cudaEvent_t event = nullptr;
  if (!ok(state,
          cudaEventCreateWithFlags(&event, Timing ? cudaEventDefault : cudaEventDisableTiming)))
    return;
  for (auto _ : state) {
    (void)_;
    cudaError_t status = cudaSuccess;
    submit.start();
    for (int i = 0; i < kBatch && status == cudaSuccess; ++i)
      status = cudaEventRecord(event, stream);
    submit.stop();
    if (!ok(state, status) || !raw_sync(state, stream)) break;
  }
  (void)cudaStreamSynchronize(stream);
  (void)cudaEventDestroy(event);
  submit.report(state);
}

template <bool Timing>
void event_record_curt(benchmark::State& state) {
  submit_timer submit;
  const curt::stream_ref stream = g->stream;
  const curt::event event(g->device, Timing ? curt::event_flags::timing : curt::event_flags::none);
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) event.record(stream);
    submit.stop();
    stream.synchronize();
  }
  stream.synchronize();
  submit.report(state);
}

// The waited-on event is recorded on the other stream once, before the loop: the loop measures
// the wait alone.
void stream_wait_raw(benchmark::State& state) {
  submit_timer submit;
  const cudaStream_t stream = g->stream;
  const cudaStream_t other = g->other;
  cudaEvent_t event = nullptr;
  if (!ok(state, cudaEventCreateWithFlags(&event, cudaEventDisableTiming))) return;
  if (ok(state, cudaEventRecord(event, other)) && ok(state, cudaStreamSynchronize(other))) {
    for (auto _ : state) {
      (void)_;
      cudaError_t status = cudaSuccess;
      submit.start();
      for (int i = 0; i < kBatch && status == cudaSuccess; ++i)
        status = cudaStreamWaitEvent(stream, event, 0);
      submit.stop();
      if (!ok(state, status) || !raw_sync(state, stream)) break;
    }
  }
  (void)cudaStreamSynchronize(stream);
  (void)cudaEventDestroy(event);
  submit.report(state);
}

void stream_wait_curt(benchmark::State& state) {
  submit_timer submit;
  const curt::stream_ref stream = g->stream;
  const curt::event event(g->device);
  event.record(g->other);
  g->other.synchronize();
  for (auto _ : state) {
    (void)_;
    submit.start();
    for (int i = 0; i < kBatch; ++i) stream.wait(event);
    submit.stop();
    stream.synchronize();
  }
  submit.report(state);
}

void stream_create_raw(benchmark::State& state) {
  for (auto _ : state) {
    (void)_;
    cudaStream_t stream = nullptr;
    if (!ok(state, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking))) break;
    if (!ok(state, cudaStreamDestroy(stream))) break;
  }
  state.SetItemsProcessed(state.iterations());
}

void stream_create_curt(benchmark::State& state) {
  for (auto _ : state) {
    (void)_;
    curt::stream stream(g->device);  // non-blocking, priority 0: the raw variant's stream
    (void)stream;
  }
  state.SetItemsProcessed(state.iterations());
}

void event_create_raw(benchmark::State& state) {
  for (auto _ : state) {
    (void)_;
    cudaEvent_t event = nullptr;
    if (!ok(state, cudaEventCreateWithFlags(&event, cudaEventDisableTiming))) break;
    if (!ok(state, cudaEventDestroy(event))) break;
  }
  state.SetItemsProcessed(state.iterations());
}

void event_create_curt(benchmark::State& state) {
  for (auto _ : state) {
    (void)_;
    curt::event event(g->device);  // event_flags::none: no timing, the raw variant's event
    (void)event;
  }
  state.SetItemsProcessed(state.iterations());
}

// ---------------------------------------------------------------------------------------------
// GPU time of one small kernel, from CUDA events

unsigned saxpy_grid() { return curt::ceil_div(kSaxpyElements, kSaxpyBlockThreads); }

void gpu_time_raw(benchmark::State& state) {
  const cudaStream_t stream = g->stream;
  float* x = g->x.get();
  float* y = g->y.get();
  cudaEvent_t start = nullptr, stop = nullptr;
  if (ok(state, cudaEventCreate(&start)) && ok(state, cudaEventCreate(&stop))) {
    for (auto _ : state) {
      (void)_;
      float ms = 0.0f;
      cudaError_t status = cudaEventRecord(start, stream);
      if (status == cudaSuccess) {
        saxpy_kernel<<<saxpy_grid(), kSaxpyBlockThreads, 0, stream>>>(x, y, kSaxpyElements, 0.5f);
        status = cudaGetLastError();
      }
      if (status == cudaSuccess) status = cudaEventRecord(stop, stream);
      if (status == cudaSuccess) status = cudaEventSynchronize(stop);
      if (status == cudaSuccess) status = cudaEventElapsedTime(&ms, start, stop);
      if (!ok(state, status)) break;
      state.SetIterationTime(ms * 1e-3);
    }
  }
  (void)cudaStreamSynchronize(stream);
  if (start) (void)cudaEventDestroy(start);
  if (stop) (void)cudaEventDestroy(stop);
  state.SetItemsProcessed(state.iterations());
}

void gpu_time_curt(benchmark::State& state) {
  const curt::stream_ref stream = g->stream;
  const curt::launch_config config{dim3(saxpy_grid()), dim3(kSaxpyBlockThreads)};
  const curt::event start(g->device, curt::event_flags::timing);
  const curt::event stop(g->device, curt::event_flags::timing);
  float* x = g->x.get();
  float* y = g->y.get();
  for (auto _ : state) {
    (void)_;
    start.record(stream);
    curt::launch(stream, config, saxpy_kernel, x, y, kSaxpyElements, 0.5f);
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(curt::elapsed(start, stop).count() * 1e-3);
  }
  state.SetItemsProcessed(state.iterations());
}

// ---------------------------------------------------------------------------------------------
// Paired host cost: raw and curt alternate batch by batch inside one benchmark, so drift in the
// machine's speed (the main noise between separately run benchmarks) hits both alike. Each batch
// is kPairBatch submissions, short enough that the GPU keeps up and the queue never throttles
// the host; only the submissions are timed. Reported per operation: raw_ns and curt_ns (medians
// over the batches of the run) and curt_over_raw (median of the per-pair ratios).

constexpr int kPairBatch = 32;

template <class Raw, class Curt>
void paired(benchmark::State& state, Raw raw_batch, Curt curt_batch) {
  curt_bench::paired(state, kPairBatch, raw_batch, curt_batch, [] { g->stream.synchronize(); });
}

template <feature F>
void paired_launch_empty(benchmark::State& state) {
  const raw_launch raw(g->stream, F);
  const curt::launch_config config = curt_config(F);
  const curt::stream_ref stream = g->stream;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairBatch; ++i) (void)cudaLaunchKernelEx(&raw.config, empty_kernel);
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) curt::launch(stream, config, empty_kernel);
      });
}

void paired_launch_args(benchmark::State& state) {
  const raw_launch raw(g->stream, feature::plain);
  const curt::launch_config config = curt_config(feature::plain);
  const curt::stream_ref stream = g->stream;
  float* data = g->args_buffer.get();
  int n = 1;
  float value = 2.0f;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairBatch; ++i)
          (void)cudaLaunchKernelEx(&raw.config, args_kernel, data, n, value);
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) curt::launch(stream, config, args_kernel, data, n, value);
      });
}

#if defined(CURT_BENCH_HAS_RTC)
// The library's args_kernel: the driver's cuLaunchKernelEx of its CUkernel with a CUlaunchConfig
// built once, against curt::launch of the library_kernel (Typed: of its typed view).
template <bool Typed>
void paired_launch_library(benchmark::State& state) {
  const curt::library_kernel kernel = g->library.kernel("args_kernel");
  const auto typed = kernel.as<void(float*, int, float)>();
  const auto launch_ex = CURT_DRIVER_FUNCTION(cuLaunchKernelEx, 11060);
  CUlaunchConfig raw{};
  raw.gridDimX = raw.gridDimY = raw.gridDimZ = 1;
  raw.blockDimX = raw.blockDimY = raw.blockDimZ = 1;
  raw.hStream = g->stream.get();
  const CUfunction function = reinterpret_cast<CUfunction>(kernel.get());
  const curt::launch_config config = curt_config(feature::plain);
  const curt::stream_ref stream = g->stream;
  float* data = g->args_buffer.get();
  int n = 1;
  float value = 2.0f;
  void* arguments[] = {&data, &n, &value};
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairBatch; ++i) (void)launch_ex(&raw, function, arguments, nullptr);
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) {
          if constexpr (Typed)
            curt::launch(stream, config, typed, data, n, value);
          else
            curt::launch(stream, config, kernel, data, n, value);
        }
      });
}
#endif

void paired_event_record(benchmark::State& state) {
  const curt::event event(g->device);  // no timing
  const cudaStream_t stream = g->stream;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairBatch; ++i) (void)cudaEventRecord(event.get(), stream);
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) event.record(stream);
      });
}

void paired_stream_wait(benchmark::State& state) {
  const curt::event event(g->device);
  event.record(g->other);
  g->other.synchronize();
  const curt::stream_ref stream = g->stream;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairBatch; ++i) (void)cudaStreamWaitEvent(stream, event.get(), 0);
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) stream.wait(event);
      });
}

// stream.wait(other) against the raw pair it stands for: record an event on `other`, wait on it.
// Other = curt::stream_ref: the ref path checks that the context of its kept event is alive (one
// driver call); Other = curt::stream: an owner's context is known, so no call is added.
template <class Other>
void paired_stream_wait_stream(benchmark::State& state) {
  const curt::event event(g->device);
  const curt::stream_ref stream = g->stream;
  const Other& other = g->other;
  const cudaEvent_t raw_event = event.get();
  const cudaStream_t raw_stream = g->stream, raw_other = g->other;
  paired(
      state,
      [&] {
        for (int i = 0; i < kPairBatch; ++i) {
          (void)cudaEventRecord(raw_event, raw_other);
          (void)cudaStreamWaitEvent(raw_stream, raw_event, 0);
        }
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) stream.wait(other);
      });
}

// ---------------------------------------------------------------------------------------------
// Registration, warm-up, summary

using benchmark_function = void (*)(benchmark::State&);

// Registers `function` as `name`; a curt exception fails that benchmark instead of the program.
void add(const char* name, benchmark_function function, int operations, bool gpu_time = false) {
  operations_per_iteration()[name] = operations;
  auto* b = benchmark::RegisterBenchmark(name, curt_bench::guarded(function));  // counts failures
  if (gpu_time)
    b->UseManualTime();
  else
    b->UseRealTime();
  b->Unit(benchmark::kMicrosecond);
}

void register_benchmarks() {
  add("launch/empty/chevron", launch_chevron_empty, kBatch);
  add("launch/empty/launch_kernel_ex", launch_ex_empty<feature::plain>, kBatch);
  add("launch/empty/curt", launch_curt_empty<feature::plain>, kBatch);
  add("launch/cluster2/chevron", launch_chevron_cluster, kBatch);
  add("launch/cluster2/launch_kernel_ex", launch_ex_empty<feature::cluster>, kBatch);
  add("launch/cluster2/curt", launch_curt_empty<feature::cluster>, kBatch);
  add("launch/pdl/launch_kernel_ex", launch_ex_empty<feature::pdl>, kBatch);
  add("launch/pdl/curt", launch_curt_empty<feature::pdl>, kBatch);
  add("launch/args/chevron", launch_chevron_args, kBatch);
  add("launch/args/launch_kernel_ex", launch_ex_args, kBatch);
  add("launch/args/curt", launch_curt_args, kBatch);
  add("event_record/timing/raw", event_record_raw<true>, kBatch);
  add("event_record/timing/curt", event_record_curt<true>, kBatch);
  add("event_record/no_timing/raw", event_record_raw<false>, kBatch);
  add("event_record/no_timing/curt", event_record_curt<false>, kBatch);
  add("stream_wait_event/raw", stream_wait_raw, kBatch);
  add("stream_wait_event/curt", stream_wait_curt, kBatch);
  add("stream_create_destroy/raw", stream_create_raw, 1);
  add("stream_create_destroy/curt", stream_create_curt, 1);
  add("event_create_destroy/raw", event_create_raw, 1);
  add("event_create_destroy/curt", event_create_curt, 1);
  add("gpu_time/saxpy/raw", gpu_time_raw, 1, true);
  add("gpu_time/saxpy/curt", gpu_time_curt, 1, true);
  add("paired/launch/empty", paired_launch_empty<feature::plain>, 2 * kPairBatch);
  add("paired/launch/cluster2", paired_launch_empty<feature::cluster>, 2 * kPairBatch);
  add("paired/launch/pdl", paired_launch_empty<feature::pdl>, 2 * kPairBatch);
  add("paired/launch/args", paired_launch_args, 2 * kPairBatch);
#if defined(CURT_BENCH_HAS_RTC)
  add("paired/launch/library_args", paired_launch_library<false>, 2 * kPairBatch);
  add("paired/launch/library_args_typed", paired_launch_library<true>, 2 * kPairBatch);
#endif
  add("paired/event_record/no_timing", paired_event_record, 2 * kPairBatch);
  add("paired/stream_wait_event", paired_stream_wait, 2 * kPairBatch);
  add("paired/stream_wait_stream", paired_stream_wait_stream<curt::stream_ref>, 2 * kPairBatch);
  add("paired/stream_wait_stream_owner", paired_stream_wait_stream<curt::stream>, 2 * kPairBatch);
}

// The first launch of each kernel loads it (lazy module loading): do that before measuring.
void warm_up() {
  const cudaStream_t stream = g->stream;
  for (feature f : {feature::plain, feature::cluster, feature::pdl}) {
    const raw_launch raw(stream, f);
    CURT_CHECK(cudaLaunchKernelEx(&raw.config, empty_kernel));
    curt::launch(g->stream, curt_config(f), empty_kernel);
  }
  empty_cluster_kernel<<<2, 1, 0, stream>>>();
  args_kernel<<<1, 1, 0, stream>>>(g->args_buffer.get(), 1, 2.0f);
  saxpy_kernel<<<saxpy_grid(), kSaxpyBlockThreads, 0, stream>>>(g->x.get(), g->y.get(),
                                                                kSaxpyElements, 0.5f);
#if defined(CURT_BENCH_HAS_RTC)
  curt::launch(g->stream, curt_config(feature::plain), g->library.kernel("args_kernel"),
               g->args_buffer.get(), 1, 2.0f);
#endif
  CURT_CHECK(cudaGetLastError());
  g->stream.synchronize();
}

using curt_bench::detail::run_failed;

// The console reporter, also keeping each benchmark's median real time and submit_ns for the
// summary.
class summary_reporter : public benchmark::ConsoleReporter {
 public:
  explicit summary_reporter(OutputOptions options) : benchmark::ConsoleReporter(options) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run_failed(run, 0)) {
        results_[run.run_name.function_name];  // listed as failed unless another run succeeded
        continue;
      }
      const double ns =
          run.GetAdjustedRealTime() * 1e9 / benchmark::GetTimeUnitMultiplier(run.time_unit);
      auto submit = run.counters.find("submit_ns");
      const double submit_ns = submit == run.counters.end() ? -1.0 : submit->second.value;
      result& r = results_[run.run_name.function_name];
      const bool median_run = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (median_run || run.run_type == Run::RT_Iteration) {
        for (const char* counter : {"raw_ns", "curt_ns", "curt_over_raw"}) {
          auto it = run.counters.find(counter);
          if (it == run.counters.end()) continue;
          statistic& st = r.paired[counter];
          if (median_run)
            st.median = it->second.value;
          else
            st.samples.push_back(it->second.value);
        }
      }
      if (run.run_type == Run::RT_Aggregate) {
        if (run.aggregate_name == "median") {
          r.time.median = ns;
          r.submit.median = submit_ns;
          r.repetitions = static_cast<long long>(run.repetitions);
        }
      } else if (run.run_type == Run::RT_Iteration) {
        r.time.samples.push_back(ns);
        r.submit.samples.push_back(submit_ns);
      }
    }
  }

  // Prints "variant | median ns/launch | ratio to raw" (then the same for the submissions alone)
  // for the launch family, and the same table for the other benchmarks.
  void print() const {
    if (results_.empty()) return;
    long long repetitions = 0;
    for (const auto& entry : results_)
      repetitions = std::max(repetitions, entry.second.repetitions);
    std::printf("\nSummary: median real time per operation (GPU time for gpu_time/*)");
    if (repetitions > 1)
      std::printf(", over %lld repetitions\n", repetitions);
    else
      std::printf("; one repetition: pass --benchmark_repetitions=N for medians\n");
    std::printf(
        "ratio to raw: over launch_kernel_ex (the cudaLaunchKernelEx call curt::launch makes) "
        "for launches, over raw otherwise\n"
        "submit: host time of the %d submissions alone, without the synchronize\n\n",
        kBatch);
    print_table("launch", true, "variant", "median ns/launch");
    std::printf("\n");
    print_table("launch", false, "operation", "median ns/op");
    print_paired();
  }

  // The paired benchmarks: raw and curt host cost per operation, measured alternately.
  void print_paired() const {
    std::printf("\npaired host cost (raw and curt alternating, %d submissions per batch, "
                "medians)\n\n%-30s | %10s | %10s | %13s\n", kPairBatch, "operation", "raw ns",
                "curt ns", "curt / raw");
    std::printf("%s\n", std::string(72, '-').c_str());
    for (const auto& entry : results_) {
      if (entry.first.compare(0, 7, "paired/") != 0) continue;
      auto value = [&](const char* counter) {
        auto it = entry.second.paired.find(counter);
        return it == entry.second.paired.end() ? -1.0 : it->second.value();
      };
      std::printf("%-30s | %10s | %10s | %13s\n", entry.first.c_str() + 7,
                  number(value("raw_ns"), "%.1f").c_str(), number(value("curt_ns"), "%.1f").c_str(),
                  number(value("curt_over_raw"), "%.3f").c_str());
    }
  }

 private:
  struct statistic {
    double median = -1.0;         // from the median aggregate, when repetitions ran
    std::vector<double> samples;  // the runs themselves, when they were reported
    // The median, or the samples' median without repetitions; negative when unknown.
    double value() const {
      if (median >= 0.0 || samples.empty()) return median;
      std::vector<double> sorted = samples;
      std::sort(sorted.begin(), sorted.end());
      const std::size_t half = sorted.size() / 2;
      return sorted.size() % 2 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2.0;
    }
  };
  struct result {
    statistic time;    // real (or GPU) time per iteration, ns
    statistic submit;  // submit_ns: host submission time per operation, ns
    std::map<std::string, statistic> paired;  // raw_ns, curt_ns, curt_over_raw
    long long repetitions = 0;
  };

  // Median time per operation of benchmark `name`, in ns; negative when unknown.
  double per_operation_ns(const std::string& name) const {
    auto it = results_.find(name);
    if (it == results_.end()) return -1.0;
    const double ns = it->second.time.value();
    auto ops = operations_per_iteration().find(name);
    return ns < 0.0 || ops == operations_per_iteration().end() ? ns : ns / ops->second;
  }
  double submit_ns(const std::string& name) const {
    auto it = results_.find(name);
    return it == results_.end() ? -1.0 : it->second.submit.value();
  }

  // The name of the raw variant `name` is compared with.
  static std::string baseline_of(const std::string& name) {
    const std::string group = name.substr(0, name.rfind('/'));
    if (operations_per_iteration().count(group + "/launch_kernel_ex"))
      return group + "/launch_kernel_ex";
    return group + "/raw";
  }

  static std::string number(double value, const char* format) {
    if (value < 0.0) return "-";
    char text[32];
    std::snprintf(text, sizeof text, format, value);
    return text;
  }

  void print_table(const std::string& family, bool in_family, const char* first_header,
                   const char* time_header) const {
    std::vector<std::string> names;  // alphabetical: the variants of a group stay together
    for (const auto& entry : results_) {
      const bool member = entry.first.compare(0, family.size() + 1, family + "/") == 0;
      const bool paired_run = entry.first.compare(0, 7, "paired/") == 0;  // its own table
      if (member == in_family && !paired_run) names.push_back(entry.first);
    }
    if (names.empty()) return;
    std::size_t width = std::string(first_header).size();
    for (const std::string& name : names) width = std::max(width, name.size());
    const int w = static_cast<int>(width);
    std::printf("%-*s | %16s | %12s | %10s | %12s\n", w, first_header, time_header, "ratio to raw",
                "submit ns", "submit ratio");
    const std::string rule = std::string(width, '-') + "-+-" + std::string(16, '-') + "-+-" +
                             std::string(12, '-') + "-+-" + std::string(10, '-') + "-+-" +
                             std::string(12, '-');
    std::printf("%s\n", rule.c_str());
    for (const std::string& name : names) {
      const std::string baseline = baseline_of(name);
      const double ns = per_operation_ns(name), raw_ns = per_operation_ns(baseline);
      const double submit = submit_ns(name), raw_submit = submit_ns(baseline);
      const double ratio = ns >= 0.0 && raw_ns > 0.0 ? ns / raw_ns : -1.0;
      const double submit_ratio = submit >= 0.0 && raw_submit > 0.0 ? submit / raw_submit : -1.0;
      std::printf("%-*s | %16s | %12s | %10s | %12s\n", w, name.c_str(),
                  ns >= 0.0 ? number(ns, "%.1f").c_str() : "failed", number(ratio, "%.3f").c_str(),
                  number(submit, "%.1f").c_str(), number(submit_ratio, "%.3f").c_str());
    }
  }

  std::map<std::string, result> results_;
};

}  // namespace bench

int main(int argc, char** argv) {
  std::unique_ptr<bench::context> context;
  return curt_bench::run<bench::summary_reporter>(argc, argv, "launch_bench", [&](curt::device d) {
    context = std::make_unique<bench::context>(d);
    bench::g = context.get();
    bench::register_benchmarks();
    bench::warm_up();
    benchmark::AddCustomContext("curt_batch", std::to_string(bench::kBatch));
  });
}
