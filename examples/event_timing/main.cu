// event_timing: timing GPU work with events, without blocking the host (CUDA's asyncAPI pattern).
// A copy of pinned host input to the device, a kernel, and a copy back are enqueued between timing
// events; the enqueue returns at once, the host keeps itself busy (it counts) while polling until
// the stop event is reached, then reads the GPU's time:
//   1. curt::event (event_flags::timing): start, three stage marks and stop recorded on the
//      stream, polled with ready(), read with curt::elapsed(a, b): the whole run and each stage.
//   2. curt::stream_timer: the same work between its construction and record_stop(), polled
//      with ready(), read with elapsed() (stop() would do record_stop() and wait).
// The kernel's integer arithmetic is exact: the output (poisoned first) must equal the CPU's for
// every element. Printed: host time to enqueue, the number of polls the host made while the GPU
// worked, and the GPU times. Fresh random input; the seed is printed (CURT_EXAMPLE_SEED repeats).
// Exit code 0 when all matched, 1 on a mismatch or CUDA failure, 2 on bad arguments, 77 without
// a device. Usage: event_timing [ELEMENTS]   (default 16777216 = 2^24 unsigned ints)
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/event.hpp>
#include <curt/memory.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kRounds = 256;  // the kernel's work per element
constexpr std::uint32_t kPoison = 0xDEADBEEFu;

__global__ void churn(const std::uint32_t* in, std::uint32_t* out, std::size_t n, std::uint32_t a,
                      std::uint32_t c) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::uint32_t x = in[i];
  for (unsigned k = 0; k < kRounds; ++k) x = x * a + (c ^ k);  // modulo 2^32: exact
  out[i] = x;
}

struct problem {
  problem(curt::device d, std::size_t n)
      : host_in(d, n), host_out(d, n), in(d, n), out(d, n), want(n) {
    const auto values =
        curt_example::random_values<std::uint32_t>(n, 0, std::numeric_limits<std::uint32_t>::max());
    std::copy(values.begin(), values.end(), host_in.data());
    a = static_cast<std::uint32_t>(curt_example::rng()()) | 1u;
    c = static_cast<std::uint32_t>(curt_example::rng()());
    // Each round is x -> a x + (c ^ k): their composition is one affine map, computed once.
    std::uint32_t mul = 1, add = 0;
    for (unsigned k = 0; k < kRounds; ++k) {
      mul *= a;
      add = add * a + (c ^ k);
    }
    for (std::size_t i = 0; i < n; ++i) want[i] = mul * values[i] + add;
  }
  std::size_t size() const { return want.size(); }

  // Poisons the outputs (with nothing in flight), then the three stages, `marks` (if any)
  // recorded after the first and the second.
  void poison(curt::stream_ref s) {
    curt::fill(out, kPoison, s);
    s.synchronize();
    std::fill(host_out.data(), host_out.data() + size(), kPoison);
  }
  void enqueue(curt::stream_ref s, const curt::event* marks = nullptr) {
    curt::copy(in, host_in, s);
    if (marks) marks[0].record(s);
    curt::launch(
        s,
        curt::launch_config(
            dim3(static_cast<unsigned>(curt::ceil_div(size(), std::size_t(kBlock)))), dim3(kBlock)),
        churn, in.data(), out.data(), size(), a, c);
    if (marks) marks[1].record(s);
    curt::copy(host_out, out, s);
  }
  std::string mismatch() const {
    for (std::size_t i = 0; i < size(); ++i)
      if (host_out.data()[i] != want[i])
        return "element " + std::to_string(i) + " is " + std::to_string(host_out.data()[i]) +
               ", expected " + std::to_string(want[i]) +
               (host_out.data()[i] == kPoison ? " (poison)" : "");
    return {};
  }

  curt::pinned_buffer<std::uint32_t> host_in, host_out;
  curt::device_buffer<std::uint32_t> in, out;
  std::vector<std::uint32_t> want;
  std::uint32_t a = 1, c = 0;
};

double us_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

// Polls `ready` until it says true, counting the polls: the host's "other work" meanwhile.
template <class Ready>
unsigned long long poll(Ready&& ready) {
  unsigned long long polls = 0;
  while (!ready()) ++polls;
  return polls;
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "event_timing", "event_timing [ELEMENTS]   (1 <= ELEMENTS <= 2^28, default 16777216)", [&] {
        const std::size_t n = curt_example::size_argument(argc, argv, 1, std::size_t(1) << 24, 1,
                                                          std::size_t(1) << 28);
        const curt::device device(0);
        curt::stream stream(device);
        const std::size_t bytes = n * sizeof(std::uint32_t);
        std::printf(
            "event_timing: %zu unsigned ints (%.1f MiB each way), %u rounds per element, on %s\n",
            n, static_cast<double>(bytes) / (1 << 20), kRounds, device.name().c_str());
        curt_example::table table("event_timing",
                                  curt_example::copy_gb_per_s(device, stream, bytes));
        problem p(device, n);
        const double traffic = 2.0 * static_cast<double>(bytes);  // host -> device, device -> host
        p.poison(stream);
        p.enqueue(stream);  // warm-up: the first launch loads the kernel
        stream.synchronize();

        // ---- 1. events: start, marks, stop; poll; read --------------------------------------
        {
          const curt::event start(device, curt::event_flags::timing);
          const curt::event stop(device, curt::event_flags::timing);
          const curt::event marks[2] = {curt::event(device, curt::event_flags::timing),
                                        curt::event(device, curt::event_flags::timing)};
          p.poison(stream);
          const auto begin = std::chrono::steady_clock::now();
          start.record(stream);
          p.enqueue(stream, marks);
          stop.record(stream);
          const double enqueue_us = us_since(begin);
          const unsigned long long polls = poll([&] { return stop.ready(); });
          const double host_us = us_since(begin);
          const double ms = curt::elapsed(start, stop).count();
          const double in_ms = curt::elapsed(start, marks[0]).count();
          const double kernel_ms = curt::elapsed(marks[0], marks[1]).count();
          const double out_ms = curt::elapsed(marks[1], stop).count();
          std::printf(
              "events: enqueued in %.1f us; %llu polls of stop.ready() while the GPU worked; "
              "done after %.1f us of host time\n",
              enqueue_us, polls, host_us);
          std::printf("events: GPU %.3f ms = copy in %.3f + kernel %.3f + copy out %.3f ms\n", ms,
                      in_ms, kernel_ms, out_ms);
          const std::string bad = p.mismatch();
          char detail[160];
          std::snprintf(detail, sizeof detail,
                        "every element; %llu polls; in %.3f + kernel %.3f + out %.3f ms", polls,
                        in_ms, kernel_ms, out_ms);
          table.row("curt::event start/stop, ready, elapsed", std::to_string(n), bad.empty(), ms,
                    traffic, bad.empty() ? detail : bad);
        }

        // ---- 2. stream_timer: record_stop, poll ready, read elapsed -------------------------
        {
          p.poison(stream);
          const auto begin = std::chrono::steady_clock::now();
          curt::stream_timer timer(stream);  // records its start event now
          p.enqueue(stream);
          timer.record_stop();  // returns at once
          const double enqueue_us = us_since(begin);
          const unsigned long long polls = poll([&] { return timer.ready(); });
          const double ms = timer.elapsed().count();  // done: no wait
          std::printf("stream_timer: enqueued in %.1f us; %llu polls of ready(); GPU %.3f ms\n",
                      enqueue_us, polls, ms);
          const std::string bad = p.mismatch();
          char detail[160];
          std::snprintf(detail, sizeof detail, "every element; %llu polls while the GPU worked",
                        polls);
          table.row("stream_timer record_stop, ready, elapsed", std::to_string(n), bad.empty(), ms,
                    traffic, bad.empty() ? detail : bad);
        }
        return table.print();
      });
}
