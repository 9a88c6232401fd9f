// curt/graph/capture.hpp: graphs made by stream capture.
//
//   curt::graph g = curt::capture(stream, [&] { curt::launch(stream, config, kernel, x, n); });
//   curt::capture_scope scope(stream);  /* enqueue work on stream */  g = scope.end();
//
// A capture that does not reach end() is ended by the scope's destructor, which destroys its
// graph: nothing captured leaks, and capture() rethrows the work's exception. A call that cannot
// be captured invalidates the capture, and end() (inside capture(), the failing call's
// cuda_error) says so. capture_to_graph adds the work to a graph of yours; when such a capture
// fails, CUDA destroys that graph and a curt::graph owner of it is left empty (a graph holding it
// as a conditional body is then broken: not supported). A scope keeps the stream's context learnt
// at the beginning and ends the capture in it, also on a thread with no current context.
#pragma once

#include <curt/graph/node.hpp>

#include <typeinfo>

namespace curt {

/// Where a capture refuses unsafe calls (cudaMalloc: work a graph would not replay).
enum class capture_mode : int {
  global = cudaStreamCaptureModeGlobal,  ///< on every thread in global mode (CUDA's default)
  thread_local_ = cudaStreamCaptureModeThreadLocal,  ///< on this thread only
  relaxed = cudaStreamCaptureModeRelaxed,            ///< nowhere; it may end on another thread
};
enum class capture_status : int {
  none = cudaStreamCaptureStatusNone,                ///< not capturing
  active = cudaStreamCaptureStatusActive,            ///< capturing
  invalidated = cudaStreamCaptureStatusInvalidated,  ///< capturing, but an error spoilt it: end it
};
/// What cudaStreamGetCaptureInfo says about a stream.
struct stream_capture_info {
  capture_status status = capture_status::none;  ///< whether the stream is capturing
  unsigned long long id = 0;                     ///< unique in the process; 0 unless active
  /// The graph captured into, and what the next captured work depends on, when active. @{
  graph_ref graph{detail::state_handle<cudaGraph_t>(detail::handle_state::empty)};
  std::vector<graph_dependency> dependencies{};  ///@}
};
namespace detail {
struct capture_point {  // what a capture is into, and what its next work depends on
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  std::size_t count = 0;
};

// The status of `stream`'s capture, asked in `context` (the stream's); none when unknown.
CURT_COLD inline capture_status capture_status_of(cudaStream_t stream, CUcontext context) {
  return diagnose([&] {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    (void)cudaStreamIsCapturing(stream, &status);
    return static_cast<capture_status>(status);
  }, context);
}
// Begins a capture (into `target` after `after`, if any) in the stream's context; returns it.
inline CUcontext begin_capture(cudaStream_t stream, capture_mode mode, cudaGraph_t target,
                               const node_dependencies& after) {
  CUcontext context = context_of(stream);
  const auto native_mode = static_cast<cudaStreamCaptureMode>(mode);
  const cudaError_t status = call_in([&] {
    return target ? cudaStreamBeginCaptureToGraph(stream, target, after.nodes(), after.data(),
                                                  after.size(), native_mode)
                  : cudaStreamBeginCapture(stream, native_mode);
  }, context);
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_error(make_error_code(status),
                target ? fmt("cudaStreamBeginCaptureToGraph(stream, graph, %zu dependencies)",
                             after.size())
                       : fmt("cudaStreamBeginCapture(stream)"),
                __FILE__, __LINE__, [&] {
                  if (stream == cudaStreamLegacy)
                    return "the legacy default stream cannot be captured: capture a stream of "
                           "your own (or stream_ref::per_thread_default())";
                  capture_status now = capture_status_of(stream, context);
                  return now == capture_status::active
                             ? "the stream is capturing already: end that capture first"
                         : now == capture_status::invalidated
                             ? "the stream is still in an invalidated capture: end it "
                               "(cudaStreamEndCapture) first"
                             : "";
                });
  return context;
}
// Whether CUDA destroyed the target of a capture into an existing graph that ended with `status`.
inline bool destroys_target(cudaError_t status) noexcept {
  return status == cudaErrorStreamCaptureInvalidated || status == cudaErrorStreamCaptureUnjoined;
}
inline constexpr const char* target_destroyed =
    "CUDA destroyed the target graph, with every node it held before the capture (a curt::graph "
    "owner given as the target holds nothing now)";

// Ends the capture and returns its graph; `ended` unless the stream still captures.
inline cudaGraph_t end_capture(cudaStream_t stream, CUcontext context, bool& ended,
                               bool into_target, const char* operation) {
  if (ended)
    raise(cudaErrorIllegalState, operation, "the capture was ended already: end() once", __FILE__,
          __LINE__);
  cudaGraph_t graph = nullptr;
  const cudaError_t status = call_in([&] { return cudaStreamEndCapture(stream, &graph); }, context);
  ended = status == cudaSuccess;
  if (CURT_LIKELY(ended)) return graph;
  if (graph && !into_target)
    report(CURT_DETAIL_DRIVER_FUNCTION(cuGraphDestroy, 10000)(graph),
           "cuGraphDestroy(failed capture)", __FILE__, __LINE__);
  ended = capture_status_of(stream, context) == capture_status::none;
  throw_error(make_error_code(status), "cudaStreamEndCapture(stream)", __FILE__, __LINE__, [&] {
    std::string why =
        status == cudaErrorStreamCaptureInvalidated
            ? fmt("the capture was invalidated by a call that cannot be captured (synchronizing "
                  "or querying the capturing stream, an unsafe call such as cudaMalloc outside "
                  "relaxed mode, a failed call on the stream)%s; the capture is ended and the "
                  "stream is usable again",
                  into_target ? "" : ": no graph was made")
        : status == cudaErrorStreamCaptureUnjoined
            ? "work forked from the capturing stream onto another stream (through an event) was "
              "not joined back into it before the end"
        : status == cudaErrorStreamCaptureWrongThread
            ? "a capture in global or thread_local mode must end on the thread that began it; "
              "it is still capturing"
            : "";
    return into_target && destroys_target(status) ? why + "; " + target_destroyed : why;
  });
}
// For a scope's destructor (quiet about what an exception leaves); true if CUDA destroyed target.
inline bool abandon_capture(cudaStream_t stream, CUcontext context, bool into_target) noexcept {
  try {
    cudaGraph_t graph = nullptr;
    cudaError_t status = call_in([&] { return cudaStreamEndCapture(stream, &graph); }, context);
    if (!destroys_target(status))
      report(status, "cudaStreamEndCapture(stream) (a capture left without end())", __FILE__,
             __LINE__);
    (void)cudaGetLastError();
    if (graph && !into_target)
      report(CURT_DETAIL_DRIVER_FUNCTION(cuGraphDestroy, 10000)(graph),
             "cuGraphDestroy(abandoned capture)", __FILE__, __LINE__);
    return into_target && destroys_target(status);
  } catch (const std::exception& error) {  // the stream's context could not be made current
    report(error);
    return false;
  }
}
// The explanation part of a cuda_error's message; empty when it has none.
CURT_COLD inline std::string explanation_of(const cuda_error& error) {
  std::string what = error.what();
  std::string head = fmt("%s failed: %s: ", error.call().c_str(), error.code().message().c_str());
  std::size_t tail = (error.where().empty() ? 0 : error.where().size() + 4) +
                     (error.driver_log().empty() ? 0 : error.driver_log().size() + 14);
  if (what.compare(0, head.size(), head) != 0 || what.size() < head.size() + tail) return {};
  return what.substr(head.size(), what.size() - head.size() - tail);
}
// The captured work threw `error`: if that invalidated the capture, throws it again saying so.
CURT_COLD inline void rethrow_if_capture_invalidated(cudaStream_t stream, CUcontext context,
                                                     const cuda_error& error, bool owns_graph) {
  if (typeid(error) != typeid(cuda_error)) return;  // keep derived types (out_of_memory) as is
  if (capture_status_of(stream, context) != capture_status::invalidated) return;
  std::string why = error.status() == cudaErrorStreamCaptureUnsupported
                        ? "this call cannot be made while its stream is being captured, and it "
                          "invalidated the capture"
                        : "the capture is invalidated";
  why += owns_graph ? ": curt::capture ended it and discarded its graph"
                    : fmt(": curt::capture_to_graph ended it, and %s", target_destroyed);
  why += "; the stream is usable again";
  std::string own = explanation_of(error);
  if (!own.empty()) why += fmt(" (%s)", own.c_str());
  throw cuda_error(error.code(), error.call(), std::move(why), error.where(), error.driver_log());
}
struct capture_access {  // runs the work of capture() and capture_to_graph() in their scope
  template <class Scope, class Work>
  static void run(Scope& scope, Work&& work, bool owns_graph) {
    static_assert(std::is_invocable_v<Work&&> || std::is_invocable_v<Work&&, stream_ref>,
                  "curt::capture: the work must be callable with no arguments or with the "
                  "capturing curt::stream_ref");
    try {
      if constexpr (std::is_invocable_v<Work&&, stream_ref>)
        std::forward<Work>(work)(scope.stream_);
      else
        std::forward<Work>(work)();
    } catch (const cuda_error& error) {
      rethrow_if_capture_invalidated(scope.stream_.get(), scope.context_, error, owns_graph);
      throw;
    }
  }
};
// The capture `stream` is in; refuses a stream that does not capture. In the stream's context.
inline constexpr const char* not_capturing_use_graph =
    "the stream is not capturing: pass the graph itself to add to a graph that is not being "
    "captured";
inline capture_point active_capture(cudaStream_t stream, const char* operation,
                                    const char* not_capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  capture_point point;
  check(cudaStreamGetCaptureInfo(stream, &status, nullptr, &point.graph, &point.nodes, &point.data,
                                 &point.count),
        "cudaStreamGetCaptureInfo(stream)", __FILE__, __LINE__);
  if (CURT_UNLIKELY(status == cudaStreamCaptureStatusInvalidated))
    raise(cudaErrorStreamCaptureInvalidated, operation,
          "the stream's capture was invalidated by an earlier error: there is no graph to add "
          "to; end the capture first",
          __FILE__, __LINE__);
  if (CURT_UNLIKELY(status != cudaStreamCaptureStatusActive))
    raise(cudaErrorIllegalState, operation, not_capturing, __FILE__, __LINE__);
  return point;
}

}  // namespace detail

/// Whether `stream` is capturing, into which graph, and what its next captured work depends on.
inline stream_capture_info capture_info(stream_ref stream) {
  cudaStream_t h = stream.get();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  stream_capture_info info;
  detail::capture_point p;
  detail::context_scope in(detail::for_stream, h);
  cudaError_t result =
      cudaStreamGetCaptureInfo(h, &status, &info.id, &p.graph, &p.nodes, &p.data, &p.count);
  if (CURT_UNLIKELY(result != cudaSuccess))
    detail::throw_error(make_error_code(result), "cudaStreamGetCaptureInfo(stream)", __FILE__,
                        __LINE__,
                        result == cudaErrorStreamCaptureImplicit
                            ? "the legacy default stream cannot be asked while a blocking stream "
                              "of its device is capturing"
                            : "");
  info.status = static_cast<capture_status>(status);
  if (status != cudaStreamCaptureStatusActive) return stream_capture_info{info.status};
  info.graph = p.graph;
  std::vector<graph_dependency> dependencies(p.count);  // as node.hpp makes them (no push_back)
  for (std::size_t i = 0; i < p.count; ++i)  // the arrays are valid until the next call on it
    dependencies[i] = {p.nodes[i], p.data ? p.data[i] : cudaGraphEdgeData{}};
  info.dependencies.swap(dependencies);
  return info;
}
/// The node that the work last captured on `stream` became (a kernel, a copy, ...), for a
/// per-node update of the executable graph later (update_kernel_node and the like). Refused where
/// the stream is not capturing, or its next work depends on no node or several (after a join).
inline graph_node last_captured_node(stream_ref stream) {
  stream_capture_info info = capture_info(stream);
  if (CURT_UNLIKELY(info.status != capture_status::active || info.dependencies.size() != 1))
    detail::raise(cudaErrorIllegalState, "curt::last_captured_node(stream)",
                  info.status != capture_status::active
                      ? detail::fmt("the stream is not capturing")
                      : detail::fmt("the stream's next work depends on %zu nodes, not one: ask "
                                    "right after the work whose node you want",
                                    info.dependencies.size()),
                  __FILE__, __LINE__);
  return info.dependencies[0].node;
}
/// Captures the work enqueued on a stream into a new graph, from construction to end().
class capture_scope {
 public:
  /// Begins capturing `stream` in `mode` (cudaStreamBeginCapture); throws, saying why, if refused.
  explicit capture_scope(stream_ref stream, capture_mode mode = capture_mode::global)
      : stream_(stream), context_(detail::begin_capture(stream.get(), mode, nullptr, {})) {}
  /// A temporary stream owner would be gone before the capture ends.
  explicit capture_scope(curt::stream&&, capture_mode = capture_mode::global) = delete;
  ~capture_scope() {
    if (!ended_) (void)detail::abandon_capture(stream_.get(), context_, false);
  }
  capture_scope(const capture_scope&) = delete;
  capture_scope& operator=(const capture_scope&) = delete;

  /// Ends the capture and returns the graph; throws for an invalidated capture, or a second end().
  curt::graph end() {
    return curt::graph::from_native_handle(detail::end_capture(
        stream_.get(), context_, ended_, false, "curt::capture_scope::end()"));
  }
  stream_ref stream() const noexcept { return stream_; }  ///< the stream being captured
  /// The graph being captured into (to retain() values the work uses), while the capture is active.
  graph_ref graph() const {
    const char* operation = "curt::capture_scope::graph()";
    if (ended_)  // the stream may be in another capture by now
      detail::raise(cudaErrorIllegalState, operation, "the capture has ended", __FILE__, __LINE__);
    detail::context_scope in(context_);
    return detail::active_capture(stream_.get(), operation,
                                  "the stream is not capturing: its capture was ended elsewhere")
        .graph;
  }

 private:
  friend struct detail::capture_access;
  stream_ref stream_;
  CUcontext context_;  // the stream's, learnt at the beginning
  bool ended_ = false;
};
/// Captures the work enqueued on a stream into `target`, a graph of the caller's, after
/// `dependencies`; if CUDA destroys the target (a failed capture), its owner is left empty.
class capture_to_graph_scope {
  template <class T>
  using target_of =
      std::enable_if_t<std::is_convertible_v<T, graph_ref> && !std::is_same_v<T, graph>, int>;

 public:
  /// Begins capturing into `target`: a curt::graph lvalue or graph_ref (not a temporary owner). @{
  template <class Target, target_of<Target> = 0>
  capture_to_graph_scope(stream_ref stream, Target&& target,
                         const std::vector<graph_dependency>& dependencies = {},
                         capture_mode mode = capture_mode::global)
      : stream_(stream),
        target_(graph_ref(target).get()),
        context_(detail::begin_capture(stream.get(), mode, target_, dependencies)) {
    using owner = std::remove_reference_t<Target>;
    if constexpr (std::is_same_v<std::remove_const_t<owner>, curt::graph>) {
      static_assert(!std::is_const_v<owner>,
                    "curt::capture_to_graph: give a target owner as curt::graph&, not const: "
                    "CUDA destroys the target of a failed capture, and its owner must then let "
                    "go of it (a graph_ref is taken too, but curt cannot tell its owner)");
      owner_ = &target;
    }
  }
  template <class Target, target_of<Target> = 0>
  capture_to_graph_scope(stream_ref stream, Target&& target, capture_mode mode)
      : capture_to_graph_scope(stream, std::forward<Target>(target), {}, mode) {}  ///@}
  template <class... Rest>  // a temporary stream would be gone before the capture ends
  capture_to_graph_scope(curt::stream&&, Rest&&...) = delete;
  /// Ends the capture if end() was not called; what was captured stays in the target.
  ~capture_to_graph_scope() {
    if (!ended_ && detail::abandon_capture(stream_.get(), context_, true)) target_gone();
  }
  capture_to_graph_scope(const capture_to_graph_scope&) = delete;
  capture_to_graph_scope& operator=(const capture_to_graph_scope&) = delete;

  /// Ends the capture; the work is in the target graph. Throws for an invalidated capture.
  void end() {
    try {
      (void)detail::end_capture(stream_.get(), context_, ended_, true,
                                "curt::capture_to_graph_scope::end()");
    } catch (const cuda_error& error) {
      if (detail::destroys_target(error.status())) target_gone();
      throw;
    }
  }
  stream_ref stream() const noexcept { return stream_; }  ///< the stream being captured

 private:
  friend struct detail::capture_access;
  void target_gone() noexcept {  // CUDA destroyed the target: its owner lets go of it
    if (!owner_ || graph_ref(*owner_) != graph_ref(target_)) return;
    (void)owner_->release();
    *owner_ = curt::graph(no_handle);
  }
  stream_ref stream_;
  cudaGraph_t target_;
  CUcontext context_;  // the stream's, learnt at the beginning
  curt::graph* owner_ = nullptr;
  bool ended_ = false;
};
/// Captures what `work` enqueues on `stream` (work() or work(stream)) into a new graph.
template <class Work>
curt::graph capture(stream_ref stream, Work&& work, capture_mode mode = capture_mode::global) {
  capture_scope scope(stream, mode);
  detail::capture_access::run(scope, std::forward<Work>(work), true);
  return scope.end();
}
/// Captures what `work` enqueues on `stream` into `target` (see capture_to_graph_scope).
template <class Target, class Work>
void capture_to_graph(stream_ref stream, Target&& target,
                      const std::vector<graph_dependency>& dependencies, Work&& work,
                      capture_mode mode = capture_mode::global) {
  capture_to_graph_scope scope(stream, std::forward<Target>(target), dependencies, mode);
  detail::capture_access::run(scope, std::forward<Work>(work), false);
  scope.end();
}
/// The same, with no dependencies.
template <class Target, class Work>
void capture_to_graph(stream_ref stream, Target&& target, Work&& work,
                      capture_mode mode = capture_mode::global) {
  capture_to_graph(stream, std::forward<Target>(target), {}, std::forward<Work>(work), mode);
}

}  // namespace curt
