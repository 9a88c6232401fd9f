// curt/core/deferred.hpp: what CUDA's callback threads leave for a user thread.
//
// Host functions and CUDA user objects run on a runtime thread where CUDA calls are not allowed. So
// what they leave behind waits in one process-wide table until a user thread picks it up:
// - callables (and values a graph kept) whose captures may own CUDA resources, destroyed at the
//   next drain: a synchronize() or ready() of a stream, event or device, or a stream's destruction,
//   where the user waits or polls anyway (not amid other work: a destruction could invalidate a
//   capture in progress on that thread). Pushing allocates nothing and takes no lock.
// - exceptions a host function threw, kept per stream id (cudaStreamGetId: never reused in a
//   process, unlike handle values and thread ids) until its next synchronize() through curt
//   rethrows the first; if the stream goes first, to the error handler as a host_function_error.
#pragma once

#include <curt/core/atomic.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>

#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

namespace curt::detail {

struct deferred_task {
  deferred_task* next = nullptr;
  void (*destroy)(deferred_task*) noexcept = nullptr;
};
/// Pushes `task` on the list that starts at `head`. Lock-free: safe on a callback thread.
inline void push_task(atomic<deferred_task*>& head, deferred_task* task) noexcept {
  deferred_task* next = head.load(order::relaxed);
  do {
    task->next = next;
  } while (!head.compare_exchange_weak(next, task, order::release, order::relaxed));
}
/// Destroys `task` and every task after it in its list.
inline void destroy_tasks(deferred_task* task) noexcept {
  while (task) {
    deferred_task* next = task->next;
    task->destroy(task);
    task = next;
  }
}

/// The thread in relaxed capture mode for a scope: what curt frees or waits for then spoils no
/// global-mode capture on another thread (nor the thread's own: curt's call is not captured).
struct relaxed_capture {  // (the exchange fails only while CUDA unloads: nothing to restore)
  cudaStreamCaptureMode previous = cudaStreamCaptureModeRelaxed;
  relaxed_capture() noexcept { (void)cudaThreadExchangeStreamCaptureMode(&previous); }
  ~relaxed_capture() { (void)cudaThreadExchangeStreamCaptureMode(&previous); }
};

class deferred_work {
 public:
  /// A finished task, to be destroyed on a user thread. Lock-free: safe on a callback thread.
  void push(deferred_task* task) noexcept { push_task(head_, task); }
  /// Destroys every finished task on the calling thread; one load when there is none. In
  /// relaxed capture mode: a task's captures may free CUDA resources, which a global-mode
  /// capture on another thread would otherwise see as an unsafe call and be invalidated by.
  void drain() noexcept {
    if (head_.load(order::relaxed) == nullptr) return;
    relaxed_capture relaxed;
    destroy_tasks(head_.exchange(nullptr, order::acquire));
  }

  /// A host function was enqueued on stream `id`.
  void begin(unsigned long long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entry* e = find(id);
    if (!e) e = &entries_.push_back(entry{id, 0, false, nullptr});
    ++e->running;
    size_.store(entries_.size(), order::relaxed);
  }
  /// A host function of stream `id` returned or threw `error`. Allocates nothing (callback thread).
  void finish(unsigned long long id, std::exception_ptr error) noexcept {
    std::exception_ptr orphan;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry* e = find(id);
      if (!e) return;  // cannot happen: begin() made it
      --e->running;
      if (error && e->stream_gone) {
        orphan = std::move(error);
      } else if (error && !e->error) {
        e->error = std::move(error);
        pending_.fetch_add(1, order::release);
      }
      forget_if_done(e);
    }
    if (orphan) report_orphan(std::move(orphan), id, "after its stream was destroyed");
  }
  /// The exception kept for stream `id`, once; null when none. One load when none is kept.
  std::exception_ptr take(unsigned long long id) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    entry* e = find(id);
    if (!e || !e->error) return nullptr;
    std::exception_ptr error = std::exchange(e->error, nullptr);
    pending_.fetch_sub(1, order::relaxed);
    forget_if_done(e);
    return error;
  }
  bool has_errors() const noexcept { return pending_.load(order::acquire) != 0; }
  bool has_entries() const noexcept { return size_.load(order::relaxed) != 0; }
  /// Stream `id` is gone (its owner destroyed it, or its thread exited: a per-thread stream):
  /// its kept exception, and any its unfinished host functions throw later, go to the handler.
  void stream_gone(unsigned long long id) noexcept {
    std::exception_ptr kept;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry* e = find(id);
      if (!e) return;
      if (e->error) pending_.fetch_sub(1, order::relaxed);
      kept = std::exchange(e->error, nullptr);
      e->stream_gone = true;
      forget_if_done(e);
    }
    if (kept)
      report_orphan(std::move(kept), id, "and its stream was destroyed before synchronize()");
  }

  /// Hands an exception nobody can rethrow to the error handler, as a host_function_error.
  static void report_orphan(std::exception_ptr error, unsigned long long stream_id,
                            const char* when) noexcept {
    std::string text = "a host function threw ";
    try {
      text += when;
      if (stream_id) text += fmt(" (stream id %llu)", stream_id);
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        text += fmt(": %s", e.what());
      } catch (...) {
        text += ": an exception not derived from std::exception";
      }
      report(host_function_error(text, std::move(error)));
    } catch (...) {
      std::fprintf(stderr, "curt: %s\n", text.c_str());
    }
  }

 private:
  struct entry {
    unsigned long long id = 0;
    int running = 0;
    bool stream_gone = false;
    std::exception_ptr error;
  };
  entry* find(unsigned long long id) noexcept {
    for (entry& e : entries_)
      if (e.id == id) return &e;
    return nullptr;
  }
  void forget_if_done(entry* e) noexcept {  // allocates nothing
    if (e->running == 0 && !e->error) entries_.remove(e);
    size_.store(entries_.size(), order::relaxed);
  }

  atomic<deferred_task*> head_{nullptr};
  std::mutex mutex_;
  entries<entry> entries_;
  atomic<std::size_t> size_{0};
  atomic<int> pending_{0};
};

/// The process's table; never destroyed (owners with static storage may die after it would).
inline deferred_work& deferred() {
  static deferred_work* const work = new deferred_work;
  return *work;
}

/// curt's one thread_local: the per-thread default streams the thread used for host functions (they
/// die with it: a kept exception then goes to the error handler); its count of open nccl_groups.
struct thread_state {
  entries<unsigned long long> per_thread_streams;
  int nccl_groups = 0;

  static thread_state& current() {
    thread_local thread_state state;
    return state;
  }
  void watch_per_thread_stream(unsigned long long id) {
    for (unsigned long long known : per_thread_streams)
      if (known == id) return;
    per_thread_streams.push_back(id);
  }
  ~thread_state() {
    for (unsigned long long id : per_thread_streams) deferred().stream_gone(id);
  }
};

}  // namespace curt::detail
