// multi_gpu_bench: issue #12's multi-GPU benchmarks, curt against the raw API in one run:
//
//   multi_gpu/peer_copy/<direction>/<size>
//        GPU time of a peer copy between devices 0 and 1 with peer access enabled both ways
//        (curt::peer_access_scope, held for the program): curt::copy(span on the destination
//        device, span on the source device, stream) against cudaMemcpyPeerAsync of the same
//        bytes, alternating (raw first on even iterations). Directions: 0to1 and 1to0 (the
//        stream is the source device's, events on it) and bidirectional (both at once, one
//        stream per direction: a start event on device 0's stream that device 1's stream waits
//        for, device 1's stream marked done and waited for by device 0's, which records the end).
//        Sizes 64 MiB and 1 GiB (per direction). Counters: raw_us, curt_us (GPU time per copy or
//        bidirectional pair, medians), raw_GBps, curt_GBps (bytes moved / GPU time, both
//        directions summed when bidirectional; medians), curt_over_raw (median of the
//        per-iteration curt_GBps / raw_GBps; higher is better; goal >= 0.9). The benchmark's
//        own time is curt's GPU time (manual time) and bytes_per_second curt's bandwidth.
//   multi_gpu/peer_copy_no_access/<direction>/<size>
//        the same copies with peer access disabled both ways while they run (enabled again for
//        the other benchmarks and at the end; switched only when the next run needs the other
//        state, since enabling maps every allocation of the peer): how the driver moves the
//        bytes without it (staged, or over the link by the copy engines). Same counters;
//        reported, no goal.
//   multi_gpu/nccl_all_reduce/<size>               (built where NCCL is found)
//        out-of-place float sum all-reduce over every local GPU (one communicator per device,
//        ncclCommInitAll, one stream each, made once per process), <size> per GPU: 1 MiB,
//        64 MiB, 1 GiB. Each timed region: a start event on device 0's stream that every other
//        stream waits for, the group of all-reduces (repeats_for(size) of them back to back:
//        20, 4, 1), each other stream marked done and waited for by device 0's, which records
//        the end: the time of the slowest rank. curt (curt::nccl_group + curt::all_reduce on
//        curt spans and streams) against raw (ncclGroupStart + ncclAllReduce + ncclGroupEnd on
//        the same buffers), alternating. Counters: ranks, raw_us, curt_us (per all-reduce),
//        raw_algbw_GBps, curt_algbw_GBps (bytes per GPU / time), raw_busbw_GBps,
//        curt_busbw_GBps (algBW * 2 (n-1) / n, as nccl-tests), curt_over_raw (median of the
//        per-iteration curt / raw bus bandwidths; goal >= 0.98).
//
// Correctness is checked once per benchmark and process, outside timing, both ways (raw and
// curt): a copy of random bytes (splitmix64, fixed seed, made on every core) must arrive byte for
// byte (read back into a pinned buffer, compared on every core); an all-reduce must match a CPU
// sum over a slice of random small integers (exact in float) and over elements each rank filled
// with rank + 1. A mismatch fails the benchmark (SkipWithError); the verdict is kept for its
// repetitions.
//
// MinTime: Google Benchmark counts the time an iteration reports, curt's GPU time of one copy or
// one all-reduce, against MinTime, while an iteration also runs raw's and, for an all-reduce,
// repeats of each. MinTime is 0.25 s / repeats: every run times at least 0.25 s of curt's GPU
// work and as much of raw's. (The default 0.5 s made a run of the 1 MiB all-reduce, 2 x 20 of
// them per iteration, last about 30 s, and its first repetition, which also finds the iteration
// count, 40 s.) It is set per benchmark: --benchmark_min_time does not change it.
// Setup makes nothing big: the copies' buffers (a 1 GiB source and destination on each
// device, the random bytes, the pinned buffer) are made by the first peer copy run, the
// communicators with their streams and buffers (2 GiB per device) by the first all-reduce run,
// and both kept for the process; a --benchmark_filter that selects one kind makes only that one.
//
//   multi_gpu_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// How long, estimated for the two-H200 machine (not yet measured there): the timed runs take
// about 16 s for one repetition of everything, 40 s for 3 and 60 s for 5 (with random
// interleaving or without), plus a few seconds per process for the contexts, NCCL's
// initialization, the random bytes and the checks (about 17 GiB read back in all).
// The console table is followed by a summary (bandwidths, ratios, goals). With one device it
// registers nothing, says so on stderr and exits 0 (scripts/bench.sh reads 77 as "no device at
// all" and stops the whole suite); exit code 77 when there is no device.
#include "harness.hpp"

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/memory.hpp>
#include <curt/peer.hpp>
#include <curt/span.hpp>
#include <curt/stream.hpp>
#if CURT_BENCH_HAS_NCCL
#include <curt/nccl.hpp>
#endif

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;
constexpr std::size_t kGiB = std::size_t(1) << 30;
constexpr std::size_t kCopySizes[] = {64 * kMiB, kGiB};
constexpr std::size_t kCopyMax = kGiB;
constexpr double kPeerGoal = 0.9;   // curt / raw peer copy bandwidth, at least
constexpr double kNcclGoal = 0.98;  // curt / raw all-reduce bus bandwidth, at least
constexpr double kMinTime = 0.25;   // seconds of curt's GPU time per benchmark run (see setup())
constexpr std::size_t kWordsPerChunk = std::size_t(1) << 20;  // host-side work per chunk

using curt_bench::median_of;

std::string size_name(std::size_t bytes) {
  return bytes >= kGiB ? std::to_string(bytes / kGiB) + "GiB"
                       : std::to_string(bytes / kMiB) + "MiB";
}

// The splitmix64 stream seeded with `seed`, word by word in little-endian order (the bytes a
// loop of splitmix64 draws would write), made in parallel (curt_bench::random_word).
void fill_random(curt_bench::host_array<unsigned char>& bytes, std::uint64_t seed) {
  unsigned char* out = bytes.data();
  const std::size_t n = bytes.size();
  curt_bench::for_chunks((n + 7) / 8, kWordsPerChunk, [=](std::size_t begin, std::size_t end) {
    for (std::size_t w = begin; w < end; ++w) {
      const std::uint64_t word = curt_bench::random_word(seed, w);
      unsigned char* at = out + 8 * w;
      if (8 * w + 8 <= n) {
        for (std::size_t k = 0; k < 8; ++k) at[k] = static_cast<unsigned char>(word >> (8 * k));
      } else {  // the last word, in part
        for (std::size_t k = 0; 8 * w + k < n; ++k)
          at[k] = static_cast<unsigned char>(word >> (8 * k));
      }
    }
  });
}

// Whether a[0, n) and b[0, n) hold the same bytes, compared on every core.
bool same_bytes(const unsigned char* a, const unsigned char* b, std::size_t n) {
  std::atomic<bool> same{true};
  curt_bench::for_chunks(n, 8 * kWordsPerChunk, [&](std::size_t begin, std::size_t end) {
    if (same.load(std::memory_order_relaxed) && std::memcmp(a + begin, b + begin, end - begin) != 0)
      same.store(false);
  });
  return same.load();
}

// What a benchmark run found when it checked its results: empty when right. Checked once per
// benchmark name (the first run), remembered for its repetitions.
std::map<std::string, std::string>& checked() {
  static std::map<std::string, std::string> results;
  return results;
}

// Events of one device for a timed region.
struct device_events {
  explicit device_events(curt::device d)
      : start(d, curt::event_flags::timing), stop(d, curt::event_flags::timing), done(d) {}
  curt::event start;
  curt::event stop;
  curt::event done;  // a rank's end, waited for by device 0's stream
};

// ---------------------------------------------------------------------------------------------
// Peer copies between devices 0 and 1

enum class direction { d0to1, d1to0, both };
const char* direction_name(direction d) {
  return d == direction::d0to1 ? "0to1" : d == direction::d1to0 ? "1to0" : "bidirectional";
}

// Peer access between devices 0 and 1 as each benchmark needs it: as setup() left it (enabled
// both ways where the devices can) for peer_copy and the all-reduce, disabled both ways for
// peer_copy_no_access. Switched only when a benchmark needs the other state (enabling maps all
// of the peer's allocations, GiBs here), not at every run; restore() puts back what disable()
// found enabled.
class peer_access_state {
 public:
  void disable() {
    if (disabled_) return;
    const curt::device d0(0), d1(1);
    was01_ = curt::disable_peer_access(d0, d1);
    was10_ = curt::disable_peer_access(d1, d0);
    disabled_ = true;
  }
  void restore() {
    if (!disabled_) return;
    disabled_ = false;
    const curt::device d0(0), d1(1);
    if (was01_) (void)curt::enable_peer_access(d0, d1);
    if (was10_) (void)curt::enable_peer_access(d1, d0);
  }
  // What setup() enabled for the program (each scope disables at its end what it enabled).
  std::optional<curt::peer_access_scope> access01, access10;

 private:
  bool disabled_ = false;
  bool was01_ = false, was10_ = false;
};

peer_access_state& peer_access() {
  static peer_access_state state;
  return state;
}

// The copies' buffers, streams and events, and the random bytes the sources hold; made by the
// first peer copy benchmark to run and kept for the program.
struct peer_context {
  curt::device dev[2];
  curt::stream stream[2];
  curt::device_buffer<unsigned char> src[2];  // src[i] on device i
  curt::device_buffer<unsigned char> dst[2];  // dst[i] on device i
  device_events events[2];
  curt_bench::host_array<unsigned char> random;  // kCopyMax random bytes: src[0] and src[1]
  curt::pinned_buffer<unsigned char> back;       // a check's copy of what arrived

  peer_context(curt::device d0, curt::device d1)
      : dev{d0, d1},
        stream{curt::stream(d0), curt::stream(d1)},
        src{curt::device_buffer<unsigned char>(d0, kCopyMax),
            curt::device_buffer<unsigned char>(d1, kCopyMax)},
        dst{curt::device_buffer<unsigned char>(d0, kCopyMax),
            curt::device_buffer<unsigned char>(d1, kCopyMax)},
        events{device_events(d0), device_events(d1)},
        random(kCopyMax),
        back(d0, kCopyMax, curt::pinned_flags::portable) {
    fill_random(random, 0x5eed1234abcdull);
    curt::copy_and_wait(src[0], random, stream[0]);
    curt::copy_and_wait(src[1], random, stream[1]);
    // Warm-up: the first copies each way pay for lazy setup in the driver.
    for (int i = 0; i < 2; ++i)
      for (bool use_curt : {false, true}) (void)time(direction::both, 64 * kMiB, use_curt);
  }

  // Copies `bytes` from src[from] to dst[1 - from] on the source device's stream.
  void enqueue(int from, std::size_t bytes, bool use_curt) {
    const int to = 1 - from;
    curt::device_guard guard(dev[from]);  // the stream's device current, both ways alike
    if (use_curt)
      curt::copy(curt::span(dst[to], 0, bytes), curt::span(std::as_const(src[from]), 0, bytes),
                 stream[from]);
    else
      CURT_CHECK(cudaMemcpyPeerAsync(dst[to].data(), dev[to].ordinal(), src[from].data(),
                                     dev[from].ordinal(), bytes, stream[from]));
  }

  // GPU seconds of one copy (or the bidirectional pair).
  double time(direction d, std::size_t bytes, bool use_curt) {
    if (d != direction::both) {
      const int from = d == direction::d0to1 ? 0 : 1;
      curt::device_guard guard(dev[from]);
      events[from].start.record(stream[from]);
      enqueue(from, bytes, use_curt);
      events[from].stop.record(stream[from]);
      events[from].stop.synchronize();
      return curt::elapsed(events[from].start, events[from].stop).count() / 1e3;
    }
    {
      curt::device_guard guard(dev[0]);
      events[0].start.record(stream[0]);
    }
    stream[1].wait(events[0].start);
    enqueue(0, bytes, use_curt);
    enqueue(1, bytes, use_curt);
    {
      curt::device_guard guard(dev[1]);
      events[1].done.record(stream[1]);
    }
    stream[0].wait(events[1].done);
    curt::device_guard guard(dev[0]);
    events[0].stop.record(stream[0]);
    events[0].stop.synchronize();
    return curt::elapsed(events[0].start, events[0].stop).count() / 1e3;
  }

  // Each way once on zeroed destinations: every byte must arrive. Empty when all did.
  std::string check(direction d, std::size_t bytes) {
    for (bool use_curt : {false, true}) {
      for (int i = 0; i < 2; ++i) {
        curt::device_guard guard(dev[i]);
        CURT_CHECK(cudaMemset(dst[i].data(), 0, bytes));
        CURT_CHECK(cudaDeviceSynchronize());
      }
      (void)time(d, bytes, use_curt);
      for (int from = 0; from < 2; ++from) {
        if ((d == direction::d0to1 && from == 1) || (d == direction::d1to0 && from == 0)) continue;
        const int to = 1 - from;
        curt::copy_and_wait(curt::span(back, 0, bytes),
                            curt::span(std::as_const(dst[to]), 0, bytes), stream[to]);
        if (!same_bytes(back.data(), random.data(), bytes))
          return std::string(use_curt ? "curt::copy" : "cudaMemcpyPeerAsync") + " from device " +
                 std::to_string(from) + " to " + std::to_string(to) + " of " + size_name(bytes) +
                 ": the bytes that arrived differ from those sent";
      }
    }
    return {};
  }
};

std::unique_ptr<peer_context> gp;  // made by the first peer copy run, destroyed by main()

peer_context& peer_data() {
  if (!gp) gp = std::make_unique<peer_context>(curt::device(0), curt::device(1));
  return *gp;
}

void peer_copy(benchmark::State& state, direction d, std::size_t bytes, bool access) {
  if (access)
    peer_access().restore();
  else
    peer_access().disable();
  peer_context& p = peer_data();
  const std::string key = std::string(access ? "peer_copy/" : "peer_copy_no_access/") +
                          direction_name(d) + "/" + size_name(bytes);
  auto found = checked().find(key);
  if (found == checked().end()) found = checked().emplace(key, p.check(d, bytes)).first;
  if (!found->second.empty()) {
    state.SkipWithError(found->second.c_str());
    return;
  }
  const double moved = static_cast<double>(d == direction::both ? 2 * bytes : bytes);
  std::vector<double> raw_us, curt_us, raw_gbps, curt_gbps, ratio;
  bool raw_first = true;
  for (auto _ : state) {
    (void)_;
    double r = 0.0, c = 0.0;
    if (raw_first) {
      r = p.time(d, bytes, false);
      c = p.time(d, bytes, true);
    } else {
      c = p.time(d, bytes, true);
      r = p.time(d, bytes, false);
    }
    raw_first = !raw_first;
    state.SetIterationTime(c);
    raw_us.push_back(r * 1e6);
    curt_us.push_back(c * 1e6);
    raw_gbps.push_back(moved / r / 1e9);
    curt_gbps.push_back(moved / c / 1e9);
    ratio.push_back(r / c);  // bandwidth ratio: curt / raw
  }
  curt_bench::set_bandwidth(state, static_cast<std::size_t>(moved));
  state.counters["bytes"] = moved;
  state.counters["raw_us"] = median_of(raw_us);
  state.counters["curt_us"] = median_of(curt_us);
  state.counters["raw_GBps"] = median_of(raw_gbps);
  state.counters["curt_GBps"] = median_of(curt_gbps);
  state.counters["curt_over_raw"] = median_of(ratio);
}

// ---------------------------------------------------------------------------------------------
// NCCL all-reduce over every local GPU

#if CURT_BENCH_HAS_NCCL

constexpr std::size_t kReduceSizes[] = {kMiB, 64 * kMiB, kGiB};  // bytes per GPU
constexpr std::size_t kReduceMax = kGiB / sizeof(float);         // floats per GPU
constexpr std::size_t kCheckSlice = 4096;                        // random floats checked

// A raw NCCL call's failure as an exception (the benchmark fails, the program goes on).
void check_nccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess)
    throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(result));
}

int repeats_for(std::size_t bytes) { return bytes <= kMiB ? 20 : bytes <= 64 * kMiB ? 4 : 1; }

struct nccl_context {
  std::vector<curt::device> devices;
  std::vector<curt::nccl_communicator> comms;
  std::vector<curt::stream> streams;
  std::vector<curt::device_buffer<float>> send, recv;
  std::vector<device_events> events;

  explicit nccl_context(std::vector<curt::device> all)
      : devices(std::move(all)), comms(curt::nccl_communicator::create_all(devices)) {
    for (curt::device d : devices) {
      streams.emplace_back(d);
      send.emplace_back(d, kReduceMax);
      recv.emplace_back(d, kReduceMax);
      events.emplace_back(d);
    }
  }
  std::size_t ranks() const { return devices.size(); }

  void enqueue(std::size_t count, bool use_curt) {
    if (use_curt) {
      curt::nccl_group group;
      for (std::size_t i = 0; i < ranks(); ++i)
        curt::all_reduce(curt::span(std::as_const(send[i]), 0, count),
                         curt::span(recv[i], 0, count), curt::nccl_op::sum, comms[i], streams[i]);
      group.end();
    } else {
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (std::size_t i = 0; i < ranks(); ++i)
        check_nccl(ncclAllReduce(send[i].data(), recv[i].data(), count, ncclFloat, ncclSum,
                                 comms[i].get(), streams[i].get()),
                   "ncclAllReduce");
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    }
  }

  // GPU seconds of `repeats` all-reduces, from device 0's start to the last rank's end.
  double time(std::size_t count, int repeats, bool use_curt) {
    {
      curt::device_guard guard(devices[0]);
      events[0].start.record(streams[0]);
    }
    for (std::size_t i = 1; i < ranks(); ++i) streams[i].wait(events[0].start);
    for (int k = 0; k < repeats; ++k) enqueue(count, use_curt);
    for (std::size_t i = 1; i < ranks(); ++i) {
      curt::device_guard guard(devices[i]);
      events[i].done.record(streams[i]);
    }
    for (std::size_t i = 1; i < ranks(); ++i) streams[0].wait(events[i].done);
    curt::device_guard guard(devices[0]);
    events[0].stop.record(streams[0]);
    events[0].stop.synchronize();
    return curt::elapsed(events[0].start, events[0].stop).count() / 1e3;
  }

  // Each way once: rank i's send holds i + 1 everywhere but a slice of random small integers at
  // the start and one at the end; recv must be the CPU's sum there. Empty when right.
  std::string check(std::size_t count) {
    const std::size_t slice = std::min(kCheckSlice, count / 2);
    std::mt19937 rng(12345);
    std::uniform_int_distribution<int> value(-64, 64);
    std::vector<std::vector<float>> head(ranks()), tail(ranks());
    std::vector<float> want_head(slice, 0.0f), want_tail(slice, 0.0f);
    for (std::size_t i = 0; i < ranks(); ++i) {
      curt::fill(curt::span(send[i], 0, count), static_cast<float>(i + 1), streams[i]);
      streams[i].synchronize();
      head[i].resize(slice);
      tail[i].resize(slice);
      for (std::size_t k = 0; k < slice; ++k) {
        head[i][k] = static_cast<float>(value(rng));
        tail[i][k] = static_cast<float>(value(rng));
        want_head[k] += head[i][k];
        want_tail[k] += tail[i][k];
      }
      curt::copy(curt::span(send[i], 0, slice), head[i], streams[i]);
      curt::copy_and_wait(curt::span(send[i], count - slice, slice), tail[i], streams[i]);
    }
    const float want_middle = static_cast<float>(ranks() * (ranks() + 1) / 2);
    for (bool use_curt : {false, true}) {
      for (std::size_t i = 0; i < ranks(); ++i) {
        curt::device_guard guard(devices[i]);
        CURT_CHECK(cudaMemset(recv[i].data(), 0, count * sizeof(float)));
        CURT_CHECK(cudaDeviceSynchronize());
      }
      (void)time(count, 1, use_curt);
      const char* who = use_curt ? "curt::all_reduce" : "ncclAllReduce";
      std::vector<float> got(slice);
      std::vector<float> middle(1);
      for (std::size_t i = 0; i < ranks(); ++i) {
        curt::copy_and_wait(got, curt::span(std::as_const(recv[i]), 0, slice), streams[i]);
        if (got != want_head)
          return std::string(who) + ": rank " + std::to_string(i) +
                 "'s first elements differ from the CPU's sum";
        curt::copy_and_wait(got, curt::span(std::as_const(recv[i]), count - slice, slice),
                            streams[i]);
        if (got != want_tail)
          return std::string(who) + ": rank " + std::to_string(i) +
                 "'s last elements differ from the CPU's sum";
        curt::copy_and_wait(middle, curt::span(std::as_const(recv[i]), count / 2, 1), streams[i]);
        if (middle[0] != want_middle)
          return std::string(who) + ": rank " + std::to_string(i) + "'s middle element is " +
                 std::to_string(middle[0]) + ", not " + std::to_string(want_middle);
      }
    }
    return {};
  }
};

std::unique_ptr<nccl_context> gn;  // made by the first all-reduce run, destroyed by main()

nccl_context& nccl_data() {
  if (!gn) {
    std::vector<curt::device> all;
    for (curt::device d : curt::devices()) all.push_back(d);
    gn = std::make_unique<nccl_context>(std::move(all));
  }
  return *gn;
}

void nccl_all_reduce(benchmark::State& state, std::size_t bytes) {
  peer_access().restore();  // NCCL's transports between devices 0 and 1 may use it
  nccl_context& g = nccl_data();
  const std::size_t count = bytes / sizeof(float);
  const int repeats = repeats_for(bytes);
  const std::string key = "nccl_all_reduce/" + size_name(bytes);
  auto found = checked().find(key);
  if (found == checked().end()) found = checked().emplace(key, g.check(count)).first;
  if (!found->second.empty()) {
    state.SkipWithError(found->second.c_str());
    return;
  }
  (void)g.time(count, repeats, false);  // warm: NCCL's first call of a size sets up
  (void)g.time(count, repeats, true);
  const double n = static_cast<double>(g.ranks());
  const double bus_factor = 2.0 * (n - 1.0) / n;
  std::vector<double> raw_us, curt_us, raw_alg, curt_alg, ratio;
  bool raw_first = true;
  for (auto _ : state) {
    (void)_;
    double r = 0.0, c = 0.0;
    if (raw_first) {
      r = g.time(count, repeats, false) / repeats;
      c = g.time(count, repeats, true) / repeats;
    } else {
      c = g.time(count, repeats, true) / repeats;
      r = g.time(count, repeats, false) / repeats;
    }
    raw_first = !raw_first;
    state.SetIterationTime(c);
    raw_us.push_back(r * 1e6);
    curt_us.push_back(c * 1e6);
    raw_alg.push_back(static_cast<double>(bytes) / r / 1e9);
    curt_alg.push_back(static_cast<double>(bytes) / c / 1e9);
    ratio.push_back(r / c);  // bus bandwidth ratio: curt / raw (same factor both ways)
  }
  curt_bench::set_bandwidth(state, bytes);
  state.counters["ranks"] = n;
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["raw_us"] = median_of(raw_us);
  state.counters["curt_us"] = median_of(curt_us);
  state.counters["raw_algbw_GBps"] = median_of(raw_alg);
  state.counters["curt_algbw_GBps"] = median_of(curt_alg);
  state.counters["raw_busbw_GBps"] = median_of(raw_alg) * bus_factor;
  state.counters["curt_busbw_GBps"] = median_of(curt_alg) * bus_factor;
  state.counters["curt_over_raw"] = median_of(ratio);
}

#endif  // CURT_BENCH_HAS_NCCL

// ---------------------------------------------------------------------------------------------
// Setup and summary

// Registers the benchmarks (MinTime: see the file's comment) and enables peer access; makes
// nothing big: the peer copies' buffers and the NCCL communicators are made by the first run
// that needs them.
void setup(curt::device) {
  const int count = curt::device_count();
  if (count < 2) {
    std::fprintf(stderr,
                 "multi_gpu_bench: %d device: no multi-GPU benchmark registered (they need 2 "
                 "devices)\n",
                 count);
    return;
  }
  const curt::device d0(0), d1(1);
#if CURT_BENCH_HAS_NCCL
  benchmark::AddCustomContext("curt_nccl_version", std::to_string(curt::nccl_version()));
  benchmark::AddCustomContext("curt_nccl_ranks", std::to_string(count));  // every device
#endif
  // Peer access for the program, enabled before the big allocations (NCCL, made later, finds it
  // enabled and leaves it so).
  const bool peer = curt::can_access_peer(d0, d1) && curt::can_access_peer(d1, d0);
  if (peer) {
    peer_access().access01.emplace(d0, d1);
    peer_access().access10.emplace(d1, d0);
    const curt::peer_link link = curt::peer_attributes(d0, d1);
    benchmark::AddCustomContext("curt_peer_link",
                                "performance rank " + std::to_string(link.performance_rank) +
                                    (link.native_atomics ? ", native atomics" : ""));
  } else {
    std::fprintf(stderr,
                 "multi_gpu_bench: devices 0 and 1 cannot access each other's memory: the peer "
                 "copies are measured without peer access only\n");
  }
  benchmark::AddCustomContext("curt_device_1", d1.name());

  using curt_bench::add;
  for (bool access : {true, false}) {
    if (access && !peer) continue;
    for (std::size_t bytes : kCopySizes)
      for (direction d : {direction::d0to1, direction::d1to0, direction::both})
        add(
            std::string("multi_gpu/") + (access ? "peer_copy/" : "peer_copy_no_access/") +
                direction_name(d) + "/" + size_name(bytes),
            [d, bytes, access](benchmark::State& state) { peer_copy(state, d, bytes, access); },
            true)
            ->MinTime(kMinTime);
  }
#if CURT_BENCH_HAS_NCCL
  for (std::size_t bytes : kReduceSizes)
    add(
        "multi_gpu/nccl_all_reduce/" + size_name(bytes),
        [bytes](benchmark::State& state) { nccl_all_reduce(state, bytes); }, true)
        ->MinTime(kMinTime / repeats_for(bytes));
#else
  std::fprintf(stderr, "multi_gpu_bench: built without NCCL: no all-reduce benchmark\n");
#endif
}

// The console table, then each benchmark's bandwidths, ratio and goal (medians over the
// repetitions when they ran, else over the runs).
class multi_gpu_summary : public benchmark::ConsoleReporter {
 public:
  using benchmark::ConsoleReporter::ConsoleReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (curt_bench::detail::run_failed(run, 0)) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (!median && run.run_type != Run::RT_Iteration) continue;
      for (const auto& counter : run.counters) {
        statistic& s = results_[run.run_name.function_name][counter.first];
        if (median)
          s.median = counter.second.value;
        else
          s.samples.push_back(counter.second.value);
      }
    }
  }

  void print() const {
    if (results_.empty()) return;
    std::printf(
        "\nmulti-GPU bandwidth, curt and raw in the same run (GB/s, medians; NCCL: bus "
        "bandwidth)\n\n%-44s | %9s | %9s | %10s | %s\n%s\n",
        "benchmark", "raw", "curt", "curt / raw", "goal", std::string(96, '-').c_str());
    using curt_bench::detail::number;
    for (const auto& entry : results_) {
      auto value = [&](const char* counter) {
        auto it = entry.second.find(counter);
        return it == entry.second.end() ? -1.0 : it->second.value();
      };
      const std::string& name = entry.first;
      const bool nccl = name.find("nccl") != std::string::npos;
      const double goal = nccl                                         ? kNcclGoal
                          : name.rfind("multi_gpu/peer_copy/", 0) == 0 ? kPeerGoal
                                                                       : -1.0;
      const double ratio = value("curt_over_raw");
      std::string verdict = "-";
      if (goal > 0.0 && ratio >= 0.0)
        verdict = ">= " + number(goal, "%.2f") + ": " + (ratio >= goal ? "met" : "MISSED");
      std::printf("%-44s | %9s | %9s | %10s | %s\n", name.c_str(),
                  number(value(nccl ? "raw_busbw_GBps" : "raw_GBps"), "%.1f").c_str(),
                  number(value(nccl ? "curt_busbw_GBps" : "curt_GBps"), "%.1f").c_str(),
                  number(ratio, "%.3f").c_str(), verdict.c_str());
    }
  }

 private:
  struct statistic {
    double median = -1.0;
    std::vector<double> samples;
    double value() const { return median >= 0.0 ? median : median_of(samples); }
  };
  std::map<std::string, std::map<std::string, statistic>> results_;
};

}  // namespace

int main(int argc, char** argv) {
  const int status = curt_bench::run<multi_gpu_summary>(argc, argv, "multi_gpu_bench", setup);
  // Before the runtime's own teardown at exit: peer access put back as setup() left it, the
  // communicators (ncclCommDestroy), the copies' buffers, then the peer scopes (they disable
  // what they enabled).
  int teardown = 0;
  const auto step = [&teardown](const char* what, auto&& action) {
    try {
      action();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "multi_gpu_bench: teardown, %s: %s\n", what, e.what());
      teardown = 1;
    }
  };
  step("restoring peer access", [] { peer_access().restore(); });
#if CURT_BENCH_HAS_NCCL
  step("the communicators", [] { gn.reset(); });
#endif
  step("the peer copies' buffers", [] { gp.reset(); });
  step("the peer access scopes", [] {
    peer_access().access10.reset();
    peer_access().access01.reset();
  });
  if (teardown != 0) return 1;
  return status;
}
