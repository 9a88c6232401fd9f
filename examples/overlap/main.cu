// overlap: copy/compute overlap with page-locked (pinned) host memory and several streams.
// An array in pinned host memory goes through a three-stage pipeline, chunk by chunk:
//   host-to-device copy (curt::copy on a stream) -> a compute-heavy kernel -> device-to-host copy
// done two ways and timed on the GPU (curt::stream_timer, events):
//   serial      every chunk on one stream: each stage waits for the one before it, so the time
//               is the sum of all the copies and all the kernels
//   overlapped  chunk c on stream c % STREAMS (4 chunks per stream): while one stream's kernel
//               runs, another stream's input is being copied in and a third one's output copied
//               out. The streams are forked from the first stream (each waits for it, after the
//               timer's start event) and joined back into it (it waits for each) before the stop
//               event, so the timer covers the whole pipeline.
// Overlap needs:
//   - pinned host memory: the copy engines read and write it directly (DMA), so cudaMemcpyAsync
//     returns at once and the copy runs while the host and the SMs do other work. From pageable
//     memory the runtime stages the data through a buffer of its own, and the copies do not
//     overlap anything.
//   - separate copy engines: the H200 has two or more (cudaDevAttrAsyncEngineCount), so a
//     host-to-device copy, a device-to-host copy and kernels of other streams all run at the
//     same time; ideally the pipeline takes as long as its longest stage summed over the chunks,
//     not all three. (With one copy engine the two directions would take turns.)
//   - separate hardware queues: by default a device feeds streams through 8 of them
//     (CUDA_DEVICE_MAX_CONNECTIONS), so with more than 8 streams some share one, and work of
//     one can wait behind the other's.
// The kernel does `rounds` steps of x = x * a + (c ^ k) modulo 2^32 per element; `rounds` is
// calibrated at the start so that one kernel takes about as long as one copy of its chunk (the
// case where overlap pays most), unless ROUNDS is given (the rounds are printed: give them with
// CURT_EXAMPLE_SEED to repeat a run exactly). Integer arithmetic, so the result is exact: every
// output element is compared with the CPU's value, after the input and output buffers (device
// and host) were poisoned. The example passes or fails on these checks only; the speed-up is
// printed, never asserted. Printed: the calibration, the serial stage times, a per-stream breakdown
// and a timeline of one traced overlapped run, and the result table with the overlap factor (serial
// time / overlapped time) and its bound (serial time / the longest stage).
// The table's bandwidth is the host-device traffic (n elements in, n out) over the pipeline's
// time; its "of copy" column, against a device-to-device copy, only gives a sense of scale.
// Every variant also runs at edge lengths: 1 element, fewer elements than chunks (empty chunks),
// and 1000 (a ragged last chunk). Fresh random input every run (the seed is printed).
// Exit code 0 when every check passed, 1 on a mismatch or CUDA failure, 2 on bad arguments, 77
// without a CUDA device. CURT_EXAMPLE_SEED repeats a run.
// Built with curt::nvtx (where the toolkit has NVTX 3), its phases (calibration, checks, timed
// runs, traced runs) are named NVTX ranges of the domain "overlap", and its streams are named,
// on Nsight Systems' timeline: `nsys profile overlap`. Without a tool attached NVTX does nothing.
//
// Usage: overlap [ELEMENTS [STREAMS [ROUNDS]]]   (default 4194301 = 2^22 - 3 unsigned ints, 4
// streams, ROUNDS calibrated; ELEMENTS up to 2^30, STREAMS up to 32, ROUNDS up to 65536).
// Performance: overlap 268435456 4 (1 GiB each way); overlap 268435456 8 for more chunks.
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/span.hpp>
#if defined(CURT_EXAMPLE_HAS_NVTX)
#  include <curt/nvtx.hpp>
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr unsigned kBlockThreads = 256;
constexpr std::size_t kChunksPerStream = 4;
constexpr std::uint32_t kPoison = 0xDEADBEEFu;
constexpr unsigned kProbeRounds = 512;  // the kernel's work when calibrating

// ---- Phases on a profiler's timeline --------------------------------------------------------

// With curt::nvtx, a phase is a named NVTX range for its scope and streams get names; without
// it (CMake did not link curt::nvtx), both are nothing.
#if defined(CURT_EXAMPLE_HAS_NVTX)
class phase {
 public:
  explicit phase(const char* name) : range_(domain(), name) {}

 private:
  static const curt::nvtx::domain& domain() {
    static const curt::nvtx::domain overlap("overlap");
    return overlap;
  }
  curt::nvtx::scoped_range range_;
};
void name_stream(curt::stream_ref s, std::size_t i) {
  curt::nvtx::name(s, "overlap stream " + std::to_string(i));
}
#else
struct phase {
  explicit phase(const char*) {}
};
void name_stream(curt::stream_ref, std::size_t) {}
#endif

// ---- The work ---------------------------------------------------------------------------------

// The kernel's work per element: `rounds` steps of x = x * a + (c ^ k), in 32-bit unsigned
// arithmetic (modulo 2^32, exact on both sides). The step depends on k, so the compiler cannot
// fold the loop into one step.
struct work {
  std::uint32_t a = 1;
  std::uint32_t c = 0;
  unsigned rounds = 0;
};

__global__ void churn(const std::uint32_t* in, std::uint32_t* out, std::size_t n, std::uint32_t a,
                      std::uint32_t c, unsigned rounds) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::uint32_t x = in[i];
  for (unsigned k = 0; k < rounds; ++k) x = x * a + (c ^ k);
  out[i] = x;
}

// The CPU's reference. Each step is an affine map modulo 2^32, and so is their composition:
// x -> mul * x + add, computed once in `rounds` steps; then each element costs the CPU one
// multiply-add instead of `rounds` (4 million elements times thousands of rounds would take the
// CPU seconds). churn_one() is the loop itself, which cross-checks the composition.
struct affine {
  std::uint32_t mul = 1;
  std::uint32_t add = 0;
  std::uint32_t operator()(std::uint32_t x) const { return mul * x + add; }
};

affine compose(const work& w) {
  affine f;
  for (unsigned k = 0; k < w.rounds; ++k) f = {w.a * f.mul, w.a * f.add + (w.c ^ k)};
  return f;
}

std::uint32_t churn_one(std::uint32_t x, const work& w) {
  for (unsigned k = 0; k < w.rounds; ++k) x = x * w.a + (w.c ^ k);
  return x;
}

unsigned blocks_for(std::size_t items) {
  return static_cast<unsigned>(curt::ceil_div(items, std::size_t(kBlockThreads)));
}

// ---- The data and its chunks -----------------------------------------------------------------

// The input and output in pinned host memory, their device copies, and the CPU's expected output
// for the work set by expect(). Every buffer holds exactly n elements, so that the sanitizer sees
// any access past the end.
struct problem {
  problem(curt::device device, std::size_t n)
      : host_in(device, n), host_out(device, n), in(device, n), out(device, n), expected(n) {
    const std::vector<std::uint32_t> values =
        curt_example::random_values<std::uint32_t>(n, 0, std::numeric_limits<std::uint32_t>::max());
    std::copy(values.begin(), values.end(), host_in.data());
  }
  std::size_t size() const { return expected.size(); }

  void expect(const work& w) {
    const affine f = compose(w);
    for (std::size_t i = 0; i < size(); ++i) expected[i] = f(host_in.data()[i]);
    // The composition against the plain loop, on a few elements.
    for (std::size_t i = 0; i < std::min<std::size_t>(size(), 64); ++i)
      if (churn_one(host_in.data()[i], w) != expected[i])
        throw std::logic_error("the composed reference disagrees with the loop");
  }

  curt::pinned_buffer<std::uint32_t> host_in, host_out;
  curt::device_buffer<std::uint32_t> in, out;
  std::vector<std::uint32_t> expected;
};

struct chunk {
  std::size_t offset = 0;
  std::size_t count = 0;
  std::size_t stream = 0;  // the stream it goes on in the overlapped pipeline
};

// chunks_per_stream * streams chunks of ceil(n / chunks) elements, the last one shorter; chunks
// that would start past the end (n smaller than the chunk count) are left out.
std::vector<chunk> plan_chunks(std::size_t n, std::size_t streams) {
  const std::size_t chunks = kChunksPerStream * streams;
  const std::size_t length = curt::ceil_div(n, chunks);
  std::vector<chunk> plan;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t begin = std::min(n, c * length), end = std::min(n, begin + length);
    if (end > begin) plan.push_back({begin, end - begin, c % streams});
  }
  return plan;
}

// ---- The pipeline -----------------------------------------------------------------------------

// One chunk's three stages on stream s. With `marks` (4 timing events), the stream records
// marks[0] before the input copy and marks[1..3] after each stage.
void enqueue_chunk(curt::stream_ref s, problem& p, const chunk& c, const work& w,
                   curt::event* marks = nullptr) {
  if (marks) s.record(marks[0]);
  curt::copy(curt::span(p.in, c.offset, c.count), curt::span(p.host_in, c.offset, c.count), s);
  if (marks) s.record(marks[1]);
  curt::launch(s, curt::launch_config(blocks_for(c.count), kBlockThreads), churn,
               p.in.data() + c.offset, p.out.data() + c.offset, c.count, w.a, w.c, w.rounds);
  if (marks) s.record(marks[2]);
  curt::copy(curt::span(p.host_out, c.offset, c.count), curt::span(p.out, c.offset, c.count), s);
  if (marks) s.record(marks[3]);
}

// The whole pipeline: every chunk on streams[0] (serial), or chunk c on streams[c.stream]
// (overlapped), forked from streams[0] and joined back into it, so that work queued on
// streams[0] before (a timer's start event) comes first and work queued after (the stop event,
// a synchronize) comes after all of it. `marks`: 4 timing events per chunk, or none.
void run_pipeline(std::vector<curt::stream>& streams, bool overlapped, problem& p,
                  const std::vector<chunk>& plan, const work& w,
                  std::vector<curt::event>* marks = nullptr) {
  curt::stream& first = streams.front();
  if (overlapped)
    for (std::size_t i = 1; i < streams.size(); ++i) streams[i].wait(first);  // fork
  for (std::size_t k = 0; k < plan.size(); ++k)
    enqueue_chunk(overlapped ? streams[plan[k].stream] : first, p, plan[k], w,
                  marks ? marks->data() + 4 * k : nullptr);
  if (overlapped)
    for (std::size_t i = 1; i < streams.size(); ++i) first.wait(streams[i]);  // join
}

// One checked run: the device input and output and the host output poisoned (a chunk that is
// not copied in, not computed or not copied out keeps the poison), the pipeline, the host output
// compared with the CPU's. Returns the first mismatch, described; empty when all match.
std::string check(std::vector<curt::stream>& streams, bool overlapped, problem& p,
                  const std::vector<chunk>& plan, const work& w) {
  curt::stream& first = streams.front();
  curt::fill(p.in, kPoison, first);
  curt::fill(p.out, kPoison, first);
  first.synchronize();  // nothing in flight: the host may write the pinned output
  std::fill(p.host_out.begin(), p.host_out.end(), kPoison);
  run_pipeline(streams, overlapped, p, plan, w);
  first.synchronize();  // the join makes this wait for every stream
  const std::uint32_t* got = p.host_out.data();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (got[i] != p.expected[i]) {
      char text[160];
      std::snprintf(text, sizeof text, "n = %zu: element %zu is 0x%08x, expected 0x%08x%s",
                    p.size(), i, static_cast<unsigned>(got[i]),
                    static_cast<unsigned>(p.expected[i]), got[i] == kPoison ? " (poison)" : "");
      return text;
    }
  return {};
}

// ---- Calibration and tracing ------------------------------------------------------------------

// Rounds per element that make the kernel take about as long as the input copy: both timed over
// the whole array (median of 3), the kernel at kProbeRounds, which it takes time proportional to.
unsigned calibrate_rounds(curt::stream_ref s, problem& p, work w) {
  const phase calibrating("calibrate");
  const double copy_ms =
      curt_example::median_ms(s, 3, [&](curt::stream_ref t) { curt::copy(p.in, p.host_in, t); });
  w.rounds = kProbeRounds;
  const double kernel_ms = curt_example::median_ms(s, 3, [&](curt::stream_ref t) {
    curt::launch(t, curt::launch_config(blocks_for(p.size()), kBlockThreads), churn, p.in.data(),
                 p.out.data(), p.size(), w.a, w.c, w.rounds);
  });
  const double rounds = kernel_ms > 0 ? kProbeRounds * copy_ms / kernel_ms : 65536.0;
  std::printf("calibration: host-to-device copy %.3f ms, kernel at %u rounds %.3f ms\n", copy_ms,
              kProbeRounds, kernel_ms);
  return static_cast<unsigned>(std::clamp(std::llround(rounds), 16LL, 65536LL));
}

// Per chunk, the times (ms from the pipeline's start) of its four marks: stage k ran between
// mark k and mark k + 1.
struct stage_times {
  double mark[4];
};

std::vector<stage_times> trace(curt::device device, std::vector<curt::stream>& streams,
                               bool overlapped, problem& p, const std::vector<chunk>& plan,
                               const work& w) {
  const phase tracing(overlapped ? "overlapped: traced run" : "serial: traced run");
  curt::event start(device, curt::event_flags::timing);
  std::vector<curt::event> marks;
  marks.reserve(4 * plan.size());
  for (std::size_t i = 0; i < 4 * plan.size(); ++i)
    marks.emplace_back(device, curt::event_flags::timing);
  streams.front().record(start);
  run_pipeline(streams, overlapped, p, plan, w, &marks);
  streams.front().synchronize();
  std::vector<stage_times> times(plan.size());
  for (std::size_t k = 0; k < plan.size(); ++k)
    for (int m = 0; m < 4; ++m) times[k].mark[m] = curt::elapsed(start, marks[4 * k + m]).count();
  return times;
}

struct stage_sums {
  double h2d = 0, kernel = 0, d2h = 0;
};

stage_sums sum_stages(const std::vector<stage_times>& times, const std::vector<chunk>& plan,
                      std::size_t stream, bool all) {
  stage_sums s;
  for (std::size_t k = 0; k < times.size(); ++k) {
    if (!all && plan[k].stream != stream) continue;
    s.h2d += times[k].mark[1] - times[k].mark[0];
    s.kernel += times[k].mark[2] - times[k].mark[1];
    s.d2h += times[k].mark[3] - times[k].mark[2];
  }
  return s;
}

// The overlapped run, stream by stream: its chunks, when its first stage began and its last
// ended, and a timeline. A stage's interval runs from when its stream reached it to when it
// finished, so in this run it includes time spent waiting for a copy engine or for free SMs.
void print_streams(const std::vector<stage_times>& times, const std::vector<chunk>& plan,
                   std::size_t streams) {
  double end = 1e-6;  // ms; never 0, it divides below
  for (const stage_times& t : times) end = std::max(end, t.mark[3]);
  constexpr int kColumns = 64;
  std::printf(
      "\noverlapped run, traced (ms from the pipeline's start; a stage counts from when "
      "its stream reached it, waiting for an engine included):\n");
  for (std::size_t s = 0; s < streams; ++s) {
    std::string chunks;
    double first = end, last = 0;
    for (std::size_t k = 0; k < plan.size(); ++k)
      if (plan[k].stream == s) {
        chunks += " " + std::to_string(k);
        first = std::min(first, times[k].mark[0]);
        last = std::max(last, times[k].mark[3]);
      }
    const stage_sums sums = sum_stages(times, plan, s, false);
    std::printf("  stream %2zu: chunks%-16s %8.3f to %8.3f   H2D %8.3f  kernel %8.3f  D2H %8.3f\n",
                s, chunks.c_str(), first, last, sums.h2d, sums.kernel, sums.d2h);
  }
  std::printf(
      "timeline (%d columns = %.3f ms; H host-to-device copy, K kernel, D device-to-host "
      "copy):\n",
      kColumns, end);
  for (std::size_t s = 0; s < streams; ++s) {
    std::string row(kColumns, '.');
    for (std::size_t k = 0; k < plan.size(); ++k) {
      if (plan[k].stream != s) continue;
      for (int stage = 0; stage < 3; ++stage) {
        const auto column = [&](double t) {
          return std::clamp(static_cast<int>(t / end * kColumns), 0, kColumns - 1);
        };
        for (int col = column(times[k].mark[stage]); col <= column(times[k].mark[stage + 1]); ++col)
          row[static_cast<std::size_t>(col)] = "HKD"[stage];
      }
    }
    std::printf("  stream %2zu |%s|\n", s, row.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "overlap",
      "overlap [ELEMENTS [STREAMS [ROUNDS]]]   (1 <= ELEMENTS <= 2^30, default 4194301; 1 <= "
      "STREAMS <= 32, default 4; 1 <= ROUNDS <= 65536, default: calibrated)",
      [&] {
        const std::size_t n =
            curt_example::size_argument(argc, argv, 1, 4194301, 1, std::size_t(1) << 30);
        const std::size_t stream_count = curt_example::size_argument(argc, argv, 2, 4, 1, 32);
        const std::size_t rounds = curt_example::size_argument(argc, argv, 3, 0, 1, 65536);
        const curt::device device(0);
        std::vector<curt::stream> streams;
        for (std::size_t i = 0; i < stream_count; ++i) {
          streams.emplace_back(device);
          name_stream(streams.back(), i);
        }
        curt::stream& first = streams.front();

        const int engines = device.attribute<cudaDevAttrAsyncEngineCount>();
        std::printf(
            "overlap: %zu unsigned ints, %zu streams, %zu chunks; %s has %d copy "
            "engine%s%s\n",
            n, stream_count, kChunksPerStream * stream_count, device.name().c_str(), engines,
            engines == 1 ? "" : "s",
            engines >= 2 ? " (copies in both directions overlap each other and kernels)"
                         : " (the two copy directions take turns)");

        work w;
        w.a = static_cast<std::uint32_t>(curt_example::rng()());
        w.c = static_cast<std::uint32_t>(curt_example::rng()());
        problem p(device, n);
        w.rounds = rounds != 0 ? static_cast<unsigned>(rounds) : calibrate_rounds(first, p, w);
        std::printf("work: %u rounds per element%s (a = 0x%08x, c = 0x%08x)\n", w.rounds,
                    rounds != 0 ? ", as given" : ", calibrated", static_cast<unsigned>(w.a),
                    static_cast<unsigned>(w.c));
        p.expect(w);
        const std::vector<chunk> plan = plan_chunks(n, stream_count);

        // Edge lengths: one element; fewer elements than chunks (chunks of 1, the last ones
        // empty); 1000 (a ragged last chunk).
        const std::size_t edge_sizes[] = {1, kChunksPerStream * stream_count - 1, 1000};
        std::string edges = "exact; also n =";
        for (std::size_t size : edge_sizes) edges += " " + std::to_string(size);

        curt_example::table table(
            "overlap", curt_example::copy_gb_per_s(device, first, n * sizeof(std::uint32_t)));
        const double bytes = 2.0 * static_cast<double>(n) * sizeof(std::uint32_t);  // in + out
        double ms[2] = {0, 0};
        std::string mismatch[2];
        for (int variant = 0; variant < 2; ++variant) {
          const bool overlapped = variant == 1;
          {
            const phase checking(overlapped ? "overlapped: checks" : "serial: checks");
            mismatch[variant] = check(streams, overlapped, p, plan, w);
            for (std::size_t size : edge_sizes) {
              if (!mismatch[variant].empty()) break;
              problem edge(device, size);
              edge.expect(w);
              mismatch[variant] =
                  check(streams, overlapped, edge, plan_chunks(size, stream_count), w);
            }
          }
          const phase timing(overlapped ? "overlapped: timed runs" : "serial: timed runs");
          ms[variant] = curt_example::median_ms(
              first, 5, [&](curt::stream_ref) { run_pipeline(streams, overlapped, p, plan, w); });
        }

        // Where the time goes: the serial run's stages are exact (nothing overlaps on one
        // stream); the overlapped run shows which stages ran at the same time.
        const stage_sums serial =
            sum_stages(trace(device, streams, false, p, plan, w), plan, 0, true);
        const double stage_bytes = static_cast<double>(n) * sizeof(std::uint32_t);
        std::printf(
            "\nserial run, traced: host-to-device %.3f ms (%.1f GB/s), kernels %.3f ms, "
            "device-to-host %.3f ms (%.1f GB/s)\n",
            serial.h2d, curt_example::gb_per_s(stage_bytes, serial.h2d), serial.kernel, serial.d2h,
            curt_example::gb_per_s(stage_bytes, serial.d2h));
        print_streams(trace(device, streams, true, p, plan, w), plan, stream_count);

        // The best overlap can do: the longest stage (with one copy engine, both copies together).
        const double longest = engines >= 2 ? std::max({serial.h2d, serial.kernel, serial.d2h})
                                            : std::max(serial.h2d + serial.d2h, serial.kernel);
        const double total = serial.h2d + serial.kernel + serial.d2h;
        char detail[160];
        std::snprintf(detail, sizeof detail, "; stages %.3f + %.3f + %.3f ms", serial.h2d,
                      serial.kernel, serial.d2h);
        table.row("serial: 1 stream, " + std::to_string(plan.size()) + " chunks", std::to_string(n),
                  mismatch[0].empty(), ms[0], bytes,
                  mismatch[0].empty() ? edges + detail : mismatch[0]);
        std::snprintf(detail, sizeof detail, "; overlap factor %.2fx (bound %.2fx)",
                      ms[1] > 0 ? ms[0] / ms[1] : 0.0, longest > 0 ? total / longest : 0.0);
        table.row("overlapped: " + std::to_string(stream_count) + " streams, " +
                      std::to_string(plan.size()) + " chunks",
                  std::to_string(n), mismatch[1].empty(), ms[1], bytes,
                  mismatch[1].empty() ? edges + detail : mismatch[1]);
        return table.print();
      });
}
