// Conditional nodes (include/curt/graph_conditional.hpp): a WHILE node runs Jacobi steps on a
// tridiagonal system until a device-side convergence test stops it, with no host round trip, and
// gives the CPU's solution and iteration count, bit for bit, on every launch, built node by node
// and built during stream capture alike; IF and IF/ELSE nodes pick the right body; a SWITCH node
// runs body n for condition n and none for a value out of range; conditional nodes nest; and
// CUDA's rules become errors that say why (host, event and memory nodes in a body, captured or in
// a body's child graph, refused when the graph is instantiated; clone, embedding as a child, a
// second executable graph, capture calls on a stream that does not capture; tag [api-error]).
// Graphs made after a graph with conditional nodes is gone take any node.
//
// Inputs are fresh and random, outputs poisoned first (all bytes 0xFF: -1 as int, NaN as float).
//
// [no-initcheck]: under compute-sanitizer 13.0's initcheck, graphs with conditional nodes failed
// now and then with an illegal address, the driver logging "Unsupported node type" for them; the
// other tools run these tests (racecheck crashes in its own code now and then: see
// scripts/gpu-check.sh).
//
// cudafe++ 13.0 hangs on a Catch2 assertion in a member function of a class in a .cu file (with
// g++ 13): assertions live only in TEST_CASE bodies, free functions and lambdas.
#include <catch.hpp>
#include <host_helpers.hpp>
#include <device_array.hpp>
#include <expect.hpp>
#include <kernels.cuh>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_conditional.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using curt_test::device_array;
using curt_test::require_cuda_error;

constexpr int block_size = 256;

// ---- device side ------------------------------------------------------------------------------

// y[i] = a * x[i] + b in integers.
constexpr auto affine = curt_test::slow_affine_int;

// One Jacobi step for the tridiagonal system
//   lower[i] x[i-1] + diag[i] x[i] + upper[i] x[i+1] = rhs[i]:
// next[i] = (rhs[i] - lower[i] x[i-1] - upper[i] x[i+1]) / diag[i], rounded as the CPU rounds
// (no contraction), and each block's largest |next[i] - x[i]| in block_change.
__global__ void jacobi_step(const float* x, float* next, const float* lower, const float* diag,
                            const float* upper, const float* rhs, int n, float* block_change) {
  __shared__ float largest[block_size];
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  float change = 0.0f;
  if (i < n) {
    float t = rhs[i];
    if (i > 0) t = __fsub_rn(t, __fmul_rn(lower[i], x[i - 1]));
    if (i < n - 1) t = __fsub_rn(t, __fmul_rn(upper[i], x[i + 1]));
    float v = __fdiv_rn(t, diag[i]);
    next[i] = v;
    change = fabsf(__fsub_rn(v, x[i]));
  }
  largest[threadIdx.x] = change;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) largest[threadIdx.x] = fmaxf(largest[threadIdx.x], largest[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) block_change[blockIdx.x] = largest[0];
}

// The convergence test, in one block: counts the step, keeps the largest change, and lets the
// WHILE node run another step while it exceeds the tolerance (and the count is below the cap).
__global__ void converged_yet(const float* block_change, int blocks, float tolerance,
                              int* iterations, int max_iterations, float* change,
                              curt::conditional_handle loop) {
  __shared__ float largest[block_size];
  float m = 0.0f;
  for (int b = static_cast<int>(threadIdx.x); b < blocks; b += static_cast<int>(blockDim.x))
    m = fmaxf(m, block_change[b]);
  largest[threadIdx.x] = m;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) largest[threadIdx.x] = fmaxf(largest[threadIdx.x], largest[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    int done = *iterations + 1;
    *iterations = done;
    *change = largest[0];
    curt::set_condition(loop, largest[0] > tolerance && done < max_iterations ? 1u : 0u);
  }
}

// Sets the condition of `handle` to *selector (one thread).
__global__ void choose(const unsigned* selector, curt::conditional_handle handle) {
  if (threadIdx.x == 0 && blockIdx.x == 0) curt::set_condition(handle, *selector);
}

// A pass of a WHILE loop: counts it, lets the IF below run on odd passes, stops after `limit`.
__global__ void count_pass(int* passes, int limit, curt::conditional_handle loop,
                           curt::conditional_handle odd) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int p = *passes + 1;
  *passes = p;
  curt::set_condition(odd, static_cast<unsigned>(p % 2));
  curt::set_condition(loop, p < limit ? 1u : 0u);
}

// A pass of a WHILE loop that stops after `limit`.
__global__ void count_to(int* passes, int limit, curt::conditional_handle loop) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int p = *passes + 1;
  *passes = p;
  curt::set_condition(loop, p < limit ? 1u : 0u);
}

// The IF's body: notes the pass it ran in.
__global__ void note_pass(const int* passes, int* noted, int* trace) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  trace[*noted] = *passes;
  *noted += 1;
}

// ---- host side --------------------------------------------------------------------------------

curt::launch_config config_for(int n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, block_size))),
                             dim3(block_size));
}
const curt::launch_config one_thread(dim3(1), dim3(1));
const curt::launch_config one_block(dim3(1), dim3(block_size));

std::size_t count(int n) { return static_cast<std::size_t>(n); }
int random_size() { return curt_test::random_ints(1, 1000, 50000)[0]; }
int random_coefficient() { return curt_test::random_ints(1, 2, 50)[0]; }
std::vector<int> random_inputs(int n) { return curt_test::random_ints(std::size_t(n), 0, 1000); }
std::vector<int> poisoned(int n) { return std::vector<int>(count(n), -1); }

using curt_test::affine_ref;

using curt_test::all_of;

// Products and differences stored as floats, one at a time: no contraction into FMAs.
float rounded(float value) {
  volatile float stored = value;
  return stored;
}

// The tridiagonal system and what Jacobi's method gives for it.
struct jacobi_problem {
  int n = 0;
  std::vector<float> lower, diag, upper, rhs;
  float tolerance = 1e-5f;
  int max_iterations = 2000;
};
struct jacobi_answer {
  std::vector<float> x;
  int iterations = 0;
  float change = 0.0f;
};

// Diagonally dominant (|lower| + |upper| <= 2 < diag): Jacobi converges, in tens of steps.
jacobi_problem random_problem() {
  jacobi_problem p;
  p.n = curt_test::random_ints(1, 500, 4000)[0];
  p.lower = curt_test::random_floats(count(p.n), -1.0f, 1.0f);
  p.upper = curt_test::random_floats(count(p.n), -1.0f, 1.0f);
  p.diag = curt_test::random_floats(count(p.n), 2.2f, 3.0f);
  p.rhs = curt_test::random_floats(count(p.n), -1.0f, 1.0f);
  return p;
}

// Jacobi on the CPU, step for step as the graph does it: from x = 0, until the largest change
// of a step is at most the tolerance (or the cap is reached).
jacobi_answer jacobi_cpu(const jacobi_problem& p) {
  jacobi_answer a;
  a.x.assign(count(p.n), 0.0f);
  std::vector<float> next(count(p.n));
  do {
    float largest = 0.0f;
    for (int i = 0; i < p.n; ++i) {
      std::size_t k = count(i);
      float t = p.rhs[k];
      if (i > 0) t = rounded(t - rounded(p.lower[k] * a.x[k - 1]));
      if (i < p.n - 1) t = rounded(t - rounded(p.upper[k] * a.x[k + 1]));
      float v = rounded(t / p.diag[k]);
      next[k] = v;
      largest = std::fmax(largest, std::fabs(rounded(v - a.x[k])));
    }
    a.x.swap(next);
    ++a.iterations;
    a.change = largest;
  } while (a.change > p.tolerance && a.iterations < p.max_iterations);
  return a;
}

// The device side of a Jacobi solve: the system, the iterate and its successor, the per-block
// changes, the iteration count and the last change, and where the graph leaves the solution.
struct jacobi_buffers {
  explicit jacobi_buffers(const jacobi_problem& p)
      : blocks(curt::ceil_div(p.n, block_size)),
        lower(p.lower), diag(p.diag), upper(p.upper), rhs(p.rhs),
        x(count(p.n)), next(count(p.n)), result(count(p.n)),
        block_change(count(blocks)), iterations(1), change(1) {}
  int blocks;
  device_array<float> lower, diag, upper, rhs, x, next, result, block_change;
  device_array<int> iterations;
  device_array<float> change;
};

// The same solve built node by node: x = 0 and the count reset, then WHILE (step, test, copy
// next into x), then the solution copied out.
curt::graph jacobi_explicit(const jacobi_problem& p, jacobi_buffers& b) {
  curt::graph g = curt::graph::create();
  curt::graph_node start = curt::add_fill_node(g, {}, all_of(b.x), 0.0f);
  curt::graph_node reset = curt::add_memset_node(g, {}, all_of(b.iterations), 0);
  curt::conditional_handle more =
      curt::conditional_handle::create(g, 1, curt::conditional_flags::assign_default);
  curt::conditional_node loop = curt::add_while_node(g, {start, reset}, more);
  CHECK(loop.kind() == cudaGraphCondTypeWhile);
  CHECK(loop.body_count() == 1);
  CHECK(loop.handle() == more);
  CHECK(loop.type() == cudaGraphNodeTypeConditional);
  curt::graph_ref body = loop.body();
  curt::graph_node step = curt::add_kernel_node(
      body, {}, config_for(p.n), jacobi_step, static_cast<const float*>(b.x.get()), b.next.get(),
      static_cast<const float*>(b.lower.get()), static_cast<const float*>(b.diag.get()),
      static_cast<const float*>(b.upper.get()), static_cast<const float*>(b.rhs.get()), p.n,
      b.block_change.get());
  curt::add_kernel_node(body, {step}, one_block, converged_yet,
                        static_cast<const float*>(b.block_change.get()), b.blocks, p.tolerance,
                        b.iterations.get(), p.max_iterations, b.change.get(), more);
  curt::add_memcpy_node(body, {step}, all_of(b.x), all_of(b.next));
  CHECK(body.node_count() == 3);
  curt::add_memcpy_node(g, {loop}, all_of(b.result), all_of(b.x));
  return g;
}

// The same solve captured: the WHILE node added during the capture, its body captured on a
// second stream.
curt::graph jacobi_captured(const jacobi_problem& p, jacobi_buffers& b, curt::stream_ref s,
                            curt::stream_ref side) {
  return curt::capture(s, [&](curt::stream_ref cs) {
    curt::fill(all_of(b.x), 0.0f, cs);
    curt::memset(all_of(b.iterations), 0, cs);
    curt::conditional_handle more =
        curt::conditional_handle::create(cs, 1, curt::conditional_flags::assign_default);
    curt::conditional_node loop = curt::add_while_node(cs, more);
    // What the stream captures next depends on the conditional node.
    curt::stream_capture_info info = curt::capture_info(cs);
    CHECK(info.dependencies.size() == 1);
    CHECK((info.dependencies.size() == 1 && info.dependencies[0].node == loop.get()));
    curt::capture_to_graph(side, loop.body(), [&](curt::stream_ref bs) {
      curt::launch(bs, config_for(p.n), jacobi_step, static_cast<const float*>(b.x.get()),
                   b.next.get(), static_cast<const float*>(b.lower.get()),
                   static_cast<const float*>(b.diag.get()),
                   static_cast<const float*>(b.upper.get()),
                   static_cast<const float*>(b.rhs.get()), p.n, b.block_change.get());
      curt::launch(bs, one_block, converged_yet, static_cast<const float*>(b.block_change.get()),
                   b.blocks, p.tolerance, b.iterations.get(), p.max_iterations, b.change.get(),
                   more);
      curt::copy(all_of(b.x), all_of(b.next), bs);
    });
    curt::copy(all_of(b.result), all_of(b.x), cs);
  });
}

// Launches a solve's executable graph on a fresh right-hand side, once, and compares with the CPU.
void require_jacobi(const curt::graph_exec& exec, curt::stream_ref s, jacobi_problem& p,
                    jacobi_buffers& b) {
  p.rhs = curt_test::random_floats(count(p.n), -1.0f, 1.0f);
  b.rhs.upload(p.rhs);
  b.x.poison();
  b.next.poison();
  b.result.poison();
  b.iterations.poison();
  b.change.poison();
  exec.launch(s);
  s.synchronize();  // the only wait: every step and test ran on the device
  jacobi_answer want = jacobi_cpu(p);
  INFO("n " << p.n << ", CPU iterations " << want.iterations << ", last change " << want.change);
  CHECK(want.iterations > 5);  // the test stopped it, not the first pass
  CHECK(want.iterations < p.max_iterations);
  CHECK(b.iterations.download()[0] == want.iterations);
  std::vector<float> got_change = b.change.download();
  CHECK(std::memcmp(&got_change[0], &want.change, sizeof(float)) == 0);
  curt_test::require_same_bytes(b.result.download(), want.x);
}

// What curt's error says when a conditional body holds a node CUDA does not run there.
const std::initializer_list<const char*> body_refusal = {
    "conditional body", "holds only kernel, memcpy, memset, child-graph, empty and conditional nodes",
    "in its child graphs too"};

using curt_test::require_any_cuda_error;

}  // namespace

TEST_CASE("a WHILE node runs Jacobi steps until a device-side test says converged: the CPU's "
          "solution and iteration count, on every launch, with no host round trip",
          "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  jacobi_problem p = random_problem();
  jacobi_buffers b(p);
  curt::graph g = jacobi_explicit(p, b);
  curt::graph_exec exec = g.instantiate();
  for (int launch = 0; launch < 3; ++launch) {
    INFO("launch " << launch);
    require_jacobi(exec, s, p, b);
  }
}

TEST_CASE("the same WHILE loop added during stream capture, its body captured on a second stream, "
          "gives the explicit graph's results bit for bit", "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d), side(d);
  jacobi_problem p = random_problem();
  jacobi_buffers b(p);
  curt::graph explicit_graph = jacobi_explicit(p, b);
  curt::graph captured = jacobi_captured(p, b, s, side);
  CHECK(curt::capture_info(s).status == curt::capture_status::none);
  CHECK(curt::capture_info(side).status == curt::capture_status::none);
  std::size_t conditional = 0;
  for (cudaGraphNode_t node : captured.nodes())
    conditional += curt::node_type(node) == cudaGraphNodeTypeConditional;
  CHECK(conditional == 1);

  curt::graph_exec exec_explicit = explicit_graph.instantiate();
  curt::graph_exec exec_captured = captured.instantiate();
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch);
    require_jacobi(exec_captured, s, p, b);
    std::vector<float> from_capture = b.result.download();
    int iterations_capture = b.iterations.download()[0];
    b.result.poison();
    b.iterations.poison();
    exec_explicit.launch(s);
    s.synchronize();
    curt_test::require_same_bytes(b.result.download(), from_capture);
    CHECK(b.iterations.download()[0] == iterations_capture);
  }
}

TEST_CASE("IF and IF/ELSE nodes run the body the condition picks, and only that one",
          "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a1 = random_coefficient(), b1 = random_coefficient();
  const int a2 = random_coefficient() + 50, b2 = random_coefficient();
  device_array<int> x(count(n)), y_then(count(n)), y_else(count(n));
  device_array<unsigned> selector(1);

  curt::graph g = curt::graph::create();
  curt::conditional_handle h = curt::conditional_handle::create(g);  // set by `choose`
  curt::graph_node pick = curt::add_kernel_node(g, {}, one_thread, choose,
                                                static_cast<const unsigned*>(selector.get()), h);
  curt::conditional_node branch = curt::add_if_else_node(g, {pick}, h);
  CHECK(branch.body_count() == 2);
  curt::add_kernel_node(branch.body(0), {}, config_for(n), affine,
                        static_cast<const int*>(x.get()), y_then.get(), n, a1, b1, 0ull);
  curt::add_kernel_node(branch.else_body(), {}, config_for(n), affine,
                        static_cast<const int*>(x.get()), y_else.get(), n, a2, b2, 0ull);
  curt::graph_exec exec = g.instantiate();

  const unsigned values[] = {0u, 1u, static_cast<unsigned>(curt_test::random_ints(1, 2, 1 << 30)[0]),
                             0u, 0xFFFFFFFFu};
  for (unsigned value : values) {
    INFO("condition " << value);
    std::vector<int> in = random_inputs(n);
    x.upload(in);
    selector.upload({value});
    y_then.poison();
    y_else.poison();
    exec.launch(s);
    s.synchronize();
    CHECK(y_then.download() == (value != 0 ? affine_ref(in, a1, b1) : poisoned(n)));
    CHECK(y_else.download() == (value == 0 ? affine_ref(in, a2, b2) : poisoned(n)));
  }

  // A plain IF: nothing runs for 0.
  curt::graph plain = curt::graph::create();
  curt::conditional_handle hp = curt::conditional_handle::create(plain);
  curt::graph_node pick_plain = curt::add_kernel_node(
      plain, {}, one_thread, choose, static_cast<const unsigned*>(selector.get()), hp);
  curt::conditional_node only_if = curt::add_if_node(plain, {pick_plain}, hp);
  CHECK(only_if.body_count() == 1);
  curt::add_kernel_node(only_if.body(), {}, config_for(n), affine,
                        static_cast<const int*>(x.get()), y_then.get(), n, a1, b1, 0ull);
  curt::graph_exec plain_exec = plain.instantiate();
  for (unsigned value : {0u, 3u, 0u}) {
    INFO("plain IF, condition " << value);
    std::vector<int> in = random_inputs(n);
    x.upload(in);
    selector.upload({value});
    y_then.poison();
    plain_exec.launch(s);
    s.synchronize();
    CHECK(y_then.download() == (value != 0 ? affine_ref(in, a1, b1) : poisoned(n)));
  }
}

TEST_CASE("a SWITCH node runs body n for condition n, and none for a value out of range",
          "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const unsigned cases = static_cast<unsigned>(curt_test::random_ints(1, 2, 6)[0]);
  device_array<int> x(count(n));
  device_array<unsigned> selector(1);
  std::vector<device_array<int>> outputs;
  for (unsigned i = 0; i < cases; ++i) outputs.emplace_back(count(n));

  curt::graph g = curt::graph::create();
  curt::conditional_handle h = curt::conditional_handle::create(g);
  curt::graph_node pick = curt::add_kernel_node(g, {}, one_thread, choose,
                                                static_cast<const unsigned*>(selector.get()), h);
  curt::conditional_node sw = curt::add_switch_node(g, {pick}, h, cases);
  CHECK(sw.kind() == cudaGraphCondTypeSwitch);
  REQUIRE(sw.body_count() == cases);
  for (unsigned i = 0; i < cases; ++i)
    curt::add_kernel_node(sw.body(i), {}, config_for(n), affine, static_cast<const int*>(x.get()),
                          outputs[i].get(), n, static_cast<int>(i) + 2, 10 * static_cast<int>(i),
                          0ull);
  curt::graph_exec exec = g.instantiate();

  std::vector<unsigned> conditions;
  for (unsigned i = 0; i < cases; ++i) conditions.push_back(i);
  conditions.push_back(cases);       // one past the last body
  conditions.push_back(cases + 17);  // far out
  conditions.push_back(0xFFFFFFFFu);
  conditions.push_back(cases - 1);   // and back in range
  for (unsigned value : conditions) {
    INFO("condition " << value << " of " << cases << " cases");
    std::vector<int> in = random_inputs(n);
    x.upload(in);
    selector.upload({value});
    for (const device_array<int>& out : outputs) out.poison();
    exec.launch(s);
    s.synchronize();
    for (unsigned i = 0; i < cases; ++i) {
      INFO("body " << i);
      CHECK(outputs[i].download() ==
            (i == value ? affine_ref(in, static_cast<int>(i) + 2, 10 * static_cast<int>(i))
                        : poisoned(n)));
    }
  }
}

// Without cudaGraphCondAssignDefault a handle starts a launch with what the last one left: a
// WHILE loop that ended left 0, and the next launch ran no pass at all.
TEST_CASE("a handle's default value starts every launch, no flag needed",
          "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  const int limit = curt_test::random_ints(1, 3, 40)[0];
  device_array<int> passes(1);
  curt::graph g = curt::graph::create();
  curt::graph_node reset = curt::add_memset_node(g, {}, all_of(passes), 0);
  curt::conditional_handle more = curt::conditional_handle::create(g, 1);
  curt::conditional_node loop = curt::add_while_node(g, {reset}, more);
  curt::add_kernel_node(loop.body(), {}, one_thread, count_to, passes.get(), limit, more);
  curt::graph_exec exec = g.instantiate();
  for (int launch = 0; launch < 3; ++launch) {
    INFO("launch " << launch << " of a loop of " << limit << " passes");
    passes.poison();
    exec.launch(s);
    s.synchronize();
    CHECK(passes.download()[0] == limit);
  }
}

TEST_CASE("conditional nodes nest: an IF inside a WHILE runs on the odd passes",
          "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  const int limit = curt_test::random_ints(1, 3, 40)[0];
  device_array<int> passes(1), noted(1), trace(count(limit));

  curt::graph g = curt::graph::create();
  curt::graph_node reset_passes = curt::add_memset_node(g, {}, all_of(passes), 0);
  curt::graph_node reset_noted = curt::add_memset_node(g, {}, all_of(noted), 0);
  curt::conditional_handle more =
      curt::conditional_handle::create(g, 1, curt::conditional_flags::assign_default);
  curt::conditional_node loop = curt::add_while_node(g, {reset_passes, reset_noted}, more);
  curt::conditional_handle odd = curt::conditional_handle::create(loop.body());
  curt::graph_node counted = curt::add_kernel_node(loop.body(), {}, one_thread, count_pass,
                                                   passes.get(), limit, more, odd);
  curt::conditional_node on_odd = curt::add_if_node(loop.body(), {counted}, odd);
  curt::add_kernel_node(on_odd.body(), {}, one_thread, note_pass,
                        static_cast<const int*>(passes.get()), noted.get(), trace.get());

  curt::graph_exec exec = g.instantiate();
  std::vector<int> want_trace = poisoned(limit);
  for (int p = 1, k = 0; p <= limit; p += 2) want_trace[count(k++)] = p;
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch << ", " << limit << " passes");
    passes.poison();
    noted.poison();
    trace.poison();
    exec.launch(s);
    s.synchronize();
    CHECK(passes.download()[0] == limit);
    CHECK(noted.download()[0] == (limit + 1) / 2);
    CHECK(trace.download() == want_trace);
  }
}

TEST_CASE("CUDA's rules for conditional nodes are errors that say why, where the misuse happens",
          "[graph][conditional][no-initcheck][api-error]") {
  curt::device d(0);
  curt::stream s(d);
  curt::event e(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), scratch(16);

  curt::graph g = curt::graph::create();
  curt::conditional_handle h =
      curt::conditional_handle::create(g, 1, curt::conditional_flags::assign_default);
  curt::conditional_node branch = curt::add_if_node(g, {}, h);
  curt::graph_ref body = branch.body();
  curt::add_kernel_node(body, {}, config_for(n), affine, static_cast<const int*>(x.get()), y.get(),
                        n, a, b, 0ull);
  const std::size_t body_nodes = body.node_count();
  auto require_runs = [&](const curt::graph_exec& exec) {
    std::vector<int> values = random_inputs(n);
    x.upload(values);
    y.poison();
    exec.launch(s);
    s.synchronize();
    CHECK(y.download() == affine_ref(values, a, b));
  };

  // A new graph whose IF body gets what `add` adds: CUDA refuses it (when the graph is
  // instantiated, at the latest), and curt's error says why.
  auto refused_in_body = [&](auto add, const char* what) {
    INFO(what);
    curt::graph bad = curt::graph::create();
    curt::conditional_handle bad_h =
        curt::conditional_handle::create(bad, 1, curt::conditional_flags::assign_default);
    curt::graph_ref bad_body = curt::add_if_node(bad, {}, bad_h).body();
    require_any_cuda_error(
        [&] {
          add(bad_body);
          (void)bad.instantiate();
        },
        body_refusal);
  };

  SECTION("host, event and memory nodes in a body: CUDA refuses the graph, and curt says why") {
    refused_in_body([&](curt::graph_ref b) { (void)curt::add_host_node(b, {}, [] {}); },
                    "host node");
    refused_in_body([&](curt::graph_ref b) { (void)curt::add_event_record_node(b, {}, e); },
                    "event record node");
    refused_in_body([&](curt::graph_ref b) { (void)curt::add_event_wait_node(b, {}, e); },
                    "event wait node");
    refused_in_body([&](curt::graph_ref b) { (void)curt::add_allocation_node<int>(b, {}, d, 16); },
                    "memory allocation node");
    refused_in_body([&](curt::graph_ref b) { (void)curt::add_free_node(b, {}, y.get()); },
                    "memory free node");
    // In a body nested in a body, too.
    refused_in_body(
        [&](curt::graph_ref b) {
          curt::conditional_handle inner_h = curt::conditional_handle::create(b);
          curt::conditional_node inner = curt::add_switch_node(b, {}, inner_h, 3);
          (void)curt::add_host_node(inner.body(2), {}, [] {});
        },
        "host node in body 2 of a SWITCH in the body");
    // Allowed nodes are fine there (the SWITCH's condition is left unset: any body may run, so
    // none touches y).
    curt::conditional_handle inner_h = curt::conditional_handle::create(body);
    curt::conditional_node inner = curt::add_switch_node(body, {}, inner_h, 3);
    curt::add_empty_node(inner.body(0), {});
    curt::add_memset_node(inner.body(1), {}, all_of(scratch), 0);
    CHECK(inner.body(0).node_count() == 1);
  }
  SECTION("a host function captured into a body: CUDA refuses the graph, and curt says why") {
    curt::stream side(d);
    curt::graph bad = curt::graph::create();
    curt::conditional_handle bad_h =
        curt::conditional_handle::create(bad, 1, curt::conditional_flags::assign_default);
    curt::graph_ref bad_body = curt::add_if_node(bad, {}, bad_h).body();
    bool captured = false;
    try {
      curt::capture_to_graph(side, bad_body, [&](curt::stream_ref bs) { bs.host_call([] {}); });
      captured = true;
    } catch (const curt::cuda_error& error) {
      INFO("what(): " << error.what());
    }
    CHECK(curt::capture_info(side).status == curt::capture_status::none);
    if (!captured) {  // CUDA may have destroyed the body: the graph holding it is left alone
      (void)bad.release();
      FAIL("the capture of a host function into a conditional body was refused");
    }
    require_any_cuda_error([&] { (void)bad.instantiate(); }, body_refusal);
    curt::graph_exec exec = g.instantiate();  // the other graph is as it was
    require_runs(exec);
  }
  SECTION("a child graph holding a node a body cannot hold: CUDA refuses the graph, and curt "
          "says why") {
    curt::graph child = curt::graph::create();
    curt::graph_node k = curt::add_kernel_node(child, {}, config_for(n), affine,
                                               static_cast<const int*>(x.get()), y.get(), n, a, b,
                                               0ull);
    curt::graph nested_child = curt::graph::create();
    curt::add_host_node(nested_child, {}, [] {});
    curt::add_child_graph_node(child, {k}, nested_child);
    refused_in_body([&](curt::graph_ref b) { (void)curt::add_child_graph_node(b, {}, child); },
                    "a child graph holding a child graph holding a host node");
    curt::graph plain_child = curt::graph::create();
    curt::add_kernel_node(plain_child, {}, config_for(n), affine,
                          static_cast<const int*>(x.get()), y.get(), n, a, b, 0ull);
    curt::add_child_graph_node(body, {}, plain_child);  // fine
    CHECK(body.node_count() == body_nodes + 1);
  }
  SECTION("a graph with a conditional node cannot be cloned") {
    require_any_cuda_error([&] { (void)g.clone(); },
                           {"cudaGraphClone", "conditional", "cannot clone"});
  }
  SECTION("a graph with a conditional node cannot be a child graph") {
    curt::graph parent = curt::graph::create();
    require_any_cuda_error([&] { (void)curt::add_child_graph_node(parent, {}, g); },
                           {"curt::add_child_graph_node(child graph, copied)",
                            "1 conditional node(s)", "cannot embed such a graph as a child"});
    require_any_cuda_error([&] { (void)curt::add_child_graph_node(parent, {}, std::move(g)); },
                           {"curt::add_child_graph_node(child graph, moved in)",
                            "conditional node(s)"});
    CHECK(g.valid());  // refused: the owner keeps its graph
    CHECK(parent.node_count() == 0);
  }
  SECTION("a graph with a conditional node has one executable graph at a time") {
    curt::graph_exec first = g.instantiate();
    require_any_cuda_error([&] { (void)g.instantiate(); },
                           {"cudaGraphInstantiateWithParams", "holds 1 conditional node(s)",
                            "only one executable graph at a time", "destroy it first"});
    require_runs(first);
    first = curt::graph_exec(curt::no_handle);
    curt::graph_exec second = g.instantiate();
    require_runs(second);
  }
  SECTION("the capture forms refuse a stream that does not capture") {
    require_cuda_error([&] { (void)curt::add_if_node(s, h); }, cudaErrorIllegalState,
                       {"curt::add_if_node", "not capturing"});
    require_cuda_error([&] { (void)curt::add_switch_node(s, h, 2); }, cudaErrorIllegalState,
                       {"curt::add_switch_node", "not capturing"});
    require_cuda_error([&] { (void)curt::conditional_handle::create(s); }, cudaErrorIllegalState,
                       {"curt::conditional_handle::create", "not capturing"});
  }
  SECTION("a SWITCH without cases and an ELSE body of a plain IF are refused") {
    curt::conditional_handle other = curt::conditional_handle::create(g);
    require_cuda_error([&] { (void)curt::add_switch_node(g, {branch}, other, 0); },
                       cudaErrorInvalidValue, {"curt::add_switch_node(0 cases)"});
    require_cuda_error([&] { (void)branch.else_body(); }, cudaErrorInvalidValue,
                       {"only an IF/ELSE node"});
    require_cuda_error([&] { (void)branch.body(1); }, cudaErrorInvalidValue, {"1 body"});
    curt::add_if_node(g, {branch}, other);  // the handle is used after all
  }
  CHECK(cudaGetLastError() == cudaSuccess);
  if (g.valid()) {
    curt::graph_exec exec = g.instantiate();
    require_runs(exec);
  }
}

TEST_CASE("graphs made after a graph with conditional nodes is gone take any node",
          "[graph][conditional][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    {
      curt::graph g = curt::graph::create();
      curt::conditional_handle h =
          curt::conditional_handle::create(g, 1, curt::conditional_flags::assign_default);
      (void)curt::add_while_node(g, {}, h).body().get();
    }
    curt::graph fresh = curt::graph::create();  // may well get a dead body's address
    CHECK_NOTHROW(curt::add_host_node(fresh, {}, [] {}));
    CHECK(fresh.node_count() == 1);
    curt::graph_exec exec = fresh.instantiate();
    exec.launch(s);
    s.synchronize();
  }
}
