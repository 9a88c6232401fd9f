// curt/detail/graph_discards.hpp: graphs that CUDA destroyed, or left broken, behind curt's back.
//
// An invalidated or unjoined capture into an existing graph (cudaStreamBeginCaptureToGraph, that
// is curt::capture_to_graph) makes CUDA 13.0 destroy the target graph, with every node it held
// before the capture: afterwards the handle is invalid (cudaGraphGetNodes and cudaGraphDestroy
// fail with cudaErrorInvalidValue; measured on the H200). When the target is the body of a
// conditional node, the graphs holding that node (its parent, and theirs) are left broken:
// instantiating one, destroying one, or destroying the conditional node crashed in the driver
// (SIGSEGV); cudaGraphClone refuses. curt records both kinds here so that
// - the owner of a destroyed graph does not destroy it again (its address may name another graph
//   by then), and a broken graph is never destroyed: curt leaks it, the only safe thing;
// - every use through curt throws a cuda_error that says what happened, instead of crashing.
// A destroyed graph's entry goes when curt makes or adopts a graph at its address, when its owner
// lets go, or when a use finds a live graph there (made outside curt). Broken graphs are never
// freed, so their addresses never come back. Not covered: a capture into the graph of a child
// graph node (curt does not know its parent); an owner passed to capture_to_graph as a graph_ref
// (or a const curt::graph) is not marked, so once curt makes a graph at its address it names that
// graph (pass the owner itself; CUDA 13.0 gave none of 256 new graphs a destroyed one's address
// on the H200). One relaxed load while nothing was ever recorded.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/entries.hpp>
#include <curt/detail/graph_bodies.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <string>

namespace curt::detail {

enum class graph_discard : unsigned char { destroyed, broken };

class graph_discards {
 public:
  bool empty() const noexcept { return size_.load(order::relaxed) == 0; }
  /// Records `graph` (best effort: without memory for an entry, it is not recorded).
  void add(cudaGraph_t graph, graph_discard kind) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      for (entry& e : entries_)
        if (e.graph == graph) {
          e.kind = kind;
          return;
        }
      entries_.push_back(entry{graph, kind});
      size_.store(entries_.size(), order::relaxed);
    } catch (...) {
    }
  }
  bool find(cudaGraph_t graph, graph_discard& kind) noexcept {
    if (empty()) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const entry& e : entries_)
      if (e.graph == graph) {
        kind = e.kind;
        return true;
      }
    return false;
  }
  /// Forgets a destroyed graph's entry (a broken graph's stays: it is never freed).
  void forget(cudaGraph_t graph) noexcept {
    if (empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (entry& e : entries_)
      if (e.graph == graph && e.kind == graph_discard::destroyed) {
        entries_.remove(&e);
        break;
      }
    size_.store(entries_.size(), order::relaxed);
  }

 private:
  struct entry {
    cudaGraph_t graph = nullptr;
    graph_discard kind = graph_discard::destroyed;
  };
  std::mutex mutex_;
  entries<entry> entries_;
  atomic<std::size_t> size_{0};
};

// Never destroyed: graphs with static storage may be destroyed after it would have been.
inline graph_discards& discarded_graphs() {
  static graph_discards* table = new graph_discards;
  return *table;
}

/// curt made or adopted `graph`: whatever had its address before is gone.
inline void graph_is_new(cudaGraph_t graph) noexcept {
  forget_conditional_bodies(graph);
  if (CURT_UNLIKELY(!discarded_graphs().empty())) discarded_graphs().forget(graph);
}

/// CUDA destroyed `target` at the end of a capture into it: records it, and the graphs it broke
/// if it was a conditional body. Returns how many graphs it broke.
inline std::size_t capture_target_destroyed(cudaGraph_t target) noexcept {
  graph_discards& discards = discarded_graphs();
  conditional_bodies& bodies = conditional_body_table();
  std::size_t broken = 0;
  conditional_body_entry up;
  for (cudaGraph_t g = target; broken <= bodies.size() && bodies.find(g, up); g = up.parent) {
    discards.add(up.parent, graph_discard::broken);
    ++broken;
  }
  forget_conditional_bodies(target);  // the bodies it held died with it
  discards.add(target, graph_discard::destroyed);
  return broken;
}

/// What the error of a capture into `target` says after CUDA destroyed it (`broken` graphs).
CURT_COLD inline std::string describe_destroyed_target(std::size_t broken) {
  std::string why =
      "CUDA destroyed the target graph, with every node it held before the capture: a "
      "curt::graph owning it holds nothing now (its uses throw; it destroys nothing)";
  if (broken != 0)
    why += "; the target was the body of a conditional node, and CUDA cannot instantiate, copy "
           "or destroy the graph holding that node any more (" +
           std::to_string(broken) +
           " graph(s), counting the nested ones): curt refuses their uses and leaks them; build "
           "the graph again";
  return why;
}

/// Throws for a use (curt::graph::`operation`) of a graph CUDA destroyed or broke; returns when
/// `graph` is neither (or a graph made outside curt took a destroyed one's address).
CURT_COLD inline void refuse_discarded_graph(cudaGraph_t graph, const char* operation) {
  graph_discard kind{};
  if (!discarded_graphs().find(graph, kind)) return;
  if (kind == graph_discard::destroyed) {
    std::size_t nodes = 0;
    cudaError_t status;
    {
      current_device_scope in_context(any_context);
      status = cudaGraphGetNodes(graph, nullptr, &nodes);
    }
    if (status == cudaSuccess) {  // alive: a graph made since at that address
      discarded_graphs().forget(graph);
      return;
    }
    (void)cudaGetLastError();
    raise(cudaErrorInvalidResourceHandle, std::string("curt::graph::") + operation,
          "CUDA destroyed this graph, with every node it held, when a capture into it "
          "(curt::capture_to_graph) was invalidated or left unjoined; make a new graph",
          __FILE__, __LINE__);
  }
  raise(cudaErrorIllegalState, std::string("curt::graph::") + operation,
        "this graph holds a conditional node whose body CUDA destroyed when a capture into the "
        "body (curt::capture_to_graph) was invalidated or left unjoined; CUDA crashes when such a "
        "graph is instantiated or destroyed, so curt refuses every use and never destroys it (it "
        "is leaked): build the graph again",
        __FILE__, __LINE__);
}

/// For an owner letting go of `graph`: true when curt must not destroy it (CUDA destroyed it, or
/// destroying it would crash).
inline bool owner_keeps_off(cudaGraph_t graph) noexcept {
  graph_discard kind{};
  if (CURT_LIKELY(discarded_graphs().empty()) || !discarded_graphs().find(graph, kind))
    return false;
  discarded_graphs().forget(graph);
  return true;
}

}  // namespace curt::detail
