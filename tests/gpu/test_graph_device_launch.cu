// Device graph launch and device-updatable kernel nodes (include/curt/graph_device_launch.hpp):
// - a scheduler kernel reads the data on the device and tail-launches the one of three executable
//   graphs it picks, with one host launch and one synchronize (the scheduler's graph launched
//   for the host and for device launch alike): the picked graph ran once and the others left
//   their outputs poisoned, for inputs made to pick each branch and a random one;
// - fire-and-forget and sibling launches run, and a tail launch made after them sees what the
//   fire-and-forget graph wrote (CUDA runs tail launches once the fired graphs are done);
// - a device graph relaunches itself (tail_launch(current_device_graph())) until a count read on
//   the device is reached; current_device_graph() is null outside a device graph;
// - a kernel in the same graph sets a device-updatable node's enabled state, grid and scalar
//   argument before it runs, as a plan in device memory says, on every launch;
// - the same with the node captured (launch_device_updatable during curt::capture), which is
//   refused on a stream that is not capturing;
// - a kernel outside the graph changes the node before a launch; the change lasts for later
//   launches until changed again;
// - a scheduler resizes a node of another device graph (grid and two arguments) from the data
//   and tail-launches that graph;
// - a graph with a device-updatable node is never copied: a copied child and clone() are refused
//   before CUDA is called (also one level down), naming the remedy; moved into a parent, the
//   node is changed by the parent's kernel as the plans say;
// - refusals with a message that says why (tag [api-error]): a device_graph of an executable
//   graph not instantiated for device launch, or of a moved-from owner; a second executable graph
//   of a graph with a device-updatable node, and a whole-graph update of it; attributes kernel
//   nodes do not take and null dependencies, before CUDA is called, leaving the graph as it was.
//
// Inputs are fresh and random, outputs poisoned first (all bytes 0xFF: -1 as int), compared
// with the CPU after each launch. Device-side calls record the status CUDA returned (-1: never
// called), so a failure names the call and its error.
//
// Built without -rdc and without cudadevrt on purpose: the header says CUDA 13.0 needs neither.
//
// cudafe++ 13.0 hangs on a Catch2 assertion in a member function of a class in a .cu file (with
// g++ 13): assertions live only in TEST_CASE bodies, free functions and lambdas.
#include <catch.hpp>
#include <device_array.hpp>
#include <expect.hpp>

#include <curt/device.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_device_launch.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using curt_test::device_array;
using curt_test::require_cuda_error;

constexpr int block_size = 256;  // a power of two: the block reductions below halve it

// ---- device side ------------------------------------------------------------------------------

// y[i] = a * x[i] + b for i < n; the first thread counts the run in *runs.
__global__ void affine_counted(const int* x, int* y, int n, int a, int b, int* runs) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + b;
  if (i == 0) atomicAdd(runs, 1);
}

// out[i] = 2 * in[i] + 1; the first thread counts the run in *runs.
__global__ void twice_plus_one(const int* in, int* out, int n, int* runs) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 2 * in[i] + 1;
  if (i == 0) atomicAdd(runs, 1);
}

// y[i] = a * x[i] + b for i < n: the kernel of the device-updatable nodes.
__global__ void affine_plain(const int* x, int* y, int n, int a, int b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + b;
}

using target_node = curt::device_kernel_node_for<decltype(affine_plain)>;

// The sum of x[0..n), in one block of block_size threads; every thread gets it.
__device__ long long block_sum(const int* x, int n) {
  __shared__ long long partial[block_size];
  long long s = 0;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  return partial[0];
}

// Picks branch sum(x) % 3 and tail-launches its graph; records the pick and the launch's status.
__global__ void schedule_by_sum(const int* x, int n, curt::device_graph branch0,
                                curt::device_graph branch1, curt::device_graph branch2,
                                int* choice, int* status) {
  long long sum = block_sum(x, n);
  if (threadIdx.x != 0) return;
  int pick = static_cast<int>(sum % 3);
  *choice = pick;
  curt::device_graph next = pick == 0 ? branch0 : pick == 1 ? branch1 : branch2;
  status[0] = static_cast<int>(curt::tail_launch(next));
}

// Fires and forgets `forget`, launches `sibling` as a sibling, queues `tail`.
__global__ void launch_three(curt::device_graph forget, curt::device_graph sibling,
                             curt::device_graph tail, int* status) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  status[0] = static_cast<int>(curt::fire_and_forget(forget));
  status[1] = static_cast<int>(curt::sibling_launch(sibling));
  status[2] = static_cast<int>(curt::tail_launch(tail));
}

// y[i] += x[i]; then the first thread counts the pass and, below *limit passes, relaunches the
// device graph it runs in (recording whether it found it, and the relaunch's status).
__global__ void accumulate_and_relaunch(const int* x, int* y, int n, int* passes,
                                        const int* limit, int* found_self, int* status) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += x[i];
  if (i != 0) return;
  int pass = *passes + 1;
  *passes = pass;
  if (pass >= *limit) return;
  curt::device_graph self = curt::current_device_graph();
  *found_self = self.valid() ? 1 : 0;
  *status = static_cast<int>(curt::tail_launch(self));
}

// Whether current_device_graph() names a graph (1) or is null (0).
__global__ void current_graph_valid(int* valid) {
  if (threadIdx.x == 0 && blockIdx.x == 0) *valid = curt::current_device_graph().valid() ? 1 : 0;
}

// What a device-updatable affine_plain node should do on its next runs.
struct plan {
  int enabled;
  unsigned blocks;
  int a;
};

// Applies *p to the node *target (read from device memory: the node is made after this kernel's
// node); records each call's status.
__global__ void apply_plan(const plan* p, const target_node* target, int* status) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const plan q = *p;
  const target_node node = *target;
  status[0] = static_cast<int>(curt::set_enabled(node, q.enabled != 0));
  status[1] = static_cast<int>(curt::set_grid(node, dim3(q.blocks)));
  status[2] = static_cast<int>(curt::set_argument<3>(node, q.a));  // parameter 3: a
}

// From the data: k = sum(x) % n + 1 elements to process with a = k % 7 + 2; sizes `target`'s grid
// to cover k, sets its n (parameter 2, typed) and a (parameter 3, by byte offset), and
// tail-launches `next`, its graph.
__global__ void size_and_launch(const int* x, int n, target_node target, curt::device_graph next,
                                int* status) {
  long long sum = block_sum(x, n);
  if (threadIdx.x != 0) return;
  int k = static_cast<int>(sum % n) + 1;
  int a = k % 7 + 2;
  unsigned blocks = static_cast<unsigned>((k + block_size - 1) / block_size);
  status[0] = static_cast<int>(curt::set_grid(target, dim3(blocks)));
  status[1] = static_cast<int>(curt::set_argument<2>(target, k));
  // a by its byte offset, the untyped way (set_argument<3> would find the same offset).
  status[2] = static_cast<int>(curt::set_param(target, target.argument_offset(3), a));
  status[3] = static_cast<int>(curt::tail_launch(next));
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
int random_int(int lo, int hi) { return curt_test::random_ints(1, lo, hi)[0]; }
std::vector<int> random_inputs(int n) { return curt_test::random_ints(count(n), 0, 1000); }
std::vector<int> poisoned(int n) { return std::vector<int>(count(n), -1); }
long long sum_of(const std::vector<int>& x) {
  long long s = 0;
  for (int v : x) s += v;
  return s;
}

using curt_test::affine_ref;

// What a device-side call's recorded status means.
std::string status_name(int status) {
  if (status == -1) return "nothing: the call was never made (the slot is still poisoned)";
  return cudaGetErrorName(static_cast<cudaError_t>(status));
}

// Every device-side call recorded in `status` returned cudaSuccess; a failure names the call.
void require_device_calls_succeeded(const device_array<int>& status,
                                    std::initializer_list<const char*> calls) {
  std::vector<int> got = status.download();
  REQUIRE(got.size() == calls.size());
  std::size_t i = 0;
  for (const char* call : calls) {
    INFO("on the device, " << call << " returned " << status_name(got[i]));
    CHECK(got[i] == static_cast<int>(cudaSuccess));
    ++i;
  }
}

// Every element equal; a failure names the array, how many differ, and the first.
void require_equal(const std::vector<int>& got, const std::vector<int>& want,
                   const std::string& what) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && bad++ == 0) first = i;
  INFO(what << ": " << bad << " of " << want.size() << " elements differ"
            << (bad ? "; first at " + std::to_string(first) + ": got " +
                          std::to_string(got[first]) + ", want " + std::to_string(want[first]) +
                          (want[first] == -1 ? " (poison: this work should not have run there)"
                                             : got[first] == -1 ? " (still poisoned: not run)"
                                                                : "")
                    : std::string()));
  CHECK(bad == 0);
}

// affine_plain on x as plan p says: nothing when disabled, else the first blocks * block_size
// elements (at most n = x.size()) get a * x[i] + b, the others stay poisoned.
std::vector<int> planned_ref(const std::vector<int>& x, const plan& p, int b, std::size_t n) {
  std::vector<int> y(x.size(), -1);
  if (!p.enabled) return y;
  std::size_t covered = std::size_t(p.blocks) * block_size;
  for (std::size_t i = 0; i < x.size() && i < covered && i < n; ++i) y[i] = p.a * x[i] + b;
  return y;
}

std::string describe(const plan& p) {
  return std::string(p.enabled ? "enabled" : "disabled") + ", " + std::to_string(p.blocks) +
         " block(s), a = " + std::to_string(p.a);
}

// One launch of `exec`, whose updater kernel applies plan `p` (from `plans`) to a device-updatable
// affine_plain node writing y: the device calls succeeded and y is what the plan gives.
void require_plan_applied(const curt::graph_exec& exec, curt::stream_ref s, const plan& p,
                          device_array<int>& x, device_array<int>& y, device_array<int>& status,
                          device_array<plan>& plans, int b, const char* what) {
  const int n = static_cast<int>(x.size());
  INFO("plan: " << describe(p) << "; n = " << n << " ("
                << curt::ceil_div(n, block_size) << " blocks)");
  std::vector<int> values = random_inputs(n);
  x.upload(values);
  y.poison();
  status.poison();
  plans.upload({p});
  exec.launch(s);
  s.synchronize();
  require_device_calls_succeeded(status, {"set_enabled(node)", "set_grid(node)",
                                          "set_argument<3>(node, a)"});
  require_equal(y.download(), planned_ref(values, p, b, count(n)), what);
}

// A graph of one affine_counted node: y = a * x + b over n elements, counted in *runs.
curt::graph affine_graph(const int* x, int* y, int n, int a, int b, int* runs) {
  curt::graph g = curt::graph::create();
  curt::add_kernel_node(g, {}, config_for(n), affine_counted, x, y, n, a, b, runs);
  return g;
}

static_assert(std::is_trivially_copyable_v<curt::device_graph>);
static_assert(std::is_trivially_copyable_v<curt::device_node>);
static_assert(std::is_trivially_copyable_v<target_node>);
static_assert(
    std::is_same_v<target_node, curt::device_kernel_node<const int*, int*, int, int, int>>);
static_assert(target_node::parameter_count == 5);
static_assert(sizeof(curt::device_graph) == sizeof(cudaGraphExec_t));
static_assert(sizeof(curt::device_node) == sizeof(cudaGraphDeviceNode_t));

}  // namespace

TEST_CASE("a scheduler kernel picks the next graph from the data and tail-launches it: one host "
          "launch, one synchronize, only the picked branch runs",
          "[graph][device-launch]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  device_array<int> x(count(n)), choice(1), status(1), runs(3);
  device_array<int> y0(count(n)), y1(count(n)), y2(count(n));
  const device_array<int>* outputs[3] = {&y0, &y1, &y2};
  int a[3], b[3];
  for (int k = 0; k < 3; ++k) {
    a[k] = random_coefficient();
    b[k] = random_coefficient();
  }

  // The three branches, instantiated for device launch and uploaded (the constructor uploads).
  curt::graph_exec branch_execs[3] = {
      affine_graph(x.get(), y0.get(), n, a[0], b[0], runs.get() + 0)
          .instantiate(curt::instantiate_flags::device_launch),
      affine_graph(x.get(), y1.get(), n, a[1], b[1], runs.get() + 1)
          .instantiate(curt::instantiate_flags::device_launch),
      affine_graph(x.get(), y2.get(), n, a[2], b[2], runs.get() + 2)
          .instantiate(curt::instantiate_flags::device_launch)};
  curt::device_graph branches[3] = {curt::device_graph(branch_execs[0], s),
                                    curt::device_graph(branch_execs[1], s),
                                    curt::device_graph(branch_execs[2], s)};
  for (int k = 0; k < 3; ++k) {
    CHECK(branches[k].valid());
    CHECK(branches[k].native() == branch_execs[k].get());
  }
  CHECK(branches[0] != branches[1]);
  s.synchronize();

  curt::graph scheduler = curt::graph::create();
  curt::add_kernel_node(scheduler, {}, one_block, schedule_by_sum,
                        static_cast<const int*>(x.get()), n, branches[0], branches[1],
                        branches[2], choice.get(), status.get());

  // The scheduler's own graph launched as a host graph, and instantiated for device launch.
  for (curt::instantiate_flags flags :
       {curt::instantiate_flags::none, curt::instantiate_flags::device_launch}) {
    INFO("scheduler graph instantiated with flags "
         << curt::detail::describe_instantiate_flags(static_cast<unsigned long long>(flags)));
    curt::graph_exec exec = scheduler.instantiate(flags);
    // Inputs made to pick branch 0, 1 and 2, then one left to chance.
    for (int target : {0, 1, 2, -1}) {
      std::vector<int> values = random_inputs(n);
      if (target >= 0)
        values[0] += static_cast<int>((target - sum_of(values) % 3 + 3) % 3);
      const int pick = static_cast<int>(sum_of(values) % 3);
      INFO("round made to pick " << target << " (-1: random); the CPU picks " << pick << ", n = "
                                 << n);
      x.upload(values);
      for (const device_array<int>* y : outputs) y->poison();
      choice.poison();
      status.poison();
      runs.upload({0, 0, 0});

      exec.launch(s);
      s.synchronize();  // the only wait: the tail launch is part of the stream's launch

      require_device_calls_succeeded(status, {"tail_launch(branch)"});
      CHECK(choice.download() == std::vector<int>{pick});
      std::vector<int> want_runs = {0, 0, 0};
      want_runs[count(pick)] = 1;
      CHECK(runs.download() == want_runs);
      for (int k = 0; k < 3; ++k) {
        std::string what = "branch " + std::to_string(k) + "'s output";
        if (k == pick)
          require_equal(outputs[k]->download(), affine_ref(values, a[k], b[k]), what);
        else
          require_equal(outputs[k]->download(), poisoned(n), what + " (a branch not picked)");
      }
    }
  }
}

TEST_CASE("fire-and-forget and sibling launches run; a tail launch sees what the "
          "fire-and-forget graph wrote",
          "[graph][device-launch]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  const int c = random_coefficient(), e = random_coefficient();
  device_array<int> x(count(n)), forgotten(count(n)), sibling(count(n)), tail(count(n));
  device_array<int> runs(3), status(3);

  curt::graph_exec forget_exec = affine_graph(x.get(), forgotten.get(), n, a, b, runs.get() + 0)
                                     .instantiate(curt::instantiate_flags::device_launch);
  curt::graph_exec sibling_exec =
      affine_graph(x.get(), sibling.get(), n, c, e, runs.get() + 1)
          .instantiate_and_upload(s, curt::instantiate_flags::device_launch);
  curt::graph tail_graph = curt::graph::create();
  curt::add_kernel_node(tail_graph, {}, config_for(n), twice_plus_one,
                        static_cast<const int*>(forgotten.get()), tail.get(), n, runs.get() + 2);
  curt::graph_exec tail_exec = tail_graph.instantiate(curt::instantiate_flags::device_launch);
  tail_exec.upload(s);

  // Three ways to the same promise: upload in the constructor, at instantiation, explicitly.
  curt::device_graph forget(forget_exec, s);
  curt::device_graph sibling_graph(sibling_exec);
  curt::device_graph tail_graph_handle(tail_exec);

  // The launching graph is a host graph, as in the Programming Guide's examples.
  curt::graph launcher = curt::graph::create();
  curt::add_kernel_node(launcher, {}, one_thread, launch_three, forget, sibling_graph,
                        tail_graph_handle, status.get());
  curt::graph_exec launcher_exec = launcher.instantiate();

  for (int round = 0; round < 2; ++round) {
    INFO("round " << round << ", n = " << n);
    std::vector<int> values = random_inputs(n);
    x.upload(values);
    forgotten.poison();
    sibling.poison();
    tail.poison();
    status.poison();
    runs.upload({0, 0, 0});

    launcher_exec.launch(s);
    s.synchronize();

    require_device_calls_succeeded(status, {"fire_and_forget(forget)", "sibling_launch(sibling)",
                                            "tail_launch(tail)"});
    CHECK(runs.download() == std::vector<int>{1, 1, 1});
    std::vector<int> want_forgotten = affine_ref(values, a, b);
    require_equal(forgotten.download(), want_forgotten, "the fire-and-forget graph's output");
    require_equal(sibling.download(), affine_ref(values, c, e), "the sibling graph's output");
    require_equal(tail.download(), affine_ref(want_forgotten, 2, 1),
                  "the tail graph's output (2 * the fire-and-forget output + 1)");
  }
}

TEST_CASE("a device graph relaunches itself until a count read on the device is reached; "
          "current_device_graph() is null outside a device graph",
          "[graph][device-launch]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  device_array<int> x(count(n)), y(count(n)), passes(1), limit(1), found_self(1), status(1);

  curt::graph g = curt::graph::create();
  curt::add_kernel_node(g, {}, config_for(n), accumulate_and_relaunch,
                        static_cast<const int*>(x.get()), y.get(), n, passes.get(),
                        static_cast<const int*>(limit.get()), found_self.get(), status.get());
  curt::graph_exec exec = g.instantiate(curt::instantiate_flags::device_launch);
  CHECK(curt::device_graph(exec).native() == exec.get());  // accepted: instantiated for it

  for (int round = 0; round < 2; ++round) {
    const int passes_wanted = random_int(2, 12);
    INFO("round " << round << ": " << passes_wanted << " passes, n = " << n);
    std::vector<int> values = random_inputs(n), start = random_inputs(n);
    x.upload(values);
    y.upload(start);
    passes.upload({0});
    limit.upload({passes_wanted});
    found_self.poison();
    status.poison();

    exec.launch(s);  // from the host: uploads it too, so the kernel can relaunch it
    s.synchronize();

    require_device_calls_succeeded(status, {"tail_launch(current_device_graph()) (the last one)"});
    CHECK(found_self.download() == std::vector<int>{1});
    CHECK(passes.download() == std::vector<int>{passes_wanted});
    std::vector<int> want = start;
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += passes_wanted * values[i];
    require_equal(y.download(), want, "y after every pass added x");
  }

  // A kernel launched on a stream is no node of a device graph.
  device_array<int> valid(1);
  curt::launch(s, one_thread, current_graph_valid, valid.get());
  s.synchronize();
  CHECK(valid.download() == std::vector<int>{0});
}

TEST_CASE("a kernel in the same graph sets a device-updatable node's enabled state, grid and "
          "argument before it runs, on every launch",
          "[graph][device-update]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const unsigned full = static_cast<unsigned>(curt::ceil_div(n, block_size));  // at least 4
  const int b = random_coefficient(), a0 = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), status(3);
  device_array<plan> plans(1);
  device_array<target_node> slot(1);

  curt::graph g = curt::graph::create();
  curt::graph_node updater = curt::add_kernel_node(
      g, {}, one_thread, apply_plan, static_cast<const plan*>(plans.get()),
      static_cast<const target_node*>(slot.get()), status.get());
  // Made with one block and a0: the plans replace both.
  auto target = curt::add_device_updatable_kernel_node(
      g, {updater}, curt::launch_config(dim3(1), dim3(block_size)), affine_plain,
      static_cast<const int*>(x.get()), y.get(), n, a0, b);
  const target_node handle = target.device_handle();
  REQUIRE(handle.valid());
  CHECK(target.type() == cudaGraphNodeTypeKernel);
  cudaLaunchAttributeValue attribute{};
  CURT_CHECK(cudaGraphKernelNodeGetAttribute(
      target.get(), cudaLaunchAttributeDeviceUpdatableKernelNode, &attribute));
  CHECK(attribute.deviceUpdatableKernelNode.deviceUpdatable == 1);
  CHECK(attribute.deviceUpdatableKernelNode.devNode == handle.native());
  // Where CUDA puts the parameters (const int*, int*, int, int, int): as a struct would hold them.
  const std::size_t want_offsets[5] = {0, 8, 16, 20, 24};
  for (std::size_t i = 0; i < 5; ++i) {
    INFO("parameter " << i);
    CHECK(handle.argument_offset(i) == want_offsets[i]);
  }
  slot.upload({handle});

  curt::graph_exec exec = g.instantiate_and_upload(s);  // its own kernel changes the node

  const unsigned part = static_cast<unsigned>(random_int(1, static_cast<int>(full) - 1));
  const plan rounds[] = {
      {1, full, random_coefficient()},                                              // everything
      {1, part, random_coefficient()},                                              // a prefix
      {0, full, random_coefficient()},                                              // nothing
      {1, static_cast<unsigned>(random_int(1, static_cast<int>(full))), random_coefficient()},
      {1, full, random_coefficient()},                                              // all again
  };
  for (const plan& p : rounds)
    require_plan_applied(exec, s, p, x, y, status, plans, b, "the device-updatable node's output");
}

TEST_CASE("a launch captured with launch_device_updatable is a device-updatable node that a "
          "kernel captured before it changes; outside a capture it is refused",
          "[graph][device-update]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const unsigned full = static_cast<unsigned>(curt::ceil_div(n, block_size));
  const int b = random_coefficient(), a0 = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), status(3);
  device_array<plan> plans(1);
  device_array<target_node> slot(1);

  curt::updatable_kernel_node<const int*, int*, int, int, int> target;
  curt::graph_node updater;
  curt::graph g = curt::capture(s, [&](curt::stream_ref cs) {
    curt::launch(cs, one_thread, apply_plan, static_cast<const plan*>(plans.get()),
                 static_cast<const target_node*>(slot.get()), status.get());
    updater = curt::capture_info(cs).dependencies.at(0).node;
    target = curt::launch_device_updatable(cs, curt::launch_config(dim3(1), dim3(block_size)),
                                           affine_plain, static_cast<const int*>(x.get()),
                                           y.get(), n, a0, b);
  });
  REQUIRE(target.valid());
  REQUIRE(target.device_handle().valid());
  CHECK(g.node_count() == 2);
  CHECK(target.type() == cudaGraphNodeTypeKernel);
  std::vector<curt::graph_dependency> before = target.dependencies();
  REQUIRE(before.size() == 1);
  CHECK(before[0].node == updater.get());
  cudaLaunchAttributeValue attribute{};
  CURT_CHECK(cudaGraphKernelNodeGetAttribute(
      target.get(), cudaLaunchAttributeDeviceUpdatableKernelNode, &attribute));
  CHECK(attribute.deviceUpdatableKernelNode.deviceUpdatable == 1);
  CHECK(attribute.deviceUpdatableKernelNode.devNode == target.device_handle().native());
  CHECK(target.device_handle().argument_offset(3) == 20);
  slot.upload({target.device_handle()});

  curt::graph_exec exec = g.instantiate_and_upload(s);
  const plan rounds[] = {
      {1, static_cast<unsigned>(random_int(2, static_cast<int>(full))), random_coefficient()},
      {0, full, random_coefficient()},
      {1, full, random_coefficient()},
  };
  for (const plan& p : rounds)
    require_plan_applied(exec, s, p, x, y, status, plans, b,
                         "the captured device-updatable node's output");

  // Not capturing: refused before anything is launched (y keeps its poison).
  y.poison();
  require_cuda_error(
      [&] {
        (void)curt::launch_device_updatable(s, curt::launch_config(dim3(1), dim3(block_size)),
                                            affine_plain, static_cast<const int*>(x.get()),
                                            y.get(), n, a0, b);
      },
      cudaErrorIllegalState,
      {"curt::launch_device_updatable", "not capturing", "Nothing was launched"});
  s.synchronize();
  require_equal(y.download(), poisoned(n), "y after the refused launch");
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a kernel outside the graph changes a device-updatable node before a launch; the "
          "change lasts until it is changed again",
          "[graph][device-update]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const unsigned full = static_cast<unsigned>(curt::ceil_div(n, block_size));
  const int b = random_coefficient(), a0 = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), status(3);
  device_array<plan> plans(1);
  device_array<target_node> slot(1);

  curt::graph g = curt::graph::create();
  auto target = curt::add_device_updatable_kernel_node(
      g, {}, curt::launch_config(dim3(1), dim3(block_size)), affine_plain,
      static_cast<const int*>(x.get()), y.get(), n, a0, b);
  slot.upload({target.device_handle()});
  curt::graph_exec exec = g.instantiate_and_upload(s);

  // Runs the graph on fresh inputs and requires the result of plan `p`.
  auto run_and_require = [&](const plan& p, const char* when) {
    INFO(when << "; the node should run as: " << describe(p) << "; n = " << n);
    std::vector<int> values = random_inputs(n);
    x.upload(values);
    y.poison();
    exec.launch(s);
    s.synchronize();
    require_equal(y.download(), planned_ref(values, p, b, count(n)),
                  "the device-updatable node's output");
  };
  // Changes the node from a kernel launched on the stream, outside any graph.
  auto change = [&](const plan& p) {
    INFO("changing the node from a kernel outside the graph to: " << describe(p));
    plans.upload({p});
    status.poison();
    curt::launch(s, one_thread, apply_plan, static_cast<const plan*>(plans.get()),
                 static_cast<const target_node*>(slot.get()), status.get());
    s.synchronize();
    require_device_calls_succeeded(status, {"set_enabled(node)", "set_grid(node)",
                                            "set_argument<3>(node, a)"});
  };

  run_and_require({1, 1, a0}, "as made (one block, a0), before any change");
  const plan first{1, static_cast<unsigned>(random_int(2, static_cast<int>(full))),
                   random_coefficient()};
  change(first);
  run_and_require(first, "the first launch after the change");
  run_and_require(first, "a second launch, with no change in between (the change lasts)");
  const plan off{0, full, random_coefficient()};
  change(off);
  run_and_require(off, "after disabling it");
  const plan on{1, full, random_coefficient()};
  change(on);
  run_and_require(on, "after enabling it again over the whole grid");
}

TEST_CASE("a graph with a device-updatable node is never copied (copied child, clone()); moved "
          "into a parent, the parent's kernel changes the node",
          "[graph][device-update][api-error]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const unsigned full = static_cast<unsigned>(curt::ceil_div(n, block_size));
  const int b = random_coefficient(), a0 = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), status(3);
  device_array<plan> plans(1);
  device_array<target_node> slot(1);

  curt::graph g = curt::graph::create();
  auto target = curt::add_device_updatable_kernel_node(
      g, {}, curt::launch_config(dim3(1), dim3(block_size)), affine_plain,
      static_cast<const int*>(x.get()), y.get(), n, a0, b);
  slot.upload({target.device_handle()});
  curt::graph parent = curt::graph::create();
  curt::graph_node updater = curt::add_kernel_node(
      parent, {}, one_thread, apply_plan, static_cast<const plan*>(plans.get()),
      static_cast<const target_node*>(slot.get()), status.get());

  // A copy's node is not the handle's: refused before CUDA is called, nothing added or copied.
  require_cuda_error([&] { (void)curt::add_child_graph_node(parent, {updater}, g); },
                     cudaErrorNotSupported,
                     {"curt::add_child_graph_node(child graph, copied)",
                      "the graph holds 1 device-updatable kernel node(s)",
                      "updatable_kernel_node::device_handle()", "never reach the copy",
                      "curt::add_child_graph_node(parent, dependencies, std::move(child))",
                      "Nothing was copied"});
  CHECK(parent.node_count() == 1);
  CHECK(g.valid());
  require_cuda_error([&] { (void)g.clone(); }, cudaErrorNotSupported,
                     {"curt::graph::clone()", "the graph holds 1 device-updatable kernel node(s)",
                      "never reach the copy", "Nothing was copied"});
  CHECK(cudaGetLastError() == cudaSuccess);

  // Moved in: the parent runs the node itself.
  const cudaGraph_t moved_handle = g.get();
  curt::graph_node child = curt::add_child_graph_node(parent, {updater}, std::move(g));
  CHECK_FALSE(g.valid());
  cudaGraph_t inside = nullptr;
  CURT_CHECK(cudaGraphChildGraphNodeGetGraph(child.get(), &inside));
  CHECK(inside == moved_handle);
  CHECK(parent.node_count() == 2);

  // The node in a child graph counts: the parent is not copied either.
  curt::graph outer = curt::graph::create();
  require_cuda_error([&] { (void)curt::add_child_graph_node(outer, {}, parent); },
                     cudaErrorNotSupported,
                     {"curt::add_child_graph_node(child graph, copied)",
                      "the graph holds 1 device-updatable kernel node(s)", "std::move(child)"});
  require_cuda_error([&] { (void)parent.clone(); }, cudaErrorNotSupported,
                     {"curt::graph::clone()", "1 device-updatable kernel node(s)"});
  CHECK(outer.node_count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);

  curt::graph_exec exec = parent.instantiate_and_upload(s);  // its own kernel changes the node
  const plan rounds[] = {
      {1, full, random_coefficient()},
      {1, static_cast<unsigned>(random_int(1, static_cast<int>(full) - 1)), random_coefficient()},
      {0, full, random_coefficient()},
      {1, full, random_coefficient()},
  };
  for (const plan& p : rounds)
    require_plan_applied(exec, s, p, x, y, status, plans, b,
                         "the moved-in device-updatable node's output");
}

TEST_CASE("a scheduler sizes a node of the next device graph from the data (grid and two "
          "arguments) and tail-launches it",
          "[graph][device-launch][device-update]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int b = random_coefficient(), a0 = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), status(4);

  // The work: made over one element with one block; the scheduler resizes it every time.
  curt::graph work = curt::graph::create();
  auto node = curt::add_device_updatable_kernel_node(
      work, {}, curt::launch_config(dim3(1), dim3(block_size)), affine_plain,
      static_cast<const int*>(x.get()), y.get(), 1, a0, b);
  curt::graph_exec work_exec = work.instantiate(curt::instantiate_flags::device_launch);
  curt::device_graph next(work_exec, s);

  curt::graph scheduler = curt::graph::create();
  curt::add_kernel_node(scheduler, {}, one_block, size_and_launch,
                        static_cast<const int*>(x.get()), n, node.device_handle(), next,
                        status.get());
  curt::graph_exec scheduler_exec = scheduler.instantiate();

  for (int round = 0; round < 3; ++round) {
    std::vector<int> values = random_inputs(n);
    const int k = static_cast<int>(sum_of(values) % n) + 1;
    const int a = k % 7 + 2;
    INFO("round " << round << ": the CPU expects the first " << k << " of " << n
                  << " elements with a = " << a << " (" << curt::ceil_div(k, block_size)
                  << " blocks)");
    x.upload(values);
    y.poison();
    status.poison();

    scheduler_exec.launch(s);
    s.synchronize();

    require_device_calls_succeeded(status, {"set_grid(node)", "set_argument<2>(node, k)",
                                            "set_param(node, offset of a, a)",
                                            "tail_launch(next)"});
    std::vector<int> want = poisoned(n);
    for (int i = 0; i < k; ++i) want[count(i)] = a * values[count(i)] + b;
    require_equal(y.download(), want, "the resized node's output");
  }
}

TEST_CASE("device launch and device-updatable nodes refuse what CUDA does not allow, saying why",
          "[graph][device-launch][device-update][api-error]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), runs(1);

  curt::graph plain = affine_graph(x.get(), y.get(), n, a, b, runs.get());
  curt::graph_exec host_only = plain.instantiate();
  require_cuda_error([&] { (void)curt::device_graph(host_only); }, cudaErrorInvalidValue,
                     {"curt::device_graph(exec)", "not instantiated for device launch",
                      "its flags: none", "curt::instantiate_flags::device_launch"});
  // use_node_priority is not device_launch (and CUDA 13.0 reports it as none).
  curt::graph_exec priority = plain.instantiate(curt::instantiate_flags::use_node_priority);
  require_cuda_error(
      [&] { (void)curt::device_graph(priority, s); }, cudaErrorInvalidValue,
      {"curt::device_graph(exec, upload_stream)", "instantiate_flags::device_launch"});
  curt::graph_exec moved = plain.instantiate(curt::instantiate_flags::device_launch);
  curt::graph_exec taker = std::move(moved);
  require_cuda_error([&] { (void)curt::device_graph(moved); }, cudaErrorInvalidResourceHandle,
                     {"curt::graph_exec::device_graph()", "moved-from"});
  CHECK(curt::device_graph(taker).native() == taker.get());
  const curt::device_graph null_graph;
  CHECK_FALSE(null_graph.valid());
  CHECK(null_graph == curt::device_graph::from_native_handle(nullptr));
  CHECK(cudaGetLastError() == cudaSuccess);

  // A graph with a device-updatable node: one executable graph at a time, no whole-graph update.
  curt::graph g = curt::graph::create();
  auto node = curt::add_device_updatable_kernel_node(g, {}, config_for(n), affine_plain,
                                                     static_cast<const int*>(x.get()), y.get(),
                                                     n, a, b);
  REQUIRE(node.device_handle().valid());
  {
    curt::graph_exec first = g.instantiate();
    curt_test::require_any_cuda_error([&] { (void)g.instantiate(); },
                                      {"cudaGraphInstantiateWithParams",
                                       "1 device-updatable kernel node(s)",
                                       "one executable graph at a time"});
    curt_test::require_any_cuda_error([&] { first.update(g); },
                                      {"cudaGraphExecUpdate", "1 device-updatable kernel node(s)"});
  }
  // With the first one gone, a new one is made, and runs the node as it was made.
  curt::graph_exec second = g.instantiate_and_upload(s);
  std::vector<int> values = random_inputs(n);
  x.upload(values);
  y.poison();
  second.launch(s);
  s.synchronize();
  require_equal(y.download(), affine_ref(values, a, b), "the device-updatable node's output");

  // Refused before CUDA is called; the graph keeps its one node.
  REQUIRE(g.node_count() == 1);
  require_cuda_error(
      [&] {
        (void)curt::add_device_updatable_kernel_node(
            g, {}, config_for(n).programmatic_stream_serialization(true), affine_plain,
            static_cast<const int*>(x.get()), y.get(), n, a, b);
      },
      cudaErrorInvalidValue,
      {"curt::add_device_updatable_kernel_node", "curt::programmatic_edge", "Nothing was added"});
  require_cuda_error(
      [&] {
        (void)curt::add_device_updatable_kernel_node(g, {curt::graph_node()}, config_for(n),
                                                     affine_plain,
                                                     static_cast<const int*>(x.get()), y.get(),
                                                     n, a, b);
      },
      cudaErrorInvalidValue, {"curt::add_device_updatable_kernel_node", "null node"});
  CHECK(g.node_count() == 1);
  CHECK(cudaGetLastError() == cudaSuccess);
}
