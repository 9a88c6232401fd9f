// curt/detail/graph_bodies.hpp: which graphs are bodies of conditional nodes that curt made, so
// that a node CUDA does not run in a body (host, event, memory allocation and free nodes) is
// refused when it is added, not at instantiation. CUDA 13.0 cannot tell a graph's parent
// (cudaGraphNodeGetContainingGraph comes later), so curt keeps the table itself.
//
// A body lives as long as its conditional node, that is as long as the graph holding the node.
// An entry is dropped
// - at once, when curt destroys that graph (a curt::graph owner, or a capture curt discards):
//   forget_conditional_bodies(graph), before cudaGraphDestroy, also drops the bodies nested in
//   those bodies; and when curt creates a graph (graph::create, clone): a fresh graph is no body,
//   nor does it hold any yet, whatever the address it got;
// - otherwise (a graph destroyed by a raw cudaGraphDestroy after release()) when a marker user
//   object that the outermost graph holds is released: after that graph and its executable graphs
//   are gone, on CUDA's thread, a little later. Until then a new graph that happens to get the dead
//   body's address would be taken for a body.
// Nothing here calls CUDA: the table's logic is tested without a device.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/conditional_body_check.hpp>
#include <curt/detail/config.hpp>
#include <curt/detail/entries.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace curt::detail {

/// One body of a conditional node curt made.
struct conditional_body_entry {
  cudaGraph_t body = nullptr;
  cudaGraph_t parent = nullptr;  ///< the graph holding the conditional node (maybe a body itself)
  unsigned long long id = 0;     ///< the conditional node's number; its bodies share it
  cudaGraphConditionalNodeType kind = cudaGraphCondTypeIf;
  unsigned index = 0;  ///< which body of the node
  unsigned count = 0;  ///< how many bodies the node has
  bool dead = false;   ///< marked for removal (only inside forget_*)
};

class conditional_bodies {
 public:
  /// A number for a new conditional node; never 0.
  unsigned long long next_id() noexcept { return next_.fetch_add(1, order::relaxed) + 1; }

  /// Records the bodies of a new conditional node (best effort: on allocation failure the node's
  /// bodies are simply not checked).
  void add(cudaGraph_t parent, unsigned long long id, cudaGraphConditionalNodeType kind,
           const cudaGraph_t* bodies, unsigned count) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      for (unsigned i = 0; i < count; ++i) {
        // A dead body whose address CUDA gave to this one must not linger under two entries.
        mark(bodies[i]);
        entries_.push_back(conditional_body_entry{bodies[i], parent, id, kind, i, count, false});
      }
      sweep();
    } catch (...) {
    }
  }

  /// Whether `graph` is a body recorded here; its entry in `found`.
  bool find(cudaGraph_t graph, conditional_body_entry& found) noexcept {
    if (empty()) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const conditional_body_entry& e : entries_)
      if (e.body == graph) {
        found = e;
        return true;
      }
    return false;
  }

  /// The outermost graph above `graph`: the first one up the chain of parents that is no body.
  cudaGraph_t root_of(cudaGraph_t graph) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t guard = 0; guard <= entries_.size(); ++guard) {
      const conditional_body_entry* up = nullptr;
      for (const conditional_body_entry& e : entries_)
        if (e.body == graph) up = &e;
      if (!up) return graph;
      graph = up->parent;
    }
    return graph;  // a cycle cannot happen; stop anyway
  }

  /// `graph` is being destroyed: drops the bodies of the conditional nodes it holds, and theirs.
  void forget_graph(cudaGraph_t graph) noexcept {
    if (empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    for (conditional_body_entry& e : entries_) e.dead = e.parent == graph || e.body == graph;
    sweep();
  }

  /// The conditional node numbered `id` is gone: drops its bodies and those nested in them. Runs
  /// on CUDA's thread (a user object's destructor): takes a lock, allocates nothing.
  void forget_id(unsigned long long id) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (conditional_body_entry& e : entries_) e.dead = e.id == id;
    sweep();
  }

  bool empty() const noexcept { return size_.load(order::relaxed) == 0; }
  std::size_t size() const noexcept { return size_.load(order::relaxed); }

 private:
  // Marks the entry of `body` dead (a body at the address of a dead one).
  void mark(cudaGraph_t body) noexcept {
    for (conditional_body_entry& e : entries_) e.dead = e.dead || e.body == body;
  }
  // Marks whatever is nested in a dead body, then removes every dead entry. No allocation. One
  // pass when nothing is dead (a new body, an unrelated graph destroyed): recording N conditional
  // nodes costs O(N^2) comparisons in all, not O(N^3).
  void sweep() noexcept {
    bool any_dead = false;
    for (const conditional_body_entry& e : entries_) any_dead = any_dead || e.dead;
    if (!any_dead) {
      size_.store(entries_.size(), order::relaxed);  // add() counts on this
      return;
    }
    bool changed = true;
    while (changed) {
      changed = false;
      for (conditional_body_entry& inner : entries_) {
        if (inner.dead) continue;
        for (const conditional_body_entry& outer : entries_)
          if (outer.dead && outer.body == inner.parent) {
            inner.dead = true;
            changed = true;
            break;
          }
      }
    }
    for (std::size_t i = entries_.size(); i-- > 0;) {
      conditional_body_entry* e = entries_.begin() + i;
      if (e->dead) entries_.remove(e);
    }
    size_.store(entries_.size(), order::relaxed);
  }

  std::mutex mutex_;
  entries<conditional_body_entry> entries_;
  atomic<std::size_t> size_{0};
  atomic<unsigned long long> next_{0};
};

/// The process's table; never destroyed (graphs with static storage may die after it would).
inline conditional_bodies& conditional_body_table() {
  static conditional_bodies* table = new conditional_bodies;
  return *table;
}

/// Whether `graph` is the body of a conditional node curt made: one load when none was ever made.
inline bool is_conditional_body(cudaGraph_t graph) noexcept {
  conditional_bodies& table = conditional_body_table();
  if (CURT_LIKELY(table.empty())) return false;
  conditional_body_entry found;
  return table.find(graph, found);
}

// Installs the check stream.hpp's host_call makes (see detail/conditional_body_check.hpp).
inline const bool conditional_body_check_installed =
    (conditional_body_check = &is_conditional_body, true);

/// Called by curt just before it destroys `graph` (the hook in graph.hpp and graph_capture.hpp):
/// one load when no conditional node was ever made.
inline void forget_conditional_bodies(cudaGraph_t graph) noexcept {
  conditional_bodies& table = conditional_body_table();
  if (CURT_LIKELY(table.empty())) return;
  table.forget_graph(graph);
}

/// The marker's destructor (a user object's, on CUDA's thread): the node numbered by `id` is gone.
inline void CUDART_CB forget_conditional_node(void* id) noexcept {
  conditional_body_table().forget_id(static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(id)));
}

}  // namespace curt::detail
