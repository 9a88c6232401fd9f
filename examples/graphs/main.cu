// graphs: CUDA graphs with curt, each part checked against the CPU.
//   1. A small pipeline (pinned host -> device copy, STEPS kernels, device -> pinned host copy) run
//      ITERATIONS times op by op on a stream, then captured once into a graph (curt::capture),
//      instantiated and uploaded, and launched ITERATIONS times. Printed: the GPU time per
//      iteration of each; the graph saves the per-operation launch overhead, which dominates for
//      small work like this. Integer arithmetic: every output element must equal the CPU's.
//   2. A conditional WHILE loop: Jacobi iterations on a diagonally dominant tridiagonal system,
//      repeated on the device until a device-side test (the largest change of a step at most the
//      tolerance) stops the loop with curt::set_condition: no host round trip between steps. The
//      loop is built twice, during stream capture (add_while_node on the capturing stream, its body
//      captured on a second stream) and node by node (add_*_node), and each graph is launched on a
//      fresh right-hand side. The iteration count and the solution must equal the CPU's, bit for
//      bit (both sides round every operation the same way).
// Outputs are poisoned before every checked run; the seed is printed (CURT_EXAMPLE_SEED repeats).
// Exit code 0 when all matched, 1 on a mismatch or CUDA failure, 2 on bad arguments, 77 without a
// device. Usage: graphs [ELEMENTS [ITERATIONS [UNKNOWNS]]]   (defaults 65536, 200, 262147)
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_conditional.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/memory.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr unsigned kBlock = 256;  // a power of two: the max reductions halve it
constexpr int kSteps = 8;         // kernels in the pipeline
constexpr std::uint32_t kPoison = 0xDEADBEEFu;

curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, std::size_t(kBlock)))),
                             dim3(kBlock));
}

// ---- 1. The pipeline ---------------------------------------------------------------------------

__global__ void affine_step(const std::uint32_t* in, std::uint32_t* out, std::size_t n,
                            std::uint32_t a, std::uint32_t b) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * a + b;  // modulo 2^32: exact on both sides
}

struct pipeline {
  pipeline(curt::device d, std::size_t n)
      : host_in(d, n), host_out(d, n), ping(d, n), pong(d, n), a(kSteps), b(kSteps), want(n) {
    const auto values =
        curt_example::random_values<std::uint32_t>(n, 0, std::numeric_limits<std::uint32_t>::max());
    std::copy(values.begin(), values.end(), host_in.data());
    a = curt_example::random_values<std::uint32_t>(kSteps, 1, 1u << 31);
    b = curt_example::random_values<std::uint32_t>(kSteps, 0, 1u << 31);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t x = values[i];
      for (int k = 0; k < kSteps; ++k) x = x * a[k] + b[k];
      want[i] = x;
    }
  }
  // One iteration: copy in, kSteps kernels between ping and pong, copy out.
  void enqueue(curt::stream_ref s) {
    curt::copy(ping, host_in, s);
    for (int k = 0; k < kSteps; ++k) {
      auto& from = k % 2 == 0 ? ping : pong;
      auto& to = k % 2 == 0 ? pong : ping;
      curt::launch(s, config_for(want.size()), affine_step, from.data(), to.data(), want.size(),
                   a[k], b[k]);
    }
    curt::copy(host_out, kSteps % 2 == 0 ? ping : pong, s);
  }
  std::string mismatch() const {
    for (std::size_t i = 0; i < want.size(); ++i)
      if (host_out.data()[i] != want[i])
        return "element " + std::to_string(i) + " is " + std::to_string(host_out.data()[i]) +
               ", expected " + std::to_string(want[i]);
    return {};
  }
  curt::pinned_buffer<std::uint32_t> host_in, host_out;
  curt::device_buffer<std::uint32_t> ping, pong;
  std::vector<std::uint32_t> a, b, want;
};

// ---- 2. Jacobi in a WHILE loop -----------------------------------------------------------------

// The largest `value` of the block's threads (blockDim.x == kBlock), for every thread.
__device__ float block_max(float value) {
  __shared__ float largest[kBlock];
  largest[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      largest[threadIdx.x] = fmaxf(largest[threadIdx.x], largest[threadIdx.x + half]);
    __syncthreads();
  }
  return largest[0];
}

// One Jacobi step for lower[i] x[i-1] + diag[i] x[i] + upper[i] x[i+1] = rhs[i], every operation
// rounded on its own (no contraction into FMAs, as on the CPU), and each block's largest change.
__global__ void jacobi_step(const float* x, float* next, const float* lower, const float* diag,
                            const float* upper, const float* rhs, int n, float* block_change) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  float change = 0.0f;
  if (i < n) {
    float t = rhs[i];
    if (i > 0) t = __fsub_rn(t, __fmul_rn(lower[i], x[i - 1]));
    if (i < n - 1) t = __fsub_rn(t, __fmul_rn(upper[i], x[i + 1]));
    const float v = __fdiv_rn(t, diag[i]);
    next[i] = v;
    change = fabsf(__fsub_rn(v, x[i]));
  }
  const float m = block_max(change);
  if (threadIdx.x == 0) block_change[blockIdx.x] = m;
}

// The device-side test (one block): counts the step and tells the WHILE node whether to go on.
__global__ void converged_yet(const float* block_change, int blocks, float tolerance,
                              int* iterations, int max_iterations, curt::conditional_handle more) {
  float m = 0.0f;
  for (int k = static_cast<int>(threadIdx.x); k < blocks; k += static_cast<int>(kBlock))
    m = fmaxf(m, block_change[k]);
  m = block_max(m);
  if (threadIdx.x == 0) {  // one thread sets the condition
    const int done = *iterations + 1;
    *iterations = done;
    curt::set_condition(more, m > tolerance && done < max_iterations ? 1u : 0u);
  }
}

float rounded(float value) {  // stored as a float: no contraction, no excess precision
  volatile float stored = value;
  return stored;
}

struct jacobi {
  static constexpr float tolerance = 1e-5f;
  static constexpr int max_iterations = 5000;

  jacobi(curt::device device, int unknowns) : d(device), n(unknowns) {
    // Diagonally dominant (|lower| + |upper| < 2 < diag): the iteration converges.
    host_lower = curt_example::random_values<float>(count(), -1.0f, 1.0f);
    host_upper = curt_example::random_values<float>(count(), -1.0f, 1.0f);
    host_diag = curt_example::random_values<float>(count(), 2.2f, 3.0f);
    curt::stream s(d);
    curt::copy(lower, host_lower, s);
    curt::copy(upper, host_upper, s);
    curt::copy(diag, host_diag, s);
    s.synchronize();
  }
  std::size_t count() const { return static_cast<std::size_t>(n); }

  // The loop's body: a step, the test, next copied into x.
  void body(curt::stream_ref s) {
    curt::launch(s, config_for(count()), jacobi_step, x.data(), next.data(), lower.data(),
                 diag.data(), upper.data(), rhs.data(), n, block_change.data());
    curt::launch(s, curt::launch_config(dim3(1), dim3(kBlock)), converged_yet, block_change.data(),
                 blocks, tolerance, iterations.data(), max_iterations, more);
    curt::copy(x, next, s);
  }
  // Built during capture: x = 0, count = 0, WHILE (body captured on `side`).
  curt::graph captured(curt::stream_ref s, curt::stream_ref side) {
    return curt::capture(s, [&](curt::stream_ref cs) {
      curt::fill(x, 0.0f, cs);
      curt::memset(iterations, 0, cs);
      more = curt::conditional_handle::create(cs, 1, curt::conditional_flags::assign_default);
      curt::conditional_node loop = curt::add_while_node(cs, more);
      curt::capture_to_graph(side, loop.body(), [&](curt::stream_ref bs) { body(bs); });
    });
  }
  // Built node by node: the same graph.
  curt::graph explicit_nodes() {
    curt::graph g = curt::graph::create();
    curt::graph_node zero = curt::add_fill_node(g, {}, x, 0.0f);
    curt::graph_node reset = curt::add_memset_node(g, {}, iterations, 0);
    more = curt::conditional_handle::create(g, 1, curt::conditional_flags::assign_default);
    curt::graph_ref loop = curt::add_while_node(g, {zero, reset}, more).body();
    curt::graph_node step = curt::add_kernel_node(loop, {}, config_for(count()), jacobi_step,
                                                  x.data(), next.data(), lower.data(), diag.data(),
                                                  upper.data(), rhs.data(), n, block_change.data());
    curt::add_kernel_node(loop, {step}, curt::launch_config(dim3(1), dim3(kBlock)), converged_yet,
                          block_change.data(), blocks, tolerance, iterations.data(), max_iterations,
                          more);
    curt::add_memcpy_node(loop, {step}, x, next);
    return g;
  }

  // A fresh right-hand side, outputs poisoned, one launch, compared with the CPU's Jacobi.
  std::string solve(const curt::graph_exec& exec, curt::stream_ref s, double& ms, int& steps) {
    const std::vector<float> b = curt_example::random_values<float>(count(), -1.0f, 1.0f);
    curt::copy(rhs, b, s);
    curt::fill(x, std::nanf(""), s);
    curt::fill(next, std::nanf(""), s);
    curt::memset(iterations, 0xFF, s);
    curt::stream_timer timer(s);
    exec.launch(s);
    ms = timer.stop().count();  // the only wait: every step and test ran on the device
    std::vector<float> got(count());
    std::vector<int> got_count(1, -1);
    curt::copy(got, x, s);
    curt::copy(got_count, iterations, s);
    s.synchronize();
    const int got_steps = got_count[0];

    std::vector<float> want(count(), 0.0f), step(count());
    int want_steps = 0;
    float change = 0.0f;
    do {
      change = 0.0f;
      for (int i = 0; i < n; ++i) {
        const std::size_t k = static_cast<std::size_t>(i);
        float t = b[k];
        if (i > 0) t = rounded(t - rounded(host_lower[k] * want[k - 1]));
        if (i < n - 1) t = rounded(t - rounded(host_upper[k] * want[k + 1]));
        step[k] = rounded(t / host_diag[k]);
        change = std::fmax(change, std::fabs(rounded(step[k] - want[k])));
      }
      want.swap(step);
      ++want_steps;
    } while (change > tolerance && want_steps < max_iterations);
    steps = want_steps;
    if (got_steps != want_steps)
      return std::to_string(got_steps) + " iterations, the CPU took " + std::to_string(want_steps);
    for (std::size_t i = 0; i < count(); ++i)
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
        return "x[" + std::to_string(i) + "] is " + std::to_string(got[i]) + ", expected " +
               std::to_string(want[i]);
    return {};
  }

  curt::device d;
  int n;
  int blocks = static_cast<int>(curt::ceil_div(n, int(kBlock)));
  std::vector<float> host_lower, host_diag, host_upper;
  curt::device_buffer<float> lower{d, count()}, diag{d, count()}, upper{d, count()},
      rhs{d, count()}, x{d, count()}, next{d, count()}, block_change{d, std::size_t(blocks)};
  curt::device_buffer<int> iterations{d, 1};
  curt::conditional_handle more;  // the handle of the graph built last
};

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "graphs",
      "graphs [ELEMENTS [ITERATIONS [UNKNOWNS]]]   (ELEMENTS 1..2^26, default 65536; ITERATIONS "
      "1..100000, default 200; UNKNOWNS 1..2^24, default 262147)",
      [&] {
        const std::size_t n =
            curt_example::size_argument(argc, argv, 1, 65536, 1, std::size_t(1) << 26);
        const int iterations =
            static_cast<int>(curt_example::size_argument(argc, argv, 2, 200, 1, 100000));
        const int unknowns =
            static_cast<int>(curt_example::size_argument(argc, argv, 3, 262147, 1, 1 << 24));
        const curt::device device(0);
        curt::set_current_device(device);  // graphs belong to no device: calls use the current one
        curt::stream stream(device), side(device);
        std::printf(
            "graphs: pipeline of %d kernels on %zu unsigned ints, %d iterations; Jacobi "
            "on %d unknowns, on %s\n",
            kSteps, n, iterations, unknowns, device.name().c_str());
        curt_example::table table(
            "graphs", curt_example::copy_gb_per_s(device, stream, n * sizeof(std::uint32_t)));

        // ---- 1. op by op vs one graph launch per iteration ----------------------------------
        pipeline p(device, n);
        const double bytes = (2.0 + 2.0 * kSteps) * static_cast<double>(n * sizeof(std::uint32_t));
        const std::string size = std::to_string(n) + " x " + std::to_string(iterations);
        const auto timed = [&](const char* name, auto&& one_iteration) {
          std::fill(p.host_out.data(), p.host_out.data() + n, kPoison);
          const auto all = [&](curt::stream_ref s) {
            for (int i = 0; i < iterations; ++i) one_iteration(s);
          };
          const double ms = curt_example::median_ms(stream, 3, all) / iterations;
          const std::string bad = p.mismatch();
          table.row(name, size, bad.empty(), ms, bytes,
                    bad.empty() ? "every element, per iteration" : bad);
          return ms;
        };
        const std::string ops = "op by op (" + std::to_string(kSteps + 2) + " operations)";
        const double op_ms = timed(ops.c_str(), [&](curt::stream_ref s) { p.enqueue(s); });
        curt::graph g = curt::capture(stream, [&](curt::stream_ref s) { p.enqueue(s); });
        curt::graph_exec exec = g.instantiate_and_upload(stream);
        const double graph_ms =
            timed("captured graph, one launch", [&](curt::stream_ref s) { exec.launch(s); });
        std::printf(
            "pipeline: graph of %zu nodes; %.2f us per iteration op by op, %.2f us as a "
            "graph (%.2fx)\n",
            g.node_count(), op_ms * 1e3, graph_ms * 1e3, graph_ms > 0 ? op_ms / graph_ms : 0.0);

        // ---- 2. a WHILE loop that stops itself --------------------------------------------------
        jacobi j(device, unknowns);
        const double step_bytes = 8.0 * static_cast<double>(j.count() * sizeof(float));
        for (int variant = 0; variant < 2; ++variant) {
          curt::graph loop = variant == 0 ? j.captured(stream, side) : j.explicit_nodes();
          curt::graph_exec loop_exec = loop.instantiate_and_upload(stream);
          for (int launch = 0; launch < 2; ++launch) {  // a fresh right-hand side each launch
            double ms = 0;
            int steps = 0;
            const std::string bad = j.solve(loop_exec, stream, ms, steps);
            const std::string name =
                std::string(variant == 0 ? "WHILE loop, captured" : "WHILE loop, node by node") +
                ", launch " + std::to_string(launch + 1);
            table.row(name, std::to_string(unknowns), bad.empty(), ms, step_bytes * steps,
                      bad.empty() ? std::to_string(steps) + " iterations and x, bit for bit" : bad);
          }
        }
        return table.print();
      });
}
