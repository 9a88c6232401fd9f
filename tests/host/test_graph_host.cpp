// Graphs without a device: instantiation flags (names, values, the pair CUDA refuses, refused
// before any call), the messages for refused instantiations and updates (every result code; a
// refusal with no node says so and names none), and owners that hold nothing (empty, moved-from,
// released graphs, executable graphs and capture scopes on such streams): every operation throws
// naming the state and the operation, before CUDA is called, and a value given to retain() on
// such a graph is left with the caller. Graph memory attributes other than a high watermark's
// reset are refused before CUDA, naming the attribute and the value; the attributes' values are
// the driver's.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_memory.hpp>

#include <cuda.h>  // CUgraphMem_attribute, checked against curt's values

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace {

using curt_test::require_cuda_error;

// A handle value no CUDA call ever sees: owners made from it are released before they die.
cudaGraph_t fake_graph() { return reinterpret_cast<cudaGraph_t>(std::uintptr_t(0x1000)); }
cudaGraphExec_t fake_exec() { return reinterpret_cast<cudaGraphExec_t>(std::uintptr_t(0x2000)); }

template <class Action>
void require_no_handle(const char* type, const char* word, const char* operation, Action&& action) {
  INFO(type << " in state " << word << ", operation " << operation);
  require_cuda_error(std::forward<Action>(action), cudaErrorInvalidResourceHandle,
                     {type, word, operation, "holds no handle"});
}

// Every operation of a graph_ref that holds no graph.
void require_every_graph_operation_fails(curt::graph_ref bad, const char* word) {
  const char* type = "curt::graph";
  CHECK_FALSE(bad.valid());
  require_no_handle(type, word, "get()", [&] { (void)bad.get(); });
  require_no_handle(type, word, "node_count()", [&] { (void)bad.node_count(); });
  require_no_handle(type, word, "nodes()", [&] { (void)bad.nodes(); });
  require_no_handle(type, word, "edges()", [&] { (void)bad.edges(); });
  require_no_handle(type, word, "clone()", [&] { (void)bad.clone(); });
  require_no_handle(type, word, "instantiate()", [&] { (void)bad.instantiate(); });
  require_no_handle(type, word, "instantiate_and_upload()", [&] {
    (void)bad.instantiate_and_upload(curt::stream_ref::legacy_default());
  });
  require_no_handle(type, word, "debug_dot_print()", [&] { bad.debug_dot_print("/tmp/x.dot"); });
  // retain() takes nothing from the caller when it cannot hold it.
  auto value = std::make_unique<int>(42);
  require_no_handle(type, word, "retain()", [&] { (void)bad.retain(std::move(value)); });
  REQUIRE(value != nullptr);
  CHECK(*value == 42);
  // An executable graph updated from it names the graph's state and the operation.
  curt::graph_exec exec = curt::graph_exec::from_native_handle(fake_exec());
  require_no_handle(type, word, "update() (the graph to update from)", [&] { exec.update(bad); });
  require_no_handle(type, word, "update() (the graph to update from)",
                    [&] { (void)exec.try_update(bad); });
  CHECK(exec.release() == fake_exec());  // never destroyed: it is no executable graph
}

void require_every_exec_operation_fails(curt::graph_exec_ref bad, const char* word) {
  const char* type = "curt::graph_exec";
  const curt::stream_ref s = curt::stream_ref::legacy_default();
  CHECK_FALSE(bad.valid());
  require_no_handle(type, word, "get()", [&] { (void)bad.get(); });
  require_no_handle(type, word, "launch()", [&] { bad.launch(s); });
  require_no_handle(type, word, "upload()", [&] { bad.upload(s); });
  require_no_handle(type, word, "update()", [&] { bad.update(fake_graph()); });
  require_no_handle(type, word, "update()", [&] { (void)bad.try_update(fake_graph()); });
  require_no_handle(type, word, "flags()", [&] { (void)bad.flags(); });
}

}  // namespace

TEST_CASE("instantiate flags are CUDA's, combine with |, and are tested with has_flag",
          "[graph]") {
  using curt::instantiate_flags;
  static_assert(static_cast<unsigned long long>(instantiate_flags::auto_free_on_launch) ==
                cudaGraphInstantiateFlagAutoFreeOnLaunch);
  static_assert(static_cast<unsigned long long>(instantiate_flags::device_launch) ==
                cudaGraphInstantiateFlagDeviceLaunch);
  static_assert(static_cast<unsigned long long>(instantiate_flags::use_node_priority) ==
                cudaGraphInstantiateFlagUseNodePriority);
  constexpr instantiate_flags both =
      instantiate_flags::device_launch | instantiate_flags::use_node_priority;
  static_assert(curt::has_flag(both, instantiate_flags::device_launch));
  static_assert(curt::has_flag(both, instantiate_flags::use_node_priority));
  static_assert(!curt::has_flag(both, instantiate_flags::auto_free_on_launch));
  static_assert(!curt::has_flag(instantiate_flags::none, instantiate_flags::device_launch));

  // Every combination but the refused pair passes unchanged.
  for (unsigned bits = 0; bits < 8; ++bits) {
    instantiate_flags flags = instantiate_flags::none;
    if (bits & 1) flags = flags | instantiate_flags::auto_free_on_launch;
    if (bits & 2) flags = flags | instantiate_flags::device_launch;
    if (bits & 4) flags = flags | instantiate_flags::use_node_priority;
    INFO("flags " << curt::detail::describe_instantiate_flags(static_cast<unsigned long long>(flags)));
    if ((bits & 3) == 3) {
      require_cuda_error([&] { (void)curt::detail::native_instantiate_flags(flags); },
                         cudaErrorInvalidValue,
                         {"curt::graph::instantiate(", "auto_free_on_launch | device_launch",
                          "device launch cannot free memory on launch", "nothing was called"});
    } else {
      CHECK(curt::detail::native_instantiate_flags(flags) == static_cast<unsigned long long>(flags));
    }
  }
}

TEST_CASE("device_launch with auto_free_on_launch is refused before CUDA, on a graph that is no "
          "graph",
          "[graph]") {
  // The handle is never handed to CUDA: the flags are checked first.
  curt::graph g = curt::graph::from_native_handle(fake_graph());
  require_cuda_error(
      [&] {
        (void)g.instantiate(curt::instantiate_flags::device_launch |
                            curt::instantiate_flags::auto_free_on_launch);
      },
      cudaErrorInvalidValue, {"device_launch", "auto_free_on_launch", "nothing was called"});
  CHECK(g.release() == fake_graph());
}

TEST_CASE("instantiation flags are described by name, unknown bits in hexadecimal", "[graph]") {
  using curt::detail::describe_instantiate_flags;
  CHECK(describe_instantiate_flags(0) == "none");
  CHECK(describe_instantiate_flags(cudaGraphInstantiateFlagUpload) == "upload");
  CHECK(describe_instantiate_flags(cudaGraphInstantiateFlagAutoFreeOnLaunch |
                                   cudaGraphInstantiateFlagUpload |
                                   cudaGraphInstantiateFlagDeviceLaunch |
                                   cudaGraphInstantiateFlagUseNodePriority) ==
        "auto_free_on_launch | upload | device_launch | use_node_priority");
  CHECK(describe_instantiate_flags(0x40) == "0x40");
  CHECK(describe_instantiate_flags(cudaGraphInstantiateFlagDeviceLaunch | 0x30) ==
        "device_launch | 0x30");
}

TEST_CASE("every instantiation result has its name and, when it failed, a reason", "[graph]") {
  using namespace curt::detail;
  const cudaGraphInstantiateResult failures[] = {
      cudaGraphInstantiateError, cudaGraphInstantiateInvalidStructure,
      cudaGraphInstantiateNodeOperationNotSupported,
      cudaGraphInstantiateMultipleDevicesNotSupported,
      cudaGraphInstantiateConditionalHandleUnused};
  auto describe = [](cudaGraphInstantiateResult r) {
    return describe_result(instantiate_results, r, "cudaGraphInstantiate");
  };
  CHECK(describe(cudaGraphInstantiateSuccess) == "cudaGraphInstantiateSuccess");
  for (cudaGraphInstantiateResult r : failures) {
    INFO("result " << int(r));
    std::string text = describe(r);
    CHECK(text.rfind("cudaGraphInstantiate", 0) == 0);
    std::size_t colon = text.find(": ");
    REQUIRE(colon != std::string::npos);
    CHECK(text.size() - colon > 20);  // a reason follows the name
  }
  CHECK_THAT(describe(cudaGraphInstantiateInvalidStructure), ContainsSubstring("cycle"));
  CHECK_THAT(describe(static_cast<cudaGraphInstantiateResult>(77)), ContainsSubstring("unknown"));
}

TEST_CASE("a refused update names its reason, and says so when the driver names no node",
          "[graph]") {
  using namespace curt::detail;
  const cudaGraphExecUpdateResult refusals[] = {
      cudaGraphExecUpdateError,
      cudaGraphExecUpdateErrorTopologyChanged,
      cudaGraphExecUpdateErrorNodeTypeChanged,
      cudaGraphExecUpdateErrorFunctionChanged,
      cudaGraphExecUpdateErrorParametersChanged,
      cudaGraphExecUpdateErrorNotSupported,
      cudaGraphExecUpdateErrorUnsupportedFunctionChange,
      cudaGraphExecUpdateErrorAttributesChanged};
  for (cudaGraphExecUpdateResult r : refusals) {
    INFO("result " << int(r));
    std::string text = describe_update_refusal(r, "", "");
    CHECK(text.rfind("cudaGraphExecUpdate", 0) == 0);
    std::size_t colon = text.find(": "), end = text.find("; the driver");
    REQUIRE(colon != std::string::npos);
    CHECK(end - colon > 20);  // a reason follows the name
    CHECK_THAT(text, ContainsSubstring("the driver names no node"));
    CHECK_THAT(text, !ContainsSubstring("the node in the new graph"));
  }
  // A node count that changed: CUDA names no node, and the message does not pretend to.
  std::string topology = describe_update_refusal(cudaGraphExecUpdateErrorTopologyChanged, "", "");
  CHECK_THAT(topology, ContainsSubstring("topology"));
  CHECK_THAT(topology, ContainsSubstring("instantiate it instead"));
  // A changed type names the node the driver gave; a mismatched dependency names both ends.
  std::string type = describe_update_refusal(cudaGraphExecUpdateErrorNodeTypeChanged,
                                             "memset node 0x1234", "");
  CHECK_THAT(type, ContainsSubstring("node's type"));
  CHECK_THAT(type, ContainsSubstring("the node in the new graph: memset node 0x1234"));
  CHECK_THAT(type, !ContainsSubstring("names no node"));
  std::string edge = describe_update_refusal(cudaGraphExecUpdateErrorTopologyChanged,
                                             "kernel node 0x2", "kernel node 0x1");
  CHECK_THAT(edge, ContainsSubstring("kernel node 0x2, whose dependency on kernel node 0x1 does "
                                     "not match"));
  CHECK_THAT(describe_result(update_results, 99, "cudaGraphExecUpdate"),
             ContainsSubstring("unknown"));
}

TEST_CASE("node types have readable names", "[graph]") {
  using curt::detail::node_type_name;
  CHECK(std::string(node_type_name(cudaGraphNodeTypeKernel)) == "kernel");
  CHECK(std::string(node_type_name(cudaGraphNodeTypeMemset)) == "memset");
  CHECK(std::string(node_type_name(cudaGraphNodeTypeMemAlloc)) == "memory allocation");
  CHECK(std::string(node_type_name(cudaGraphNodeTypeConditional)) == "conditional");
  CHECK(std::string(node_type_name(static_cast<cudaGraphNodeType>(0x40))) == "unknown");
}

TEST_CASE("the explanation of a cuda_error is read back from its message", "[graph]") {
  using curt::detail::explanation_of;
  curt::cuda_error full(cudaErrorInvalidValue, "f(x)", "because: of this", "a.hpp:1", "log text");
  CHECK(explanation_of(full) == "because: of this");
  curt::cuda_error no_log(cudaErrorInvalidValue, "f(x)", "why", "a.hpp:1");
  CHECK(explanation_of(no_log) == "why");
  curt::cuda_error bare(cudaErrorInvalidValue, "f(x)", "", "a.hpp:1", "log: with colon");
  CHECK(explanation_of(bare).empty());
  curt::cuda_error nothing(cudaErrorInvalidValue, "f(x)");
  CHECK(explanation_of(nothing).empty());
}

TEST_CASE("graphs and executable graphs are move-only owners over copyable refs", "[graph]") {
  static_assert(!std::is_copy_constructible_v<curt::graph>);
  static_assert(!std::is_copy_assignable_v<curt::graph>);
  static_assert(std::is_nothrow_move_constructible_v<curt::graph>);
  static_assert(std::is_nothrow_move_assignable_v<curt::graph>);
  static_assert(!std::is_copy_constructible_v<curt::graph_exec>);
  static_assert(std::is_nothrow_move_constructible_v<curt::graph_exec>);
  static_assert(std::is_nothrow_move_assignable_v<curt::graph_exec>);
  static_assert(std::is_trivially_copyable_v<curt::graph_ref>);
  static_assert(std::is_trivially_copyable_v<curt::graph_exec_ref>);
  static_assert(std::is_convertible_v<cudaGraph_t, curt::graph_ref>);
  static_assert(std::is_convertible_v<cudaGraphExec_t, curt::graph_exec_ref>);
  static_assert(!std::is_constructible_v<curt::graph_ref, int>);
  static_assert(!std::is_constructible_v<curt::graph_ref, std::nullptr_t>);
  static_assert(!std::is_constructible_v<curt::graph_exec_ref, int>);
  static_assert(!std::is_constructible_v<curt::graph_exec_ref, std::nullptr_t>);
  static_assert(!std::is_default_constructible_v<curt::graph>);
  static_assert(!std::is_copy_constructible_v<curt::capture_scope>);
  static_assert(!std::is_move_constructible_v<curt::capture_scope>);
  static_assert(!std::is_move_constructible_v<curt::capture_to_graph_scope>);
  static_assert(static_cast<int>(curt::capture_mode::global) == cudaStreamCaptureModeGlobal);
  static_assert(static_cast<int>(curt::capture_mode::thread_local_) ==
                cudaStreamCaptureModeThreadLocal);
  static_assert(static_cast<int>(curt::capture_mode::relaxed) == cudaStreamCaptureModeRelaxed);
  curt::graph_ref r = fake_graph();
  CHECK(r.get() == fake_graph());
  CHECK(r == curt::graph_ref(fake_graph()));
  curt::graph_exec_ref e = fake_exec();
  CHECK(e.get() == fake_exec());
}

TEST_CASE("empty, moved-from and released graphs fail every operation, saying which", "[graph]") {
  curt::graph empty(curt::no_handle);
  require_every_graph_operation_fails(empty, "empty");
  require_every_graph_operation_fails(curt::graph_ref(empty), "empty");

  curt::graph moved_to(std::move(empty));
  require_every_graph_operation_fails(empty, "moved-from");  // NOLINT: use after move, on purpose
  require_every_graph_operation_fails(moved_to, "empty");    // it took the empty state
  require_no_handle("curt::graph", "empty", "release()", [&] { (void)moved_to.release(); });

  curt::graph released = curt::graph::from_native_handle(fake_graph());
  CHECK(released.valid());
  CHECK(released.release() == fake_graph());
  require_every_graph_operation_fails(released, "released");

  curt::graph assigned(curt::no_handle);
  assigned = std::move(released);
  require_every_graph_operation_fails(released, "moved-from");  // NOLINT: use after move
  require_every_graph_operation_fails(assigned, "released");

  require_cuda_error([] { (void)curt::graph::from_native_handle(nullptr); },
                     cudaErrorInvalidResourceHandle, {"from_native_handle", "not null"});
}

TEST_CASE("empty, moved-from and released executable graphs fail every operation, saying which",
          "[graph]") {
  curt::graph_exec empty(curt::no_handle);
  require_every_exec_operation_fails(empty, "empty");
  curt::graph_exec moved_to(std::move(empty));
  require_every_exec_operation_fails(empty, "moved-from");  // NOLINT: use after move, on purpose
  curt::graph_exec released = curt::graph_exec::from_native_handle(fake_exec());
  CHECK(released.release() == fake_exec());
  require_every_exec_operation_fails(released, "released");
  require_cuda_error([] { (void)curt::graph_exec::from_native_handle(nullptr); },
                     cudaErrorInvalidResourceHandle, {"from_native_handle", "not null"});
}

TEST_CASE("capture on a stream owner that holds no stream throws before CUDA and runs nothing",
          "[graph]") {
  curt::stream empty(curt::no_handle);
  int runs = 0;
  require_cuda_error([&] { curt::capture_scope scope(empty); }, cudaErrorInvalidResourceHandle,
                     {"curt::stream", "empty"});
  require_cuda_error([&] { (void)curt::capture(empty, [&] { ++runs; }); },
                     cudaErrorInvalidResourceHandle, {"empty"});
  require_cuda_error([&] { (void)curt::capture_info(empty); }, cudaErrorInvalidResourceHandle,
                     {"empty"});
  curt::stream moved(std::move(empty));
  require_cuda_error([&] { (void)curt::capture(empty, [&](curt::stream_ref) { ++runs; }); },
                     cudaErrorInvalidResourceHandle, {"moved-from"});
  // Into a graph that holds none: refused before the capture begins.
  curt::graph none(curt::no_handle);
  require_cuda_error(
      [&] { curt::capture_to_graph(curt::stream_ref::per_thread_default(), none, [&] { ++runs; }); },
      cudaErrorInvalidResourceHandle, {"curt::graph", "empty"});
  CHECK(runs == 0);

  curt::stream_capture_info info;
  CHECK(info.status == curt::capture_status::none);
  CHECK_FALSE(info.graph.valid());
  CHECK(info.dependencies.empty());
}

TEST_CASE("graph memory: only a high watermark can be set, and only to 0, refused before CUDA",
          "[graph]") {
  const curt::device d = curt::device::from_ordinal_unchecked(0);  // never reached: refused first
  using attribute = curt::graph_memory_attribute;
  const std::uint64_t value = 1 + curt_test::rng()() % (std::uint64_t{1} << 40);
  const std::string text = std::to_string(value);
  for (attribute current : {attribute::used_current, attribute::reserved_current}) {
    const char* name = current == attribute::used_current ? "used_current" : "reserved_current";
    require_cuda_error([&] { curt::set_graph_memory(d, current, 0); }, cudaErrorInvalidValue,
                       {"curt::set_graph_memory(device 0", name, ", 0)",
                        "only the high watermarks", "nothing was called"});
    require_cuda_error([&] { curt::set_graph_memory(d, current, value); }, cudaErrorInvalidValue,
                       {name, text.c_str(), "only the high watermarks"});
  }
  for (attribute high : {attribute::used_high, attribute::reserved_high}) {
    const char* name = high == attribute::used_high ? "used_high" : "reserved_high";
    require_cuda_error([&] { curt::set_graph_memory(d, high, value); }, cudaErrorInvalidValue,
                       {"curt::set_graph_memory(device 0", name, text.c_str(),
                        "can only be reset, to 0", "nothing was called"});
  }
  STATIC_REQUIRE(static_cast<int>(attribute::used_current) == cudaGraphMemAttrUsedMemCurrent);
  STATIC_REQUIRE(static_cast<int>(attribute::reserved_high) == cudaGraphMemAttrReservedMemHigh);
  // The calls pass the value on to the driver's cuDevice*GraphMem* functions as it is.
  STATIC_REQUIRE(static_cast<int>(attribute::used_current) == CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
  STATIC_REQUIRE(static_cast<int>(attribute::used_high) == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
  STATIC_REQUIRE(static_cast<int>(attribute::reserved_current) ==
                 CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
  STATIC_REQUIRE(static_cast<int>(attribute::reserved_high) == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
}
