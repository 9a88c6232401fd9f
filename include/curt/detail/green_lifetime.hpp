// curt/detail/green_lifetime.hpp: what keeps a green context alive, and what curt must destroy
// before it destroys one.
//
// The driver requires a green context's streams to be destroyed before the green context
// (cuGreenCtxDestroy leaks them, and every later call on them, cudaStreamDestroy included, fails
// with CUDA_ERROR_CONTEXT_IS_DESTROYED). A stream made by curt::green_context::make_stream()
// holds a reference to its green context here, keyed by the stream's handle while the stream is
// alive: curt::stream's destructor takes the entry before it destroys the stream and drops the
// reference after, so a green context outlives every curt stream made in it, whatever order the
// owners die in. A graph captured on such a stream shares the reference (share(), through a CUDA
// user object: graph_capture.hpp). An ordinary stream's destructor, and a capture on it, pay one
// relaxed load (the table is empty).
//
// curt also caches things of its own in whatever context is current or waited on: a thread's
// reusable wait event (stream.hpp), the stream of synchronous pool calls (memory_pool.hpp). In
// one of curt's own green contexts they are kept in green_contexts(), and the green context
// destroys them before itself (green_state::drop in green_context.hpp).
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/entries.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>

namespace curt::detail {

/// Something a stream keeps alive: run() drops it (once the stream is gone). share() takes one
/// more reference, for something that keeps it apart from the stream (a graph captured on it):
/// `retain` takes it and `release_shared` drops it (null: nothing can share it).
struct stream_hold {
  void (*release)(void*) noexcept = nullptr;
  void* object = nullptr;
  void (*retain)(void*) noexcept = nullptr;
  void (*release_shared)(void*) noexcept = nullptr;
  void run() noexcept {
    if (release) release(object);
  }
};

class stream_holds {
 public:
  /// `stream` (alive) keeps `hold` until taken.
  void add(cudaStream_t stream, stream_hold hold) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(entry{stream, hold});
    size_.store(entries_.size(), order::relaxed);
  }
  /// The hold of `stream`, removed from the table; an empty one when it has none. Call it while
  /// the stream is still alive (its handle may name another stream once it is destroyed).
  stream_hold take(cudaStream_t stream) noexcept {
    if (size_.load(order::relaxed) == 0) return {};
    std::lock_guard<std::mutex> lock(mutex_);
    for (entry& e : entries_) {
      if (e.stream != stream) continue;
      stream_hold hold = e.hold;
      entries_.remove(&e);
      size_.store(entries_.size(), order::relaxed);
      return hold;
    }
    return {};
  }
  /// A new reference to what `stream` (alive) keeps, for the caller to run() once; an empty hold
  /// when it keeps nothing. Taken under the lock, so the stream's own cannot be the last meanwhile.
  stream_hold share(cudaStream_t stream) noexcept {
    if (CURT_LIKELY(size_.load(order::relaxed) == 0)) return {};
    std::lock_guard<std::mutex> lock(mutex_);
    for (entry& e : entries_) {
      if (e.stream != stream || e.hold.retain == nullptr) continue;
      e.hold.retain(e.hold.object);
      return stream_hold{e.hold.release_shared, e.hold.object};
    }
    return {};
  }

 private:
  struct entry {
    cudaStream_t stream = nullptr;
    stream_hold hold;
  };
  std::mutex mutex_;
  entries<entry> entries_;
  atomic<std::size_t> size_{0};
};

// Never destroyed: streams with static storage may be destroyed after it would have been.
inline stream_holds& held_by_streams() {
  static stream_holds* table = new stream_holds;
  return *table;
}

/// The work of a green_registry::destroy_fn: `destroy()` (the CUDA call `call`) with `context`
/// current, if it still has id `id` (else the handle died with it); a failure goes to the error
/// handler.
template <class Destroy>
void destroy_in_context(CUcontext context, unsigned long long id, const char* call,
                        Destroy destroy) noexcept {
  try {
    if (!context_has_id(context, id)) return;
    context_scope in(context);
    check_noexcept(destroy(), call, __FILE__, __LINE__);
  } catch (const std::exception& error) {  // no entry point, or the context could not be current
    report_caught(error);
  }
}

/// curt's own green contexts, by the id of their driver context (cuCtxGetId of
/// cuCtxFromGreenCtx's: unique in the process, unlike handles), and what curt keeps in each.
class green_registry {
 public:
  /// Destroys `handle`, made in `context` (id `id`), if that context still has that id; never
  /// throws (a failure goes to the error handler).
  using destroy_fn = void (*)(CUcontext context, unsigned long long id, void* handle) noexcept;

  /// A green context of curt's now exists, with driver context `id`.
  void context_made(unsigned long long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    contexts_.push_back(id);
    count_.store(contexts_.size(), order::relaxed);
  }
  /// True while any green context of curt's exists: one relaxed load.
  bool any() const noexcept { return count_.load(order::relaxed) != 0; }
  /// Whether `id` is the driver context of one of curt's green contexts.
  bool is_curts(unsigned long long id) {
    if (CURT_LIKELY(!any())) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    return find_context(id) != nullptr;
  }
  /// `handle`, just made in context `id`, is to be destroyed before that green context is:
  /// true when it is kept so, false (nothing kept) when `id` is none of curt's green contexts.
  /// `shared`: no thread holds on to it (an allocation stream, not a thread's wait event), so it
  /// also goes when a released green context lets go (its new owner may destroy it any time).
  bool keep(unsigned long long id, CUcontext context, void* handle, destroy_fn destroy,
            bool shared = false) {
    if (CURT_LIKELY(!any())) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    if (find_context(id) == nullptr) return false;
    kept_.push_back(kept{id, context, handle, destroy, shared});
    return true;
  }
  /// For the owner of a kept handle that goes first (a thread's wait events at its exit):
  /// destroys it now if it is still kept and its context still lives, and forgets it. Under the
  /// lock, so that its green context is not destroyed meanwhile; a handle the green context took
  /// already (or a reused one of another context) is left alone.
  void destroy_kept(unsigned long long id, void* handle) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    for (kept& k : kept_) {
      if (k.id != id || k.handle != handle) continue;
      kept found = k;
      kept_.remove(&k);
      found.destroy(found.context, found.id, found.handle);
      return;
    }
  }
  /// The green context of driver context `id` lets go (green_state::drop): it no longer counts
  /// as curt's, and what curt kept in it is destroyed now: everything when `destroying` (curt
  /// destroys it next); for a released one (its new owner destroys it), what no thread holds on
  /// to, while a thread's wait event stays until that thread exits (destroy_kept), which the new
  /// owner must wait for. Allocates nothing.
  void context_ending(unsigned long long id, bool destroying) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (unsigned long long* c = find_context(id)) contexts_.remove(c);
      count_.store(contexts_.size(), order::relaxed);
    }
    for (;;) {  // one at a time: each destroyed outside the lock, taken under it
      kept found;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        kept* k = find_kept(id, !destroying);
        if (k == nullptr) return;
        found = *k;
        kept_.remove(k);
      }
      found.destroy(found.context, found.id, found.handle);
    }
  }
  /// How many handles are kept for context `id` (for tests).
  std::size_t kept_count(unsigned long long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const kept& k : kept_) n += k.id == id;
    return n;
  }

 private:
  struct kept {
    unsigned long long id = 0;
    CUcontext context = nullptr;
    void* handle = nullptr;
    destroy_fn destroy = nullptr;
    bool shared = false;
  };
  unsigned long long* find_context(unsigned long long id) noexcept {
    for (unsigned long long& c : contexts_)
      if (c == id) return &c;
    return nullptr;
  }
  kept* find_kept(unsigned long long id, bool shared_only = false) noexcept {
    for (kept& k : kept_)
      if (k.id == id && (k.shared || !shared_only)) return &k;
    return nullptr;
  }
  std::mutex mutex_;
  entries<unsigned long long> contexts_;
  entries<kept> kept_;
  atomic<std::size_t> count_{0};
};

// Never destroyed, as held_by_streams().
inline green_registry& green_contexts() {
  static green_registry* registry = new green_registry;
  return *registry;
}

/// Whether `context` is the driver context of one of curt's green contexts: one relaxed load
/// while none exists.
inline bool is_curts_green_context(CUcontext context) {
  if (CURT_LIKELY(!green_contexts().any()) || context == nullptr) return false;
  unsigned long long id = 0;
  if (CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetId, 12000)(context, &id) != 0) return false;
  return green_contexts().is_curts(id);
}

}  // namespace curt::detail
