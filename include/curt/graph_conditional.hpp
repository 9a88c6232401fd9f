// curt/graph_conditional.hpp: conditional nodes (IF, IF/ELSE, WHILE, SWITCH), their handles, and
// the device-side call that sets a condition.
//
//   curt::conditional_handle more = curt::conditional_handle::create(
//       g, 1, curt::conditional_flags::assign_default);     // 1 at the start of every launch
//   curt::conditional_node loop = curt::add_while_node(g, {init}, more);
//   auto step = curt::add_kernel_node(loop.body(), {}, config, jacobi_step, x, x_next, n);
//   curt::add_kernel_node(loop.body(), {step}, one, check, residual, tolerance, more);
//   //   __global__ void check(..., curt::conditional_handle more) {
//   //     ... curt::set_condition(more, residual > tolerance);  // from one thread
//   //   }
//
// A conditional node runs its bodies on the device, as the condition says when the node is
// reached (and, for WHILE, after each pass through its body): IF runs its body when the
// condition is not 0 and, with an ELSE body (add_if_else_node), that one when it is 0; WHILE runs
// its body as long as the condition is not 0; SWITCH runs body n when the condition is n, and
// none when it is not below the number of bodies. No host round trip.
//
// Bodies are graphs the caller fills with the same calls as any graph (add_kernel_node(body, ...)
// from <curt/graph_nodes.hpp>, or curt::capture_to_graph(other_stream, body, work)). They belong to the node: no owner, no
// destruction. CUDA's rules, which curt turns into errors where the misuse happens:
// - a body holds only kernel, empty, child-graph, memset, memcpy and conditional nodes: a host,
//   event, memory allocation or free node added to a body curt made, or a child graph holding
//   one, is refused before CUDA is called (what stream capture puts into a body is CUDA's to
//   refuse);
// - a graph that holds a conditional node cannot be cloned, nor embedded as a child graph, and can
//   have only one executable graph at a time: CUDA refuses, and curt's error says why;
// - a handle serves one conditional node, in the graph it was made for or in a body below it; an
//   executable graph with a handle no node uses is refused (cudaGraphInstantiateConditionalHandleUnused).
//
// During stream capture, add_if_node(stream, handle) and friends add the node to the capturing
// graph after what the stream's next work would depend on, and make the node that dependency
// (cudaStreamGetCaptureInfo, cudaGraphAddNode, cudaStreamUpdateCaptureDependencies); capture
// its bodies with another stream (a stream captures one graph at a time):
//   curt::capture_to_graph(side, node.body(), [&](curt::stream_ref s) { ... });
#pragma once

#include <curt/detail/config.hpp>
#include <curt/detail/graph_bodies.hpp>
#include <curt/detail/graph_errors.hpp>
#include <curt/detail/graph_node_add.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>
#include <curt/graph_node.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace curt {

/// How a conditional handle's value starts each launch of its graph.
enum class conditional_flags : unsigned {
  /// Undefined at the start of each launch: work before the conditional node sets it
  /// (set_condition in a kernel). CUDA ignores the default value then.
  none = 0,
  /// The default value at the start of every launch (cudaGraphCondAssignDefault).
  assign_default = cudaGraphCondAssignDefault,
};

/// The value a conditional node reads: a cudaGraphConditionalHandle. Made on the host for a graph;
/// passed by value to kernels, which set it with curt::set_condition. Handles are never destroyed
/// (CUDA has no call for it); each serves one conditional node.
class conditional_handle {
 public:
  constexpr conditional_handle() noexcept = default;
  CURT_HOST_DEVICE constexpr explicit conditional_handle(cudaGraphConditionalHandle native) noexcept
      : handle_(native) {}
  CURT_HOST_DEVICE constexpr cudaGraphConditionalHandle native() const noexcept { return handle_; }

  /// A handle for a conditional node of `g` or of a body below it
  /// (cudaGraphConditionalHandleCreate). With conditional_flags::assign_default every launch
  /// starts with `default_value`; without, the value is undefined until the device sets it.
  static conditional_handle create(graph_ref g, unsigned default_value = 0,
                                   conditional_flags flags = conditional_flags::none) {
    cudaGraph_t graph = detail::graph_access(g).handle("conditional_handle::create()");
    detail::current_device_scope in_context;
    return make(graph, default_value, flags);
  }
  /// The same for the graph `capturing` is capturing into (refused when it is not capturing).
  static conditional_handle create(stream_ref capturing, unsigned default_value = 0,
                                   conditional_flags flags = conditional_flags::none);

  friend constexpr bool operator==(conditional_handle a, conditional_handle b) noexcept {
    return a.handle_ == b.handle_;
  }
  friend constexpr bool operator!=(conditional_handle a, conditional_handle b) noexcept {
    return a.handle_ != b.handle_;
  }

 private:
  static conditional_handle make(cudaGraph_t graph, unsigned default_value,
                                 conditional_flags flags) {
    cudaGraphConditionalHandle handle = 0;
    cudaError_t status = cudaGraphConditionalHandleCreate(&handle, graph, default_value,
                                                          static_cast<unsigned>(flags));
    if (CURT_UNLIKELY(status != cudaSuccess))
      detail::throw_error(make_error_code(status),
                          "cudaGraphConditionalHandleCreate(graph, default " +
                              std::to_string(default_value) + ", flags " +
                              std::to_string(static_cast<unsigned>(flags)) + ")",
                          detail::location(__FILE__, __LINE__));
    return conditional_handle(handle);
  }

  cudaGraphConditionalHandle handle_ = 0;
};

#if defined(__CUDACC__)
/// Sets the value the conditional node of `handle` reads next (cudaGraphSetConditional): for a
/// WHILE node, whether its body runs again. Call it from one thread: concurrent calls race
/// (undefined in CUDA). The kernel must run in the handle's context (the graph's).
__device__ inline void set_condition(conditional_handle handle, unsigned value) {
  cudaGraphSetConditional(handle.native(), value);
}
/// The same for a native handle.
__device__ inline void set_condition(cudaGraphConditionalHandle handle, unsigned value) {
  cudaGraphSetConditional(handle, value);
}
#endif

/// A conditional node and its bodies (graphs that belong to the node, valid as long as it is).
class conditional_node : public graph_node {
 public:
  conditional_node() noexcept = default;
  conditional_node(graph_node node, cudaGraphConditionalNodeType kind, conditional_handle handle,
                   cudaGraph_t* bodies, unsigned count) noexcept
      : graph_node(node), kind_(kind), handle_(handle), bodies_(bodies), count_(count) {}

  cudaGraphConditionalNodeType kind() const noexcept { return kind_; }
  conditional_handle handle() const noexcept { return handle_; }
  /// 1 for IF and WHILE, 2 for IF/ELSE, the number of cases for SWITCH.
  unsigned body_count() const noexcept { return count_; }

  /// Body `index`: the only one of IF and WHILE, the IF body of IF/ELSE (0) or its ELSE body (1),
  /// case `index` of SWITCH. Throws for an index past the last body.
  graph_ref body(unsigned index = 0) const {
    if (CURT_UNLIKELY(bodies_ == nullptr || index >= count_))
      detail::raise(cudaErrorInvalidValue,
                    "curt::conditional_node::body(" + std::to_string(index) + ")",
                    bodies_ == nullptr
                        ? std::string("this conditional_node is empty (default-constructed)")
                        : "a conditional " +
                              std::string(detail::conditional_kind_name(kind_, count_)) +
                              " node has " + std::to_string(count_) + " bod" +
                              (count_ == 1 ? "y" : "ies") + ", numbered from 0",
                    __FILE__, __LINE__);
    return graph_ref(bodies_[index]);
  }
  /// The ELSE body of an IF/ELSE node (body 1); throws for any other node.
  graph_ref else_body() const {
    if (CURT_UNLIKELY(kind_ != cudaGraphCondTypeIf || count_ != 2))
      detail::raise(cudaErrorInvalidValue, "curt::conditional_node::else_body()",
                    "only an IF/ELSE node (add_if_else_node) has an ELSE body; this is a " +
                        std::string(detail::conditional_kind_name(kind_, count_)) + " node",
                    __FILE__, __LINE__);
    return body(1);
  }

 private:
  cudaGraphConditionalNodeType kind_ = cudaGraphCondTypeIf;
  conditional_handle handle_;
  cudaGraph_t* bodies_ = nullptr;  // CUDA's array, valid for the node's life
  unsigned count_ = 0;
};

namespace detail {

/// Refuses, before CUDA is called, a conditional node with no body.
inline void check_conditional_bodies(cudaGraphConditionalNodeType kind, unsigned count,
                                     const char* operation) {
  if (kind == cudaGraphCondTypeSwitch && count == 0)
    raise(cudaErrorInvalidValue, std::string(operation) + "(0 cases)",
          "a SWITCH node has at least one body (case 0). Nothing was added", __FILE__, __LINE__);
}

inline cudaGraphNodeParams conditional_node_params(conditional_handle handle,
                                                   cudaGraphConditionalNodeType kind,
                                                   unsigned count) noexcept {
  cudaGraphNodeParams p = node_params(cudaGraphNodeTypeConditional);
  p.conditional.handle = handle.native();
  p.conditional.type = kind;
  p.conditional.size = count;
  p.conditional.phGraph_out = nullptr;  // CUDA's out-parameter
  return p;
}

// Records the new node's bodies (parent: `graph`) so that nodes CUDA does not run in a body are
// refused when added, and ties the record's end to the outermost graph through a marker user
// object, for graphs destroyed without curt (see detail/graph_bodies.hpp). Best effort: nothing
// here throws. The caller has made the context current.
inline void record_bodies(cudaGraph_t graph, cudaGraphConditionalNodeType kind,
                          cudaGraph_t* bodies, unsigned count) noexcept {
  conditional_bodies& table = conditional_body_table();
  cudaGraph_t root = table.root_of(graph);
  unsigned long long id = table.next_id();
  cudaUserObject_t marker = nullptr;
  bool marked = false;
  if (cudaUserObjectCreate(&marker, reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)),
                           &forget_conditional_node, 1, cudaUserObjectNoDestructorSync) ==
      cudaSuccess) {
    marked = cudaGraphRetainUserObject(root, marker, 1, cudaGraphUserObjectMove) == cudaSuccess;
    if (!marked) (void)cudaUserObjectRelease(marker, 1);  // its destructor forgets `id`...
  }
  (void)cudaGetLastError();
  if (!marked) id = table.next_id();  // ...so record under another number
  table.add(graph, id, kind, bodies, count);
}

CURT_COLD inline const char* conditional_function(cudaGraphConditionalNodeType kind,
                                                  unsigned count) noexcept {
  switch (kind) {
    case cudaGraphCondTypeIf: return count == 2 ? "curt::add_if_else_node" : "curt::add_if_node";
    case cudaGraphCondTypeWhile: return "curt::add_while_node";
    default: return "curt::add_switch_node";
  }
}

inline conditional_node add_conditional(graph_ref g, const node_dependencies& dependencies,
                                        conditional_handle handle,
                                        cudaGraphConditionalNodeType kind, unsigned count) {
  const char* function = conditional_function(kind, count);
  std::string operation = std::string(function + 6) + "()";  // "add_while_node()"
  cudaGraph_t graph = prepare_node(g, dependencies, cudaGraphNodeTypeConditional, function,
                                   operation.c_str());
  check_conditional_bodies(kind, count, function);
  cudaGraphNodeParams p = conditional_node_params(handle, kind, count);
  current_device_scope in_context;
  cudaGraphNode_t node = add_graph_node(graph, dependencies, p, function);
  record_bodies(graph, kind, p.conditional.phGraph_out, count);
  return conditional_node(node, kind, handle, p.conditional.phGraph_out, count);
}

inline conditional_node add_conditional_in_capture(stream_ref capturing,
                                                   conditional_handle handle,
                                                   cudaGraphConditionalNodeType kind,
                                                   unsigned count) {
  const char* function = conditional_function(kind, count);
  cudaStream_t stream = capturing.get();
  check_conditional_bodies(kind, count, function);
  stream_context_scope in_context(stream);
  capture_point point = active_capture(stream, function, not_capturing_use_graph);
  cudaGraphNodeParams p = conditional_node_params(handle, kind, count);
  cudaGraphNode_t node = nullptr;
  cudaError_t status =
      cudaGraphAddNode(&node, point.graph, point.nodes, point.data, point.count, &p);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    std::vector<graph_dependency> dependencies(point.count);
    for (std::size_t i = 0; i < point.count; ++i)
      dependencies[i] = graph_dependency{point.nodes[i], point.data ? point.data[i] : cudaGraphEdgeData{}};
    throw_add_node_error(status, point.graph, node_dependencies(dependencies), p, function);
  }
  status = cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1,
                                               cudaStreamSetCaptureDependencies);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    std::string log = take_driver_log();
    (void)cudaGetLastError();
    (void)cudaGraphDestroyNode(node);  // leave the capture as it was
    (void)cudaGetLastError();
    throw_error_with_log(make_error_code(status),
                         "cudaStreamUpdateCaptureDependencies(stream, conditional node, set)",
                         location(__FILE__, __LINE__),
                         "the node was removed again: the capture is as it was", std::move(log));
  }
  record_bodies(point.graph, kind, p.conditional.phGraph_out, count);
  return conditional_node(node, kind, handle, p.conditional.phGraph_out, count);
}

}  // namespace detail

inline conditional_handle conditional_handle::create(stream_ref capturing, unsigned default_value,
                                                     conditional_flags flags) {
  cudaStream_t stream = capturing.get();
  detail::stream_context_scope in_context(stream);
  detail::capture_point point = detail::active_capture(stream, "curt::conditional_handle::create",
                                                       detail::not_capturing_use_graph);
  return make(point.graph, default_value, flags);
}

/// Adds an IF node: its body (body()) runs when the condition is not 0.
inline conditional_node add_if_node(graph_ref g, const node_dependencies& dependencies,
                                    conditional_handle handle) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeIf, 1);
}
/// Adds an IF/ELSE node: body(0) runs when the condition is not 0, else_body() (body(1)) when it
/// is 0.
inline conditional_node add_if_else_node(graph_ref g, const node_dependencies& dependencies,
                                         conditional_handle handle) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeIf, 2);
}
/// Adds a WHILE node: its body runs again and again as long as the condition is not 0 (tested
/// when the node is reached and after each pass); work in the body sets it to 0 to stop.
inline conditional_node add_while_node(graph_ref g, const node_dependencies& dependencies,
                                       conditional_handle handle) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeWhile, 1);
}
/// Adds a SWITCH node with `cases` bodies: body(n) runs when the condition is n; none runs when
/// it is `cases` or more. At least one case.
inline conditional_node add_switch_node(graph_ref g, const node_dependencies& dependencies,
                                        conditional_handle handle, unsigned cases) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeSwitch, cases);
}

/// The same, added to the graph `capturing` is capturing into, after what the stream's next
/// work would depend on; that work then depends on the node.
inline conditional_node add_if_node(stream_ref capturing, conditional_handle handle) {
  return detail::add_conditional_in_capture(capturing, handle, cudaGraphCondTypeIf, 1);
}
inline conditional_node add_if_else_node(stream_ref capturing, conditional_handle handle) {
  return detail::add_conditional_in_capture(capturing, handle, cudaGraphCondTypeIf, 2);
}
inline conditional_node add_while_node(stream_ref capturing, conditional_handle handle) {
  return detail::add_conditional_in_capture(capturing, handle, cudaGraphCondTypeWhile, 1);
}
inline conditional_node add_switch_node(stream_ref capturing, conditional_handle handle,
                                        unsigned cases) {
  return detail::add_conditional_in_capture(capturing, handle, cudaGraphCondTypeSwitch, cases);
}

}  // namespace curt
