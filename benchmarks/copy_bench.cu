// copy_bench: what a typed curt::copy(dst, src, stream) costs over the raw cudaMemcpyAsync it
// makes, measured side by side in one run.
//
//   paired/copy/<direction>/<size>   host cost per call: raw and curt alternate batch by batch
//                                    (kPairBatch calls each, the stream synchronized untimed after
//                                    each batch); counters raw_ns, curt_ns, curt_over_raw
//                                    (median of the per-pair ratios). Directions: h2d (pinned
//                                    host -> device), d2h (device -> pinned host), d2d; sizes
//                                    4 KiB and 64 MiB.
//   paired/copy_in_guard/<dir>/<size>  the same, with a curt::device_guard held around the loop
//                                    (curt's context check is one cuCtxGetCurrent all the same)
//   paired/control/h2d/<size>       the same pairing with raw on both sides: how far from 1.000
//                                    the method itself lands (the A/A control), 4 KiB and 64 MiB
//   gpu_time/copy/d2d_64MiB/<raw|curt>  GPU time of one 64 MiB device-to-device copy from CUDA
//                                    events, and the bandwidth achieved (bytes read + written).
//
// Both sides make the same call: cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream).
// curt adds its size check, the owners' state checks and one cuCtxGetCurrent (to run in the
// stream's context on a thread without one). The goal (issue #7): within 2% of raw.
//
//   copy_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// The summary after the table gives each paired operation's raw and curt ns and their ratio.
// Exit code 77 when there is no device.
#include "harness.hpp"

#include <curt/copy.hpp>
#include <curt/memory.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

namespace {

constexpr std::size_t kSmall = 4 << 10;   // bytes
constexpr std::size_t kLarge = 64 << 20;  // bytes
constexpr int kSmallBatch = 32;           // calls per batch
constexpr int kLargeBatch = 4;            // fewer: each takes the GPU tens of microseconds
constexpr double kLargeMinSeconds = 3.0;  // host <-> device pairs of 64 MiB: see setup()

struct buffers {
  buffers(curt::device d, std::size_t bytes)
      : host(d, bytes), device_a(d, bytes), device_b(d, bytes) {
    std::memset(host.data(), 1, bytes);
    CURT_CHECK(cudaMemset(device_a.data(), 2, bytes));
    CURT_CHECK(cudaMemset(device_b.data(), 3, bytes));
    CURT_CHECK(cudaDeviceSynchronize());
  }
  curt::pinned_buffer<unsigned char> host;
  curt::device_buffer<unsigned char> device_a;
  curt::device_buffer<unsigned char> device_b;
};

struct context {
  explicit context(curt::device d) : stream(d), small(d, kSmall), large(d, kLarge) {}
  curt::stream stream;
  buffers small;
  buffers large;
};

context* g = nullptr;

enum class direction { h2d, d2h, d2d };

template <direction D, std::size_t Bytes>
void paired_copy(benchmark::State& state) {
  buffers& b = Bytes == kSmall ? g->small : g->large;
  const int batch = Bytes == kSmall ? kSmallBatch : kLargeBatch;
  curt::pinned_buffer<unsigned char>& host = b.host;
  curt::device_buffer<unsigned char>& a = b.device_a;
  curt::device_buffer<unsigned char>& c = b.device_b;
  const curt::stream_ref stream = g->stream;
  const cudaStream_t raw_stream = g->stream;
  unsigned char* host_p = host.data();
  unsigned char* a_p = a.data();
  unsigned char* c_p = c.data();
  curt_bench::paired(
      state, batch,
      [&] {
        for (int i = 0; i < batch; ++i) {
          if constexpr (D == direction::h2d)
            (void)cudaMemcpyAsync(a_p, host_p, Bytes, cudaMemcpyDefault, raw_stream);
          else if constexpr (D == direction::d2h)
            (void)cudaMemcpyAsync(host_p, a_p, Bytes, cudaMemcpyDefault, raw_stream);
          else
            (void)cudaMemcpyAsync(c_p, a_p, Bytes, cudaMemcpyDefault, raw_stream);
        }
      },
      [&] {
        for (int i = 0; i < batch; ++i) {
          if constexpr (D == direction::h2d)
            curt::copy(a, host, stream);
          else if constexpr (D == direction::d2h)
            curt::copy(host, a, stream);
          else
            curt::copy(c, a, stream);
        }
      },
      [&] { g->stream.synchronize(); });
}

// Raw against raw, the A/A control of paired_copy<h2d, Bytes>: two copies of the same loop.
template <std::size_t Bytes>
void paired_control(benchmark::State& state) {
  buffers& b = Bytes == kSmall ? g->small : g->large;
  const int batch = Bytes == kSmall ? kSmallBatch : kLargeBatch;
  unsigned char* host_p = b.host.data();
  unsigned char* a_p = b.device_a.data();
  const cudaStream_t raw_stream = g->stream;
  curt_bench::paired(
      state, batch,
      [&] {
        for (int i = 0; i < batch; ++i)
          (void)cudaMemcpyAsync(a_p, host_p, Bytes, cudaMemcpyDefault, raw_stream);
      },
      [&] {
        for (int i = 0; i < batch; ++i)
          (void)cudaMemcpyAsync(a_p, host_p, Bytes, cudaMemcpyDefault, raw_stream);
      },
      [&] { g->stream.synchronize(); });
}

// What curt's context check costs by itself: raw against raw preceded by the check that
// curt::copy makes (detail::context_scope(for_stream, ...): one cuCtxGetCurrent on a thread with a
// context).
template <std::size_t Bytes>
void paired_context_check(benchmark::State& state) {
  buffers& b = Bytes == kSmall ? g->small : g->large;
  const int batch = Bytes == kSmall ? kSmallBatch : kLargeBatch;
  unsigned char* host_p = b.host.data();
  unsigned char* a_p = b.device_a.data();
  const cudaStream_t raw_stream = g->stream;
  curt_bench::paired(
      state, batch,
      [&] {
        for (int i = 0; i < batch; ++i)
          (void)cudaMemcpyAsync(a_p, host_p, Bytes, cudaMemcpyDefault, raw_stream);
      },
      [&] {
        for (int i = 0; i < batch; ++i) {
          curt::detail::context_scope in_context(curt::detail::for_stream, raw_stream);
          (void)cudaMemcpyAsync(a_p, host_p, Bytes, cudaMemcpyDefault, raw_stream);
        }
      },
      [&] { g->stream.synchronize(); });
}

// paired_copy with a curt::device_guard held around the whole loop, as a hot loop may hold one:
// a context is current throughout, so curt's check finds it with one cuCtxGetCurrent.
template <direction D, std::size_t Bytes>
void paired_copy_in_guard(benchmark::State& state) {
  curt::device_guard on(g->stream.device());
  paired_copy<D, Bytes>(state);
}

template <bool Curt>
void gpu_time_d2d_large(benchmark::State& state) {
  curt::device_buffer<unsigned char>& a = g->large.device_a;
  curt::device_buffer<unsigned char>& c = g->large.device_b;
  curt_bench::gpu_timer timer(g->stream);
  for (auto _ : state) {
    (void)_;
    timer.start();
    if constexpr (Curt)
      curt::copy(c, a, g->stream);
    else if (!curt_bench::ok(state, cudaMemcpyAsync(c.data(), a.data(), kLarge,
                                                      cudaMemcpyDefault, g->stream)))
      break;
    timer.stop(state);
  }
  curt_bench::set_bandwidth(state, 2 * kLarge);  // read and written
}

void setup(curt::device d) {
  static std::unique_ptr<context> owned = std::make_unique<context>(d);
  g = owned.get();
  using curt_bench::add;
  add("paired/copy/h2d/4KiB", paired_copy<direction::h2d, kSmall>);
  add("paired/copy/d2h/4KiB", paired_copy<direction::d2h, kSmall>);
  add("paired/copy/d2d/4KiB", paired_copy<direction::d2d, kSmall>);
  // A pair of 64 MiB batches waits about 10 ms for the copies over the host link: a longer run
  // gives their median a few hundred pairs, as the others get in the default time.
  add("paired/copy/h2d/64MiB", paired_copy<direction::h2d, kLarge>)->MinTime(kLargeMinSeconds);
  add("paired/copy/d2h/64MiB", paired_copy<direction::d2h, kLarge>)->MinTime(kLargeMinSeconds);
  add("paired/copy/d2d/64MiB", paired_copy<direction::d2d, kLarge>);
  add("paired/control/h2d/4KiB", paired_control<kSmall>);
  add("paired/control/h2d/64MiB", paired_control<kLarge>)->MinTime(kLargeMinSeconds);
  add("paired/context_check/h2d/4KiB", paired_context_check<kSmall>);
  add("paired/context_check/h2d/64MiB", paired_context_check<kLarge>)->MinTime(kLargeMinSeconds);
  add("paired/copy_in_guard/h2d/4KiB", paired_copy_in_guard<direction::h2d, kSmall>);
  add("paired/copy_in_guard/h2d/64MiB", paired_copy_in_guard<direction::h2d, kLarge>)
      ->MinTime(kLargeMinSeconds);
  add("paired/copy_in_guard/d2h/64MiB", paired_copy_in_guard<direction::d2h, kLarge>)
      ->MinTime(kLargeMinSeconds);
  add("gpu_time/copy/d2d_64MiB/raw", gpu_time_d2d_large<false>, true);
  add("gpu_time/copy/d2d_64MiB/curt", gpu_time_d2d_large<true>, true);
  // Warm-up: the first copies of each kind pay for lazy setup in the driver.
  for (int i = 0; i < 8; ++i) {
    curt::copy(g->small.device_a, g->small.host, g->stream);
    curt::copy(g->small.host, g->small.device_a, g->stream);
    curt::copy(g->large.device_b, g->large.device_a, g->stream);
  }
  g->stream.synchronize();
}

}  // namespace

int main(int argc, char** argv) { return curt_bench::run(argc, argv, "copy_bench", setup); }
