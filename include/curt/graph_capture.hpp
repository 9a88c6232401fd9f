// curt/graph_capture.hpp: graphs made by stream capture.
//
//   curt::graph g = curt::capture(stream, [&] {       // or [&](curt::stream_ref s) { ... }
//     curt::launch(stream, config, kernel, x, n);
//     curt::copy(host, device, stream);
//   });
//
//   curt::capture_scope scope(stream);                 // the same, as a scope
//   ... enqueue work on stream ...
//   curt::graph g = scope.end();
//
// A capture that does not reach end() (an exception unwinds through the scope) is ended by the
// scope's destructor, which destroys whatever graph comes back: the stream is usable again and
// nothing captured so far leaks (host functions and retained values go with that graph).
// capture() rethrows the work's exception after that. A call that cannot be captured
// (synchronizing or querying the capturing stream, an unsafe call such as cudaMalloc outside
// relaxed mode) invalidates the capture: end() then throws cudaErrorStreamCaptureInvalidated and
// says so, and when the failing call threw a curt::cuda_error inside capture(), that error says
// it too.
//
// capture_to_graph_scope / capture_to_graph() add the captured work to a graph of your own
// (cudaStreamBeginCaptureToGraph), after the nodes you name. capture_info() tells whether a
// stream is capturing, into which graph, and what the next captured work will depend on.
//
// The capture calls run in the stream's context on a thread with no current context.
#pragma once

#include <curt/detail/green_lifetime.hpp>
#include <curt/detail/handle_state.hpp>
#include <curt/detail/host_function.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace curt {

/// Which calls a capture forbids while it runs (cudaStreamCaptureMode; see
/// cudaThreadExchangeStreamCaptureMode). Unsafe calls (cudaMalloc, for instance) are those whose
/// work a graph would not replay.
enum class capture_mode : int {
  /// Unsafe calls are refused on this thread and on every thread in global mode (CUDA's default).
  global = cudaStreamCaptureModeGlobal,
  /// Unsafe calls are refused on this thread only (thread_local is a keyword, hence the _).
  thread_local_ = cudaStreamCaptureModeThreadLocal,
  /// Unsafe calls are allowed; calls that conflict with capture (synchronizing the capturing
  /// stream) are still refused. A relaxed capture may end on another thread.
  relaxed = cudaStreamCaptureModeRelaxed,
};

enum class capture_status : int {
  none = cudaStreamCaptureStatusNone,            ///< not capturing
  active = cudaStreamCaptureStatusActive,        ///< capturing
  invalidated = cudaStreamCaptureStatusInvalidated,  ///< capturing, but an error spoilt it: end it
};

/// What cudaStreamGetCaptureInfo says about a stream.
struct stream_capture_info {
  capture_status status = capture_status::none;
  unsigned long long id = 0;  ///< unique in the process; 0 unless active
  /// The graph being captured into; holds no handle unless active.
  graph_ref graph{detail::state_handle<cudaGraph_t>(detail::handle_state::empty)};
  /// What the next work captured on the stream will depend on (with edge data); empty unless
  /// active.
  std::vector<graph_dependency> dependencies;
};

namespace detail {

inline capture_status raw_capture_status(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return capture_status::none;
  }
  return static_cast<capture_status>(status);
}

CURT_COLD inline std::string describe_capture_begin_failure(cudaStream_t stream) {
  if (stream == cudaStreamLegacy)
    return "the legacy default stream cannot be captured: capture a stream of your own (or "
           "stream_ref::per_thread_default())";
  return diagnose(
      [&] {
        switch (raw_capture_status(stream)) {
          case capture_status::active:
            return std::string("the stream is capturing already: end that capture first");
          case capture_status::invalidated:
            return std::string("the stream is still in an invalidated capture: end it "
                               "(cudaStreamEndCapture) first");
          default:
            return std::string();
        }
      },
      stream);
}

CURT_COLD inline std::string describe_capture_end_failure(cudaError_t status, bool into_target) {
  switch (status) {
    case cudaErrorStreamCaptureInvalidated:
      return std::string("the capture was invalidated by a call that cannot be captured "
                         "(synchronizing or querying the capturing stream, an unsafe call such as "
                         "cudaMalloc outside relaxed mode, a failed call on the stream)") +
             (into_target ? "" : ": no graph was made") +
             "; the capture is ended and the stream is usable again";
    case cudaErrorStreamCaptureUnjoined:
      return "work forked from the capturing stream onto another stream (through an event) was "
             "not joined back into it before the end";
    case cudaErrorStreamCaptureWrongThread:
      return "a capture in global or thread_local mode must end on the thread that began it "
             "(a relaxed one may end anywhere); it is still capturing";
    case cudaErrorIllegalState:
      return "the stream is not capturing: its capture was ended elsewhere";
    default:
      return "";
  }
}

// Begins a capture (into `target` when it is not null, after `count` dependencies).
inline void begin_capture(cudaStream_t stream, capture_mode mode, cudaGraph_t target,
                          const cudaGraphNode_t* nodes, const cudaGraphEdgeData* data,
                          std::size_t count) {
  cudaError_t status;
  bool added = false;
  {
    stream_context_scope in_context(stream);
    // Kept until the end: an invalidated capture hides the stream's context from the driver. (Not
    // for the per-thread default stream: its handle names another stream on each thread.)
    if (!is_default_stream_handle(stream))
      if (CUcontext context = stream_context(stream))
        added = capture_contexts().add(stream, context);
    auto native_mode = static_cast<cudaStreamCaptureMode>(mode);
    status = target ? cudaStreamBeginCaptureToGraph(stream, target, nodes, data, count, native_mode)
                    : cudaStreamBeginCapture(stream, native_mode);
  }
  if (CURT_LIKELY(status == cudaSuccess)) return;
  if (added) capture_contexts().remove(stream);  // not the entry of a capture running already
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  std::string why = describe_capture_begin_failure(stream);
  if (why.empty() && target && count)
    why = "the dependencies must be nodes of the target graph";
  throw_error_with_log(make_error_code(status),
                       target ? "cudaStreamBeginCaptureToGraph(stream, graph, " +
                                    std::to_string(count) + " dependencies)"
                              : std::string("cudaStreamBeginCapture(stream)"),
                       location(__FILE__, __LINE__), std::move(why), std::move(log));
}

// Whether CUDA destroyed the target of a capture into an existing graph that ended with `status`
// (see detail/graph_discards.hpp).
inline bool destroys_target(cudaError_t status) noexcept {
  return status == cudaErrorStreamCaptureInvalidated || status == cudaErrorStreamCaptureUnjoined;
}

// Ends a capture and returns its graph. `ended` becomes true unless the stream still captures
// (a capture ended on the wrong thread). `target`: the caller's graph captured into (null: the
// capture's own graph, destroyed when a failure hands one back).
inline cudaGraph_t end_capture(cudaStream_t stream, bool& ended, cudaGraph_t target,
                               const char* operation) {
  if (ended)
    raise(cudaErrorIllegalState, operation, "the capture was ended already: end() once",
          __FILE__, __LINE__);
  cudaGraph_t graph = nullptr;
  cudaError_t status;
  {
    stream_context_scope in_context(stream);
    status = cudaStreamEndCapture(stream, &graph);
  }
  if (CURT_LIKELY(status == cudaSuccess)) {
    ended = true;
    capture_contexts().remove(stream);
    return graph;
  }
  std::string log = take_driver_log();
  (void)cudaGetLastError();
  capture_status now = diagnose(
      [&] {
        if (graph && !target && !owner_keeps_off(graph)) {
          forget_conditional_bodies(graph);
          (void)cudaGraphDestroy(graph);
        }
        return raw_capture_status(stream);
      },
      stream);
  ended = now == capture_status::none;
  if (ended) capture_contexts().remove(stream);
  std::string why = describe_capture_end_failure(status, target != nullptr);
  if (target && destroys_target(status))
    why += "; " + describe_destroyed_target(capture_target_destroyed(target));
  throw_error_with_log(make_error_code(status), "cudaStreamEndCapture(stream)",
                       location(__FILE__, __LINE__), std::move(why), std::move(log));
}

// What the capturing stream keeps alive (its green context, for a stream made by
// green_context::make_stream()), shared with a graph captured on it: a CUDA user object holds the
// reference, and executable graphs keep their source graph's. CUDA releases it on a thread of
// its own, where CUDA calls are not allowed, so it is dropped on a user thread through the
// deferred queue, as host functions are (the next synchronize or stream destruction).
struct graph_stream_hold : host_task_base {
  stream_hold hold;
  explicit graph_stream_hold(stream_hold h) noexcept : hold(h) { destroy = &drop; }
  static void drop(host_task_base* self) noexcept {
    auto* kept = static_cast<graph_stream_hold*>(self);
    kept->hold.run();
    delete kept;
  }
  static void CUDART_CB released(void* self) noexcept {
    deferred().push(static_cast<graph_stream_hold*>(self));
  }
};

// `graph`, just captured on `stream` (alive), keeps what the stream keeps. One relaxed load when
// no stream keeps anything.
inline void share_stream_holds(cudaStream_t stream, cudaGraph_t graph) {
  stream_hold hold = held_by_streams().share(stream);
  if (CURT_LIKELY(hold.release == nullptr)) return;
  graph_stream_hold* kept = nullptr;
  try {
    kept = new graph_stream_hold(hold);
  } catch (...) {
    hold.run();
    throw;
  }
  stream_context_scope in_context(stream);
  cudaUserObject_t object = nullptr;
  cudaError_t status = cudaUserObjectCreate(&object, kept, &graph_stream_hold::released, 1,
                                            cudaUserObjectNoDestructorSync);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    graph_stream_hold::drop(kept);
    throw_error(status, "cudaUserObjectCreate(green context of the capturing stream)", __FILE__,
                __LINE__);
  }
  status = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    (void)cudaUserObjectRelease(object, 1);  // drops the reference (through the deferred queue)
    throw_error(status, "cudaGraphRetainUserObject(captured graph, green context)", __FILE__,
                __LINE__);
  }
}

// For a scope's destructor: ends a capture that did not reach end() and destroys the graph it
// gives (when it is the scope's own; `target`: the caller's graph captured into, else null). An
// invalidated or unjoined capture is what an exception usually leaves behind: not reported;
// anything else goes to the error handler. False when CUDA destroyed `target`.
inline bool abandon_capture(cudaStream_t stream, cudaGraph_t target) noexcept {
  try {
    stream_context_scope in_context(stream);
    cudaGraph_t graph = nullptr;
    cudaError_t status = cudaStreamEndCapture(stream, &graph);
    if (status != cudaErrorStreamCaptureWrongThread) capture_contexts().remove(stream);
    if (destroys_target(status)) {
      (void)cudaGetLastError();
      if (target) {
        (void)capture_target_destroyed(target);
        return false;
      }
    } else {
      check_noexcept(status, "cudaStreamEndCapture(stream) (a capture left without end())",
                     __FILE__, __LINE__);
    }
    if (graph && !target && !owner_keeps_off(graph)) {  // a broken graph is leaked
      forget_conditional_bodies(graph);
      check_noexcept(cudaGraphDestroy(graph), "cudaGraphDestroy(abandoned capture)", __FILE__,
                     __LINE__);
    }
  } catch (const cuda_error& error) {  // the stream's context could not be made current
    report_caught(error);
  }
  return true;
}

// The explanation part of a cuda_error's message ("<call> failed: <code>: <explanation> at
// <where>; driver log: <log>"); empty when it has none.
CURT_COLD inline std::string explanation_of(const cuda_error& error) {
  std::string what = error.what();
  std::string head = error.call() + " failed: " + error.code().message() + ": ";
  std::size_t tail = (error.where().empty() ? 0 : error.where().size() + 4) +
                     (error.driver_log().empty() ? 0 : error.driver_log().size() + 14);
  if (what.compare(0, head.size(), head) != 0 || what.size() < head.size() + tail) return {};
  return what.substr(head.size(), what.size() - head.size() - tail);
}

// The captured work threw `error` (the rethrow is the caller's `throw;`). If the capture is now
// invalidated, throws the same error with a note that says so instead.
CURT_COLD inline void rethrow_if_capture_invalidated(cudaStream_t stream, const cuda_error& error,
                                                     bool owns_graph) {
  if (typeid(error) != typeid(cuda_error)) return;  // keep derived types (out_of_memory) as they are
  if (diagnose([&] { return raw_capture_status(stream); }, stream) != capture_status::invalidated)
    return;
  std::string why = error.status() == cudaErrorStreamCaptureUnsupported
                        ? "this call cannot be made while its stream is being captured, and it "
                          "invalidated the capture"
                        : "the capture is invalidated";
  why += owns_graph ? ": curt::capture ended it and discarded its graph; the stream is usable again"
                    : ": curt::capture_to_graph ended it, and CUDA destroyed the target graph with "
                      "every node it held (for a conditional body: the graph holding it can no "
                      "longer be instantiated or destroyed, and curt refuses its uses); the "
                      "stream is usable again";
  std::string own = explanation_of(error);
  if (!own.empty()) why += " (" + own + ")";
  throw cuda_error(error.code(), error.call(), std::move(why), error.where(), error.driver_log());
}

template <class Work>
void run_captured(stream_ref stream, Work&& work, bool owns_graph) {
  static_assert(std::is_invocable_v<Work&&> || std::is_invocable_v<Work&&, stream_ref>,
                "curt::capture: the work must be callable with no arguments or with the "
                "capturing curt::stream_ref");
  try {
    if constexpr (std::is_invocable_v<Work&&, stream_ref>)
      std::forward<Work>(work)(stream);
    else
      std::forward<Work>(work)();
  } catch (const cuda_error& error) {
    rethrow_if_capture_invalidated(stream.get(), error, owns_graph);
    throw;
  }
}

}  // namespace detail

/// Whether `stream` is capturing, into which graph, and what its next captured work depends on
/// (cudaStreamGetCaptureInfo, with edge data).
inline stream_capture_info capture_info(stream_ref stream) {
  cudaStream_t h = stream.get();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* nodes = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  std::size_t count = 0;
  stream_capture_info info;
  detail::stream_context_scope in_context(h);
  cudaError_t result = cudaStreamGetCaptureInfo(h, &status, &id, &graph, &nodes, &data, &count);
  if (CURT_UNLIKELY(result != cudaSuccess))
    detail::throw_error(make_error_code(result), "cudaStreamGetCaptureInfo(stream)",
                        detail::location(__FILE__, __LINE__),
                        result == cudaErrorStreamCaptureImplicit
                            ? "the legacy default stream cannot be asked while a blocking stream "
                              "of its device is capturing"
                            : "");
  info.status = static_cast<capture_status>(status);
  if (status != cudaStreamCaptureStatusActive) return info;
  info.id = id;
  info.graph = graph;
  info.dependencies.resize(count);
  for (std::size_t i = 0; i < count; ++i)  // the arrays are valid until the next call on it
    info.dependencies[i] = graph_dependency{nodes[i], data ? data[i] : cudaGraphEdgeData{}};
  return info;
}

/// Captures the work enqueued on a stream into a new graph, from construction to end(). Not
/// copyable or movable: the capture belongs to this scope.
class capture_scope {
 public:
  explicit capture_scope(stream_ref stream, capture_mode mode = capture_mode::global)
      : stream_(stream.get()) {
    detail::begin_capture(stream_, mode, nullptr, nullptr, nullptr, 0);
  }
  /// A temporary stream owner would be gone before the capture ends.
  explicit capture_scope(curt::stream&&, capture_mode = capture_mode::global) = delete;
  /// Ends the capture if end() was not called, and destroys the graph it made.
  ~capture_scope() {
    if (!ended_) (void)detail::abandon_capture(stream_, nullptr);
  }
  capture_scope(const capture_scope&) = delete;
  capture_scope& operator=(const capture_scope&) = delete;

  /// Ends the capture and returns the graph. Throws for an invalidated capture (saying so), or
  /// when called twice.
  curt::graph end() {
    curt::graph g = curt::graph::from_native_handle(
        detail::end_capture(stream_, ended_, nullptr, "curt::capture_scope::end()"));
    detail::share_stream_holds(stream_, g.get());
    return g;
  }

  stream_ref stream() const noexcept { return stream_; }
  /// The graph being captured into (to retain() values the captured work uses). Throws when
  /// the capture is not active.
  graph_ref graph() const {
    if (ended_)  // the stream may be in another capture by now
      detail::raise(cudaErrorIllegalState, "curt::capture_scope::graph()", "the capture has ended",
                    __FILE__, __LINE__);
    stream_capture_info info = capture_info(stream_);
    if (info.status == capture_status::invalidated)
      detail::raise(cudaErrorStreamCaptureInvalidated, "curt::capture_scope::graph()",
                    "the capture was invalidated by an earlier call that cannot be captured: "
                    "there is no graph to add to",
                    __FILE__, __LINE__);
    if (info.status != capture_status::active)
      detail::raise(cudaErrorIllegalState, "curt::capture_scope::graph()",
                    "the stream is not capturing: its capture was ended elsewhere", __FILE__,
                    __LINE__);
    return info.graph;
  }

 private:
  stream_ref stream_;
  bool ended_ = false;
};

/// Captures the work enqueued on a stream into `target`, a graph of the caller's, after
/// `dependencies` (nodes of target; none: the work starts at the graph's roots).
/// (cudaStreamBeginCaptureToGraph.) A capture that does not reach end() leaves target with what
/// was captured before. An invalidated or unjoined capture makes CUDA destroy the target, with
/// the nodes it held before: a curt::graph owner given as the target is then "discarded" (its
/// uses throw saying so; it destroys nothing); if the target was a conditional body, CUDA can no
/// longer instantiate or destroy the graph holding it: curt refuses its uses, saying so, and
/// leaks it (see detail/graph_discards.hpp).
class capture_to_graph_scope {
 public:
  capture_to_graph_scope(stream_ref stream, curt::graph& target,
                         capture_mode mode = capture_mode::global)
      : capture_to_graph_scope(stream, graph_ref(target), {}, mode) {
    owner_ = &target;
  }
  capture_to_graph_scope(stream_ref stream, curt::graph& target,
                         const std::vector<graph_dependency>& dependencies,
                         capture_mode mode = capture_mode::global)
      : capture_to_graph_scope(stream, graph_ref(target), dependencies, mode) {
    owner_ = &target;
  }
  capture_to_graph_scope(stream_ref stream, graph_ref target,
                         capture_mode mode = capture_mode::global)
      : capture_to_graph_scope(stream, target, {}, mode) {}
  capture_to_graph_scope(stream_ref stream, graph_ref target,
                         const std::vector<graph_dependency>& dependencies,
                         capture_mode mode = capture_mode::global)
      : stream_(stream.get()), target_(target.get()) {
    cudaGraph_t g = target_;
    std::vector<cudaGraphNode_t> nodes(dependencies.size());
    std::vector<cudaGraphEdgeData> data(dependencies.size());
    for (std::size_t i = 0; i < dependencies.size(); ++i) {
      nodes[i] = dependencies[i].node;
      data[i] = dependencies[i].data;
    }
    detail::begin_capture(stream_, mode, g, nodes.data(), data.data(), nodes.size());
  }
  /// A temporary stream or target would be gone before the capture ends.
  capture_to_graph_scope(curt::stream&&, graph_ref, capture_mode = capture_mode::global) = delete;
  capture_to_graph_scope(stream_ref, curt::graph&&, capture_mode = capture_mode::global) = delete;
  capture_to_graph_scope(curt::stream&&, graph_ref, const std::vector<graph_dependency>&,
                         capture_mode = capture_mode::global) = delete;
  capture_to_graph_scope(stream_ref, curt::graph&&, const std::vector<graph_dependency>&,
                         capture_mode = capture_mode::global) = delete;
  /// Ends the capture if end() was not called; what was captured stays in the target.
  ~capture_to_graph_scope() {
    if (ended_) return;
    if (!detail::abandon_capture(stream_, target_)) {
      target_destroyed();
      return;
    }
    try {
      detail::share_stream_holds(stream_, target_);
    } catch (const std::exception& error) {
      detail::report_caught(error);
    }
  }
  capture_to_graph_scope(const capture_to_graph_scope&) = delete;
  capture_to_graph_scope& operator=(const capture_to_graph_scope&) = delete;

  /// Ends the capture; the work is in the target graph. Throws for an invalidated capture.
  void end() {
    try {
      (void)detail::end_capture(stream_, ended_, target_, "curt::capture_to_graph_scope::end()");
    } catch (const cuda_error& error) {
      if (detail::destroys_target(error.status())) target_destroyed();
      throw;
    }
    detail::share_stream_holds(stream_, target_);
  }
  stream_ref stream() const noexcept { return stream_; }

 private:
  void target_destroyed() noexcept {
    if (owner_ && owner_->handle_ == target_) owner_->destroyed_by_cuda();
  }
  stream_ref stream_;
  cudaGraph_t target_;
  curt::graph* owner_ = nullptr;  // the target's owner, when the caller gave it
  bool ended_ = false;
};

/// Captures what `work` enqueues on `stream` (called as work() or work(stream)) into a new graph.
/// If work throws, the capture is ended and discarded and the exception rethrown; an invalidated
/// capture throws a cuda_error that says so.
template <class Work>
curt::graph capture(stream_ref stream, Work&& work, capture_mode mode = capture_mode::global) {
  capture_scope scope(stream, mode);
  detail::run_captured(scope.stream(), std::forward<Work>(work), true);
  return scope.end();
}

namespace detail {
template <class Work>
void capture_into(capture_to_graph_scope& scope, Work&& work) {
  run_captured(scope.stream(), std::forward<Work>(work), false);
  scope.end();
}
}  // namespace detail

/// Captures what `work` enqueues on `stream` into `target`, after `dependencies` (see
/// capture_to_graph_scope; given the owner, curt marks it when CUDA destroys the graph).
template <class Work>
void capture_to_graph(stream_ref stream, graph_ref target, Work&& work,
                      capture_mode mode = capture_mode::global) {
  capture_to_graph_scope scope(stream, target, mode);
  detail::capture_into(scope, std::forward<Work>(work));
}
template <class Work>
void capture_to_graph(stream_ref stream, curt::graph& target, Work&& work,
                      capture_mode mode = capture_mode::global) {
  capture_to_graph_scope scope(stream, target, mode);
  detail::capture_into(scope, std::forward<Work>(work));
}
template <class Work>
void capture_to_graph(stream_ref stream, graph_ref target,
                      const std::vector<graph_dependency>& dependencies, Work&& work,
                      capture_mode mode = capture_mode::global) {
  capture_to_graph_scope scope(stream, target, dependencies, mode);
  detail::capture_into(scope, std::forward<Work>(work));
}
template <class Work>
void capture_to_graph(stream_ref stream, curt::graph& target,
                      const std::vector<graph_dependency>& dependencies, Work&& work,
                      capture_mode mode = capture_mode::global) {
  capture_to_graph_scope scope(stream, target, dependencies, mode);
  detail::capture_into(scope, std::forward<Work>(work));
}

}  // namespace curt
