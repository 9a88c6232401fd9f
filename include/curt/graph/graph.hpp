// curt/graph/graph.hpp: CUDA graphs (owning curt::graph and curt::graph_exec, graph_ref and
// graph_exec_ref): queries, DOT output, instantiation, launch, update, and host values tied to a
// graph (retain). Graphs are made by capture (graph/capture.hpp) or node by node (nodes.hpp).
//
//   curt::graph g = curt::capture(stream, [&] { curt::launch(stream, config, kernel, x, n); });
//   curt::graph_exec exec = g.instantiate();
//   exec.launch(stream);                      // costs what cuGraphLaunch costs
//   exec.update(curt::capture(stream, ...));  // same topology, new arguments
//
// A graph belongs to no device: calls that need some context run, on a thread with none, in an
// active primary context pushed for the call. Launch and upload run in the stream's context (the
// driver's), destruction goes to the driver. Edge queries pass edge data (PDL edges need it).
#pragma once

#include <curt/core/entries.hpp>
#include <curt/core/flags.hpp>
#include <curt/execution/stream.hpp>
#include <curt/graph/node_kinds.hpp>

#include <memory>
#include <vector>

namespace curt::detail::driver_fn {
CURT_DETAIL_DRIVER_TYPE(cuGraphDestroy_v10000, cudaGraph_t graph);
CURT_DETAIL_DRIVER_TYPE(cuGraphExecDestroy_v10000, cudaGraphExec_t exec);
CURT_DETAIL_DRIVER_TYPE(cuGraphLaunch_v10000, cudaGraphExec_t exec, CUstream stream);
CURT_DETAIL_DRIVER_TYPE(cuGraphUpload_v11010, cudaGraphExec_t exec, CUstream stream);
}  // namespace curt::detail::driver_fn

namespace curt {

/// Named instantiation flags; combine with |. (An upload takes a stream: instantiate_and_upload.)
enum class instantiate_flags : unsigned long long {
  none = 0,
  /// Frees what the previous launch allocated and left (else such a launch is refused).
  auto_free_on_launch = cudaGraphInstantiateFlagAutoFreeOnLaunch,
  device_launch = cudaGraphInstantiateFlagDeviceLaunch,  ///< launchable from kernels too
  use_node_priority = cudaGraphInstantiateFlagUseNodePriority,  ///< kernel nodes' own priorities
};
CURT_DETAIL_FLAGS(instantiate_flags);
/// What graph_ref::debug_dot_print writes beyond topology, node types and kernel names.
enum class dot_flags : unsigned {
  none = 0,
  verbose = cudaGraphDebugDotFlagsVerbose,  ///< everything below
  kernel_node_params = cudaGraphDebugDotFlagsKernelNodeParams,
  memcpy_node_params = cudaGraphDebugDotFlagsMemcpyNodeParams,
  memset_node_params = cudaGraphDebugDotFlagsMemsetNodeParams,
  host_node_params = cudaGraphDebugDotFlagsHostNodeParams,
  event_node_params = cudaGraphDebugDotFlagsEventNodeParams,
  kernel_node_attributes = cudaGraphDebugDotFlagsKernelNodeAttributes,
  handles = cudaGraphDebugDotFlagsHandles,
  conditional_node_params = cudaGraphDebugDotFlagsConditionalNodeParams,
};
CURT_DETAIL_FLAGS(dot_flags);
/// An edge: `to` depends on `from`; `data` says how (all zero: full completion).
struct graph_edge {
  cudaGraphNode_t from = nullptr;  ///< the node depended on
  cudaGraphNode_t to = nullptr;    ///< the node that waits for `from`
  cudaGraphEdgeData data{};        ///< ports and dependency type (cudaGraphEdgeData)
};
/// One end of an edge still to be made: work added next depends on `node`, as `data` says.
struct graph_dependency {
  cudaGraphNode_t node = nullptr;  ///< the node depended on
  cudaGraphEdgeData data{};        ///< ports and type of the edge; all zero: a plain edge
};
/// What cudaGraphExecUpdate answered (graph_exec_ref::try_update). True when the update was made.
struct graph_update_result {
  /// cudaGraphExecUpdateSuccess (the result is then true), or why the update was refused. @{
  cudaGraphExecUpdateResult result = cudaGraphExecUpdateSuccess;
  cudaGraphNode_t node = nullptr;       ///< the offending node of the new graph; often null
  cudaGraphNode_t from_node = nullptr;  ///< for a mismatched dependency, where it comes from
  explicit operator bool() const noexcept { return result == cudaGraphExecUpdateSuccess; }  ///@}
};
class graph;
class graph_exec;
namespace detail {
// "auto_free_on_launch | device_launch", "none"; unknown bits in hexadecimal.
CURT_COLD inline std::string describe_instantiate_flags(unsigned long long flags) {
  static constexpr const char* names[] = {"auto_free_on_launch", "upload", "device_launch",
                                          "use_node_priority"};  // bits 1, 2, 4, 8
  std::string text;
  for (unsigned bit = 0; bit < 4; ++bit)
    if (flags & (1ull << bit)) text += fmt("%s%s", text.empty() ? "" : " | ", names[bit]);
  if (flags & ~0xfull) text += fmt("%s0x%llx", text.empty() ? "" : " | ", flags & ~0xfull);
  return text.empty() ? "none" : text;
}
/// The native flags; refuses, before CUDA is called, the pair CUDA refuses.
inline unsigned long long native_instantiate_flags(instantiate_flags flags) {
  const auto native = static_cast<unsigned long long>(flags);
  if (has_flag(flags, instantiate_flags::device_launch) &&
      has_flag(flags, instantiate_flags::auto_free_on_launch))
    raise(cudaErrorInvalidValue,
          fmt("curt::graph::instantiate(%s)", describe_instantiate_flags(native).c_str()),
          "a graph instantiated for device launch cannot free memory on launch: CUDA refuses "
          "device_launch with auto_free_on_launch; drop one of them (nothing was called)",
          __FILE__, __LINE__);
  return native;
}
// Runs `describe`, which asks CUDA, in context_scope(where...); value-initialized if it fails.
template <class Describe, class... Where>
CURT_COLD auto diagnose(Describe&& describe, const Where&... where) -> decltype(describe()) {
  decltype(describe()) result{};
  try {
    context_scope in(where...);
    result = describe();
  } catch (...) {
  }
  (void)cudaGetLastError();
  return result;
}
// Runs a CUDA `call` in context_scope(where...); returns its status, to explain and throw after it.
template <class Call, class... Where>
cudaError_t call_in(const Call& call, const Where&... where) {
  context_scope in(where...);
  return call();
}
// "memset node 0x...". Needs a context.
CURT_COLD inline std::string describe_node(cudaGraphNode_t node) {
  cudaGraphNodeType type = cudaGraphNodeTypeCount;
  if (node && cudaGraphNodeGetType(node, &type) != cudaSuccess) type = cudaGraphNodeTypeCount;
  return node ? fmt("%s node %p", node_type_name(type), static_cast<void*>(node)) : std::string();
}
// Counts single_exec_nodes in `graph` and its child graphs; `found`: `node` is one of them.
CURT_COLD inline single_exec_nodes census(cudaGraph_t graph, cudaGraphNode_t node = nullptr,
                                          bool* found = nullptr, single_exec_nodes held = {},
                                          int depth = 0) {
  std::size_t n = 0;
  entries<cudaGraphNode_t> nodes;
  if (depth < 16 && cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess) nodes.resize(n);
  if (n && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) nodes.clear();
  for (cudaGraphNode_t each : nodes) {
    cudaGraphNodeType type{};
    cudaLaunchAttributeValue value{};
    cudaGraph_t child = nullptr;
    if (cudaGraphNodeGetType(each, &type) != cudaSuccess) continue;
    if (found && each == node) *found = true;
    held.conditional += type == cudaGraphNodeTypeConditional;
    held.memory += type == cudaGraphNodeTypeMemAlloc || type == cudaGraphNodeTypeMemFree;
    if (type == cudaGraphNodeTypeKernel &&
        cudaGraphKernelNodeGetAttribute(each, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                        &value) == cudaSuccess)
      held.device_updatable += value.deviceUpdatableKernelNode.deviceUpdatable != 0;
    if (type == cudaGraphNodeTypeGraph &&
        cudaGraphChildGraphNodeGetGraph(each, &child) == cudaSuccess)
      held = census(child, node, found, held, depth + 1);
  }
  (void)cudaGetLastError();
  return held;
}
/// Set once curt made a device-updatable node: copies of graphs are checked from then on.
inline atomic<bool>& device_updatable_nodes_made() noexcept {
  static atomic<bool> made{false};
  return made;
}
/// refuse_device_updatable_count for `graph`, once curt made such a node. Needs a context.
inline void refuse_device_updatable_copy(cudaGraph_t graph, const char* operation,
                                         const char* remedy) {
  if (CURT_LIKELY(!device_updatable_nodes_made().load(order::relaxed))) return;
  refuse_device_updatable_count(census(graph).device_updatable, operation, remedy);
}
// The base of handles kernels take by value (device_graph, device_node, conditional_handle).
template <class Native>
class device_value {
 public:
  CURT_HOST_DEVICE constexpr Native native() const noexcept { return native_; }
  friend CURT_HOST_DEVICE constexpr bool operator==(device_value a, device_value b) noexcept {
    return a.native_ == b.native_;
  }
  friend CURT_HOST_DEVICE constexpr bool operator!=(device_value a, device_value b) noexcept {
    return a.native_ != b.native_;
  }

 protected:
  constexpr device_value() noexcept = default;
  CURT_HOST_DEVICE constexpr explicit device_value(Native native) noexcept : native_(native) {}
  Native native_{};
};
struct graph_access;
struct graph_traits;
struct graph_exec_traits;
struct exec_state {
  mutable bool updated = false;  // updated as a whole through this owner (see update_host_node)
  mutable host_node_callable* current = nullptr;  // host nodes' replacements (update_host_node)
  // Hands the current replacements to their graph's callables, which the launches still running
  // keep alive: before the owner ends, and before a whole update drops that graph's references.
  void keep_in_graph() const noexcept {
    for (host_node_callable* c = current; c; c = c->next_current) c->original->adopt(c->task);
  }
  // A whole update replaces the executable graph's references to its graph's callables, so the
  // originals of the replacements are kept alive across it (user object references); only an
  // update that succeeds hands the replacements to them (a refused one leaves them here).
  template <class Update>
  graph_update_result whole_update(Update update) const {
    host_node_callable* const list = current;
    context_scope in;  // the runtime's user-object calls wake no primary context
    if (list) in.enter(any_context);
    host_node_callable* c = list;
    auto release = [list](host_node_callable* end) noexcept {
      for (host_node_callable *r = list, *next = nullptr; r != end; r = next) {
        next = r->next_current;  // before the release, which may free r with its original
        report(cudaUserObjectRelease(r->original->object, 1), "cudaUserObjectRelease", __FILE__,
               __LINE__);
      }
    };
    try {
      for (; c; c = c->next_current)
        check(cudaUserObjectRetain(c->original->object, 1), "cudaUserObjectRetain", __FILE__,
              __LINE__);
      graph_update_result result = update();
      if (result) {
        keep_in_graph();
        current = nullptr;
        updated = true;
      }
      release(nullptr);
      return result;
    } catch (...) {
      release(c);
      throw;
    }
  }
};
}  // namespace detail

/// The type of a node (cudaGraphNodeGetType).
inline cudaGraphNodeType node_type(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  detail::context_scope in(detail::any_context);
  detail::check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType", {"node"}, __FILE__,
                __LINE__);
  return type;
}
/// A non-owning graph handle.
class graph_ref {
 public:
  /// A raw graph, neither owned nor checked (implicit, like stream_ref's from cudaStream_t).
  graph_ref(cudaGraph_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit by design
  graph_ref(int) = delete;             ///< 0 is not a graph
  graph_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The native handle; get() throws and valid() is false for a ref of an owner holding none. @{
  cudaGraph_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///@}

  inline graph clone() const;  ///< A copy; refused for memory, conditional, device-updatable nodes.
  /// An executable graph; a failure names the result and the node the driver blames, if any.
  inline graph_exec instantiate(instantiate_flags flags = instantiate_flags::none) const;
  /// The same, uploaded on `upload_stream` so that the first launch does not pay for it.
  inline graph_exec instantiate_and_upload(stream_ref upload_stream,
                                           instantiate_flags flags = instantiate_flags::none) const;

  /// How many nodes the graph holds, and the nodes themselves (cudaGraphGetNodes). @{
  std::size_t node_count() const { return list_nodes(native("node_count()"), nullptr); }
  std::vector<cudaGraphNode_t> nodes() const {
    cudaGraph_t g = native("nodes()");
    std::vector<cudaGraphNode_t> result(list_nodes(g, nullptr));
    (void)list_nodes(g, &result);  // the same count: a graph is not changed during a query
    return result;
  }  ///@}
  /// Every edge, with its data (cudaGraphGetEdges).
  std::vector<graph_edge> edges() const {
    cudaGraph_t g = native("edges()");
    detail::context_scope in(detail::any_context);
    std::size_t n = 0;
    detail::check(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n), "cudaGraphGetEdges(graph)",
                  __FILE__, __LINE__);
    detail::entries<cudaGraphNode_t> from(n), to(n);
    detail::entries<cudaGraphEdgeData> data(n);
    if (n)
      detail::check(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &n),
                    "cudaGraphGetEdges(graph, with edge data)", __FILE__, __LINE__);
    std::vector<graph_edge> result(n);
    for (std::size_t i = 0; i < n; ++i) result[i] = graph_edge{from[i], to[i], data[i]};
    return result;
  }
  /// Writes the graph in Graphviz's DOT language to `path` (cudaGraphDebugDotPrint).
  void debug_dot_print(const std::string& path, dot_flags flags = dot_flags::none) const {
    cudaGraph_t g = native("debug_dot_print()");
    detail::context_scope in(detail::any_context);
    cudaError_t status = cudaGraphDebugDotPrint(g, path.c_str(), static_cast<unsigned>(flags));
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(make_error_code(status),
                          detail::fmt("cudaGraphDebugDotPrint(graph, \"%s\", flags %u)",
                                      path.c_str(), static_cast<unsigned>(flags)),
                          __FILE__, __LINE__,
                          "could not write the DOT file (does its directory exist, and may this "
                          "process write there?)");
  }
  /// Ties `value` to the graph, its clones and executable graphs, after which it is destroyed on
  /// a user thread (it may own CUDA resources). Returns the graph's copy, for its work to use.
  template <class T>
  std::decay_t<T>& retain(T&& value) const {
    using value_type = std::decay_t<T>;
    static_assert(!std::is_array_v<std::remove_reference_t<T>>,
                  "curt::graph::retain takes a value, not an array: wrap it (std::array)");
    static_assert(std::is_constructible_v<value_type, T&&>,
                  "curt::graph::retain owns what it is given: move a move-only value in "
                  "(std::move), or pass one that can be copied");
    cudaGraph_t g = native("retain()");
    auto owned = std::make_unique<detail::host_task<value_type>>(std::forward<T>(value), 0);
    detail::context_scope in(detail::any_context);
    return detail::retain_in_graph(g, std::move(owned)).function;
  }
  /// Same graph handle. Refs of owners that hold none compare by their state. @{
  friend bool operator==(graph_ref a, graph_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(graph_ref a, graph_ref b) noexcept { return a.handle_ != b.handle_; }
  ///@}
 protected:
  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaGraph_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::graph", operation);
  }
  cudaGraph_t handle_;  ///< the graph; a state (core/handle.hpp) for an owner that holds none

 private:
  friend class graph_exec_ref;  // update() names its operation on the graph
  friend struct detail::graph_access;
  static std::size_t list_nodes(cudaGraph_t g, std::vector<cudaGraphNode_t>* into) {
    std::size_t n = into ? into->size() : 0;
    detail::context_scope in(detail::any_context);
    detail::check(cudaGraphGetNodes(g, n ? into->data() : nullptr, &n), "cudaGraphGetNodes(graph)",
                  __FILE__, __LINE__);
    return n;
  }
  inline graph_exec instantiate_with(instantiate_flags flags, cudaStream_t upload,
                                     const char* operation) const;
};
/// An owning graph. Move-only; destroying it leaves its executable graphs working.
class graph : public detail::unique_handle<graph_ref, detail::graph_traits> {
  using base = detail::unique_handle<graph_ref, detail::graph_traits>;

 public:
  /// A new, empty graph (cudaGraphCreate).
  static graph create() {
    cudaGraph_t created = nullptr;
    detail::context_scope in(detail::any_context);
    detail::check(cudaGraphCreate(&created, 0), "cudaGraphCreate", __FILE__, __LINE__);
    return graph(created);
  }
  explicit graph(no_handle_t) noexcept : base(no_handle) {}  ///< An empty owner: every use throws.
  /// Takes ownership of a native graph (not null).
  static graph from_native_handle(cudaGraph_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::graph::from_native_handle",
                    "only a created graph can be owned, not null", __FILE__, __LINE__);
    return graph(handle);
  }

 private:
  explicit graph(cudaGraph_t handle) noexcept : base(handle) {}
};
struct detail::graph_traits {
  static void destroy(graph_ref& g, no_state&) {
    report(CURT_DETAIL_DRIVER_FUNCTION(cuGraphDestroy, 10000)(g.get()), "cuGraphDestroy(graph)",
           __FILE__, __LINE__);
  }
};
/// A non-owning executable-graph handle.
class graph_exec_ref {
 public:
  /// A raw executable graph, neither owned nor checked (implicit, like graph_ref's).
  graph_exec_ref(cudaGraphExec_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit
  graph_exec_ref(int) = delete;             ///< 0 is not an executable graph
  graph_exec_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The native handle; get() throws and valid() is false for a ref of an owner holding none. @{
  cudaGraphExec_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///@}

  /// Runs the graph on `stream`, after the work before it there and the graph's earlier launches.
  void launch(stream_ref stream) const {
    cudaGraphExec_t e = native("launch()");
    cudaStream_t s = stream.get();
    int result = detail::on_stream(
        s, [&] { return CURT_DETAIL_DRIVER_FUNCTION(cuGraphLaunch, 10000)(e, s); });
    if (CURT_UNLIKELY(result != 0)) throw_launch_error(result, e, s, "cuGraphLaunch(exec, stream)");
  }
  /// Uploads the graph's work on `stream` without running it, so that the first launch is sooner.
  void upload(stream_ref stream) const {
    cudaGraphExec_t e = native("upload()");
    cudaStream_t s = stream.get();
    int result = detail::on_stream(
        s, [&] { return CURT_DETAIL_DRIVER_FUNCTION(cuGraphUpload, 11010)(e, s); });
    if (CURT_UNLIKELY(result != 0)) throw_launch_error(result, e, s, "cuGraphUpload(exec, stream)");
  }
  /// Takes the parameters of `from`, a graph of the same topology, for later launches; a refusal
  /// (which leaves it unchanged) names the reason and the node the driver names.
  void update(graph_ref from) const {
    graph_update_result result = try_update(from);
    if (CURT_UNLIKELY(!result)) throw_update_refused(result, from.get());
  }
  /// As update(), but a refused update comes back: if (!e.try_update(g)) e = g.instantiate();
  graph_update_result try_update(graph_ref from) const {
    cudaGraphExec_t e = native("update()");
    cudaGraph_t g = from.native("update() (the graph to update from)");
    cudaGraphExecUpdateResultInfo info{};
    const cudaError_t status =
        detail::call_in([&] { return cudaGraphExecUpdate(e, g, &info); }, detail::any_context);
    if (status == cudaErrorGraphExecUpdateFailure) {
      (void)cudaGetLastError();
      graph_update_result refused{info.result, info.errorNode, info.errorFromNode};
      if (refused.result == cudaGraphExecUpdateSuccess) refused.result = cudaGraphExecUpdateError;
      return refused;
    }
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(make_error_code(status), "cudaGraphExecUpdate(exec, graph)", __FILE__,
                          __LINE__, [&] { return device_updatable_note(g); });
    return {};
  }
  /// The flags as CUDA 13.0 reports them (not use_node_priority, nor the upload).
  instantiate_flags flags() const {
    cudaGraphExec_t e = native("flags()");
    unsigned long long value = 0;
    detail::context_scope in(detail::any_context);
    detail::check(cudaGraphExecGetFlags(e, &value), "cudaGraphExecGetFlags(exec)", __FILE__,
                  __LINE__);
    return static_cast<instantiate_flags>(value);
  }
  /// Same executable-graph handle. Refs of owners that hold none compare by their state. @{
  friend bool operator==(graph_exec_ref a, graph_exec_ref b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(graph_exec_ref a, graph_exec_ref b) noexcept {
    return a.handle_ != b.handle_;
  }  ///@}

 protected:
  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaGraphExec_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::graph_exec", operation);
  }
  cudaGraphExec_t handle_;  ///< the executable graph; a state for an owner that holds none

 private:
  friend struct detail::graph_access;
  CURT_COLD static std::string device_updatable_note(cudaGraph_t from) {
    std::size_t updatable = detail::diagnose(
        [&] { return detail::census(from).device_updatable; }, detail::any_context);
    if (!updatable) return {};
    return detail::fmt("the graph updated from holds %zu device-updatable kernel node(s): CUDA "
                       "updates no executable graph from such a graph, nor one instantiated from "
                       "one (instantiate anew)", updatable);
  }
  [[noreturn]] CURT_COLD static void throw_update_refused(const graph_update_result& refused,
                                                         cudaGraph_t from) {
    auto named = [](cudaGraphNode_t node) {
      return detail::diagnose([&] { return detail::describe_node(node); }, detail::any_context);
    };
    auto why = [&] {
      std::string text = detail::describe_update_refusal(refused.result, named(refused.node),
                                                         named(refused.from_node));
      std::string note = device_updatable_note(from);
      return note.empty() ? text : detail::fmt("%s; %s", text.c_str(), note.c_str());
    };
    detail::throw_error(make_error_code(cudaErrorGraphExecUpdateFailure),
                        "cudaGraphExecUpdate(exec, graph)", __FILE__, __LINE__, why);
  }
  // Explained in the stream's context: any other could be a context the program never used.
  [[noreturn]] CURT_COLD static void throw_launch_error(int result, cudaGraphExec_t e,
                                                       cudaStream_t stream, const char* call) {
    auto freeing = [&] {  // instantiated with auto_free_on_launch (or unknown)
      unsigned long long flags = 0;
      return cudaGraphExecGetFlags(e, &flags) != cudaSuccess ||
             (flags & cudaGraphInstantiateFlagAutoFreeOnLaunch) != 0;
    };
    auto why = [&] {
      if (result != cudaErrorInvalidValue || detail::diagnose(freeing, detail::for_stream, stream))
        return "";
      return "an executable graph whose last launch left memory allocated (allocation nodes "
             "without a free) cannot run again until that memory is freed (cudaFreeAsync), "
             "unless it was instantiated with instantiate_flags::auto_free_on_launch";
    };
    detail::throw_error(make_error_code(static_cast<cudaError_t>(result)), call, __FILE__, __LINE__,
                        why);
  }
};
/// An owning executable graph (destroying it while a launch runs is fine).
class graph_exec
    : public detail::unique_handle<graph_exec_ref, detail::graph_exec_traits, detail::exec_state> {
  using base = detail::unique_handle<graph_exec_ref, detail::graph_exec_traits, detail::exec_state>;

 public:
  explicit graph_exec(no_handle_t) noexcept : base(no_handle) {}  ///< An empty owner: uses throw.
  /// Takes ownership of a native executable graph (not null).
  static graph_exec from_native_handle(cudaGraphExec_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::graph_exec::from_native_handle",
                    "only an instantiated graph can be owned, not null", __FILE__, __LINE__);
    return graph_exec(handle);
  }
  /// As graph_exec_ref's, remembered (see update_host_node). @{
  void update(graph_ref from) const {
    state_.whole_update([&] {
      graph_exec_ref::update(from);  // throws if refused
      return graph_update_result{};
    });
  }
  graph_update_result try_update(graph_ref from) const {
    return state_.whole_update([&] { return graph_exec_ref::try_update(from); });
  }  ///@}

 private:
  friend struct detail::graph_access;
  explicit graph_exec(cudaGraphExec_t handle) noexcept : base(handle) {}
};

namespace detail {
struct graph_exec_traits {
  static void destroy(graph_exec_ref& e, exec_state& state) {
    state.keep_in_graph();
    report(CURT_DETAIL_DRIVER_FUNCTION(cuGraphExecDestroy, 10000)(e.get()),
           "cuGraphExecDestroy(exec)", __FILE__, __LINE__);
  }
  static void release(exec_state& state) noexcept { state.keep_in_graph(); }
};
struct graph_access {  // for other graph headers: refs' handles, naming the operation if none
  static cudaGraph_t handle(graph_ref g, const char* operation) { return g.native(operation); }
  static cudaGraphExec_t handle(graph_exec_ref e, const char* operation) {
    return e.native(operation);
  }
  static const exec_state& state(const graph_exec& e) noexcept { return e.state_; }
};
// Why an instantiation was refused: the node blamed, and what conditional bodies may hold.
CURT_COLD inline std::string explain_instantiation(const cudaGraphInstantiateParams& params,
                                                   cudaGraph_t graph) {
  const cudaGraphNode_t blamed = params.errNode_out;
  bool found = false;
  single_exec_nodes held = census(graph, blamed, &found);
  std::string text = blamed ? fmt("; error node: %s", describe_node(blamed).c_str())
                            : fmt("; the driver names no node");
  // A blamed node that is none of the graph's own (nor its child graphs') lies in a body.
  cudaGraphNodeType type = cudaGraphNodeTypeCount;
  if (blamed && cudaGraphNodeGetType(blamed, &type) != cudaSuccess) type = cudaGraphNodeTypeCount;
  if (held.conditional && (!found || type == cudaGraphNodeTypeConditional))
    text += fmt("%s; a conditional body holds only %s, in its child graphs too (CUDA refuses "
                "others)", blamed && !found ? ", which lies in a conditional body" : "",
                kinds_with(&node_kind::in_body).c_str());
  return text + describe_single_exec(held);
}
}  // namespace detail

inline graph graph_ref::clone() const {
  cudaGraph_t g = native("clone()");
  cudaGraph_t copy = nullptr;
  const cudaError_t status = detail::call_in([&] {
    detail::refuse_device_updatable_copy(
        g, "curt::graph::clone()",
        "instantiate the graph itself (one executable graph at a time), or build or capture it "
        "again for a second one with handles of its own");
    return cudaGraphClone(&copy, g);
  }, detail::any_context);
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_error(make_error_code(status), "cudaGraphClone(graph)", __FILE__, __LINE__, [&] {
      detail::single_exec_nodes held =
          detail::diagnose([&] { return detail::census(g); }, detail::any_context);
      if (!held.memory && !held.conditional) return std::string();
      return detail::fmt("the graph holds %zu memory allocation, memory free or conditional "
                         "nodes, and CUDA cannot clone such a graph: build or capture it again "
                         "instead", held.memory + held.conditional);
    });
  return graph::from_native_handle(copy);
}
inline graph_exec graph_ref::instantiate(instantiate_flags flags) const {
  return instantiate_with(flags, nullptr, "instantiate()");
}
inline graph_exec graph_ref::instantiate_and_upload(stream_ref upload_stream,
                                                    instantiate_flags flags) const {
  return instantiate_with(flags, upload_stream.get(), "instantiate_and_upload()");
}
inline graph_exec graph_ref::instantiate_with(instantiate_flags flags, cudaStream_t upload,
                                              const char* operation) const {
  cudaGraph_t g = native(operation);
  cudaGraphInstantiateParams params{};
  params.flags = detail::native_instantiate_flags(flags);
  if (upload) params.flags |= cudaGraphInstantiateFlagUpload;
  params.uploadStream = upload;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = [&] {  // in these contexts; a failure is explained after them
    detail::context_scope in_stream;  // an upload runs in the stream's context
    if (upload && !detail::current_context()) in_stream.push(detail::context_of(upload));
    detail::context_scope in(detail::any_context);
    return cudaGraphInstantiateWithParams(&exec, g, &params);
  }();
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_error(
        make_error_code(status),
        detail::fmt("cudaGraphInstantiateWithParams(graph, flags %s)",
                    detail::describe_instantiate_flags(params.flags).c_str()),
        __FILE__, __LINE__, [&] {
          return detail::describe_result(detail::instantiate_results, params.result_out,
                                         "cudaGraphInstantiate") +
                 detail::diagnose([&] { return detail::explain_instantiation(params, g); },
                                  detail::any_context);
        });
  return graph_exec::from_native_handle(exec);
}

}  // namespace curt
