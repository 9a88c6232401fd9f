// Graphs built node by node (include/curt/graph_nodes.hpp, graph_node_update.hpp): the same
// pipeline built explicitly and by capture gives identical results (and the CPU's) on every
// launch; kernel nodes from __global__ functions, functors and device lambdas, with converted
// arguments and the launch attributes kernel nodes take (read back from the node; a cluster seen
// from the device); programmatic and launch-completion edges; memcpy, memset and fill nodes;
// host nodes that run on every launch, whose callable the graph owns and destroys on a user
// thread, and whose exceptions go to the error handler; child graphs copied and moved in; event
// record and wait nodes; memory allocation and free nodes, in the graph, across graphs and with
// auto_free_on_launch; per-node updates of an executable graph (kernel arguments and
// configuration, memcpy, memset, fill, host) that change its results and no other executable
// graph's; disabled nodes that do not run; and refusals that say why (tag [api-error]).
//
// Kernels compute on fresh random inputs into outputs poisoned first (all bytes 0xFF: NaN as
// float, -1 as int), compared with the CPU on every launch.
//
// cudafe++ 13.0 hangs on a Catch2 assertion in a member function of a class in a .cu file (with
// g++ 13): assertions live only in TEST_CASE bodies, free functions and lambdas. Device lambdas
// need an enclosing function nvcc can name: they live in namespace graph_nodes_test.
#include <catch.hpp>
#include <cuda/std/span>
#include <error_recorder.hpp>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>
#include <isolation.hpp>
#include <kernels.cuh>
#include <lifetime_probe.hpp>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_node_update.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/stream.hpp>

#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using curt_test::destructor_error_counter;
using curt_test::device_array;
using curt_test::require_cuda_error;

// ---- device side ------------------------------------------------------------------------------

// y[i] = a * x[i] + b in integers, after every thread spun for delay_ns.
constexpr auto affine = curt_test::slow_affine_int;

// A PDL consumer: out[i] = in[i] * in[i] + c, read once the producer's memory is visible.
__global__ void pdl_square_plus(const int* in, int* out, int n, int c) {
  cudaGridDependencySynchronize();
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] * in[i] + c;
}

// Each block writes the size of its cluster and its rank in it.
__global__ void cluster_shape(int* sizes, int* ranks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) {
    sizes[blockIdx.x] = static_cast<int>(cluster.num_blocks());
    ranks[blockIdx.x] = static_cast<int>(cluster.block_rank());
  }
#else
  if (threadIdx.x == 0) sizes[blockIdx.x] = ranks[blockIdx.x] = 0;  // no clusters before sm_90
#endif
}

// out[i] = in[i] * factor, as a functor.
struct times {
  int factor;
  __device__ void operator()(const int* in, int* out, int n) const {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = in[i] * factor;
  }
};

// out[i] = a[i] + b[i].
__global__ void add_arrays(const int* a, const int* b, int* out, int n) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a[i] + b[i];
}

// ---- host side --------------------------------------------------------------------------------

constexpr int block_size = 256;

curt::launch_config config_for(int n, int block = block_size) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, block))),
                             dim3(static_cast<unsigned>(block)));
}

int random_size() { return curt_test::random_ints(1, 1000, 50000)[0]; }
int random_coefficient() { return curt_test::random_ints(1, 2, 50)[0]; }
std::vector<int> random_inputs(int n) { return curt_test::random_ints(std::size_t(n), 0, 1000); }
std::size_t count(int n) { return static_cast<std::size_t>(n); }
std::vector<int> poisoned(int n) { return std::vector<int>(count(n), -1); }

using curt_test::affine_ref;

using curt_test::all_of;

std::size_t count_type(curt::graph_ref g, cudaGraphNodeType type) {
  std::size_t found = 0;
  for (cudaGraphNode_t node : g.nodes()) found += curt::node_type(node) == type;
  return found;
}

using curt_test::eventually;

using curt_test::require_any_cuda_error;

using curt_test::destroyed_on;
using curt_test::lifetime;
using curt_test::probe;

class node_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using curt_test::error_recorder;


// Launches `exec`, which computes out = a * x + b, `launches` times on fresh inputs (the output
// poisoned first) and compares each result with the CPU's.
void require_affine_launches(const curt::graph_exec& exec, curt::stream_ref s,
                             device_array<int>& x, device_array<int>& out, int a, int b,
                             int launches) {
  const int n = static_cast<int>(x.size());
  for (int launch = 0; launch < launches; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = random_inputs(n);
    x.upload(values);
    out.poison();
    exec.launch(s);
    s.synchronize();
    CHECK(out.download() == affine_ref(values, a, b));
  }
}

}  // namespace

// Device lambdas need an enclosing function that nvcc can name: not a TEST_CASE's body.
namespace graph_nodes_test {

// One pipeline (two pool allocations, a copy in, a fill, two kernels, a copy out) built node by
// node into `explicit_graph` and captured on `s` into the returned graph. Both use one device
// lambda object, so both run the very same kernels.
curt::graph build_pipeline(curt::stream_ref s, curt::graph_ref explicit_graph, curt::device d,
                           const curt::memory_pool& pool, int n, float a, float c0,
                           float bias_value, const curt::pinned_buffer<float>& host_in,
                           curt::pinned_buffer<float>& host_out_explicit,
                           curt::pinned_buffer<float>& host_out_captured,
                           curt::device_buffer<float>& bias_explicit,
                           curt::device_buffer<float>& bias_captured,
                           curt::device_buffer<float>& out_explicit,
                           curt::device_buffer<float>& out_captured) {
  auto scale_add = [] __device__(const float* in, const float* add, float* out, int count,
                                 float factor) {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < count) out[i] = __fadd_rn(__fmul_rn(factor, in[i]), add[i]);
  };
  const curt::launch_config config = config_for(n);
  const std::size_t elements = count(n);

  curt::graph_ref g = explicit_graph;
  curt::allocation_node<float> staged = curt::add_allocation_node<float>(g, {}, d, elements);
  curt::allocation_node<float> squared = curt::add_allocation_node<float>(g, {}, d, elements);
  curt::graph_node copy_in = curt::add_memcpy_node(g, {staged}, staged, host_in);
  curt::graph_node fill = curt::add_fill_node(g, {}, bias_explicit, bias_value);
  curt::graph_node first = curt::add_kernel_node(
      g, {copy_in, squared}, config, curt_test::square_plus,
      static_cast<const float*>(staged.data()), squared.data(), n, c0);
  curt::add_free_node(g, {first}, staged);
  curt::graph_node second = curt::add_kernel_node(
      g, {first, fill}, config, scale_add, static_cast<const float*>(squared.data()),
      static_cast<const float*>(bias_explicit.data()), out_explicit.data(), n, a);
  curt::add_free_node(g, {second}, squared);
  curt::add_memcpy_node(g, {second}, host_out_explicit, out_explicit);

  return curt::capture(s, [&](curt::stream_ref cs) {
    curt::async_buffer<float> staged_c = pool.allocate<float>(elements, cs);
    curt::async_buffer<float> squared_c = pool.allocate<float>(elements, cs);
    curt::copy(staged_c, host_in, cs);
    curt::fill(bias_captured, bias_value, cs);
    curt::launch(cs, config, curt_test::square_plus, static_cast<const float*>(staged_c.data()),
                 squared_c.data(), n, c0);
    curt::launch(cs, config, scale_add, static_cast<const float*>(squared_c.data()),
                 static_cast<const float*>(bias_captured.data()), out_captured.data(), n, a);
    curt::copy(host_out_captured, out_captured, cs);
  });  // both buffers are freed on the capturing stream: free nodes
}

// A kernel node from a device lambda: out[i] = in[i] * k + add.
curt::graph_node add_lambda_node(curt::graph_ref g, const curt::node_dependencies& after, int n,
                                 const int* in, int* out, int k, int add) {
  return curt::add_kernel_node(g, after, config_for(n),
                               [=] __device__(int count_, int multiplier) {
                                 int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
                                 if (i < count_) out[i] = in[i] * multiplier + add;
                               },
                               n, k);
}

// Gives that node another device lambda (another kernel): out[i] = in[i] - subtract.
void update_lambda_node(curt::graph_exec_ref exec, curt::graph_node node, int n, const int* in,
                        int* out, int subtract) {
  curt::update_kernel_node(exec, node, config_for(n, 128),
                           [=] __device__(int count_) {
                             int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
                             if (i < count_) out[i] = in[i] - subtract;
                           },
                           n);
}

// A kernel node from a device lambda whose parameters are spans, given buffers:
// out[i] = in[i] * k + add.
curt::graph_node add_span_lambda_node(curt::graph_ref g, int n,
                                      const curt::device_buffer<int>& in,
                                      curt::device_buffer<int>& out, int k, int add) {
  return curt::add_kernel_node(
      g, {}, config_for(n),
      [=] __device__(cuda::std::span<const int> from, cuda::std::span<int> to) {
        const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < to.size()) to[i] = from[i] * k + add;
      },
      in, out);
}

}  // namespace graph_nodes_test

TEST_CASE("a kernel node from a device lambda taking spans is given curt buffers", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = curt_test::random_ints(1, 3000, 9000)[0];
  const std::vector<int> x = curt_test::random_ints(static_cast<std::size_t>(n), -1000, 1000);
  const int k = curt_test::random_ints(1, 2, 9)[0], add = curt_test::random_ints(1, 1, 99)[0];
  curt::device_buffer<int> in(d, x.size()), out(d, x.size());
  curt::copy(in, x, s);
  curt::fill(out, -7777777, s);  // poisoned
  curt::graph g = curt::graph::create();
  graph_nodes_test::add_span_lambda_node(g, n, in, out, k, add);
  curt::graph_exec exec = g.instantiate();
  exec.launch(s);
  std::vector<int> back(x.size(), 0);
  curt::copy(back, out, s);
  s.synchronize();
  CHECK(back == curt_test::affine_ref(x, k, add));
}

TEST_CASE("the same pipeline built node by node and captured gives identical results, the CPU's, "
          "on every launch", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  curt::memory_pool pool(curt::memory_pool_properties::device(d));
  const int n = random_size();
  const float a = curt_test::random_floats(1, 0.5f, 2.0f)[0];
  const float c0 = curt_test::random_floats(1, -1.0f, 1.0f)[0];
  const float bias_value = curt_test::random_floats(1, -3.0f, 3.0f)[0];
  curt::pinned_buffer<float> host_in(d, count(n)), host_out_e(d, count(n)), host_out_c(d, count(n));
  curt::device_buffer<float> bias_e(d, count(n)), bias_c(d, count(n)), out_e(d, count(n)),
      out_c(d, count(n));

  curt::graph explicit_graph = curt::graph::create();
  curt::graph captured = graph_nodes_test::build_pipeline(
      s, explicit_graph, d, pool, n, a, c0, bias_value, host_in, host_out_e, host_out_c, bias_e,
      bias_c, out_e, out_c);

  // The same nodes, type by type.
  for (cudaGraphNodeType type : {cudaGraphNodeTypeKernel, cudaGraphNodeTypeMemAlloc,
                                 cudaGraphNodeTypeMemFree, cudaGraphNodeTypeMemcpy,
                                 cudaGraphNodeTypeMemset}) {
    INFO("node type " << curt::detail::node_type_name(type));
    CHECK(count_type(explicit_graph, type) == count_type(captured, type));
  }
  CHECK(count_type(explicit_graph, cudaGraphNodeTypeKernel) == 2);
  CHECK(count_type(explicit_graph, cudaGraphNodeTypeMemAlloc) == 2);
  CHECK(explicit_graph.node_count() == 9);
  CHECK(captured.node_count() == 9);

  curt::graph_exec exec_e = explicit_graph.instantiate();
  curt::graph_exec exec_c = captured.instantiate();
  for (int launch = 0; launch < 3; ++launch) {
    INFO("launch " << launch);
    std::vector<float> x = curt_test::random_floats(count(n), -2.0f, 2.0f);
    std::copy(x.begin(), x.end(), host_in.begin());
    std::memset(static_cast<void*>(host_out_e.data()), 0xFF, host_out_e.size_bytes());
    std::memset(static_cast<void*>(host_out_c.data()), 0xFF, host_out_c.size_bytes());
    curt::memset(out_e, 0xFF, s);
    curt::memset(out_c, 0xFF, s);
    curt::memset(bias_e, 0xFF, s);
    exec_e.launch(s);
    exec_c.launch(s);
    s.synchronize();
    std::vector<float> want(count(n));
    for (std::size_t i = 0; i < want.size(); ++i) {
      float squared = x[i] * x[i];
      squared = squared + c0;
      float scaled = a * squared;
      want[i] = scaled + bias_value;
    }
    std::vector<float> got_e(host_out_e.begin(), host_out_e.end());
    std::vector<float> got_c(host_out_c.begin(), host_out_c.end());
    curt_test::require_same_bytes(got_e, got_c);  // identical, bit for bit
    curt_test::require_close_all(got_e, want, 1e-6);
  }
}

TEST_CASE("kernel nodes: converted arguments, functors and device lambdas; a node knows its type "
          "and its neighbours", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient(), k = random_coefficient();
  const int add = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), z(count(n)), w(count(n));

  curt::graph g = curt::graph::create();
  // long -> int, short -> int, unsigned -> unsigned long long: as <<<>>> converts them.
  long n_long = n;
  short a_short = static_cast<short>(a);
  curt::graph_node first = curt::add_kernel_node(g, {}, config_for(n), affine,
                                                 static_cast<const int*>(x.get()), y.get(),
                                                 n_long, a_short, b, 0u);
  curt::graph_node functor = curt::add_kernel_node(g, {first}, config_for(n), times{k},
                                                   static_cast<const int*>(y.get()), z.get(), n);
  curt::graph_node lambda = graph_nodes_test::add_lambda_node(g, {first}, n, y.get(), w.get(),
                                                              k, add);
  CHECK(first.type() == cudaGraphNodeTypeKernel);
  CHECK(functor.type() == cudaGraphNodeTypeKernel);
  std::vector<curt::graph_dependency> after_first = first.dependents();
  CHECK(after_first.size() == 2);
  std::vector<curt::graph_dependency> before_lambda = lambda.dependencies();
  REQUIRE(before_lambda.size() == 1);
  CHECK(before_lambda[0].node == first.get());
  CHECK(before_lambda[0].data.type == cudaGraphDependencyTypeDefault);
  CHECK(first.dependencies().empty());

  curt::graph_exec exec = g.instantiate();
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = random_inputs(n);
    x.upload(values);
    y.poison();
    z.poison();
    w.poison();
    exec.launch(s);
    s.synchronize();
    std::vector<int> want_y = affine_ref(values, a, b);
    CHECK(y.download() == want_y);
    CHECK(z.download() == affine_ref(want_y, k, 0));
    CHECK(w.download() == affine_ref(want_y, k, add));
  }
}

TEST_CASE("kernel node attributes: clusters reach the device; priority, memory sync domain, "
          "access policy window and device updates are set on the node", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int blocks = 2 * curt_test::random_ints(1, 2, 16)[0];  // a multiple of the cluster
  device_array<int> sizes(count(blocks)), ranks(count(blocks)), data(1024);

  curt::access_policy_window window{data.get(), data.bytes(), 0.5f, cudaAccessPropertyPersisting,
                                    cudaAccessPropertyStreaming};
  curt::graph g = curt::graph::create();
  curt::graph_node clustered = curt::add_kernel_node(
      g, {},
      curt::launch_config(dim3(static_cast<unsigned>(blocks)), dim3(32))
          .cluster_dims(dim3(2))
          .priority(d.stream_priority_range().first)
          .memory_sync_domain(cudaLaunchMemSyncDomainRemote)
          .access_policy_window(window)
          .programmatic_stream_serialization(false),  // asks for nothing: left out
      cluster_shape, sizes.get(), ranks.get());

  auto attribute = [&](cudaLaunchAttributeID id) {
    cudaLaunchAttributeValue value{};
    CURT_CHECK(cudaGraphKernelNodeGetAttribute(clustered.get(), id, &value));
    return value;
  };
  cudaLaunchAttributeValue cluster = attribute(cudaLaunchAttributeClusterDimension);
  CHECK(cluster.clusterDim.x == 2);
  CHECK(cluster.clusterDim.y == 1);
  CHECK(cluster.clusterDim.z == 1);
  CHECK(attribute(cudaLaunchAttributePriority).priority == d.stream_priority_range().first);
  CHECK(attribute(cudaLaunchAttributeMemSyncDomain).memSyncDomain == cudaLaunchMemSyncDomainRemote);
  cudaAccessPolicyWindow got = attribute(cudaLaunchAttributeAccessPolicyWindow).accessPolicyWindow;
  CHECK(got.base_ptr == data.get());
  CHECK(got.num_bytes == data.bytes());
  CHECK(got.hitRatio == 0.5f);

  curt::graph_exec exec = g.instantiate(curt::instantiate_flags::use_node_priority);
  sizes.poison();
  ranks.poison();
  exec.launch(s);
  s.synchronize();
  std::vector<int> got_sizes = sizes.download(), got_ranks = ranks.download();
  for (int i = 0; i < blocks; ++i) {
    INFO("block " << i);
    CHECK(got_sizes[count(i)] == 2);
    CHECK(got_ranks[count(i)] == i % 2);
  }

  // Device-updatable: a handle for device code, and the attribute reads back set.
  curt::graph other = curt::graph::create();
  curt::graph_node updatable =
      curt::add_kernel_node(other, {}, curt::launch_config(dim3(1), dim3(32)), cluster_shape,
                            sizes.get(), ranks.get());
  cudaGraphDeviceNode_t handle = curt::make_device_updatable(updatable);
  CHECK(handle != nullptr);
  cudaLaunchAttributeValue value{};
  CURT_CHECK(cudaGraphKernelNodeGetAttribute(updatable.get(),
                                             cudaLaunchAttributeDeviceUpdatableKernelNode, &value));
  CHECK(value.deviceUpdatableKernelNode.deviceUpdatable == 1);
}

TEST_CASE("programmatic and launch-completion edges join kernel nodes, carry their data, and give "
          "the CPU's results", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  const int a2 = random_coefficient(), b2 = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), z(count(n)), x2(count(n)), w(count(n));

  curt::graph g = curt::graph::create();
  curt::graph_node producer = curt::add_kernel_node(
      g, {}, config_for(n), affine, static_cast<const int*>(x.get()), y.get(), n, a, b,
      1'000'000ull);
  curt::graph_node consumer =
      curt::add_kernel_node(g, {curt::programmatic_edge(producer)}, config_for(n),
                            pdl_square_plus, static_cast<const int*>(y.get()), z.get(), n, c);
  // Launch completion: the second kernel may start once the producer's blocks have all started;
  // it reads nothing the producer writes.
  curt::graph_node early = curt::add_kernel_node(
      g, {curt::launch_completion_edge(producer)}, config_for(n), affine,
      static_cast<const int*>(x2.get()), w.get(), n, a2, b2, 0ull);

  std::vector<curt::graph_edge> edges = g.edges();
  REQUIRE(edges.size() == 2);
  for (const curt::graph_edge& e : edges) {
    CHECK(e.from == producer.get());
    CHECK(e.data.type == cudaGraphDependencyTypeProgrammatic);
    CHECK(e.data.to_port == 0);
    if (e.to == consumer.get())
      CHECK(e.data.from_port == cudaGraphKernelNodePortProgrammatic);
    else
      CHECK((e.to == early.get() && e.data.from_port == cudaGraphKernelNodePortLaunchCompletion));
  }
  std::vector<curt::graph_dependency> into_consumer = consumer.dependencies();
  REQUIRE(into_consumer.size() == 1);
  CHECK(into_consumer[0].data.from_port == cudaGraphKernelNodePortProgrammatic);

  curt::graph_exec exec = g.instantiate();
  for (int launch = 0; launch < 3; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = random_inputs(n), values2 = random_inputs(n);
    x.upload(values);
    x2.upload(values2);
    y.poison();
    z.poison();
    w.poison();
    exec.launch(s);
    s.synchronize();
    std::vector<int> want_y = affine_ref(values, a, b);
    CHECK(y.download() == want_y);
    std::vector<int> want_z(count(n));
    for (std::size_t i = 0; i < want_z.size(); ++i) want_z[i] = want_y[i] * want_y[i] + c;
    CHECK(z.download() == want_z);
    CHECK(w.download() == affine_ref(values2, a2, b2));
  }
}

TEST_CASE("memcpy, memset and fill nodes, and empty nodes that join branches", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int fill_value = curt_test::random_ints(1, 1 << 20, 1 << 30)[0];  // bytes that differ
  const unsigned char byte = static_cast<unsigned char>(curt_test::random_ints(1, 1, 254)[0]);
  device_array<int> src(count(n)), dst(count(n)), filled(count(n)), set(count(n)), sum(count(n));
  device_array<short> halves(count(n));
  const short half = static_cast<short>(curt_test::random_ints(1, 300, 30000)[0]);
  curt::pinned_buffer<int> host(d, count(n));

  curt::graph g = curt::graph::create();
  curt::graph_node copy = curt::add_memcpy_node(g, {}, all_of(dst), all_of(src));
  curt::graph_node fill = curt::add_fill_node(g, {}, all_of(filled), fill_value);
  curt::graph_node set_bytes = curt::add_memset_node(g, {}, all_of(set), byte);
  curt::graph_node fill_half = curt::add_fill_node(g, {}, all_of(halves), half);
  curt::graph_node join = curt::add_empty_node(g, {copy, fill, set_bytes, fill_half});
  curt::graph_node add = curt::add_kernel_node(g, {join}, config_for(n), add_arrays,
                                               static_cast<const int*>(dst.get()),
                                               static_cast<const int*>(filled.get()), sum.get(), n);
  curt::add_memcpy_node(g, {add}, host, all_of(sum));  // device to pinned host
  CHECK(copy.type() == cudaGraphNodeTypeMemcpy);
  CHECK(fill.type() == cudaGraphNodeTypeMemset);
  CHECK(join.type() == cudaGraphNodeTypeEmpty);
  CHECK(join.dependencies().size() == 4);

  curt::graph_exec exec = g.instantiate();
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = random_inputs(n);
    src.upload(values);
    dst.poison();
    filled.poison();
    set.poison();
    halves.poison();
    sum.poison();
    std::fill(host.begin(), host.end(), -1);
    exec.launch(s);
    s.synchronize();
    CHECK(dst.download() == values);
    CHECK(filled.download() == std::vector<int>(count(n), fill_value));
    int byte_pattern = 0;
    std::memset(&byte_pattern, byte, sizeof byte_pattern);
    CHECK(set.download() == std::vector<int>(count(n), byte_pattern));
    CHECK(halves.download() == std::vector<short>(count(n), half));
    std::vector<int> want = affine_ref(values, 1, fill_value);
    CHECK(sum.download() == want);
    CHECK(std::vector<int>(host.begin(), host.end()) == want);
  }
}

TEST_CASE("a host node runs on every launch; the graph owns its callable, destroyed on a user "
          "thread; an exception goes to the error handler and the launch goes on",
          "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  error_recorder errors;
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), z(count(n));
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto life = std::make_shared<lifetime>();
  auto throw_on = std::make_shared<std::atomic<int>>(-1);
  const std::string message = "host node failure #" + std::to_string(random_coefficient());

  {
    curt::graph g = curt::graph::create();
    curt::graph_node k = curt::add_kernel_node(g, {}, config_for(n), affine,
                                               static_cast<const int*>(x.get()), y.get(), n, a, b,
                                               0ull);
    curt::graph_node host = curt::add_host_node(
        g, {k}, [calls, throw_on, message, p = probe(life)] {
          int call = calls->fetch_add(1);
          if (call == throw_on->load()) throw node_failure(message);
        });
    CHECK(host.type() == cudaGraphNodeTypeHost);
    // After the host node: it runs even when the host node threw.
    curt::add_kernel_node(g, {host}, config_for(n), affine, static_cast<const int*>(y.get()),
                          z.get(), n, 1, 1, 0ull);
    curt::graph_exec exec = g.instantiate();
    g = curt::graph(curt::no_handle);  // the executable graph holds the callable now
    throw_on->store(2);
    for (int launch = 0; launch < 4; ++launch) {
      INFO("launch " << launch);
      std::vector<int> values = random_inputs(n);
      x.upload(values);
      y.poison();
      z.poison();
      exec.launch(s);
      CHECK_NOTHROW(s.synchronize());  // a graph's exception is not the stream's
      CHECK(calls->load() == launch + 1);
      std::vector<int> want_y = affine_ref(values, a, b);
      CHECK(y.download() == want_y);
      CHECK(z.download() == affine_ref(want_y, 1, 1));
      CHECK(errors.host_function_errors.load() == (launch >= 2 ? 1 : 0));
    }
    CHECK(life->destroyed.load() == 0);
  }  // graph and executable graph gone: the callable is destroyed on this thread
  CHECK(eventually([&] { return life->destroyed.load() == 1; }, [&] { s.synchronize(); }));
  CHECK(destroyed_on(*life) == std::this_thread::get_id());

  REQUIRE(errors.count.load() == 1);
  std::string what = errors.message(0);
  INFO("handled: " << what);
  CHECK_THAT(what, ContainsSubstring("in a graph"));
  CHECK_THAT(what, ContainsSubstring(message));
  std::exception_ptr original = errors.original(0);
  REQUIRE(original != nullptr);
  try {
    std::rethrow_exception(original);
  } catch (const node_failure& e) {
    CHECK(std::string(e.what()) == message);
  } catch (...) {
    FAIL("original() is not the exception the host node threw");
  }
}

// CUDA gives an executable graph updated as a whole the references of the graph it was updated
// from: its host nodes call that graph's callables. A per-node update naming a node of the first
// graph used to hand its callable to the first graph's owner, which could then free it while the
// executable graph still called it.
TEST_CASE("after a whole-graph update, update_host_node is refused; a new executable graph takes "
          "it again", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  auto first = std::make_shared<std::atomic<int>>(0);
  auto second = std::make_shared<std::atomic<int>>(0);
  auto third = std::make_shared<std::atomic<int>>(0);
  curt::graph g1 = curt::graph::create();
  curt::graph_node h1 = curt::add_host_node(g1, {}, [first] { first->fetch_add(1); });
  curt::graph g2 = curt::graph::create();
  curt::add_host_node(g2, {}, [second] { second->fetch_add(1); });
  curt::graph_exec exec = g1.instantiate();
  exec.launch(s);
  s.synchronize();
  CHECK(first->load() == 1);
  exec.update(g2);
  exec.launch(s);
  s.synchronize();
  CHECK(first->load() == 1);
  CHECK(second->load() == 1);
  require_cuda_error([&] { curt::update_host_node(exec, h1, [third] { third->fetch_add(1); }); },
                     cudaErrorInvalidValue,
                     {"curt::update_host_node", "updated as a whole", "Nothing was changed"});
  exec.launch(s);
  s.synchronize();
  CHECK(second->load() == 2);
  CHECK(third->load() == 0);

  curt::graph_exec fresh = g1.instantiate();
  curt::update_host_node(fresh, h1, [third] { third->fetch_add(1); });
  fresh.launch(s);
  s.synchronize();
  CHECK(third->load() == 1);
  CHECK(first->load() == 1);
}

TEST_CASE("per-node updates change what one executable graph does; the graph and its other "
          "executable graphs keep theirs", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  destructor_error_counter destructor_errors;
  const int n = random_size();
  const int a1 = random_coefficient(), b1 = random_coefficient();
  const int a2 = random_coefficient() + 50, b2 = random_coefficient();
  const int k = random_coefficient(), add = random_coefficient(), subtract = random_coefficient();
  const int fill1 = curt_test::random_ints(1, 1 << 20, 1 << 29)[0];
  const int fill2 = fill1 + 12345;
  const unsigned char byte1 = 0x11, byte2 = 0x5A;
  device_array<int> x1(count(n)), y1(count(n)), x2(count(n)), y2(count(n)), src1(count(n)),
      dst1(count(n)), src2(count(n)), dst2(count(n)), f1(count(n)), f2(count(n)), m1(count(n)),
      m2(count(n)), l1(count(n)), l2(count(n));
  auto calls_a = std::make_shared<std::atomic<int>>(0);
  auto calls_b = std::make_shared<std::atomic<int>>(0);
  auto updated_life = std::make_shared<lifetime>();

  curt::graph g = curt::graph::create();
  curt::graph_node kernel = curt::add_kernel_node(g, {}, config_for(n), affine,
                                                  static_cast<const int*>(x1.get()), y1.get(), n,
                                                  a1, b1, 0ull);
  curt::graph_node copy = curt::add_memcpy_node(g, {}, all_of(dst1), all_of(src1));
  curt::graph_node fill = curt::add_fill_node(g, {}, all_of(f1), fill1);
  curt::graph_node set = curt::add_memset_node(g, {}, all_of(m1), byte1);
  curt::graph_node host = curt::add_host_node(g, {}, [calls_a] { calls_a->fetch_add(1); });
  curt::graph_node lambda = graph_nodes_test::add_lambda_node(g, {}, n, x1.get(), l1.get(), k, add);
  curt::graph_exec first = g.instantiate();
  curt::graph_exec second = g.instantiate();

  std::vector<int> v1 = random_inputs(n), v2 = random_inputs(n), s1 = random_inputs(n),
                   s2 = random_inputs(n);
  x1.upload(v1);
  x2.upload(v2);
  src1.upload(s1);
  src2.upload(s2);
  auto poison_all = [&] {
    for (const device_array<int>* a : {&y1, &y2, &dst1, &dst2, &f1, &f2, &m1, &m2, &l1, &l2})
      a->poison();
  };
  int pattern1 = 0, pattern2 = 0;
  std::memset(&pattern1, byte1, sizeof pattern1);
  std::memset(&pattern2, byte2, sizeof pattern2);
  auto require_original = [&](int calls) {
    CHECK(y1.download() == affine_ref(v1, a1, b1));
    CHECK(dst1.download() == s1);
    CHECK(f1.download() == std::vector<int>(count(n), fill1));
    CHECK(m1.download() == std::vector<int>(count(n), pattern1));
    CHECK(l1.download() == affine_ref(v1, k, add));
    CHECK(calls_a->load() == calls);
    for (const device_array<int>* untouched : {&y2, &dst2, &f2, &m2, &l2})
      CHECK(untouched->download() == poisoned(n));
  };

  poison_all();
  first.launch(s);
  s.synchronize();
  require_original(1);

  // Every kind of update, on the first executable graph only.
  curt::update_kernel_node(first, kernel, config_for(n, 128), affine,
                           static_cast<const int*>(x2.get()), y2.get(), n, a2, b2, 0ull);
  curt::update_memcpy_node(first, copy, all_of(dst2), all_of(src2));
  curt::update_fill_node(first, fill, all_of(f2), fill2);
  curt::update_memset_node(first, set, all_of(m2), byte2);
  curt::update_host_node(first, host, [calls_b, p = probe(updated_life)] { calls_b->fetch_add(1); });
  graph_nodes_test::update_lambda_node(first, lambda, n, x2.get(), l2.get(), subtract);

  poison_all();
  first.launch(s);
  s.synchronize();
  CHECK(y2.download() == affine_ref(v2, a2, b2));
  CHECK(dst2.download() == s2);
  CHECK(f2.download() == std::vector<int>(count(n), fill2));
  CHECK(m2.download() == std::vector<int>(count(n), pattern2));
  CHECK(l2.download() == affine_ref(v2, 1, -subtract));
  CHECK(calls_b->load() == 1);
  CHECK(calls_a->load() == 1);
  for (const device_array<int>* untouched : {&y1, &dst1, &f1, &m1, &l1})
    CHECK(untouched->download() == poisoned(n));

  // The other executable graph, and one instantiated from the graph now, keep the original.
  poison_all();
  second.launch(s);
  s.synchronize();
  require_original(2);
  second = curt::graph_exec(curt::no_handle);
  curt::graph_exec third = g.instantiate();
  poison_all();
  third.launch(s);
  s.synchronize();
  require_original(3);
  CHECK(calls_b->load() == 1);

  // The updated callable lives until the graph and its executable graphs are gone.
  first = curt::graph_exec(curt::no_handle);
  third = curt::graph_exec(curt::no_handle);
  s.synchronize();
  CHECK(updated_life->destroyed.load() == 0);  // the graph still holds the node's callable
  g = curt::graph(curt::no_handle);
  CHECK(eventually([&] { return updated_life->destroyed.load() == 1; }, [&] { s.synchronize(); }));
  CHECK(destroyed_on(*updated_life) == std::this_thread::get_id());
  CHECK(destructor_errors.count() == 0);
}

// A program that updates a host node before each launch must not pile up callables (issue: the
// everyday path, 6): through the owner, each replaced callable is freed once its successor ran.
TEST_CASE("update_host_node through an owner frees each replaced callable once its successor has "
          "run; the current one lives as long as the graph", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  destructor_error_counter destructor_errors;
  curt::graph g = curt::graph::create();
  auto seen = std::make_shared<std::atomic<int>>(-1);
  curt::graph_node host = curt::add_host_node(g, {}, [seen] { seen->store(0); });
  curt::graph_exec exec = g.instantiate();
  const int updates = 2 * (50 + static_cast<int>(random_size() % 50));
  std::vector<std::shared_ptr<lifetime>> lives;
  for (int i = 1; i <= updates; ++i) {
    lives.push_back(std::make_shared<lifetime>());
    curt::update_host_node(exec, host, [seen, i, p = probe(lives.back())] { seen->store(i); });
    if (i % 2 == 1) continue;  // every other callable is replaced before it ever runs
    exec.launch(s);
    s.synchronize();  // a drain: what the host node retired is freed here
    REQUIRE(seen->load() == i);
  }
  int alive = 0;
  for (const auto& life : lives) alive += life->destroyed.load() == 0;
  INFO(alive << " of " << updates << " callables alive after " << updates / 2 << " launches");
  CHECK(alive == 1);
  CHECK(lives.back()->destroyed.load() == 0);
  CHECK(destroyed_on(*lives.front()) == std::this_thread::get_id());

  // The current one outlives the executable graph (a launch may still call it), not the graph.
  exec.launch(s);
  exec = curt::graph_exec(curt::no_handle);
  s.synchronize();
  CHECK(seen->load() == updates);
  CHECK(lives.back()->destroyed.load() == 0);
  g = curt::graph(curt::no_handle);
  CHECK(eventually([&] { return lives.back()->destroyed.load() == 1; }, [&] { s.synchronize(); }));
  CHECK(destructor_errors.count() == 0);
}

// A refused whole update leaves the executable graph as it was, still calling the owner's
// replacements: the owner must keep freeing them as it did (found by review: they were handed to
// the graph before CUDA was asked, and each refused try_update kept one until the graph died).
TEST_CASE("a refused whole update through an owner leaves its host-node replacements to it: each "
          "is still freed once its successor has run",
          "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  destructor_error_counter destructor_errors;
  auto seen = std::make_shared<std::atomic<int>>(-1);
  curt::graph g = curt::graph::create();
  curt::graph_node host = curt::add_host_node(g, {}, [seen] { seen->store(0); });
  curt::graph other = curt::graph::create();  // another topology: CUDA refuses the update
  curt::graph_node o1 = curt::add_host_node(other, {}, [] {});
  (void)curt::add_host_node(other, {o1}, [] {});
  curt::graph_exec exec = g.instantiate();
  const int rounds = 20 + static_cast<int>(random_size() % 20);
  std::vector<std::shared_ptr<lifetime>> lives;
  for (int i = 1; i <= rounds; ++i) {
    lives.push_back(std::make_shared<lifetime>());
    curt::update_host_node(exec, host, [seen, i, p = probe(lives.back())] { seen->store(i); });
    if (i % 3 == 0)
      require_cuda_error([&] { exec.update(other); }, cudaErrorGraphExecUpdateFailure,
                         {"cudaGraphExecUpdate"});
    else
      REQUIRE_FALSE(exec.try_update(other));
    exec.launch(s);  // still the replacement: the refused update changed nothing
    s.synchronize();
    REQUIRE(seen->load() == i);
  }
  int alive = 0;
  for (const auto& life : lives) alive += life->destroyed.load() == 0;
  INFO(alive << " of " << rounds << " callables alive after " << rounds << " refused updates");
  CHECK(alive == 1);
  // Host nodes can still be updated through the owner, and an accepted update then hands over.
  curt::graph same = curt::graph::create();
  (void)curt::add_host_node(same, {}, [seen] { seen->store(-7); });
  REQUIRE(exec.try_update(same));
  exec.launch(s);
  s.synchronize();
  CHECK(seen->load() == -7);
  exec = curt::graph_exec(curt::no_handle);
  g = curt::graph(curt::no_handle);
  CHECK(eventually([&] { return lives.back()->destroyed.load() == 1; }, [&] { s.synchronize(); }));
  CHECK(destructor_errors.count() == 0);
}

// A whole update drops the references to the first graph's callables, which held the owner's
// replacements once it handed them over: it must hand them over before, while they are alive
// (found by review: handed over at the owner's end, into a callable already freed).
TEST_CASE("a host node replaced through an owner, then the owner updated as a whole from another "
          "graph after the first one died: the replacement is freed, nothing is touched after",
          "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  destructor_error_counter destructor_errors;
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto replacement_life = std::make_shared<lifetime>();
  curt::graph g1 = curt::graph::create();
  curt::graph_node h1 = curt::add_host_node(g1, {}, [calls] { calls->fetch_add(1); });
  curt::graph_exec exec = g1.instantiate();
  curt::update_host_node(exec, h1, [calls, p = probe(replacement_life)] { calls->fetch_add(10); });
  exec.launch(s);
  s.synchronize();
  CHECK(calls->load() == 10);
  g1 = curt::graph(curt::no_handle);  // only the executable graph keeps its callables now

  curt::graph g2 = curt::graph::create();
  (void)curt::add_host_node(g2, {}, [calls] { calls->fetch_add(100); });
  exec.update(g2);
  exec.launch(s);
  s.synchronize();
  CHECK(calls->load() == 110);
  CHECK(eventually([&] { return replacement_life->destroyed.load() == 1; },
                   [&] { s.synchronize(); }));
  exec = curt::graph_exec(curt::no_handle);
  g2 = curt::graph(curt::no_handle);
  s.synchronize();
  CHECK(destroyed_on(*replacement_life) == std::this_thread::get_id());
  CHECK(destructor_errors.count() == 0);
}

TEST_CASE("disabled kernel, memcpy and memset nodes do not run; enabled again they do, with the "
          "updates made meanwhile", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient(), b_later = b + 100;
  const int fill_value = curt_test::random_ints(1, 1 << 20, 1 << 29)[0];
  device_array<int> x(count(n)), y(count(n)), src(count(n)), dst(count(n)), filled(count(n));

  curt::graph g = curt::graph::create();
  curt::graph_node kernel = curt::add_kernel_node(g, {}, config_for(n), affine,
                                                  static_cast<const int*>(x.get()), y.get(), n, a,
                                                  b, 0ull);
  curt::graph_node copy = curt::add_memcpy_node(g, {}, all_of(dst), all_of(src));
  curt::graph_node fill = curt::add_fill_node(g, {}, all_of(filled), fill_value);
  curt::graph_exec exec = g.instantiate();
  std::vector<int> values = random_inputs(n), copied = random_inputs(n);
  x.upload(values);
  src.upload(copied);

  for (curt::graph_node node : {kernel, copy, fill}) {
    CHECK(curt::node_enabled(exec, node));
    curt::set_node_enabled(exec, node, false);
    CHECK_FALSE(curt::node_enabled(exec, node));
  }
  for (int launch = 0; launch < 2; ++launch) {
    y.poison();
    dst.poison();
    filled.poison();
    exec.launch(s);
    s.synchronize();
    CHECK(y.download() == poisoned(n));
    CHECK(dst.download() == poisoned(n));
    CHECK(filled.download() == poisoned(n));
  }
  // Updated while disabled: the update takes effect once it is enabled.
  curt::update_kernel_node(exec, kernel, config_for(n), affine, static_cast<const int*>(x.get()),
                           y.get(), n, a, b_later, 0ull);
  curt::set_node_enabled(exec, kernel, true);
  curt::set_node_enabled(exec, copy, true);
  y.poison();
  dst.poison();
  exec.launch(s);
  s.synchronize();
  CHECK(y.download() == affine_ref(values, a, b_later));
  CHECK(dst.download() == copied);
  CHECK(filled.download() == poisoned(n));  // still disabled
  curt::set_node_enabled(exec, fill, true);
  exec.launch(s);
  s.synchronize();
  CHECK(filled.download() == std::vector<int>(count(n), fill_value));
}

TEST_CASE("memory allocation and free nodes in one graph", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  device_array<int> x(count(n)), out(count(n));
  auto require_launches = [&](const curt::graph_exec& exec, int launches) {
    require_affine_launches(exec, s, x, out, a, b, launches);
  };

  SECTION("allocated and freed in the graph") {
    curt::graph g = curt::graph::create();
    curt::allocation_node<int> scratch = curt::add_allocation_node<int>(g, {}, d, count(n));
    curt::graph_node k = curt::add_kernel_node(g, {scratch}, config_for(n), affine,
                                               static_cast<const int*>(x.get()), scratch.data(), n,
                                               a, b, 0ull);
    curt::graph_node copy = curt::add_memcpy_node(g, {k}, all_of(out), scratch);
    curt::graph_node free_node = curt::add_free_node(g, {copy}, scratch);
    CHECK(scratch.type() == cudaGraphNodeTypeMemAlloc);
    CHECK(free_node.type() == cudaGraphNodeTypeMemFree);
    cudaMemAllocNodeParams params{};
    CURT_CHECK(cudaGraphMemAllocNodeGetParams(scratch.get(), &params));
    CHECK(params.dptr == scratch.data());
    CHECK(params.bytesize == scratch.size_bytes());
    CHECK(params.poolProps.location.type == cudaMemLocationTypeDevice);
    CHECK(params.poolProps.location.id == d.ordinal());
    curt::graph_exec exec = g.instantiate();
    require_launches(exec, 3);
  }
}

// [no-memcheck]: compute-sanitizer 13.0's leak check once (of three runs) reported an allocation
// made by a graph launch as leaked here (8312 bytes, allocated in cuGraphLaunch), although every
// launch's allocation was freed by the other graph, by the next auto-free launch or by
// cudaFreeAsync; the driver logs "Unsupported node type" for memory nodes under the sanitizer. A
// raw-CUDA program of the same sequence was clean: not explained yet (docs/design.md).
// initcheck, racecheck and synccheck run it.
TEST_CASE("memory nodes whose allocation outlives its graph: freed by another graph, or kept "
          "with auto_free_on_launch, the graph relaunches cleanly", "[graph][nodes][no-memcheck]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  device_array<int> x(count(n)), out(count(n));
  auto require_launches = [&](const curt::graph_exec& exec, int launches) {
    require_affine_launches(exec, s, x, out, a, b, launches);
  };

  SECTION("allocated in one graph, freed by another") {
    curt::graph producer = curt::graph::create();
    curt::allocation_node<int> shared = curt::add_allocation_node<int>(producer, {}, d, count(n));
    curt::add_kernel_node(producer, {shared}, config_for(n), affine,
                          static_cast<const int*>(x.get()), shared.data(), n, a, b, 0ull);
    curt::graph consumer = curt::graph::create();
    curt::graph_node copy = curt::add_memcpy_node(consumer, {}, all_of(out), shared);
    curt::add_free_node(consumer, {copy}, shared.data());
    curt::graph_exec make = producer.instantiate(), use = consumer.instantiate();
    for (int launch = 0; launch < 3; ++launch) {
      INFO("launch " << launch);
      std::vector<int> values = random_inputs(n);
      x.upload(values);
      out.poison();
      make.launch(s);
      use.launch(s);  // frees it: the producer may run again
      s.synchronize();
      CHECK(out.download() == affine_ref(values, a, b));
    }
  }
  SECTION("kept past the launch: refused another launch until freed, unless auto_free_on_launch") {
    curt::graph g = curt::graph::create();
    curt::allocation_node<int> kept = curt::add_allocation_node<int>(g, {}, d, count(n));
    curt::graph_node k = curt::add_kernel_node(g, {kept}, config_for(n), affine,
                                               static_cast<const int*>(x.get()), kept.data(), n, a,
                                               b, 0ull);
    curt::add_memcpy_node(g, {k}, all_of(out), kept);
    {
      curt::graph_exec plain = g.instantiate();
      // One executable graph at a time for a graph with memory nodes: CUDA refuses, curt says why.
      require_any_cuda_error([&] { (void)g.instantiate(); },
                             {"cudaGraphInstantiateWithParams",
                              "memory allocation or free node(s)",
                              "only one executable graph at a time", "destroy it first"});
      require_launches(plain, 1);
      require_cuda_error([&] { plain.launch(s); }, cudaErrorInvalidValue,
                         {"cuGraphLaunch(exec, stream)", "auto_free_on_launch"});
      CURT_CHECK(cudaFreeAsync(kept.data(), s));
      require_launches(plain, 1);  // freed: it runs again
      CURT_CHECK(cudaFreeAsync(kept.data(), s));
      s.synchronize();
    }  // the first executable graph is gone: another may be made
    curt::graph_exec exec = g.instantiate(curt::instantiate_flags::auto_free_on_launch);
    require_launches(exec, 3);
    CURT_CHECK(cudaFreeAsync(kept.data(), s));
    s.synchronize();
  }
}

// [no-memcheck][no-initcheck]: under compute-sanitizer 13.0 the driver logs "Unsupported node
// type" for memory nodes; memcheck once reported the kernel's writes into the child's allocation
// out of bounds and stopped it (a raw-CUDA program of this shape was clean in 8 runs: not
// explained yet; docs/design.md). racecheck and synccheck run it.
TEST_CASE("child graph nodes: a copied child stays the caller's; a child with memory nodes moves "
          "in and belongs to the parent", "[graph][nodes][no-memcheck][no-initcheck]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), z(count(n));

  curt::graph child = curt::graph::create();
  curt::add_kernel_node(child, {}, config_for(n), affine, static_cast<const int*>(x.get()),
                        y.get(), n, a, b, 0ull);
  curt::graph parent = curt::graph::create();
  curt::graph_node copied = curt::add_child_graph_node(parent, {}, child);
  CHECK(copied.type() == cudaGraphNodeTypeGraph);
  CHECK(child.valid());
  curt::add_empty_node(child, {});  // the parent's copy does not change
  cudaGraph_t embedded = nullptr;
  CURT_CHECK(cudaGraphChildGraphNodeGetGraph(copied.get(), &embedded));
  CHECK(embedded != child.get());
  CHECK(curt::graph_ref(embedded).node_count() == 1);

  // A child that allocates, uses and frees memory.
  curt::graph with_memory = curt::graph::create();
  curt::allocation_node<int> scratch = curt::add_allocation_node<int>(with_memory, {}, d, count(n));
  curt::graph_node k = curt::add_kernel_node(with_memory, {scratch}, config_for(n), affine,
                                             static_cast<const int*>(y.get()), scratch.data(), n,
                                             1, c, 0ull);
  curt::graph_node copy = curt::add_memcpy_node(with_memory, {k}, all_of(z), scratch);
  curt::add_free_node(with_memory, {copy}, scratch);
  // Copied in, CUDA refuses it, and curt says to move it (the child stays the caller's).
  require_any_cuda_error([&] { (void)curt::add_child_graph_node(parent, {copied}, with_memory); },
                         {"curt::add_child_graph_node(child graph, copied)", "memory allocation",
                          "std::move(child)"});
  CHECK(with_memory.valid());
  cudaGraph_t moved_handle = with_memory.get();
  curt::graph_node moved = curt::add_child_graph_node(parent, {copied}, std::move(with_memory));
  CHECK_FALSE(with_memory.valid());  // released: the parent owns it
  cudaGraph_t inside = nullptr;
  CURT_CHECK(cudaGraphChildGraphNodeGetGraph(moved.get(), &inside));
  CHECK(inside == moved_handle);

  curt::graph_exec exec = parent.instantiate();
  for (int launch = 0; launch < 3; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = random_inputs(n);
    x.upload(values);
    y.poison();
    z.poison();
    exec.launch(s);
    s.synchronize();
    std::vector<int> want_y = affine_ref(values, a, b);
    CHECK(y.download() == want_y);
    CHECK(z.download() == affine_ref(want_y, 1, c));
  }
}

TEST_CASE("event record and wait nodes order work across streams and graphs", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d), other(d);
  curt::event recorded(d), waited(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  device_array<int> x(count(n)), y(count(n)), x2(count(n)), y2(count(n)), z(count(n));

  // Record after a slow kernel: once the event is done, so is the kernel.
  curt::graph recorder = curt::graph::create();
  curt::graph_node slow = curt::add_kernel_node(recorder, {}, config_for(n), affine,
                                                static_cast<const int*>(x.get()), y.get(), n, a, b,
                                                5'000'000ull);
  curt::graph_node record = curt::add_event_record_node(recorder, {slow}, recorded);
  CHECK(record.type() == cudaGraphNodeTypeEventRecord);
  curt::graph_exec record_exec = recorder.instantiate();

  // Wait for an event recorded on another stream after a slow kernel, then read its output.
  curt::graph waiter = curt::graph::create();
  curt::graph_node wait = curt::add_event_wait_node(waiter, {}, waited);
  CHECK(wait.type() == cudaGraphNodeTypeWaitEvent);
  curt::add_kernel_node(waiter, {wait}, config_for(n), affine, static_cast<const int*>(y2.get()),
                        z.get(), n, 1, c, 0ull);
  curt::graph_exec wait_exec = waiter.instantiate();

  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = random_inputs(n), values2 = random_inputs(n);
    x.upload(values);
    x2.upload(values2);
    y.poison();
    y2.poison();
    z.poison();
    record_exec.launch(s);
    recorded.synchronize();
    CHECK(y.download() == affine_ref(values, a, b));

    curt::launch(other, config_for(n), affine, static_cast<const int*>(x2.get()), y2.get(), n, a,
                 b, 5'000'000ull);
    waited.record(other);
    wait_exec.launch(s);
    s.synchronize();
    CHECK(z.download() == affine_ref(affine_ref(values2, a, b), 1, c));
    other.synchronize();
  }
}

TEST_CASE("nodes added on a thread with no current context leave none current", "[graph][nodes]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  const int a = random_coefficient(), b = random_coefficient();
  device_array<int> x(count(n)), y(count(n));
  curt::graph g = curt::graph::create();
  curt_test::on_fresh_thread([&] {
    REQUIRE(curt_test::current_context() == nullptr);
    curt::graph_node k = curt::add_kernel_node(g, {}, config_for(n), affine,
                                               static_cast<const int*>(x.get()), y.get(), n, a, b,
                                               0ull);
    curt::graph_node e = curt::add_empty_node(g, {k});
    CHECK(e.dependencies().size() == 1);
    CHECK(curt_test::current_context() == nullptr);
  });
  std::vector<int> values = random_inputs(n);
  x.upload(values);
  y.poison();
  curt::graph_exec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  CHECK(y.download() == affine_ref(values, a, b));
}

TEST_CASE("refused nodes and updates say why and leave the graph as it was",
          "[graph][nodes][api-error]") {
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  device_array<int> x(count(n)), y(count(n)), z(count(n));
  curt::graph g = curt::graph::create();
  curt::graph_node k = curt::add_kernel_node(g, {}, config_for(n), affine,
                                             static_cast<const int*>(x.get()), y.get(), n, 2, 3,
                                             0ull);
  curt::graph_node set = curt::add_memset_node(g, {k}, all_of(z), 0);
  curt::graph_node host = curt::add_host_node(g, {}, [] {});
  curt::graph_node empty = curt::add_empty_node(g, {});
  const std::size_t nodes = g.node_count();

  SECTION("a dependency of another graph") {
    curt::graph other = curt::graph::create();
    require_any_cuda_error([&] { (void)curt::add_empty_node(other, {k}); },
                           {"curt::add_empty_node", "dependency 0", "is not a node of this graph"});
    CHECK(other.node_count() == 0);
  }
  SECTION("a dependency given twice") {
    require_any_cuda_error([&] { (void)curt::add_empty_node(g, {k, set, k}); },
                           {"dependency 2 repeats dependency 0"});
  }
  SECTION("a programmatic edge that does not join two kernel nodes") {
    require_any_cuda_error(
        [&] {
          (void)curt::add_kernel_node(g, {curt::programmatic_edge(set)}, config_for(n), affine,
                                      static_cast<const int*>(x.get()), z.get(), n, 1, 1, 0ull);
        },
        {"curt::add_kernel_node(", "programmatic or launch-completion edge",
         "joins two kernel nodes", "memset node -> kernel node"});
    require_any_cuda_error(
        [&] { (void)curt::add_empty_node(g, {curt::programmatic_edge(k)}); },
        {"curt::add_empty_node", "joins two kernel nodes", "kernel node -> empty node"});
  }
  SECTION("attributes kernel nodes do not take are refused before CUDA") {
    require_cuda_error(
        [&] {
          (void)curt::add_kernel_node(
              g, {}, config_for(n).programmatic_stream_serialization(), affine,
              static_cast<const int*>(x.get()), z.get(), n, 1, 1, 0ull);
        },
        cudaErrorInvalidValue, {"programmatic stream serialization", "curt::programmatic_edge"});
  }
  curt::graph_exec exec = g.instantiate();
  SECTION("an update of the wrong node type names the node's type") {
    require_any_cuda_error(
        [&] {
          curt::update_kernel_node(exec, set, config_for(n), affine,
                                   static_cast<const int*>(x.get()), z.get(), n, 1, 1, 0ull);
        },
        {"curt::update_kernel_node(", "the node is a memset node, not a kernel node"});
    require_any_cuda_error([&] { curt::update_memset_node(exec, k, all_of(z), 1); },
                           {"the node is a kernel node, not a memset node"});
    require_any_cuda_error([&] { curt::update_host_node(exec, k, [] {}); },
                           {"curt::update_host_node", "kernel node, not a host node"});
  }
  SECTION("launch attributes in an update are refused before CUDA") {
    require_cuda_error(
        [&] {
          curt::update_kernel_node(exec, k, config_for(n).cluster_dims(dim3(2)), affine,
                                   static_cast<const int*>(x.get()), z.get(), n, 1, 1, 0ull);
        },
        cudaErrorInvalidValue, {"keeps the launch attributes it was instantiated with"});
  }
  SECTION("only kernel, memcpy and memset nodes are enabled and disabled") {
    require_cuda_error([&] { curt::set_node_enabled(exec, host, false); }, cudaErrorInvalidValue,
                       {"curt::set_node_enabled(false)", "only kernel, memcpy and memset nodes",
                        "host node", "Nothing was changed"});
    require_cuda_error([&] { (void)curt::node_enabled(exec, empty); }, cudaErrorInvalidValue,
                       {"curt::node_enabled", "empty node"});
  }
  SECTION("a host node made by capture has no callable curt owns to update") {
    curt::graph captured = curt::capture(s, [&](curt::stream_ref cs) { cs.host_call([] {}); });
    std::vector<cudaGraphNode_t> captured_nodes = captured.nodes();
    REQUIRE(captured_nodes.size() == 1);
    curt::graph_exec captured_exec = captured.instantiate();
    require_cuda_error(
        [&] { curt::update_host_node(captured_exec, captured_nodes[0], [] {}); },
        cudaErrorInvalidValue, {"curt::update_host_node", "not made by curt::add_host_node"});
  }
  CHECK(g.node_count() == nodes);
  CHECK(cudaGetLastError() == cudaSuccess);
  // The graph still runs.
  std::vector<int> values = random_inputs(n);
  x.upload(values);
  y.poison();
  exec.launch(s);
  s.synchronize();
  CHECK(y.download() == affine_ref(values, 2, 3));
}

// attack9 claim 1: a node made device-updatable through curt::make_device_updatable(node) did
// not turn on the copy check, so in a process that made no other such node a copied child and
// clone() of its graph were accepted (a copy the device handle does not name). Run in a child
// process, where curt has made no device-updatable node yet.
const char* const only_make_device_updatable_child =
    "child: a graph made device-updatable only through make_device_updatable is never copied";

TEST_CASE(only_make_device_updatable_child, "[.][graph-child]") {
  REQUIRE_FALSE(curt::detail::device_updatable_nodes_made().load());  // the premise: a fresh process
  curt::device d(0);
  curt::stream s(d);
  const int n = random_size();
  device_array<int> a(count(n)), b(count(n)), out(count(n));
  curt::graph g = curt::graph::create();
  curt::graph_node node =
      curt::add_kernel_node(g, {}, config_for(n), add_arrays, static_cast<const int*>(a.get()),
                            static_cast<const int*>(b.get()), out.get(), n);
  CHECK(curt::make_device_updatable(node) != nullptr);
  curt::graph parent = curt::graph::create();
  require_cuda_error([&] { (void)curt::add_child_graph_node(parent, {}, g); },
                     cudaErrorNotSupported,
                     {"curt::add_child_graph_node(child graph, copied)",
                      "the graph holds 1 device-updatable kernel node(s)", "Nothing was copied"});
  CHECK(parent.node_count() == 0);
  require_cuda_error([&] { (void)g.clone(); }, cudaErrorNotSupported,
                     {"curt::graph::clone()", "the graph holds 1 device-updatable kernel node(s)"});
  CHECK(cudaGetLastError() == cudaSuccess);
  std::printf("the child reached its end\n");
}

TEST_CASE("a graph made device-updatable only through make_device_updatable is never copied",
          "[graph][nodes][device-update][api-error]") {
  curt_test::child_result child = curt_test::run_self(only_make_device_updatable_child);
  INFO("child exit code " << child.exit_code << ", output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find("the child reached its end") != std::string::npos);
}
