// curt/detail/green_lifetime.hpp: what a stream keeps alive until it is destroyed.
//
// The driver requires a green context's streams to be destroyed before the green context
// (cuGreenCtxDestroy leaks them, and every later call on them, cudaStreamDestroy included, fails
// with CUDA_ERROR_CONTEXT_IS_DESTROYED). A stream made by curt::green_context::make_stream()
// holds a reference to its green context here, keyed by the stream's handle while the stream is
// alive: curt::stream's destructor takes the entry before it destroys the stream and drops the
// reference after, so a green context outlives every curt stream made in it, whatever order the
// owners die in. An ordinary stream's destructor pays one relaxed load (the table is empty).
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/entries.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>

namespace curt::detail {

/// Something a stream keeps alive: run() drops it (once the stream is gone).
struct stream_hold {
  void (*release)(void*) noexcept = nullptr;
  void* object = nullptr;
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

}  // namespace curt::detail
