// Device graph launch and device-updatable kernel nodes without a device
// (include/curt/graph_device_launch.hpp, compiled here by the host compiler alone): the device
// handles are trivially copyable and as small as CUDA's; the kernel-node handle's type follows
// from the kernel; executable-graph flags without device_launch are refused with a message that
// names the fix; owners that hold nothing are refused, naming their state; and
// add_device_updatable_kernel_node refuses an empty graph, a null dependency and attributes kernel
// nodes do not take, all before CUDA is called; a copy of a graph holding device-updatable nodes
// is refused with the count and the remedy. A device_graph is never made from a temporary
// executable-graph owner (it would dangle).
#include <catch.hpp>
#include <expect.hpp>

#include <curt/graph.hpp>
#include <curt/graph_device_launch.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace {

using curt_test::require_cuda_error;

// Handle values no CUDA call ever sees: owners made from them are released before they die.
cudaGraph_t fake_graph() { return reinterpret_cast<cudaGraph_t>(std::uintptr_t(0x1000)); }

// A host function with a kernel's shape: the calls below refuse it before CUDA would see it.
void fake_kernel(const int*, int*, int, float) {}

using fake_node = curt::device_kernel_node_for<decltype(fake_kernel)>;

static_assert(std::is_trivially_copyable_v<curt::device_graph>);
static_assert(std::is_trivially_copyable_v<curt::device_node>);
static_assert(std::is_trivially_copyable_v<fake_node>);
static_assert(sizeof(curt::device_graph) == sizeof(cudaGraphExec_t));
static_assert(sizeof(curt::device_node) == sizeof(cudaGraphDeviceNode_t));
static_assert(std::is_same_v<fake_node, curt::device_kernel_node<const int*, int*, int, float>>);
static_assert(std::is_same_v<curt::device_kernel_node_for<decltype(&fake_kernel)>, fake_node>);
static_assert(std::is_same_v<curt::device_kernel_node_for<void (*const)(int)>,
                             curt::device_kernel_node<int>>);
static_assert(fake_node::parameter_count == 4);
static_assert(std::is_base_of_v<curt::device_node, fake_node>);
static_assert(std::is_base_of_v<curt::graph_node, curt::updatable_kernel_node<int>>);
// Made from an executable graph that outlives it, never from a temporary owner (it would dangle).
static_assert(std::is_constructible_v<curt::device_graph, curt::graph_exec&>);
static_assert(std::is_constructible_v<curt::device_graph, curt::graph_exec_ref>);
static_assert(!std::is_constructible_v<curt::device_graph, curt::graph_exec&&>);
static_assert(!std::is_constructible_v<curt::device_graph, curt::graph_exec&&, curt::stream_ref>);
static_assert(std::is_constructible_v<curt::device_graph, curt::graph_exec&, curt::stream_ref>);
// Nothing converts to a device_graph implicitly: the flag check is asked for by name.
static_assert(!std::is_convertible_v<curt::graph_exec_ref, curt::device_graph>);
static_assert(!std::is_convertible_v<cudaGraphDeviceNode_t, curt::device_node>);

}  // namespace

TEST_CASE("device handles start null, compare by handle, and give offsets only for parameters",
          "[graph][device-launch]") {
  constexpr curt::device_graph none;
  static_assert(!none.valid());
  static_assert(none.native() == nullptr);
  cudaGraphExec_t raw = reinterpret_cast<cudaGraphExec_t>(std::uintptr_t(0x2000));
  curt::device_graph adopted = curt::device_graph::from_native_handle(raw);
  CHECK(adopted.valid());
  CHECK(adopted.native() == raw);
  CHECK(adopted != none);
  CHECK(adopted == curt::device_graph::from_native_handle(raw));

  constexpr curt::device_node no_node;
  static_assert(!no_node.valid());
  cudaGraphDeviceNode_t raw_node = reinterpret_cast<cudaGraphDeviceNode_t>(std::uintptr_t(0x3000));
  CHECK(curt::device_node(raw_node).native() == raw_node);
  CHECK(curt::device_node(raw_node) != no_node);

  fake_node typed;
  CHECK_FALSE(typed.valid());
  for (std::size_t i = 0; i < 6; ++i) CHECK(typed.argument_offset(i) == 0);
}

TEST_CASE("executable-graph flags without device_launch are refused, naming the flag to use",
          "[graph][device-launch][api-error]") {
  using curt::detail::require_device_launch_flags;
  for (unsigned long long flags :
       {0ull, static_cast<unsigned long long>(cudaGraphInstantiateFlagAutoFreeOnLaunch),
        static_cast<unsigned long long>(cudaGraphInstantiateFlagUseNodePriority),
        static_cast<unsigned long long>(cudaGraphInstantiateFlagUpload |
                                        cudaGraphInstantiateFlagUseNodePriority)}) {
    std::string named = curt::detail::describe_instantiate_flags(flags);
    INFO("flags " << named);
    require_cuda_error([&] { require_device_launch_flags(flags, "curt::device_graph(exec)"); },
                       cudaErrorInvalidValue,
                       {"curt::device_graph(exec)", "not instantiated for device launch",
                        ("its flags: " + named + ")").c_str(),
                        "curt::instantiate_flags::device_launch"});
  }
  for (unsigned long long flags :
       {static_cast<unsigned long long>(cudaGraphInstantiateFlagDeviceLaunch),
        static_cast<unsigned long long>(cudaGraphInstantiateFlagDeviceLaunch |
                                        cudaGraphInstantiateFlagUseNodePriority |
                                        cudaGraphInstantiateFlagUpload)}) {
    INFO("flags " << curt::detail::describe_instantiate_flags(flags));
    CHECK_NOTHROW(require_device_launch_flags(flags, "curt::device_graph(exec)"));
  }
}

TEST_CASE("a device_graph of an executable graph owner that holds none is refused, naming its "
          "state",
          "[graph][device-launch][api-error]") {
  curt::graph_exec empty(curt::no_handle);
  require_cuda_error([&] { (void)curt::device_graph(empty); }, cudaErrorInvalidResourceHandle,
                     {"curt::graph_exec::device_graph()", "empty", "holds no handle"});
  curt::graph_exec moved(curt::no_handle);
  curt::graph_exec taker = std::move(moved);
  require_cuda_error(
      [&] { (void)curt::device_graph(moved, curt::stream_ref::legacy_default()); },
      cudaErrorInvalidResourceHandle, {"curt::graph_exec::device_graph()", "moved-from"});
}

TEST_CASE("add_device_updatable_kernel_node refuses an empty graph, a null dependency and "
          "attributes kernel nodes do not take, before CUDA is called",
          "[graph][device-update][api-error]") {
  int in = 1, out = 0;
  const curt::launch_config config(dim3(1), dim3(32));
  curt::graph empty(curt::no_handle);
  require_cuda_error(
      [&] {
        (void)curt::add_device_updatable_kernel_node(empty, {}, config, fake_kernel,
                                                     static_cast<const int*>(&in), &out, 1, 2.0f);
      },
      cudaErrorInvalidResourceHandle,
      {"curt::graph::add_device_updatable_kernel_node()", "empty"});

  // The handle is never handed to CUDA: the dependencies and the configuration are checked first.
  curt::graph g = curt::graph::from_native_handle(fake_graph());
  require_cuda_error(
      [&] {
        (void)curt::add_device_updatable_kernel_node(g, {curt::graph_node()}, config, fake_kernel,
                                                     static_cast<const int*>(&in), &out, 1, 2.0f);
      },
      cudaErrorInvalidValue,
      {"curt::add_device_updatable_kernel_node", "dependency 0 is a null node",
       "Nothing was added"});
  curt::launch_config serialized = config;
  serialized.programmatic_stream_serialization(true);
  require_cuda_error(
      [&] {
        (void)curt::add_device_updatable_kernel_node(g, {}, serialized, fake_kernel,
                                                     static_cast<const int*>(&in), &out, 1, 2);
      },
      cudaErrorInvalidValue,
      {"curt::add_device_updatable_kernel_node", "curt::programmatic_edge", "Nothing was added"});
  CHECK(g.release() == fake_graph());
}

TEST_CASE("a parameter whose size differs between host and device is explained",
          "[graph][device-update]") {
  std::string text = curt::detail::describe_parameter_size_mismatch(2, 16, 12);
  CHECK_THAT(text, ContainsSubstring("parameter 2 takes 16 bytes on the device"));
  CHECK_THAT(text, ContainsSubstring("its C++ type has 12"));
  CHECK_THAT(text, ContainsSubstring("Nothing was added"));
}

TEST_CASE("a copy of a graph holding device-updatable nodes is refused, saying why and what to do",
          "[graph][device-update][api-error]") {
  using curt::detail::refuse_device_updatable_count;
  CHECK_NOTHROW(refuse_device_updatable_count(0, "curt::graph::clone()", "do this instead"));
  for (std::size_t count : {std::size_t(1), std::size_t(3)}) {
    INFO(count << " device-updatable node(s)");
    const std::string held =
        "the graph holds " + std::to_string(count) + " device-updatable kernel node(s)";
    require_cuda_error(
        [&] {
          refuse_device_updatable_count(count, "curt::add_child_graph_node(child graph, copied)",
                                       "move it in instead");
        },
        cudaErrorNotSupported,
        {"curt::add_child_graph_node(child graph, copied)", held.c_str(),
         "a copy's nodes are not the ones their device handles "
         "(updatable_kernel_node::device_handle()) name",
         "never reach the copy; move it in instead. Nothing was copied"});
  }
}
