// graph_bench: what curt's graphs cost over the raw CUDA runtime, and what a graph saves over
// stream launches (issue #8), measured side by side in one run:
//
//   paired/graph/launch        host cost per call of curt::graph_exec::launch(stream) against
//                              cudaGraphLaunch(exec, stream) on the same executable graph (one
//                              empty kernel): raw and curt alternate batch by batch (kPairBatch
//                              launches each, the stream synchronized untimed after each batch).
//                              Counters raw_ns, curt_ns, curt_over_raw. Goal: within 2 %.
//   paired/graph/build_instantiate/1000
//                              host time to build a graph of 1000 kernel nodes (kBuildChains
//                              chains) and instantiate it: cudaGraphCreate + cudaGraphAddKernelNode
//                              + cudaGraphInstantiate against curt::graph::create +
//                              curt::add_kernel_node + instantiate(), with the same kernel,
//                              configuration and arguments; both graphs and executable graphs are
//                              destroyed untimed. Counters as above, per graph. Goal: within 5 %.
//   graph/chain100             GPU time (CUDA events around the submission, on an idle stream)
//                              of 100 one-thread kernels in a chain, each adding one to a counter,
//                              four ways in a rotating order each iteration: one launch of the
//                              executable graph captured from 100 curt::launch calls, by curt
//                              (graph_curt_us) and by cudaGraphLaunch (graph_raw_us), and the 100
//                              kernels launched one by one with curt::launch (stream_curt_us) and
//                              with <<<>>> (stream_chevron_us). speedup: median of the
//                              per-iteration stream_curt / graph_curt; speedup_raw: the same for
//                              <<<>>> over cudaGraphLaunch; graph_curt_over_raw: the two graph
//                              launches' GPU times. Goal: speedup >= 4. Before timing, each way
//                              runs once from a zeroed counter, which must then read 100.
//
//   graph_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// The console table is followed by the paired summary and the chain's medians and speed-ups.
// Exit code 77 when there is no device.
#include "harness.hpp"

#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_node.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

constexpr int kPairBatch = 32;       // graph launches per timed batch, as launch_bench's pairs
constexpr int kChainKernels = 100;   // kernels in the chain graph and in the stream loop
constexpr int kBuildNodes = 1000;    // kernel nodes per built graph
constexpr int kBuildChains = 4;      // independent chains they form, as work from a few streams
constexpr int kSaxpyElements = 256;  // the build kernels' arguments point here (never launched)

__global__ void empty_kernel() {}

__global__ void add_one(unsigned* counter) { *counter += 1; }

__global__ void saxpy_kernel(float a, const float* x, float* y, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + y[i];
}

struct context {
  curt::device device;
  curt::stream stream;
  curt::device_buffer<unsigned> counter;
  curt::device_buffer<float> x;
  curt::device_buffer<float> y;
  curt::graph_exec single_kernel{curt::no_handle};  // one empty kernel: the launch pair
  curt::graph_exec chain{curt::no_handle};          // kChainKernels add_one kernels, captured

  explicit context(curt::device d)
      : device(d), stream(d), counter(d, 1), x(d, kSaxpyElements), y(d, kSaxpyElements) {}
};

context* g = nullptr;

using curt_bench::median_of;
using curt_bench::ok;

const curt::launch_config one_thread(dim3(1), dim3(1));

// ---------------------------------------------------------------------------------------------
// Graph launch, host cost per call

void paired_graph_launch(benchmark::State& state) {
  const curt::graph_exec& exec = g->single_kernel;
  const cudaGraphExec_t raw_exec = exec.get();
  const curt::stream_ref stream = g->stream;
  const cudaStream_t raw_stream = g->stream;
  curt_bench::paired(
      state, kPairBatch,
      [&] {
        for (int i = 0; i < kPairBatch; ++i) (void)cudaGraphLaunch(raw_exec, raw_stream);
      },
      [&] {
        for (int i = 0; i < kPairBatch; ++i) exec.launch(stream);
      },
      [] { g->stream.synchronize(); });
}

// ---------------------------------------------------------------------------------------------
// 1000 kernel nodes: build + instantiate, host time per graph

// One graph built and instantiated each way, its handles kept for the untimed destruction.
struct built_graphs {
  cudaGraph_t raw_graph = nullptr;
  cudaGraphExec_t raw_exec = nullptr;
  curt::graph curt_graph{curt::no_handle};
  curt::graph_exec curt_exec{curt::no_handle};

  void destroy() {
    if (raw_exec) CURT_CHECK(cudaGraphExecDestroy(raw_exec));
    if (raw_graph) CURT_CHECK(cudaGraphDestroy(raw_graph));
    raw_exec = nullptr;
    raw_graph = nullptr;
    curt_exec = curt::graph_exec(curt::no_handle);
    curt_graph = curt::graph(curt::no_handle);
  }
  ~built_graphs() {
    if (raw_exec) (void)cudaGraphExecDestroy(raw_exec);
    if (raw_graph) (void)cudaGraphDestroy(raw_graph);
  }
};

// The same kernel node both ways: saxpy_kernel(a, x, y, n) on one block of kSaxpyElements.
struct build_arguments {
  float a = 2.0f;
  const float* x = g->x.data();
  float* y = g->y.data();
  int n = kSaxpyElements;
  void* raw_pointers[4] = {&a, &x, &y, &n};
  cudaKernelNodeParams raw_params{};
  curt::launch_config config{dim3(1), dim3(kSaxpyElements)};

  build_arguments() {
    raw_params.func = reinterpret_cast<void*>(saxpy_kernel);
    raw_params.gridDim = config.grid_dims();
    raw_params.blockDim = config.block_dims();
    raw_params.sharedMemBytes = 0;
    raw_params.kernelParams = raw_pointers;
    raw_params.extra = nullptr;
  }
  build_arguments(const build_arguments&) = delete;  // raw_pointers point into the object
  build_arguments& operator=(const build_arguments&) = delete;
};

void build_raw(const build_arguments& args, built_graphs& out) {
  CURT_CHECK(cudaGraphCreate(&out.raw_graph, 0));
  cudaGraphNode_t last[kBuildChains] = {};
  for (int i = 0; i < kBuildNodes; ++i) {
    cudaGraphNode_t& previous = last[i % kBuildChains];
    cudaGraphNode_t node = nullptr;
    CURT_CHECK(cudaGraphAddKernelNode(&node, out.raw_graph, previous ? &previous : nullptr,
                                      previous ? 1 : 0, &args.raw_params));
    previous = node;
  }
  CURT_CHECK(cudaGraphInstantiate(&out.raw_exec, out.raw_graph, 0));
}

void build_curt(const build_arguments& args, built_graphs& out) {
  out.curt_graph = curt::graph::create();
  curt::graph_node last[kBuildChains];
  for (int i = 0; i < kBuildNodes; ++i) {
    curt::graph_node& previous = last[i % kBuildChains];
    const curt::node_dependencies after =
        previous.valid() ? curt::node_dependencies(previous) : curt::node_dependencies();
    previous = curt::add_kernel_node(out.curt_graph, after, args.config, saxpy_kernel, args.a,
                                     args.x, args.y, args.n);
  }
  out.curt_exec = out.curt_graph.instantiate();
}

std::size_t edge_count(cudaGraph_t graph) {
  std::size_t n = 0;
  CURT_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  return n;
}

void paired_build_instantiate(benchmark::State& state) {
  build_arguments args;
  built_graphs built;
  {  // both ways make the same graph: kBuildNodes nodes, each chain's first one without an edge
    build_raw(args, built);
    build_curt(args, built);
    std::size_t raw_nodes = 0;
    CURT_CHECK(cudaGraphGetNodes(built.raw_graph, nullptr, &raw_nodes));
    const std::size_t expected_edges = kBuildNodes - kBuildChains;
    if (raw_nodes != kBuildNodes || built.curt_graph.node_count() != kBuildNodes ||
        edge_count(built.raw_graph) != expected_edges ||
        built.curt_graph.edges().size() != expected_edges) {
      state.SkipWithError("the raw and curt graphs do not have the expected nodes and edges");
      return;
    }
    built.destroy();
  }
  curt_bench::paired(
      state, 1, [&] { build_raw(args, built); }, [&] { build_curt(args, built); },
      [&] { built.destroy(); });
}

// ---------------------------------------------------------------------------------------------
// 100 kernels: one graph launch against 100 stream launches, GPU time

enum chain_variant { graph_curt = 0, graph_raw, stream_curt, stream_chevron, chain_variant_count };
const char* const chain_variant_names[chain_variant_count] = {"graph_curt", "graph_raw",
                                                              "stream_curt", "stream_chevron"};

void submit_chain(chain_variant v) {
  const cudaStream_t raw_stream = g->stream;
  unsigned* counter = g->counter.data();
  switch (v) {
    case graph_curt:
      g->chain.launch(g->stream);
      break;
    case graph_raw:
      CURT_CHECK(cudaGraphLaunch(g->chain.get(), raw_stream));
      break;
    case stream_curt:
      for (int i = 0; i < kChainKernels; ++i) curt::launch(g->stream, one_thread, add_one, counter);
      break;
    case stream_chevron:
      for (int i = 0; i < kChainKernels; ++i) add_one<<<1, 1, 0, raw_stream>>>(counter);
      break;
    default:
      break;
  }
}

// GPU time of one variant in µs: events around its submission on the idle stream, so the time
// includes the GPU waiting for a host that submits slower than it runs (the cost graphs save).
double gpu_us(chain_variant v, const curt::event& start, const curt::event& stop) {
  start.record(g->stream);
  submit_chain(v);
  stop.record(g->stream);
  stop.synchronize();
  return std::chrono::duration<double, std::micro>(curt::elapsed(start, stop)).count();
}

unsigned read_counter() {
  unsigned value = 0;
  CURT_CHECK(cudaMemcpyAsync(&value, g->counter.data(), sizeof value, cudaMemcpyDeviceToHost,
                             g->stream));
  g->stream.synchronize();
  return value;
}

// Each variant once from a zeroed counter (the warm-up too): each must add kChainKernels, which
// shows the graph holds the whole chain. Empty when all did; otherwise what went wrong.
std::string check_chain() {
  CURT_CHECK(cudaMemsetAsync(g->counter.data(), 0, sizeof(unsigned), g->stream));
  unsigned expected = 0;
  for (int v = 0; v < chain_variant_count; ++v) {
    submit_chain(static_cast<chain_variant>(v));
    CURT_CHECK(cudaGetLastError());
    expected += kChainKernels;
    const unsigned got = read_counter();
    if (got != expected)
      return std::string(chain_variant_names[v]) + ": the counter reads " + std::to_string(got) +
             ", expected " + std::to_string(expected);
  }
  return {};
}

void graph_chain(benchmark::State& state) {
  const std::string wrong = check_chain();
  if (!wrong.empty()) {
    state.SkipWithError(wrong.c_str());
    return;
  }
  const curt::event start(g->device, curt::event_flags::timing);
  const curt::event stop(g->device, curt::event_flags::timing);
  std::vector<double> us[chain_variant_count], speedup, speedup_raw, graph_curt_over_raw;
  int first = 0;
  for (auto _ : state) {
    (void)_;
    double t[chain_variant_count];
    for (int k = 0; k < chain_variant_count; ++k) {  // rotating order: drift hits all alike
      const auto v = static_cast<chain_variant>((first + k) % chain_variant_count);
      t[v] = gpu_us(v, start, stop);
    }
    first = (first + 1) % chain_variant_count;
    if (!ok(state, cudaGetLastError())) return;
    for (int v = 0; v < chain_variant_count; ++v) us[v].push_back(t[v]);
    speedup.push_back(t[stream_curt] / t[graph_curt]);
    speedup_raw.push_back(t[stream_chevron] / t[graph_raw]);
    graph_curt_over_raw.push_back(t[graph_curt] / t[graph_raw]);
  }
  for (int v = 0; v < chain_variant_count; ++v)
    state.counters[std::string(chain_variant_names[v]) + "_us"] = median_of(us[v]);
  state.counters["speedup"] = median_of(speedup);
  state.counters["speedup_raw"] = median_of(speedup_raw);
  state.counters["graph_curt_over_raw"] = median_of(graph_curt_over_raw);
}

// ---------------------------------------------------------------------------------------------
// Setup and summary

void setup(curt::device d) {
  static std::unique_ptr<context> owned = std::make_unique<context>(d);
  g = owned.get();
  const curt::stream_ref stream = g->stream;
  // Kernels load on first use (lazy loading): before any graph is made or timed.
  empty_kernel<<<1, 1, 0, stream.get()>>>();
  add_one<<<1, 1, 0, stream.get()>>>(g->counter.data());
  saxpy_kernel<<<1, kSaxpyElements, 0, stream.get()>>>(1.0f, g->x.data(), g->y.data(), 0);
  CURT_CHECK(cudaGetLastError());
  g->stream.synchronize();

  g->single_kernel =
      curt::capture(stream, [&] { curt::launch(stream, one_thread, empty_kernel); }).instantiate();
  curt::graph chain = curt::capture(stream, [&] {
    for (int i = 0; i < kChainKernels; ++i)
      curt::launch(stream, one_thread, add_one, g->counter.data());
  });
  if (chain.node_count() != kChainKernels)
    throw std::runtime_error("graph_bench: the captured chain has " +
                             std::to_string(chain.node_count()) + " nodes, not " +
                             std::to_string(kChainKernels));
  g->chain = chain.instantiate();
  // The first launches upload the executable graphs.
  for (int i = 0; i < 8; ++i) g->single_kernel.launch(stream);
  g->chain.launch(stream);
  g->stream.synchronize();

  using curt_bench::add;
  add("paired/graph/launch", paired_graph_launch);
  add("paired/graph/build_instantiate/1000", paired_build_instantiate);
  add("graph/chain100", graph_chain);
  benchmark::AddCustomContext("curt_graph_launches_per_batch", std::to_string(kPairBatch));
  benchmark::AddCustomContext("curt_graph_chain_kernels", std::to_string(kChainKernels));
  benchmark::AddCustomContext("curt_graph_build_nodes", std::to_string(kBuildNodes));
  benchmark::AddCustomContext("curt_graph_build_chains", std::to_string(kBuildChains));
}

// The paired summary, then the chain's GPU times and speed-ups (medians over repetitions when
// they ran, else over the runs).
class graph_summary : public curt_bench::detail::paired_summary {
 public:
  using paired_summary::paired_summary;

  void ReportRuns(const std::vector<Run>& runs) override {
    paired_summary::ReportRuns(runs);
    for (const Run& run : runs) {
      if (curt_bench::detail::run_failed(run, 0)) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (!median && run.run_type != Run::RT_Iteration) continue;
      for (const auto& counter : run.counters) {
        if (!chain_counter(counter.first)) continue;
        statistic& s = chain_[run.run_name.function_name][counter.first];
        if (median)
          s.median = counter.second.value;
        else
          s.samples.push_back(counter.second.value);
      }
    }
  }

  void print() const {
    paired_summary::print();
    for (const auto& entry : chain_) {
      auto value = [&](const std::string& counter) {
        auto it = entry.second.find(counter);
        return it == entry.second.end() ? -1.0 : it->second.value();
      };
      std::printf("\n%s: GPU time of %d one-thread kernels in a chain (medians)\n\n",
                  entry.first.c_str(), kChainKernels);
      const char* labels[chain_variant_count] = {"one graph launch, curt", "one graph launch, raw",
                                                 "stream launches, curt", "stream launches, <<<>>>"};
      for (int v = 0; v < chain_variant_count; ++v)
        std::printf("%-24s | %10s us\n", labels[v],
                    curt_bench::detail::number(
                        value(std::string(chain_variant_names[v]) + "_us"), "%.1f")
                        .c_str());
      const double speedup = value("speedup");
      std::printf("speed-up (stream / graph): curt %sx (goal >= 4x: %s), raw %sx; graph launch "
                  "GPU time curt / raw %s\n",
                  curt_bench::detail::number(speedup, "%.2f").c_str(),
                  speedup < 0.0 ? "-" : speedup >= 4.0 ? "met" : "missed",
                  curt_bench::detail::number(value("speedup_raw"), "%.2f").c_str(),
                  curt_bench::detail::number(value("graph_curt_over_raw"), "%.3f").c_str());
    }
  }

 private:
  static bool chain_counter(const std::string& name) {
    return name == "speedup" || name == "speedup_raw" || name == "graph_curt_over_raw" ||
           (name.size() > 3 && name.compare(name.size() - 3, 3, "_us") == 0);
  }
  struct statistic {
    double median = -1.0;
    std::vector<double> samples;
    double value() const { return median >= 0.0 ? median : median_of(samples); }
  };
  std::map<std::string, std::map<std::string, statistic>> chain_;
};

}  // namespace

int main(int argc, char** argv) {
  return curt_bench::run<graph_summary>(argc, argv, "graph_bench", setup);
}
