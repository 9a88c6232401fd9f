// curt/graph/conditional.hpp: conditional nodes (IF, IF/ELSE, WHILE, SWITCH), their handles, and
// the device-side call that sets a condition: work decided on the device, no host round trip.
//
//   curt::conditional_handle more = curt::conditional_handle::create(g, 1);  // 1 at every start
//   curt::conditional_node loop = curt::add_while_node(g, {init}, more);
//   curt::add_kernel_node(loop.body(), {}, config, step_and_check, x, more);
//   //   in step_and_check, from one thread: curt::set_condition(more, residual > tolerance);
//   curt::capture_to_graph(side, loop.body(), [&](curt::stream_ref s) { ... });  // or captured
//
// Bodies, which belong to the node, are filled as any graph. CUDA's rules: a body holds only the
// kinds node_kinds.hpp marks (else the graph's instantiation fails); a graph with a conditional
// node is never cloned nor a child, and has one executable graph at a time.
#pragma once

#include <curt/graph/capture.hpp>
#include <curt/graph/nodes.hpp>

namespace curt {

/// Each launch of its graph starts a conditional handle at its default value, whatever the flags
/// say (curt always asks CUDA to assign it; assign_default is kept for code that names it).
enum class conditional_flags : unsigned {
  none = 0,
  assign_default = cudaGraphCondAssignDefault,
};
/// The value a conditional node reads, which kernels set with curt::set_condition (never freed).
class conditional_handle : public detail::device_value<cudaGraphConditionalHandle> {
 public:
  constexpr conditional_handle() noexcept = default;  ///< null, or a native handle (unchecked) @{
  CURT_HOST_DEVICE constexpr explicit conditional_handle(cudaGraphConditionalHandle native) noexcept
      : device_value(native) {}  ///@}

  /// A handle for a conditional node of `g` or of a body below it.
  static conditional_handle create(graph_ref g, unsigned default_value = 0,
                                   conditional_flags flags = conditional_flags::none) {
    cudaGraph_t graph = detail::graph_access::handle(g, "conditional_handle::create()");
    detail::context_scope in(detail::any_context);
    return make(graph, default_value, flags);
  }
  /// The same for the graph `capturing` is capturing into (refused when it is not capturing).
  static conditional_handle create(stream_ref capturing, unsigned default_value = 0,
                                   conditional_flags flags = conditional_flags::none) {
    cudaStream_t stream = capturing.get();
    detail::context_scope in(detail::for_stream, stream);
    const detail::capture_point point = detail::active_capture(
        stream, "curt::conditional_handle::create", detail::not_capturing_use_graph);
    return make(point.graph, default_value, flags);
  }

 private:
  // CUDA sets the default value only if asked (cudaGraphCondAssignDefault), else each launch starts
  // with the last one's value (0 after a WHILE loop that ended); curt always asks.
  static conditional_handle make(cudaGraph_t graph, unsigned default_value,
                                 conditional_flags flags) {
    cudaGraphConditionalHandle handle = 0;
    const auto native_flags = static_cast<unsigned>(flags) | cudaGraphCondAssignDefault;
    detail::check(
        cudaGraphConditionalHandleCreate(&handle, graph, default_value, native_flags),
        "cudaGraphConditionalHandleCreate",
        {"graph", {"default", default_value}, {"flags", native_flags}}, __FILE__, __LINE__);
    return conditional_handle(handle);
  }
};

#if defined(__CUDACC__)
/// Sets the value the node of `handle` reads next (one thread of a kernel in the graph's context).
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
  conditional_node() noexcept = default;  ///< empty, or `node` with CUDA's array of its bodies @{
  conditional_node(graph_node node, cudaGraphConditionalNodeType kind, conditional_handle handle,
                   cudaGraph_t* bodies, unsigned count) noexcept
      : graph_node(node), kind_(kind), handle_(handle), bodies_(bodies), count_(count) {}  ///@}

  cudaGraphConditionalNodeType kind() const noexcept { return kind_; }  ///< IF, WHILE or SWITCH
  conditional_handle handle() const noexcept { return handle_; }  ///< the value the node reads
  /// 1 for IF and WHILE, 2 for IF/ELSE, the number of cases for SWITCH.
  unsigned body_count() const noexcept { return count_; }

  /// Body `index`: IF/ELSE's IF body (0) or ELSE body (1), SWITCH's case `index`.
  graph_ref body(unsigned index = 0) const {
    if (CURT_UNLIKELY(bodies_ == nullptr || index >= count_))
      detail::raise(cudaErrorInvalidValue, detail::fmt("curt::conditional_node::body(%u)", index),
                    bodies_ == nullptr
                        ? detail::fmt("this conditional_node is empty (default-constructed)")
                        : detail::fmt("a conditional %s node has %u bod%s, numbered from 0",
                                      kind_name().c_str(), count_, count_ == 1 ? "y" : "ies"),
                    __FILE__, __LINE__);
    return graph_ref(bodies_[index]);
  }
  /// The ELSE body of an IF/ELSE node (body 1); throws for any other node.
  graph_ref else_body() const {
    if (CURT_UNLIKELY(kind_ != cudaGraphCondTypeIf || count_ != 2))
      detail::raise(cudaErrorInvalidValue, "curt::conditional_node::else_body()",
                    detail::fmt("only an IF/ELSE node (add_if_else_node) has an ELSE body; this "
                                "is a %s node", kind_name().c_str()),
                    __FILE__, __LINE__);
    return body(1);
  }

 private:
  CURT_COLD std::string kind_name() const {  // "IF/ELSE", for messages
    if (kind_ == cudaGraphCondTypeIf) return count_ == 2 ? "IF/ELSE" : "IF";
    return kind_ == cudaGraphCondTypeWhile ? "WHILE" : "SWITCH";
  }
  cudaGraphConditionalNodeType kind_ = cudaGraphCondTypeIf;
  conditional_handle handle_;
  cudaGraph_t* bodies_ = nullptr;  // CUDA's array, valid for the node's life
  unsigned count_ = 0;
};

namespace detail {

inline const char* conditional_function(cudaGraphConditionalNodeType kind, unsigned count) {
  if (kind != cudaGraphCondTypeIf)
    return kind == cudaGraphCondTypeWhile ? "curt::add_while_node" : "curt::add_switch_node";
  return count == 2 ? "curt::add_if_else_node" : "curt::add_if_node";
}
inline void check_cases(cudaGraphConditionalNodeType kind, unsigned count) {
  if (CURT_UNLIKELY(kind == cudaGraphCondTypeSwitch && count == 0))
    raise(cudaErrorInvalidValue, "curt::add_switch_node(0 cases)",
          "a SWITCH node has at least one body (case 0). Nothing was added", __FILE__, __LINE__);
}
inline conditional_node add_conditional(graph_ref g, const node_dependencies& dependencies,
                                        conditional_handle handle,
                                        cudaGraphConditionalNodeType kind, unsigned count) {
  const char* function = conditional_function(kind, count);
  cudaGraph_t graph = prepare_node(g, dependencies, function);
  check_cases(kind, count);
  cudaGraphNodeParams p = conditional_node_params(handle.native(), kind, count);
  graph_node node = add_graph_node(graph, dependencies, p, function);
  return conditional_node(node, kind, handle, p.conditional.phGraph_out, count);
}
inline conditional_node add_conditional_in_capture(stream_ref capturing, conditional_handle handle,
                                                   cudaGraphConditionalNodeType kind,
                                                   unsigned count) {
  const char* function = conditional_function(kind, count);
  check_cases(kind, count);
  cudaStream_t stream = capturing.get();
  context_scope in(for_stream, stream);
  const capture_point point = active_capture(stream, function, not_capturing_use_graph);
  std::vector<graph_dependency> before(point.count);
  for (std::size_t i = 0; i < point.count; ++i)
    before[i] = graph_dependency{point.nodes[i], point.data ? point.data[i] : cudaGraphEdgeData{}};
  cudaGraphNodeParams p = conditional_node_params(handle.native(), kind, count);
  cudaGraphNode_t node = add_graph_node(point.graph, before, p, function);
  cudaError_t status = cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1,
                                                           cudaStreamSetCaptureDependencies);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    (void)cudaGraphDestroyNode(node);  // leave the capture as it was
    throw_error(make_error_code(status),
                "cudaStreamUpdateCaptureDependencies(stream, conditional node, set)", __FILE__,
                __LINE__, "the node was removed again: the capture is as it was");
  }
  return conditional_node(node, kind, handle, p.conditional.phGraph_out, count);
}

}  // namespace detail

/// Adds an IF node: its body (body()) runs when the condition is not 0.
inline conditional_node add_if_node(graph_ref g, const node_dependencies& dependencies,
                                    conditional_handle handle) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeIf, 1);
}
/// Adds an IF/ELSE node: body(0) runs when the condition is not 0, else_body() when it is 0.
inline conditional_node add_if_else_node(graph_ref g, const node_dependencies& dependencies,
                                         conditional_handle handle) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeIf, 2);
}
/// Adds a WHILE node: its body runs as long as the condition is not 0 (tested before each pass).
inline conditional_node add_while_node(graph_ref g, const node_dependencies& dependencies,
                                       conditional_handle handle) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeWhile, 1);
}
/// Adds a SWITCH node with `cases` (at least 1) bodies: body(n) runs when the condition is n.
inline conditional_node add_switch_node(graph_ref g, const node_dependencies& dependencies,
                                        conditional_handle handle, unsigned cases) {
  return detail::add_conditional(g, dependencies, handle, cudaGraphCondTypeSwitch, cases);
}
/// The same, added to the graph `capturing` captures into; the stream's next work depends on it.
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
