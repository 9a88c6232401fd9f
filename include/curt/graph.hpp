// curt/graph.hpp: CUDA graphs. Owning curt::graph (cudaGraph_t) and curt::graph_exec
// (cudaGraphExec_t), non-owning graph_ref and graph_exec_ref: clone, nodes and edges, DOT output,
// instantiation with named flags, launch, upload, whole-graph update, and host values tied to a
// graph's lifetime (retain). Graphs are made by stream capture: <curt/graph_capture.hpp>.
//
//   curt::graph g = curt::capture(stream, [&] { curt::launch(stream, config, kernel, x, n); });
//   curt::graph_exec exec = g.instantiate();
//   exec.launch(stream);                      // costs what cudaGraphLaunch costs
//   exec.update(curt::capture(stream, ...));  // same topology, new arguments
//
// Owners follow curt's rules for streams and events: move-only; an empty owner
// (curt::graph g(curt::no_handle)), a moved-from and a released one hold no handle, and every
// operation on them, or on a ref made from them, throws a cuda_error that says which. Destructors
// never throw: a failure goes to curt's error handler.
//
// Contexts: a graph belongs to no device. On a thread with no current context, calls that only
// need some context (create, clone, queries, update) run in a primary context that is active
// already (the runtime device's first); node additions and instantiation, which load kernels
// for a device, in the primary context of the runtime's current device (make the device you mean
// current first: a device_guard); each leaves none current. launch() and upload() run in the
// stream's context, as curt::launch does; so does an instantiation that uploads, and the
// explanation of their failures. Destruction goes to the driver, which needs no context for it.
//
// Every edge query passes edge data: without it CUDA answers cudaErrorLossyQuery for a graph with
// programmatic (PDL) edges.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/entries.hpp>
#include <curt/detail/graph_bodies.hpp>
#include <curt/detail/graph_discards.hpp>
#include <curt/detail/graph_errors.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/detail/host_function.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace curt {

/// Named instantiation flags; combine with |. Uploading at instantiation takes a stream:
/// graph_ref::instantiate_and_upload.
enum class instantiate_flags : unsigned long long {
  none = 0,
  /// Before each launch, frees what the previous launch allocated (memory-allocation nodes) and
  /// left unfreed; without it such a launch is refused until that memory is freed.
  auto_free_on_launch = cudaGraphInstantiateFlagAutoFreeOnLaunch,
  /// Launchable from kernels too. Not with auto_free_on_launch (CUDA refuses the pair).
  device_launch = cudaGraphInstantiateFlagDeviceLaunch,
  /// Kernel nodes run at their own priorities, not at the launch stream's.
  use_node_priority = cudaGraphInstantiateFlagUseNodePriority,
};
constexpr instantiate_flags operator|(instantiate_flags a, instantiate_flags b) noexcept {
  return static_cast<instantiate_flags>(static_cast<unsigned long long>(a) |
                                        static_cast<unsigned long long>(b));
}
constexpr bool has_flag(instantiate_flags set, instantiate_flags flag) noexcept {
  return (static_cast<unsigned long long>(set) & static_cast<unsigned long long>(flag)) != 0;
}

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
constexpr dot_flags operator|(dot_flags a, dot_flags b) noexcept {
  return static_cast<dot_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

/// An edge: `to` depends on `from`; `data` says how (all zero: full completion; a PDL edge has
/// type cudaGraphDependencyTypeProgrammatic).
struct graph_edge {
  cudaGraphNode_t from = nullptr;
  cudaGraphNode_t to = nullptr;
  cudaGraphEdgeData data{};
};

/// One end of an edge still to be made: work captured next depends on `node`, as `data` says.
struct graph_dependency {
  cudaGraphNode_t node = nullptr;
  cudaGraphEdgeData data{};
};

/// What cudaGraphExecUpdate answered (graph_exec_ref::try_update). True when the update was made.
struct graph_update_result {
  cudaGraphExecUpdateResult result = cudaGraphExecUpdateSuccess;
  cudaGraphNode_t node = nullptr;       ///< the offending node of the new graph; often null
  cudaGraphNode_t from_node = nullptr;  ///< for a mismatched dependency, where it comes from
  explicit operator bool() const noexcept { return result == cudaGraphExecUpdateSuccess; }
};

class graph;
class graph_exec;

namespace detail {

/// The native flags; refuses, before CUDA is called, the pair CUDA refuses.
inline unsigned long long native_instantiate_flags(instantiate_flags flags) {
  if (has_flag(flags, instantiate_flags::device_launch) &&
      has_flag(flags, instantiate_flags::auto_free_on_launch))
    raise(cudaErrorInvalidValue,
          "curt::graph::instantiate(" +
              describe_instantiate_flags(static_cast<unsigned long long>(flags)) + ")",
          "a graph instantiated for device launch cannot free memory on launch: CUDA refuses "
          "device_launch with auto_free_on_launch; drop one of them (nothing was called)",
          __FILE__, __LINE__);
  return static_cast<unsigned long long>(flags);
}

/// Set once curt made a device-updatable kernel node in this process: from then on copies of
/// graphs are checked for such nodes (the check walks the graph, so other programs skip it).
inline atomic<bool>& device_updatable_nodes_made() noexcept {
  static atomic<bool> made{false};
  return made;
}

/// Makes kernel node `node` device-updatable (cudaLaunchAttributeDeviceUpdatableKernelNode) and
/// returns CUDA's status. The flag goes first, so that copies made from then on are checked.
inline cudaError_t set_device_updatable(cudaGraphNode_t node) noexcept {
  device_updatable_nodes_made().store(true, order::relaxed);
  cudaLaunchAttributeValue value{};
  value.deviceUpdatableKernelNode.deviceUpdatable = 1;
  return cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributeDeviceUpdatableKernelNode,
                                         &value);
}

/// Refuses a copy of a graph holding `updatable` device-updatable kernel nodes (its child graphs'
/// included): the copy's nodes are not the ones their device handles name, so device code would
/// change the original, never the copy. `remedy` says what to do instead. No CUDA call.
inline void refuse_device_updatable_count(std::size_t updatable, const char* operation,
                                          const char* remedy) {
  if (CURT_LIKELY(updatable == 0)) return;
  raise(cudaErrorNotSupported, operation,
        "the graph holds " + std::to_string(updatable) +
            " device-updatable kernel node(s): a copy's nodes are not the ones their device "
            "handles (updatable_kernel_node::device_handle()) name, so changes made from the "
            "device would never reach the copy; " +
            remedy + ". Nothing was copied",
        __FILE__, __LINE__);
}
/// The same for `graph`, counted once curt has made such a node. Needs a context.
inline void refuse_device_updatable_copy(cudaGraph_t graph, const char* operation,
                                         const char* remedy) {
  if (CURT_LIKELY(!device_updatable_nodes_made().load(order::relaxed))) return;
  refuse_device_updatable_count(count_single_exec_nodes(graph).device_updatable, operation,
                                remedy);
}

/// The executable graphs curt updated as a whole (graph_exec_ref::update, try_update). CUDA then
/// hands the executable graph the references of the graph it was updated from, so the host
/// callables it calls are that graph's: a per-node update of a host node (which names a node of
/// the first graph) could not tie its new callable to anything the executable graph holds, and
/// curt refuses it. Forgotten when curt destroys the executable graph (its handle may be reused).
/// Destroying an executable graph costs one relaxed load while no graph was ever updated.
class updated_execs {
 public:
  void add(cudaGraphExec_t exec) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (cudaGraphExec_t e : execs_)
      if (e == exec) return;
    execs_.push_back(exec);
    size_.store(execs_.size(), order::relaxed);
  }
  bool contains(cudaGraphExec_t exec) {
    if (size_.load(order::relaxed) == 0) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    for (cudaGraphExec_t e : execs_)
      if (e == exec) return true;
    return false;
  }
  void forget(cudaGraphExec_t exec) noexcept {
    if (CURT_LIKELY(size_.load(order::relaxed) == 0)) return;
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      for (cudaGraphExec_t& e : execs_)
        if (e == exec) {
          execs_.remove(&e);
          size_.store(execs_.size(), order::relaxed);
          return;
        }
    } catch (const std::system_error&) {  // the lock failed: a stale entry only refuses more
    }
  }

 private:
  std::mutex mutex_;
  entries<cudaGraphExec_t> execs_;
  atomic<std::size_t> size_{0};
};

/// The process's table; never destroyed (executable graphs with static storage may die after).
inline updated_execs& updated_exec_table() {
  static updated_execs* table = new updated_execs;
  return *table;
}

// Ties `owned` to `graph` through a user object: the graph (its clones and executable graphs)
// holds the only reference, and the runtime's last release hands the task to the deferred queue,
// which destroys it on a user thread (its value may own CUDA resources).
template <class Task>
Task& retain_in_graph(cudaGraph_t graph, std::unique_ptr<Task> owned) {
  cudaUserObject_t object = nullptr;
  check(cudaUserObjectCreate(&object, owned.get(), &Task::release_from_graph, 1,
                             cudaUserObjectNoDestructorSync),  // the only flag 13.0 accepts
        "cudaUserObjectCreate(retained value)", __FILE__, __LINE__);
  Task* task = owned.release();  // the user object owns it now
  cudaError_t status = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    std::string log = take_driver_log();
    (void)cudaUserObjectRelease(object, 1);  // destroys the value (through the deferred queue)
    throw_error_with_log(make_error_code(status), "cudaGraphRetainUserObject(graph, retained value)",
                         location(__FILE__, __LINE__), {}, std::move(log));
  }
  return *task;
}

}  // namespace detail

/// The type of a node (cudaGraphNodeGetType).
inline cudaGraphNodeType node_type(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  detail::current_device_scope in_context(detail::any_context);
  detail::check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType(node)", __FILE__,
                __LINE__);
  return type;
}

/// A non-owning graph handle.
class graph_ref {
 public:
  graph_ref(cudaGraph_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit by design
  graph_ref(int) = delete;             ///< 0 is not a graph
  graph_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  /// The native handle; throws when this refers to an empty, moved-from or released owner.
  cudaGraph_t get() const { return native("get()"); }
  /// False for a ref to an empty, moved-from or released owner.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }

  /// A copy of the graph and its user objects. CUDA cannot clone a graph that holds memory
  /// allocation, memory free or conditional nodes; curt refuses one that holds device-updatable
  /// kernel nodes (the copy's are not the ones their device handles name).
  inline graph clone() const;

  /// An executable graph (cudaGraphInstantiateWithParams). A failure names the instantiation
  /// result and the node the driver blames, if any.
  inline graph_exec instantiate(instantiate_flags flags = instantiate_flags::none) const;
  /// An executable graph, uploaded on `upload_stream` (in its order) so that the first launch
  /// does not pay for it.
  inline graph_exec instantiate_and_upload(stream_ref upload_stream,
                                           instantiate_flags flags = instantiate_flags::none) const;

  std::size_t node_count() const {
    cudaGraph_t g = native("node_count()");
    std::size_t n = 0;
    detail::current_device_scope in_context(detail::any_context);
    detail::check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes(graph, count)", __FILE__,
                  __LINE__);
    return n;
  }
  std::vector<cudaGraphNode_t> nodes() const {
    cudaGraph_t g = native("nodes()");
    detail::current_device_scope in_context(detail::any_context);
    std::size_t n = 0;
    detail::check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes(graph, count)", __FILE__,
                  __LINE__);
    std::vector<cudaGraphNode_t> result(n);
    if (n)
      detail::check(cudaGraphGetNodes(g, result.data(), &n), "cudaGraphGetNodes(graph)", __FILE__,
                    __LINE__);
    result.resize(n);
    return result;
  }
  /// Every edge, with its data.
  std::vector<graph_edge> edges() const {
    cudaGraph_t g = native("edges()");
    detail::current_device_scope in_context(detail::any_context);
    std::size_t n = 0;
    detail::check(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n),
                  "cudaGraphGetEdges(graph, count)", __FILE__, __LINE__);
    std::vector<cudaGraphNode_t> from(n), to(n);
    std::vector<cudaGraphEdgeData> data(n);
    if (n)
      detail::check(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &n),
                    "cudaGraphGetEdges(graph, with edge data)", __FILE__, __LINE__);
    std::vector<graph_edge> result(n);
    for (std::size_t i = 0; i < n; ++i) result[i] = graph_edge{from[i], to[i], data[i]};
    return result;
  }

  /// Writes the graph in Graphviz's DOT language to `path`.
  void debug_dot_print(const std::string& path, dot_flags flags = dot_flags::none) const {
    cudaGraph_t g = native("debug_dot_print()");
    detail::current_device_scope in_context(detail::any_context);
    cudaError_t status = cudaGraphDebugDotPrint(g, path.c_str(), static_cast<unsigned>(flags));
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(make_error_code(status),
                          "cudaGraphDebugDotPrint(graph, \"" + path + "\", flags " +
                              std::to_string(static_cast<unsigned>(flags)) + ")",
                          detail::location(__FILE__, __LINE__),
                          "could not write the DOT file (does its directory exist, and may this "
                          "process write there?)");
  }

  /// Ties `value` (moved in, or copied from an lvalue) to the graph: it lives as long as this
  /// graph, its clones and its executable graphs hold it (their launches included), and is then
  /// destroyed on a user thread at curt's next drain point (a synchronize() of a stream, event or
  /// device, or a stream owner's destructor), never on CUDA's thread: it may own CUDA resources
  /// (a buffer, an event). Returns the graph's copy, valid while anything holding it lives: capture
  /// work that uses it (a scratch buffer the graph owns). Also on a graph being captured.
  template <class T>
  std::decay_t<T>& retain(T&& value) const {
    using value_type = std::decay_t<T>;
    static_assert(!std::is_array_v<std::remove_reference_t<T>>,
                  "curt::graph::retain takes a value, not an array: wrap it (std::array, a buffer)");
    static_assert(std::is_constructible_v<value_type, T&&>,
                  "curt::graph::retain owns what it is given: move a move-only value in "
                  "(std::move), or pass one that can be copied");
    cudaGraph_t g = native("retain()");
    using task = detail::host_task<value_type>;  // the queue host functions use
    auto owned = std::make_unique<task>(std::forward<T>(value), 0);
    detail::current_device_scope in_context(detail::any_context);
    return detail::retain_in_graph(g, std::move(owned)).function;
  }

  friend bool operator==(graph_ref a, graph_ref b) noexcept { return a.handle_ == b.handle_; }
  friend bool operator!=(graph_ref a, graph_ref b) noexcept { return a.handle_ != b.handle_; }

 protected:
  struct from_state_t {};
  graph_ref(cudaGraph_t handle, from_state_t) noexcept : handle_(handle) {}

  /// The handle for a CUDA call; throws, naming `operation`, when there is none.
  cudaGraph_t native(const char* operation) const {
    cudaGraph_t h = detail::usable_handle(handle_, "curt::graph", operation);
    if (CURT_UNLIKELY(!detail::discarded_graphs().empty()))
      detail::refuse_discarded_graph(h, operation);
    return h;
  }

  cudaGraph_t handle_;

 private:
  friend class graph_exec_ref;  // update() names its operation on the graph
  inline graph_exec instantiate_with(instantiate_flags flags, cudaStream_t upload,
                                     const char* operation) const;
};

/// An owning graph. Move-only; destroying it leaves its executable graphs working.
class graph : public graph_ref {
 public:
  /// A new, empty graph (cudaGraphCreate).
  static graph create() {
    cudaGraph_t created = nullptr;
    detail::current_device_scope in_context(detail::any_context);
    detail::check(cudaGraphCreate(&created, 0), "cudaGraphCreate", __FILE__, __LINE__);
    detail::graph_is_new(created);  // no conditional body, nor anything CUDA discarded
    return graph(created);
  }
  /// An empty owner: every use throws until a graph is assigned.
  explicit graph(no_handle_t) noexcept
      : graph_ref(detail::state_handle<cudaGraph_t>(detail::handle_state::empty), from_state_t{}) {}

  /// Takes ownership of a native graph (not null).
  static graph from_native_handle(cudaGraph_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::graph::from_native_handle",
                    "only a created graph can be owned, not null", __FILE__, __LINE__);
    if (CURT_UNLIKELY(!detail::discarded_graphs().empty()))
      detail::discarded_graphs().forget(handle);  // alive: not what CUDA destroyed there
    return graph(handle);
  }

  graph(graph&& other) noexcept
      : graph_ref(other.take(detail::handle_state::moved_from), from_state_t{}) {}
  graph& operator=(graph&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = other.take(detail::handle_state::moved_from);
    }
    return *this;
  }
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  ~graph() { destroy(); }

  /// Gives up ownership; the caller destroys the returned handle. The owner is then "released".
  cudaGraph_t release() {
    cudaGraph_t h = native("release()");
    handle_ = detail::state_handle<cudaGraph_t>(detail::handle_state::released);
    return h;
  }

 private:
  friend class capture_to_graph_scope;  // CUDA destroyed the graph a capture went into
  void destroyed_by_cuda() noexcept {
    handle_ = detail::state_handle<cudaGraph_t>(detail::handle_state::discarded);
  }
  explicit graph(cudaGraph_t handle) noexcept : graph_ref(handle, from_state_t{}) {}
  cudaGraph_t take(detail::handle_state left) noexcept {
    return std::exchange(handle_, detail::state_handle<cudaGraph_t>(left));
  }
  void destroy() noexcept {
    if (detail::is_state_handle(handle_) || detail::owner_keeps_off(handle_)) {
      handle_ = detail::state_handle<cudaGraph_t>(detail::handle_state::empty);
      return;
    }
    detail::forget_conditional_bodies(handle_);  // its conditional nodes' bodies die with it
    const cudaGraph_t h = handle_;
    detail::destroy_through_driver(
        [h] { return CURT_DETAIL_DRIVER_FUNCTION(cuGraphDestroy, 10000)(h); },
        "cuGraphDestroy(graph)", __FILE__, __LINE__);
    handle_ = detail::state_handle<cudaGraph_t>(detail::handle_state::empty);
  }
};

/// A non-owning executable-graph handle.
class graph_exec_ref {
 public:
  graph_exec_ref(cudaGraphExec_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit
  graph_exec_ref(int) = delete;             ///< 0 is not an executable graph
  graph_exec_ref(std::nullptr_t) = delete;  ///< nor is nullptr

  cudaGraphExec_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }

  /// Runs the graph on `stream`, after the work before it there and the graph's previous
  /// launches. Costs what cudaGraphLaunch costs (plus curt::launch's context check).
  void launch(stream_ref stream) const {
    cudaGraphExec_t e = native("launch()");
    cudaStream_t s = stream.get();
    cudaError_t status;
    {
      detail::stream_context_scope in_context(s);
      status = cudaGraphLaunch(e, s);
    }
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_graph_launch_error(status, e, "cudaGraphLaunch(exec, stream)", s, __FILE__,
                                       __LINE__);
  }
  /// Uploads the graph's work to the device on `stream` without running it, so that the first
  /// launch starts sooner.
  void upload(stream_ref stream) const {
    cudaGraphExec_t e = native("upload()");
    cudaStream_t s = stream.get();
    cudaError_t status;
    {
      detail::stream_context_scope in_context(s);
      status = cudaGraphUpload(e, s);
    }
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_graph_launch_error(status, e, "cudaGraphUpload(exec, stream)", s, __FILE__,
                                       __LINE__);
  }

  /// Takes the parameters of `from`, a graph of the same topology (cudaGraphExecUpdate); later
  /// launches use them. A refused update throws a cuda_error (cudaErrorGraphExecUpdateFailure)
  /// that names the reason and the node the driver names, if any; the executable graph is then
  /// unchanged.
  void update(graph_ref from) const {
    graph_update_result result = try_update(from);
    if (CURT_UNLIKELY(!result)) throw_update_refused(result, from.get());
  }
  /// As update(), but a refused update comes back instead of throwing (other failures throw):
  ///   if (!exec.try_update(g)) exec = g.instantiate();
  graph_update_result try_update(graph_ref from) const {
    cudaGraphExec_t e = native("update()");
    cudaGraph_t g = from.native("update() (the graph to update from)");
    cudaGraphExecUpdateResultInfo info{};
    cudaError_t status;
    {
      detail::current_device_scope in_context(detail::any_context);
      status = cudaGraphExecUpdate(e, g, &info);
    }
    if (status == cudaErrorGraphExecUpdateFailure) {
      (void)cudaGetLastError();
      graph_update_result refused{info.result, info.errorNode, info.errorFromNode};
      if (refused.result == cudaGraphExecUpdateSuccess) refused.result = cudaGraphExecUpdateError;
      return refused;
    }
    if (CURT_UNLIKELY(status != cudaSuccess)) {
      std::string log = detail::take_driver_log();
      (void)cudaGetLastError();
      detail::throw_error_with_log(make_error_code(status), "cudaGraphExecUpdate(exec, graph)",
                                   detail::location(__FILE__, __LINE__), device_updatable_note(g),
                                   std::move(log));
    }
    detail::updated_exec_table().add(e);
    return {};
  }

  /// The flags as CUDA reports them. CUDA 13.0 reports auto_free_on_launch and device_launch
  /// but not use_node_priority (seen on the H200), and never the upload.
  instantiate_flags flags() const {
    cudaGraphExec_t e = native("flags()");
    unsigned long long value = 0;
    detail::current_device_scope in_context(detail::any_context);
    detail::check(cudaGraphExecGetFlags(e, &value), "cudaGraphExecGetFlags(exec)", __FILE__,
                  __LINE__);
    return static_cast<instantiate_flags>(value);
  }

  friend bool operator==(graph_exec_ref a, graph_exec_ref b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend bool operator!=(graph_exec_ref a, graph_exec_ref b) noexcept {
    return a.handle_ != b.handle_;
  }

 protected:
  struct from_state_t {};
  graph_exec_ref(cudaGraphExec_t handle, from_state_t) noexcept : handle_(handle) {}

  cudaGraphExec_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::graph_exec", operation);
  }

  cudaGraphExec_t handle_;

 private:
  // "the graph updated from holds N device-updatable kernel node(s): ..." or nothing.
  CURT_COLD static std::string device_updatable_note(cudaGraph_t from) {
    std::size_t updatable = detail::diagnose(
        [&] { return detail::count_single_exec_nodes(from).device_updatable; }, detail::any_context);
    if (!updatable) return {};
    return "the graph updated from holds " + std::to_string(updatable) +
           " device-updatable kernel node(s): CUDA updates no executable graph from such a "
           "graph, nor one instantiated from one (instantiate anew)";
  }
  [[noreturn]] CURT_COLD static void throw_update_refused(const graph_update_result& refused,
                                                         cudaGraph_t from) {
    std::string log = detail::take_driver_log();
    std::string why = detail::describe_update_refusal(
        refused.result,
        detail::diagnose([&] { return detail::describe_node(refused.node); }, detail::any_context),
        detail::diagnose([&] { return detail::describe_node(refused.from_node); },
                         detail::any_context));  // in any context, as the update ran
    if (std::string note = device_updatable_note(from); !note.empty()) why += "; " + note;
    detail::throw_error_with_log(make_error_code(cudaErrorGraphExecUpdateFailure),
                                 "cudaGraphExecUpdate(exec, graph)",
                                 detail::location(__FILE__, __LINE__), std::move(why),
                                 std::move(log));
  }
};

/// An owning executable graph. Move-only. Destroying it while a launch runs is fine: CUDA keeps
/// what the launch needs until it is done.
class graph_exec : public graph_exec_ref {
 public:
  /// An empty owner: every use throws until an executable graph is assigned.
  explicit graph_exec(no_handle_t) noexcept
      : graph_exec_ref(detail::state_handle<cudaGraphExec_t>(detail::handle_state::empty),
                       from_state_t{}) {}

  /// Takes ownership of a native executable graph (not null).
  static graph_exec from_native_handle(cudaGraphExec_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::graph_exec::from_native_handle",
                    "only an instantiated graph can be owned, not null", __FILE__, __LINE__);
    return graph_exec(handle);
  }

  graph_exec(graph_exec&& other) noexcept
      : graph_exec_ref(other.take(detail::handle_state::moved_from), from_state_t{}) {}
  graph_exec& operator=(graph_exec&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = other.take(detail::handle_state::moved_from);
    }
    return *this;
  }
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  ~graph_exec() { destroy(); }

  /// Gives up ownership; the caller destroys the returned handle. The owner is then "released".
  /// A whole-graph update is still remembered for the handle (update_host_node stays refused on
  /// it, which keeps a callable from outliving its graph); curt cannot see the caller destroy it.
  cudaGraphExec_t release() {
    cudaGraphExec_t h = native("release()");
    handle_ = detail::state_handle<cudaGraphExec_t>(detail::handle_state::released);
    return h;
  }

 private:
  explicit graph_exec(cudaGraphExec_t handle) noexcept : graph_exec_ref(handle, from_state_t{}) {}
  cudaGraphExec_t take(detail::handle_state left) noexcept {
    return std::exchange(handle_, detail::state_handle<cudaGraphExec_t>(left));
  }
  void destroy() noexcept {
    if (detail::is_state_handle(handle_)) return;
    detail::updated_exec_table().forget(handle_);
    const cudaGraphExec_t h = handle_;
    detail::destroy_through_driver(
        [h] { return CURT_DETAIL_DRIVER_FUNCTION(cuGraphExecDestroy, 10000)(h); },
        "cuGraphExecDestroy(exec)", __FILE__, __LINE__);
    handle_ = detail::state_handle<cudaGraphExec_t>(detail::handle_state::empty);
  }
};

inline graph graph_ref::clone() const {
  cudaGraph_t g = native("clone()");
  cudaGraph_t copy = nullptr;
  cudaError_t status;
  {
    detail::current_device_scope in_context(detail::any_context);
    detail::refuse_device_updatable_copy(
        g, "curt::graph::clone()",
        "instantiate the graph itself (one executable graph at a time), or build or capture it "
        "again for a second one with handles of its own");
    status = cudaGraphClone(&copy, g);
  }
  if (CURT_UNLIKELY(status != cudaSuccess)) detail::throw_clone_error(status, g, __FILE__, __LINE__);
  detail::graph_is_new(copy);  // no conditional body, nor anything CUDA discarded
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
  if (upload) {
    params.flags |= cudaGraphInstantiateFlagUpload;
    params.uploadStream = upload;
  }
  cudaGraphExec_t exec = nullptr;
  cudaError_t status;
  if (upload) {
    detail::stream_context_scope in_context(upload);
    status = cudaGraphInstantiateWithParams(&exec, g, &params);
  } else {
    detail::current_device_scope in_context;
    status = cudaGraphInstantiateWithParams(&exec, g, &params);
  }
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_instantiate_error(status, params, __FILE__, __LINE__, g);
  return graph_exec::from_native_handle(exec);
}

}  // namespace curt
