// curt/graph_node.hpp: a node of a graph (curt::graph_node, a value over cudaGraphNode_t) and
// what a node added to a graph depends on (curt::node_dependencies): nodes, and edges with their
// data between kernel nodes (programmatic_edge, launch_completion_edge).
//
//   curt::graph_node k = curt::add_kernel_node(g, {}, config, producer, x, y, n);
//   curt::add_kernel_node(g, {curt::programmatic_edge(k)}, config, consumer, y, z, n);
//   curt::add_empty_node(g, {a, b, c});                    // after a, b and c
//
// Adding nodes: <curt/graph_nodes.hpp>. CUDA 13.0 cannot tell which graph a node belongs to
// (cudaGraphNodeGetContainingGraph comes later), so a graph_node holds the node's handle alone.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace curt {

/// A node of a graph: its handle, nothing owned (the graph owns its nodes). Null when
/// default-constructed; every query on a null node throws.
class graph_node {
 public:
  constexpr graph_node() noexcept = default;
  constexpr graph_node(cudaGraphNode_t node) noexcept : node_(node) {}  // NOLINT: implicit

  constexpr cudaGraphNode_t get() const noexcept { return node_; }
  constexpr bool valid() const noexcept { return node_ != nullptr; }

  /// The node's type (cudaGraphNodeGetType).
  cudaGraphNodeType type() const { return curt::node_type(checked("type()")); }
  /// The nodes this one depends on, with the data of each edge.
  std::vector<graph_dependency> dependencies() const {
    return neighbours(true, "dependencies()");
  }
  /// The nodes that depend on this one, with the data of each edge.
  std::vector<graph_dependency> dependents() const { return neighbours(false, "dependents()"); }

  /// As a dependency of a new node: a plain (full completion) edge.
  operator graph_dependency() const noexcept { return graph_dependency{node_, {}}; }  // NOLINT

  friend constexpr bool operator==(graph_node a, graph_node b) noexcept {
    return a.node_ == b.node_;
  }
  friend constexpr bool operator!=(graph_node a, graph_node b) noexcept {
    return a.node_ != b.node_;
  }

 private:
  cudaGraphNode_t checked(const char* operation) const {
    if (CURT_UNLIKELY(node_ == nullptr))
      detail::raise(cudaErrorInvalidValue, std::string("curt::graph_node::") + operation,
                    "this graph_node is null (default-constructed): it names no node", __FILE__,
                    __LINE__);
    return node_;
  }
  std::vector<graph_dependency> neighbours(bool incoming, const char* operation) const {
    cudaGraphNode_t node = checked(operation);
    auto query = incoming ? &cudaGraphNodeGetDependencies : &cudaGraphNodeGetDependentNodes;
    const char* call = incoming ? "cudaGraphNodeGetDependencies(node, with edge data)"
                                : "cudaGraphNodeGetDependentNodes(node, with edge data)";
    detail::current_device_scope in_context(detail::any_context);
    std::size_t n = 0;
    detail::check(query(node, nullptr, nullptr, &n), call, __FILE__, __LINE__);
    std::vector<cudaGraphNode_t> nodes(n);
    std::vector<cudaGraphEdgeData> data(n);
    if (n) detail::check(query(node, nodes.data(), data.data(), &n), call, __FILE__, __LINE__);
    std::vector<graph_dependency> result(n);
    for (std::size_t i = 0; i < n; ++i) result[i] = graph_dependency{nodes[i], data[i]};
    return result;
  }

  cudaGraphNode_t node_ = nullptr;
};

/// An edge from kernel node `from` to the kernel node being added: that kernel may start before
/// `from` is done, and sees what `from` wrote before it triggered
/// (cudaTriggerProgrammaticLaunchCompletion) or finished once it calls
/// cudaGridDependencySynchronize(). Programmatic dependent launch, as a graph spells it.
inline graph_dependency programmatic_edge(graph_node from) noexcept {
  graph_dependency d{from.get(), {}};
  d.data.from_port = cudaGraphKernelNodePortProgrammatic;
  d.data.type = cudaGraphDependencyTypeProgrammatic;
  return d;
}
/// An edge from kernel node `from` to the kernel node being added that fires once every block of
/// `from` has started (best effort: it may wait for `from` to finish). cudaGridDependencySynchronize()
/// in the new kernel then waits for nothing of `from`'s: it must not read what `from` writes.
inline graph_dependency launch_completion_edge(graph_node from) noexcept {
  graph_dependency d{from.get(), {}};
  d.data.from_port = cudaGraphKernelNodePortLaunchCompletion;
  d.data.type = cudaGraphDependencyTypeProgrammatic;
  return d;
}

/// What a new node depends on: nodes (full-completion edges) and edges with data. Kept by value,
/// so it may be stored and reused.
///   curt::add_empty_node(g, {});                           // a root node
///   curt::add_empty_node(g, {a, b});                       // after a and b
///   curt::add_kernel_node(g, {curt::programmatic_edge(k)}, config, consumer, ...);
class node_dependencies {
 public:
  node_dependencies() noexcept = default;
  node_dependencies(std::initializer_list<graph_dependency> list) {
    for (const graph_dependency& d : list) push(d.node, d.data);
  }
  node_dependencies(std::initializer_list<graph_node> list) {
    for (graph_node n : list) push(n.get(), {});
  }
  node_dependencies(graph_node node) { push(node.get(), {}); }  // NOLINT: implicit
  node_dependencies(cudaGraphNode_t node) { push(node, {}); }   // NOLINT: implicit
  node_dependencies(const std::vector<graph_dependency>& list) {  // NOLINT: implicit
    for (const graph_dependency& d : list) push(d.node, d.data);
  }
  node_dependencies(const std::vector<graph_node>& list) {  // NOLINT: implicit
    for (graph_node n : list) push(n.get(), {});
  }
  node_dependencies(const std::vector<cudaGraphNode_t>& list) {  // NOLINT: implicit
    for (cudaGraphNode_t n : list) push(n, {});
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
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
  graph_dependency operator[](std::size_t i) const noexcept {
    const cudaGraphEdgeData* d = data();
    return graph_dependency{nodes()[i], d ? d[i] : cudaGraphEdgeData{}};
  }

 private:
  static constexpr std::size_t inline_capacity = 4;
  static bool plain(const cudaGraphEdgeData& d) noexcept {
    const cudaGraphEdgeData zero{};
    return std::memcmp(&d, &zero, sizeof d) == 0;
  }
  void push(cudaGraphNode_t node, const cudaGraphEdgeData& data) {
    has_data_ = has_data_ || !plain(data);
    if (size_ < inline_capacity) {
      inline_nodes_[size_] = node;
      inline_data_[size_] = data;
    } else {
      if (size_ == inline_capacity) {  // move the inline ones out first
        more_nodes_.assign(inline_nodes_, inline_nodes_ + inline_capacity);
        more_data_.assign(inline_data_, inline_data_ + inline_capacity);
      }
      more_nodes_.push_back(node);
      more_data_.push_back(data);
    }
    ++size_;
  }

  cudaGraphNode_t inline_nodes_[inline_capacity] = {};
  cudaGraphEdgeData inline_data_[inline_capacity] = {};
  std::vector<cudaGraphNode_t> more_nodes_;
  std::vector<cudaGraphEdgeData> more_data_;
  std::size_t size_ = 0;
  bool has_data_ = false;
};

}  // namespace curt
