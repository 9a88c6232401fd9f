// Explicit graph nodes and conditional nodes without a device (include/curt/graph_nodes.hpp,
// graph_node_update.hpp, graph_conditional.hpp): what curt hands to cudaGraphAddNode (zeroed
// parameters, memset patterns, 1D copies, edge data) and everything it refuses before any CUDA
// call, with its message: launch attributes kernel nodes do not take, configurations an executable
// graph's kernel node cannot take, null dependencies and nodes, empty and mismatched copies and
// fills a memset cannot write, allocations of nothing, SWITCH nodes without cases, enabling node
// types CUDA does not enable, and owners that hold nothing; the node kinds CUDA runs in a
// conditional body.
//
// The handles below are never handed to CUDA: every call made with them is refused first (a real
// driver given such a handle could crash).
#include <catch.hpp>
#include <expect.hpp>

#include <curt/graph_conditional.hpp>
#include <curt/graph_node_update.hpp>
#include <curt/graph_nodes.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using curt_test::require_cuda_error;

template <class Handle>
Handle fake(std::uintptr_t value) {
  return reinterpret_cast<Handle>(value);
}
cudaGraph_t fake_graph(std::uintptr_t n = 0) { return fake<cudaGraph_t>(0x10000 + 0x100 * n); }
cudaGraphNode_t fake_node(std::uintptr_t n = 0) { return fake<cudaGraphNode_t>(0x20000 + 0x100 * n); }
cudaGraphExec_t fake_exec() { return fake<cudaGraphExec_t>(0x30000); }
cudaEvent_t fake_event() { return fake<cudaEvent_t>(0x40000); }

// Stands for a kernel: these calls are refused before the function would reach CUDA.
void kernel(float*, int, float) {}
void no_arguments() {}

bool zero_bytes(const void* p, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i)
    if (b[i]) return false;
  return true;
}

bool plain_edge(const cudaGraphEdgeData& d) {
  cudaGraphEdgeData zero{};
  return std::memcmp(&d, &zero, sizeof d) == 0;
}

// A span-like view (an element_type, built from pointer and size), as cuda::std::span is.
template <class T>
struct view {
  using element_type = T;
  T* data;
  std::size_t size;
  view(T* d, std::size_t n) : data(d), size(n) {}
};

}  // namespace

TEST_CASE("node dependencies keep nodes and edge data by value, inline or beyond", "[graph]") {
  curt::node_dependencies none;
  CHECK(none.empty());
  CHECK(none.nodes() == nullptr);
  CHECK(none.data() == nullptr);

  curt::graph_node a(fake_node(1)), b(fake_node(2)), c(fake_node(3));
  curt::node_dependencies two = {a, b};
  REQUIRE(two.size() == 2);
  CHECK(two.nodes()[0] == fake_node(1));
  CHECK(two.nodes()[1] == fake_node(2));
  CHECK(two.data() == nullptr);  // plain edges: CUDA's default, no data passed

  curt::node_dependencies one = a;
  REQUIRE(one.size() == 1);
  CHECK(one.nodes()[0] == fake_node(1));
  curt::node_dependencies raw = fake_node(7);
  CHECK(raw.nodes()[0] == fake_node(7));

  // Programmatic and launch-completion edges carry their data.
  curt::node_dependencies edges = {a, curt::programmatic_edge(b), curt::launch_completion_edge(c)};
  REQUIRE(edges.size() == 3);
  REQUIRE(edges.data() != nullptr);
  CHECK(plain_edge(edges.data()[0]));
  CHECK(edges.data()[1].type == cudaGraphDependencyTypeProgrammatic);
  CHECK(edges.data()[1].from_port == cudaGraphKernelNodePortProgrammatic);
  CHECK(edges.data()[1].to_port == 0);
  CHECK(edges.data()[2].type == cudaGraphDependencyTypeProgrammatic);
  CHECK(edges.data()[2].from_port == cudaGraphKernelNodePortLaunchCompletion);
  CHECK(edges[2].node == fake_node(3));

  // More than fit inline, from each kind of list; a copy outlives the list it came from.
  std::vector<curt::graph_node> many;
  for (std::uintptr_t i = 0; i < 9; ++i) many.push_back(curt::graph_node(fake_node(10 + i)));
  curt::node_dependencies kept(curt::graph_node{});
  {
    std::vector<curt::graph_dependency> with_data;
    for (std::uintptr_t i = 0; i < 9; ++i)
      with_data.push_back(i == 6 ? curt::programmatic_edge(fake_node(10 + i))
                                 : curt::graph_dependency{fake_node(10 + i), {}});
    kept = curt::node_dependencies(with_data);
  }
  REQUIRE(kept.size() == 9);
  for (std::size_t i = 0; i < 9; ++i) {
    INFO("dependency " << i);
    CHECK(kept.nodes()[i] == fake_node(10 + i));
    CHECK(kept.data()[i].type == (i == 6 ? cudaGraphDependencyTypeProgrammatic
                                         : cudaGraphDependencyTypeDefault));
  }
  curt::node_dependencies from_nodes(many);
  CHECK(from_nodes.size() == 9);
  CHECK(from_nodes.nodes()[8] == fake_node(18));
  CHECK(from_nodes.data() == nullptr);
  std::vector<cudaGraphNode_t> natives = {fake_node(1), fake_node(2), fake_node(3), fake_node(4),
                                          fake_node(5)};
  curt::node_dependencies from_natives(natives);
  CHECK(from_natives.size() == 5);
  CHECK(from_natives.nodes()[4] == fake_node(5));
}

TEST_CASE("graph_node is a value over the handle; a null one says so", "[graph]") {
  static_assert(std::is_trivially_copyable_v<curt::graph_node>);
  static_assert(sizeof(curt::graph_node) == sizeof(cudaGraphNode_t));
  static_assert(std::is_convertible_v<cudaGraphNode_t, curt::graph_node>);
  static_assert(std::is_convertible_v<curt::graph_node, curt::graph_dependency>);
  curt::graph_node a(fake_node(1));
  CHECK(a.valid());
  CHECK(a.get() == fake_node(1));
  CHECK(a == curt::graph_node(fake_node(1)));
  CHECK(a != curt::graph_node(fake_node(2)));
  curt::graph_dependency d = a;
  CHECK(d.node == fake_node(1));
  CHECK(plain_edge(d.data));
  curt::graph_node null;
  CHECK_FALSE(null.valid());
  require_cuda_error([&] { (void)null.type(); }, cudaErrorInvalidValue,
                     {"curt::graph_node::type()", "null"});
  require_cuda_error([&] { (void)null.dependencies(); }, cudaErrorInvalidValue,
                     {"dependencies()", "null"});
  require_cuda_error([&] { (void)null.dependents(); }, cudaErrorInvalidValue,
                     {"dependents()", "null"});
}

TEST_CASE("node parameters are zeroed, memcpy nodes are 1D copies of bytes", "[graph]") {
  using curt::detail::node_params;
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeEmpty);
  CHECK(p.type == cudaGraphNodeTypeEmpty);
  CHECK(zero_bytes(reinterpret_cast<const char*>(&p) + sizeof p.type, sizeof p - sizeof p.type));

  int dst[5], src[5];
  cudaGraphNodeParams copy = curt::detail::memcpy_node_params(dst, src, sizeof dst);
  CHECK(copy.type == cudaGraphNodeTypeMemcpy);
  const cudaMemcpy3DParms& c = copy.memcpy.copyParams;
  CHECK(c.dstPtr.ptr == dst);
  CHECK(c.srcPtr.ptr == src);
  CHECK(c.extent.width == sizeof dst);
  CHECK(c.extent.height == 1);
  CHECK(c.extent.depth == 1);
  CHECK(c.kind == cudaMemcpyDefault);
  CHECK(copy.memcpy.flags == 0);
  CHECK(c.srcArray == nullptr);
  CHECK(c.dstArray == nullptr);

  std::vector<float> a(7), b(7), shorter(6);
  cudaGraphNodeParams typed = curt::detail::typed_memcpy_params(a, b, "add_memcpy_node");
  CHECK(typed.memcpy.copyParams.extent.width == 7 * sizeof(float));
  require_cuda_error([&] { (void)curt::detail::typed_memcpy_params(a, shorter, "add_memcpy_node"); },
                     cudaErrorInvalidValue,
                     {"curt::add_memcpy_node(destination of 7 elements, source of 6 elements)",
                      "28 bytes", "24"});
  std::vector<float> empty_a, empty_b;
  require_cuda_error(
      [&] { (void)curt::detail::typed_memcpy_params(empty_a, empty_b, "add_memcpy_node"); },
      cudaErrorInvalidValue, {"curt::add_memcpy_node(0 elements)", "empty node"});
}

TEST_CASE("fill nodes: equal bytes are a 1-byte memset, 2- and 4-byte values a typed one, "
          "anything else is refused", "[graph]") {
  using curt::detail::fill_node_params;
  alignas(8) unsigned char storage[64] = {};

  const std::uint32_t zero = 0, minus_one = 0xFFFFFFFFu, pattern = 0x12345678u;
  cudaGraphNodeParams p = fill_node_params(storage, 10, &minus_one, 4, "add_fill_node");
  CHECK(p.type == cudaGraphNodeTypeMemset);
  CHECK(p.memset.dst == storage);
  CHECK(p.memset.elementSize == 1);
  CHECK(p.memset.width == 40);
  CHECK(p.memset.value == 0xFF);
  CHECK(p.memset.height == 1);
  p = fill_node_params(storage, 10, &zero, 4, "add_fill_node");
  CHECK(p.memset.elementSize == 1);
  CHECK(p.memset.value == 0);
  p = fill_node_params(storage, 10, &pattern, 4, "add_fill_node");
  CHECK(p.memset.elementSize == 4);
  CHECK(p.memset.width == 10);
  CHECK(p.memset.value == 0x12345678u);
  const std::uint16_t half = 0xBEEF;
  p = fill_node_params(storage, 3, &half, 2, "add_fill_node");
  CHECK(p.memset.elementSize == 2);
  CHECK(p.memset.width == 3);
  CHECK(p.memset.value == 0xBEEF);
  const float one = 1.0f;  // 0x3f800000: bytes differ, 4 bytes
  p = fill_node_params(storage, 2, &one, 4, "add_fill_node");
  CHECK(p.memset.elementSize == 4);
  CHECK(p.memset.value == 0x3f800000u);
  const double same_bytes = [] {
    double d;
    std::memset(&d, 0x41, sizeof d);
    return d;
  }();
  p = fill_node_params(storage, 4, &same_bytes, 8, "add_fill_node");
  CHECK(p.memset.elementSize == 1);
  CHECK(p.memset.width == 32);
  CHECK(p.memset.value == 0x41);

  const double pi = 3.14159;
  require_cuda_error([&] { (void)fill_node_params(storage, 4, &pi, 8, "add_fill_node"); },
                     cudaErrorInvalidValue,
                     {"curt::add_fill_node(8-byte value)", "1-, 2- or 4-byte patterns",
                      "kernel node"});
  require_cuda_error([&] { (void)fill_node_params(storage + 1, 4, &pattern, 4, "add_fill_node"); },
                     cudaErrorInvalidValue, {"not aligned to its 4-byte elements"});
  require_cuda_error([&] { (void)fill_node_params(storage, 0, &pattern, 4, "add_fill_node"); },
                     cudaErrorInvalidValue, {"curt::add_fill_node(0 elements)"});
}

TEST_CASE("kernel nodes take the launch attributes CUDA 13.0 documents for graph nodes, and "
          "refuse the others saying what to use", "[graph]") {
  using curt::detail::kernel_node_attribute_allowed;
  const cudaLaunchAttributeID allowed[] = {
      cudaLaunchAttributeAccessPolicyWindow,       cudaLaunchAttributeCooperative,
      cudaLaunchAttributeClusterDimension,         cudaLaunchAttributeClusterSchedulingPolicyPreference,
      cudaLaunchAttributePriority,                 cudaLaunchAttributeMemSyncDomainMap,
      cudaLaunchAttributeMemSyncDomain,            cudaLaunchAttributePreferredClusterDimension,
      cudaLaunchAttributeDeviceUpdatableKernelNode, cudaLaunchAttributeNvlinkUtilCentricScheduling};
  for (cudaLaunchAttributeID id : allowed) {
    INFO("attribute " << int(id));
    CHECK(kernel_node_attribute_allowed(id));
  }
  const cudaLaunchAttributeID refused[] = {
      cudaLaunchAttributeSynchronizationPolicy, cudaLaunchAttributeProgrammaticStreamSerialization,
      cudaLaunchAttributeProgrammaticEvent, cudaLaunchAttributeLaunchCompletionEvent,
      cudaLaunchAttributePreferredSharedMemoryCarveout};
  for (cudaLaunchAttributeID id : refused) {
    INFO("attribute " << int(id));
    CHECK_FALSE(kernel_node_attribute_allowed(id));
    CHECK_THAT(curt::detail::kernel_node_attribute_refusal(id), ContainsSubstring("Nothing was added"));
  }

  // Every launch_config setter: the node-valid ones pass, the others are refused, each with its
  // advice, before CUDA is called (the graph is no graph).
  curt::graph_ref g = fake_graph();
  curt::launch_config base(dim3(4), dim3(128));
  curt::event_ref e = fake_event();
  auto refused_with = [&](const curt::launch_config& config, std::initializer_list<const char*> words) {
    require_cuda_error([&] { (void)curt::add_kernel_node(g, {}, config, kernel, nullptr, 1, 2.0f); },
                       cudaErrorInvalidValue, words);
  };
  refused_with(curt::launch_config(base).programmatic_stream_serialization(),
               {"curt::add_kernel_node", "programmatic stream serialization", "edge",
                "curt::programmatic_edge(producer)"});
  refused_with(curt::launch_config(base).programmatic_event(e),
               {"programmatic event", "curt::programmatic_edge(node)"});
  refused_with(curt::launch_config(base).launch_completion_event(e),
               {"launch-completion event", "curt::launch_completion_edge(node)"});
  refused_with(curt::launch_config(base).preferred_shared_memory_carveout(50),
               {"carveout", "curt::set_preferred_shared_memory_carveout"});
  refused_with(curt::launch_config(base).cluster_dims(2).programmatic_stream_serialization(),
               {"programmatic stream serialization"});

  auto passes = [&](const curt::launch_config& config) {
    CHECK_NOTHROW(curt::detail::check_kernel_node_config(config, "curt::add_kernel_node"));
  };
  passes(base);
  passes(curt::launch_config(base).cluster_dims(2).preferred_cluster_dims(4));
  passes(curt::launch_config(base).priority(-1).cooperative());
  passes(curt::launch_config(base).memory_sync_domain(cudaLaunchMemSyncDomainRemote));
  passes(curt::launch_config(base).access_policy_window(curt::access_policy_window{}));
  passes(curt::launch_config(base).programmatic_stream_serialization(false));  // asks for nothing
  require_cuda_error(
      [&] {
        curt::detail::check_kernel_node_config(
            curt::launch_config(base).dynamic_shared_memory(std::size_t(1) << 33),
            "curt::add_kernel_node");
      },
      cudaErrorInvalidValue, {"8589934592 B of dynamic shared memory", "32-bit"});
}

TEST_CASE("adding nodes refuses, before CUDA, owners that hold no graph, null dependencies, and "
          "sizes that cannot be", "[graph]") {
  curt::graph empty(curt::no_handle);
  curt::graph_ref g = fake_graph();
  curt::launch_config config(dim3(1), dim3(32));
  std::vector<float> a(4), b(4), shorter(3);
  require_cuda_error([&] { (void)curt::add_kernel_node(empty, {}, config, kernel, nullptr, 1, 2.0f); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_kernel_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_kernel_node(empty, {}, config, no_arguments); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_kernel_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_memcpy_node(empty, {}, a, b); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_memcpy_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_memset_node(empty, {}, a, 0); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_memset_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_fill_node(empty, {}, a, 1.0f); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_fill_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_host_node(empty, {}, [] {}); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_host_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_empty_node(empty, {}); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_empty_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_event_record_node(empty, {}, fake_event()); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_event_record_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_event_wait_node(empty, {}, fake_event()); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_event_wait_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_child_graph_node(empty, {}, fake_graph(1)); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_child_graph_node()", "empty", "holds no handle"});
  require_cuda_error(
      [&] {
        (void)curt::add_allocation_node<float>(empty, {}, curt::device::from_ordinal_unchecked(0), 4);
      },
      cudaErrorInvalidResourceHandle, {"curt::graph", "add_allocation_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::add_free_node(empty, {}, a.data()); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "add_free_node()", "empty", "holds no handle"});
  require_cuda_error(
      [&] { (void)curt::add_while_node(empty, {}, curt::conditional_handle(1)); },
      cudaErrorInvalidResourceHandle, {"curt::graph", "add_while_node()", "empty", "holds no handle"});
  require_cuda_error([&] { (void)curt::conditional_handle::create(empty); },
                     cudaErrorInvalidResourceHandle, {"curt::graph", "conditional_handle::create()", "empty", "holds no handle"});

  // A child that holds no graph is named as the child.
  curt::graph no_child(curt::no_handle);
  curt::graph moved_away = std::move(no_child);
  require_cuda_error([&] { (void)curt::add_child_graph_node(g, {}, no_child); },
                     cudaErrorInvalidResourceHandle, {"moved-from", "(the child graph)"});
  require_cuda_error([&] { (void)curt::add_child_graph_node(g, {}, std::move(no_child)); },
                     cudaErrorInvalidResourceHandle, {"moved-from", "(the child graph)"});

  // A null dependency, wherever it is in the list.
  curt::graph_node null;
  require_cuda_error([&] { (void)curt::add_empty_node(g, {fake_node(1), null}); },
                     cudaErrorInvalidValue, {"curt::add_empty_node", "dependency 1 is a null node"});
  require_cuda_error([&] { (void)curt::add_kernel_node(g, null, config, no_arguments); },
                     cudaErrorInvalidValue, {"curt::add_kernel_node", "dependency 0"});

  // Sizes.
  require_cuda_error([&] { (void)curt::add_memcpy_node(g, {}, a, shorter); }, cudaErrorInvalidValue,
                     {"curt::add_memcpy_node(destination of 4 elements, source of 3 elements)"});
  std::vector<float> none, none_either;
  require_cuda_error([&] { (void)curt::add_memcpy_node(g, {}, none, none_either); },
                     cudaErrorInvalidValue, {"curt::add_memcpy_node(0 elements)"});
  require_cuda_error([&] { (void)curt::add_memset_node(g, {}, none, 0); }, cudaErrorInvalidValue,
                     {"curt::add_memset_node(0 elements)"});
  std::vector<double> doubles(3);
  require_cuda_error([&] { (void)curt::add_fill_node(g, {}, doubles, 2.5); }, cudaErrorInvalidValue,
                     {"curt::add_fill_node(8-byte value)"});
  require_cuda_error(
      [&] {
        (void)curt::add_allocation_node<double>(g, {}, curt::device::from_ordinal_unchecked(0), 0);
      },
      cudaErrorInvalidValue, {"curt::add_allocation_node(0 elements of 8 bytes)", "at least one"});
  require_cuda_error(
      [&] {
        (void)curt::add_allocation_node<double>(g, {}, curt::device::from_ordinal_unchecked(0),
                                                std::size_t(-1) / 4);
      },
      cudaErrorInvalidValue, {"overflows"});
  require_cuda_error([&] { (void)curt::add_free_node(g, {}, nullptr); }, cudaErrorInvalidValue,
                     {"curt::add_free_node(null)"});
  require_cuda_error([&] { (void)curt::add_switch_node(g, {}, curt::conditional_handle(1), 0); },
                     cudaErrorInvalidValue, {"curt::add_switch_node(0 cases)", "at least one body"});
  (void)moved_away;
}

TEST_CASE("conditional handles and nodes: values, bodies by number, an ELSE body only for "
          "IF/ELSE", "[graph]") {
  static_assert(std::is_trivially_copyable_v<curt::conditional_handle>);
  static_assert(sizeof(curt::conditional_handle) == sizeof(cudaGraphConditionalHandle));
  static_assert(!std::is_convertible_v<cudaGraphConditionalHandle, curt::conditional_handle>);
  static_assert(static_cast<unsigned>(curt::conditional_flags::assign_default) ==
                cudaGraphCondAssignDefault);
  constexpr curt::conditional_handle h(42);
  static_assert(h.native() == 42);
  CHECK(h == curt::conditional_handle(42));

  cudaGraph_t bodies[2] = {fake_graph(5), fake_graph(6)};
  curt::conditional_node if_else(fake_node(1), cudaGraphCondTypeIf, h, bodies, 2);
  CHECK(if_else.body_count() == 2);
  CHECK(if_else.body(0) == curt::graph_ref(fake_graph(5)));
  CHECK(if_else.else_body() == curt::graph_ref(fake_graph(6)));
  CHECK(if_else.handle() == h);
  CHECK(if_else.kind() == cudaGraphCondTypeIf);
  CHECK(if_else.get() == fake_node(1));
  require_cuda_error([&] { (void)if_else.body(2); }, cudaErrorInvalidValue,
                     {"body(2)", "IF/ELSE node has 2 bodies, numbered from 0"});
  curt::conditional_node loop(fake_node(2), cudaGraphCondTypeWhile, h, bodies, 1);
  require_cuda_error([&] { (void)loop.else_body(); }, cudaErrorInvalidValue,
                     {"else_body()", "only an IF/ELSE node", "WHILE"});
  require_cuda_error([&] { (void)loop.body(1); }, cudaErrorInvalidValue, {"1 body,"});
  curt::conditional_node just_if(fake_node(3), cudaGraphCondTypeIf, h, bodies, 1);
  require_cuda_error([&] { (void)just_if.else_body(); }, cudaErrorInvalidValue, {"this is a IF node"});
  curt::conditional_node none;
  require_cuda_error([&] { (void)none.body(); }, cudaErrorInvalidValue, {"empty"});

  // Allowed in a body: kernel, empty, child graph, memset, memcpy, conditional.
  using curt::detail::allowed_in_conditional_body;
  CHECK(allowed_in_conditional_body(cudaGraphNodeTypeKernel));
  CHECK(allowed_in_conditional_body(cudaGraphNodeTypeConditional));
  CHECK(allowed_in_conditional_body(cudaGraphNodeTypeGraph));
  CHECK_FALSE(allowed_in_conditional_body(cudaGraphNodeTypeHost));
  CHECK_FALSE(allowed_in_conditional_body(cudaGraphNodeTypeWaitEvent));
  CHECK_FALSE(allowed_in_conditional_body(cudaGraphNodeTypeMemAlloc));

  // A refused instantiation of such a graph says why when there are conditional nodes.
  using curt::detail::describe_single_exec;
  CHECK(describe_single_exec({}).empty());
  std::string two = describe_single_exec({2, 0, 0});
  CHECK_THAT(two, ContainsSubstring("the graph holds 2 conditional node(s):"));
  CHECK_THAT(two, ContainsSubstring("only one executable graph at a time"));
  CHECK_THAT(two, ContainsSubstring("destroy it first"));
  CHECK_THAT(describe_single_exec({1, 3, 1}),
             ContainsSubstring("holds 1 conditional node(s), 3 memory allocation or free node(s), "
                               "1 device-updatable kernel node(s):"));
  CHECK_THAT(describe_single_exec({0, 2, 0}),
             ContainsSubstring("holds 2 memory allocation or free node(s):"));
}

TEST_CASE("allocation nodes give a typed range and views of it", "[graph]") {
  float storage[6] = {};
  curt::allocation_node<float> a(curt::graph_node(fake_node(1)), storage, 6);
  CHECK(a.data() == storage);
  CHECK(a.size() == 6);
  CHECK(a.size_bytes() == 24);
  CHECK(a.get() == fake_node(1));
  view<float> v = a;
  CHECK(v.data == storage);
  CHECK(v.size == 6);
  view<const float> cv = a;
  CHECK(cv.size == 6);
  static_assert(!std::is_convertible_v<curt::allocation_node<const float>, view<float>>);
  curt::node_dependencies after = a;  // a dependency like any node
  CHECK(after.nodes()[0] == fake_node(1));
}

TEST_CASE("updates of an executable graph's nodes refuse, before CUDA, attributes, null nodes "
          "and node types CUDA does not enable", "[graph]") {
  curt::graph_exec_ref exec = fake_exec();
  curt::graph_node node(fake_node(1)), null;
  std::vector<float> a(4), shorter(3);
  require_cuda_error(
      [&] {
        curt::update_kernel_node(exec, node, curt::launch_config(dim3(1), dim3(32)).priority(1),
                                 kernel, nullptr, 1, 2.0f);
      },
      cudaErrorInvalidValue,
      {"curt::update_kernel_node", "keeps the launch attributes", "Nothing was changed"});
  // An attribute that asks for nothing is no attribute.
  CHECK_NOTHROW(curt::detail::check_update_config(
      curt::launch_config().programmatic_stream_serialization(false), "curt::update_kernel_node"));
  require_cuda_error(
      [&] { curt::update_kernel_node(exec, null, curt::launch_config(), no_arguments); },
      cudaErrorInvalidValue, {"curt::update_kernel_node", "null"});
  require_cuda_error([&] { curt::update_memcpy_node(exec, node, a, shorter); }, cudaErrorInvalidValue,
                     {"curt::update_memcpy_node(destination of 4 elements, source of 3"});
  require_cuda_error([&] { curt::update_memset_node(exec, null, a, 0); }, cudaErrorInvalidValue,
                     {"curt::update_memset_node", "null"});
  require_cuda_error([&] { curt::update_fill_node(exec, null, a, 1.0f); }, cudaErrorInvalidValue,
                     {"curt::update_fill_node", "null"});
  require_cuda_error([&] { curt::update_host_node(exec, null, [] {}); }, cudaErrorInvalidValue,
                     {"curt::update_host_node", "null"});
  require_cuda_error([&] { curt::set_node_enabled(exec, null, false); }, cudaErrorInvalidValue,
                     {"curt::set_node_enabled", "null"});
  curt::graph_exec gone(curt::no_handle);
  require_cuda_error([&] { curt::set_node_enabled(gone, node, true); },
                     cudaErrorInvalidResourceHandle,
                     {"curt::graph_exec", "set_node_enabled()", "empty"});
  require_cuda_error([&] { curt::update_host_node(gone, node, [] {}); },
                     cudaErrorInvalidResourceHandle, {"curt::graph_exec", "update_host_node()"});

  using curt::detail::check_enable_type;
  CHECK_NOTHROW(check_enable_type(cudaGraphNodeTypeKernel, "curt::set_node_enabled"));
  CHECK_NOTHROW(check_enable_type(cudaGraphNodeTypeMemcpy, "curt::set_node_enabled"));
  CHECK_NOTHROW(check_enable_type(cudaGraphNodeTypeMemset, "curt::set_node_enabled"));
  const cudaGraphNodeType others[] = {cudaGraphNodeTypeHost,        cudaGraphNodeTypeGraph,
                                      cudaGraphNodeTypeEmpty,       cudaGraphNodeTypeWaitEvent,
                                      cudaGraphNodeTypeEventRecord, cudaGraphNodeTypeMemAlloc,
                                      cudaGraphNodeTypeMemFree,     cudaGraphNodeTypeConditional};
  for (cudaGraphNodeType type : others) {
    INFO("type " << curt::detail::node_type_name(type));
    require_cuda_error([&] { check_enable_type(type, "curt::set_node_enabled(false)"); },
                       cudaErrorInvalidValue,
                       {"curt::set_node_enabled(false)", "only kernel, memcpy and memset nodes",
                        curt::detail::node_type_name(type), "Nothing was changed"});
  }
}
