// curt/graph/node.hpp: a node of a graph (curt::graph_node, a value over cudaGraphNode_t: CUDA
// 13.0 cannot tell a node's graph) and what a node added to a graph depends on
// (curt::node_dependencies): nodes, and edges with data between kernel nodes.
//
//   curt::graph_node k = curt::add_kernel_node(g, {}, config, producer, x, y, n);
//   curt::add_kernel_node(g, {curt::programmatic_edge(k)}, config, consumer, y, z, n);
//   curt::add_empty_node(g, {a, b, c});                    // after a, b and c
#pragma once

#include <curt/core/entries.hpp>
#include <curt/graph/graph.hpp>

namespace curt {

/// A node of a graph: its handle (the graph owns it); queries on a null one throw.
class graph_node {
 public:
  constexpr graph_node() noexcept = default;  ///< null or native `node`, which get() returns @{
  constexpr graph_node(cudaGraphNode_t node) noexcept : node_(node) {}  // NOLINT: implicit

  constexpr cudaGraphNode_t get() const noexcept { return node_; }    ///@}
  constexpr bool valid() const noexcept { return node_ != nullptr; }  ///< false for a null node

  /// The node's type (cudaGraphNodeGetType); throws for a null node, as the queries below do.
  cudaGraphNodeType type() const { return curt::node_type(checked("type()")); }
  /// The nodes this one depends on (cudaGraphNodeGetDependencies), with each edge's data.
  std::vector<graph_dependency> dependencies() const { return neighbours(true, "dependencies()"); }
  /// The nodes that depend on this one (cudaGraphNodeGetDependentNodes), with each edge's data.
  std::vector<graph_dependency> dependents() const { return neighbours(false, "dependents()"); }

  /// As a dependency of a new node: a plain (full completion) edge.
  operator graph_dependency() const noexcept { return graph_dependency{node_, {}}; }  // NOLINT

  /// Same node handle. @{
  friend constexpr bool operator==(graph_node a, graph_node b) noexcept {
    return a.node_ == b.node_;
  }
  friend constexpr bool operator!=(graph_node a, graph_node b) noexcept {
    return a.node_ != b.node_;
  }  ///@}

 private:
  cudaGraphNode_t checked(const char* operation) const {
    if (CURT_UNLIKELY(node_ == nullptr))
      detail::raise(cudaErrorInvalidValue, detail::fmt("curt::graph_node::%s", operation),
                    "this graph_node is null (default-constructed): it names no node", __FILE__,
                    __LINE__);
    return node_;
  }
  std::vector<graph_dependency> neighbours(bool incoming, const char* operation) const {
    cudaGraphNode_t node = checked(operation);
    auto query = incoming ? &cudaGraphNodeGetDependencies : &cudaGraphNodeGetDependentNodes;
    const char* call = incoming ? "cudaGraphNodeGetDependencies(node, with edge data)"
                                : "cudaGraphNodeGetDependentNodes(node, with edge data)";
    detail::context_scope in(detail::any_context);
    std::size_t n = 0;
    detail::check(query(node, nullptr, nullptr, &n), call, __FILE__, __LINE__);
    detail::entries<cudaGraphNode_t> nodes(n);
    detail::entries<cudaGraphEdgeData> data(n);
    if (n) detail::check(query(node, nodes.data(), data.data(), &n), call, __FILE__, __LINE__);
    std::vector<graph_dependency> result(n);
    for (std::size_t i = 0; i < n; ++i) result[i] = graph_dependency{nodes[i], data[i]};
    return result;
  }
  cudaGraphNode_t node_ = nullptr;
};
/// A programmatic (PDL) edge from kernel node `from` to the kernel node being added.
inline graph_dependency programmatic_edge(graph_node from) noexcept {
  graph_dependency d{from.get(), {}};
  d.data.from_port = cudaGraphKernelNodePortProgrammatic;
  d.data.type = cudaGraphDependencyTypeProgrammatic;
  return d;
}
/// An edge that fires once every block of kernel node `from` has started.
inline graph_dependency launch_completion_edge(graph_node from) noexcept {
  graph_dependency d = programmatic_edge(from);  // of the same type, out of another port
  d.data.from_port = cudaGraphKernelNodePortLaunchCompletion;
  return d;
}
/// What a new node depends on (by value): nodes, and edges with data. {}: a root node.
class node_dependencies {
 public:
  node_dependencies() noexcept = default;  ///< none (a root node), or the given nodes or edges @{
  node_dependencies(std::initializer_list<graph_dependency> l) { push(l.begin(), l.size()); }
  node_dependencies(std::initializer_list<graph_node> l) { push(l.begin(), l.size()); }
  // Implicit by design (NOLINT): a node, or a vector of them, is a node's dependencies.
  node_dependencies(graph_node node) { push(node); }                               // NOLINT
  node_dependencies(cudaGraphNode_t node) { push(node); }                          // NOLINT
  node_dependencies(const std::vector<graph_dependency>& v) { push(v.data(), v.size()); }  // NOLINT
  node_dependencies(const std::vector<graph_node>& v) { push(v.data(), v.size()); }        // NOLINT
  node_dependencies(const std::vector<cudaGraphNode_t>& v) { push(v.data(), v.size()); }   // NOLINT
  ///@}
  std::size_t size() const noexcept { return size_; }  ///< the number of dependencies
  bool empty() const noexcept { return size_ == 0; }   ///< no dependencies: a root node
  /// The nodes, in order; null when there are none.
  const cudaGraphNode_t* nodes() const noexcept {
    if (size_ == 0) return nullptr;
    return size_ <= inline_capacity ? inline_nodes_ : more_nodes_.data();
  }
  /// The edge data, in order; null when every edge is a plain one (CUDA's default).
  const cudaGraphEdgeData* data() const noexcept {
    if (!has_data_) return nullptr;
    return size_ <= inline_capacity ? inline_data_ : more_data_.data();
  }
  /// Dependency `i` (unchecked), with its edge data (all zero for a plain edge).
  graph_dependency operator[](std::size_t i) const noexcept {
    const cudaGraphEdgeData* d = data();
    return graph_dependency{nodes()[i], d ? d[i] : cudaGraphEdgeData{}};
  }

 private:
  // A few dependencies, the common case, are kept inline: adding a node allocates nothing more.
  static constexpr std::size_t inline_capacity = 4;
  template <class T>  // (vectors passed by data() and size(): fewer of their members compiled)
  void push(const T* items, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) push(items[i]);
  }
  void push(const graph_dependency& d) { push(d.node, d.data); }  // a graph_node too
  void push(cudaGraphNode_t node, const cudaGraphEdgeData& data = {}) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&data);  // all zero: a plain edge
    for (std::size_t i = 0; i < sizeof data; ++i) has_data_ = has_data_ || bytes[i] != 0;
    if (size_ < inline_capacity) {
      inline_nodes_[size_] = node;
      inline_data_[size_] = data;
    } else {
      for (std::size_t i = 0; size_ == inline_capacity && i < inline_capacity; ++i) {
        more_nodes_.push_back(inline_nodes_[i]);  // move the inline ones out first
        more_data_.push_back(inline_data_[i]);
      }
      more_nodes_.push_back(node);
      more_data_.push_back(data);
    }
    ++size_;
  }
  cudaGraphNode_t inline_nodes_[inline_capacity] = {};
  cudaGraphEdgeData inline_data_[inline_capacity] = {};
  detail::entries<cudaGraphNode_t> more_nodes_;
  detail::entries<cudaGraphEdgeData> more_data_;
  std::size_t size_ = 0;
  bool has_data_ = false;
};

namespace detail {

/// Refuses a null node before CUDA is called.
inline void require_node(graph_node node, const char* operation) {
  if (CURT_UNLIKELY(!node.valid()))
    raise(cudaErrorInvalidValue, operation,
          "the node is null (a default-constructed graph_node): it names no node", __FILE__,
          __LINE__);
}
/// Refuses a null dependency before CUDA is called.
inline void check_dependencies(const node_dependencies& dependencies, const char* operation) {
  for (std::size_t i = 0; i < dependencies.size(); ++i)
    if (CURT_UNLIKELY(dependencies.nodes()[i] == nullptr))
      raise(cudaErrorInvalidValue, operation,
            fmt("dependency %zu is a null node (a default-constructed graph_node?). Nothing was "
                "added", i),
            __FILE__, __LINE__);
}

}  // namespace detail
}  // namespace curt
