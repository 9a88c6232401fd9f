// nvtx_bench: what a curt::nvtx::scoped_range costs with no tool attached, against an empty loop
// and against the raw NVTX calls it makes, side by side. NVTX's rule is that an unattached
// program pays next to nothing: after its first call finds no tool, each call is an empty call
// through a function pointer. Needs no GPU and calls no CUDA function.
//
// Each benchmark rotates three batches of kRanges operations per iteration (empty, raw, curt;
// then raw, curt, empty; then curt, empty, raw), so drift on a shared machine hits all three
// alike; counters per operation, medians over the iterations: empty_ns (the loop alone), raw_ns,
// curt_ns, curt_over_raw (median of the per-iteration ratios) and curt_minus_empty_ns.
//   nvtx/global/push_pop        scoped_range("phase")            vs nvtxRangePushEx / nvtxRangePop
//   nvtx/domain_color_payload   scoped_range(domain, "phase", colour, payload)
//                                                           vs nvtxDomainRangePushEx / ...Pop
//   nvtx/mark                   curt::nvtx::mark(domain, ...)    vs nvtxDomainMarkEx
// Run with no NVTX_INJECTION64_PATH in the environment (the JSON context says which tool was
// set, "none" otherwise), e.g.
//   nvtx_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include "harness.hpp"

#include <curt/nvtx.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace bench {

constexpr int kRanges = 4096;  // operations per batch

const curt::nvtx::domain& bench_domain() {
  static const curt::nvtx::domain domain("curt nvtx_bench");
  return domain;
}

// The attributes a raw caller fills in for each push, as curt does.
nvtxEventAttributes_t raw_attributes(const char* message, std::uint32_t argb,
                                     std::uint64_t payload) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = argb != 0 ? NVTX_COLOR_ARGB : NVTX_COLOR_UNKNOWN;
  a.color = argb;
  if (payload != 0) {
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = payload;
  }
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

template <class Batch>
double timed(const Batch& batch) {
  const auto start = std::chrono::steady_clock::now();
  batch();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(stop - start).count() / kRanges;
}

// `raw(i)` and `curt(i)` do one operation each; the empty batch runs the same loop with nothing
// in it but a use of `i` the compiler cannot drop.
template <class Raw, class Curt>
void rotated(benchmark::State& state, const Raw& raw, const Curt& curt) {
  auto empty_batch = [] {
    for (int i = 0; i < kRanges; ++i) benchmark::DoNotOptimize(i);
  };
  auto raw_batch = [&] {
    for (int i = 0; i < kRanges; ++i) raw(i);
  };
  auto curt_batch = [&] {
    for (int i = 0; i < kRanges; ++i) curt(i);
  };
  // The three orders in turn: (empty, raw, curt), (raw, curt, empty), (curt, empty, raw).
  static constexpr int kOrders[3][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}};
  std::vector<double> empty_ns, raw_ns, curt_ns, ratio, over_empty;
  int turn = 0;
  for (auto _ : state) {
    (void)_;
    double ns[3] = {0.0, 0.0, 0.0};  // empty, raw, curt
    for (int which : kOrders[turn])
      ns[which] = which == 0 ? timed(empty_batch) : which == 1 ? timed(raw_batch)
                                                               : timed(curt_batch);
    turn = (turn + 1) % 3;
    empty_ns.push_back(ns[0]);
    raw_ns.push_back(ns[1]);
    curt_ns.push_back(ns[2]);
    ratio.push_back(ns[2] / ns[1]);
    over_empty.push_back(ns[2] - ns[0]);
  }
  state.SetItemsProcessed(state.iterations() * 3 * kRanges);
  state.counters["empty_ns"] = curt_bench::median_of(empty_ns);
  state.counters["raw_ns"] = curt_bench::median_of(raw_ns);
  state.counters["curt_ns"] = curt_bench::median_of(curt_ns);
  state.counters["curt_over_raw"] = curt_bench::median_of(ratio);
  state.counters["curt_minus_empty_ns"] = curt_bench::median_of(over_empty);
}

void global_push_pop(benchmark::State& state) {
  rotated(
      state,
      [](int) {
        const nvtxEventAttributes_t a = raw_attributes("phase", 0, 0);
        nvtxRangePushEx(&a);
        nvtxRangePop();
      },
      [](int) { curt::nvtx::scoped_range range("phase"); });
}

// The domain is looked up once, outside the loops, on both sides.
void domain_color_payload(benchmark::State& state) {
  const curt::nvtx::domain& domain = bench_domain();
  const nvtxDomainHandle_t handle = domain.get();
  const curt::nvtx::color color = curt::nvtx::color::rgb(0, 160, 255);
  rotated(
      state,
      [&](int i) {
        const nvtxEventAttributes_t a =
            raw_attributes("phase", color.argb, static_cast<std::uint64_t>(i) + 1);
        nvtxDomainRangePushEx(handle, &a);
        nvtxDomainRangePop(handle);
      },
      [&](int i) {
        curt::nvtx::scoped_range range(domain, "phase", color,
                                       static_cast<std::uint64_t>(i) + 1);
      });
}

void mark(benchmark::State& state) {
  const curt::nvtx::domain& domain = bench_domain();
  const nvtxDomainHandle_t handle = domain.get();
  rotated(
      state,
      [&](int i) {
        const auto a = raw_attributes("mark", 0, static_cast<std::uint64_t>(i) + 1);
        nvtxDomainMarkEx(handle, &a);
      },
      [&](int i) {
        curt::nvtx::mark(domain, "mark", {}, static_cast<std::uint64_t>(i) + 1);
      });
}

}  // namespace bench

int main(int argc, char** argv) {
  const bool console = curt_bench::detail::console_format(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* tool = std::getenv("NVTX_INJECTION64_PATH");
  if (tool != nullptr)
    std::fprintf(stderr, "nvtx_bench: an NVTX tool is set (NVTX_INJECTION64_PATH=%s): these are "
                         "not the no-tool costs\n", tool);
  benchmark::AddCustomContext("nvtx_tool", tool != nullptr ? tool : "none");
  // NVTX's first call looks for a tool: made here, outside every timed batch.
  { curt::nvtx::scoped_range warm_up(bench::bench_domain(), "warm-up"); }
  curt_bench::add("nvtx/global/push_pop", bench::global_push_pop)->Unit(benchmark::kNanosecond);
  curt_bench::add("nvtx/domain_color_payload", bench::domain_color_payload)
      ->Unit(benchmark::kNanosecond);
  curt_bench::add("nvtx/mark", bench::mark)->Unit(benchmark::kNanosecond);
  curt_bench::run_registered(console);
  benchmark::Shutdown();
  return curt_bench::failures().load() != 0 ? 1 : 0;
}
