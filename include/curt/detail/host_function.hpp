// curt/detail/host_function.hpp: the machinery behind stream_ref::host_call.
//
// - A host function runs on a runtime thread where CUDA calls are not allowed, so the callable
//   (and whatever CUDA resources its captures own) is destroyed later on a user thread: finished
//   tasks go onto a lock-free list that synchronize() (of streams, events and devices) and
//   stream destructors drain. Callables that are trivially destructible are freed at once.
// - An exception a host function throws is kept for its stream, keyed by the stream's id
//   (cudaStreamGetId: never reused in a process, unlike handle values and thread ids), until that
//   stream's next synchronize() through curt rethrows it. When the stream is destroyed first (by
//   its curt owner, or with its thread for a per-thread default stream), or the function ran as a
//   graph node, it goes to the error handler (curt::set_error_handler). A stream curt does not
//   own and that is destroyed with a raw call keeps its entry (a few bytes) for good.
// - Under stream capture the function becomes a host node that runs on every launch of the
//   graph: the task is then owned by the graph through a user object and freed (on a user
//   thread, as above) when the last graph and executable graph holding it are gone.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/entries.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace curt::detail {

struct host_task_base {
  host_task_base* next = nullptr;
  void (*destroy)(host_task_base*) noexcept = nullptr;
};

// Tasks waiting to be destroyed on a user thread. Pushing allocates nothing and takes no lock,
// so it is safe on the runtime's callback thread.
class deferred_tasks {
 public:
  void push(host_task_base* task) noexcept {
    host_task_base* head = head_.load(order::relaxed);
    do {
      task->next = head;
    } while (!head_.compare_exchange_weak(head, task, order::release,
                                          order::relaxed));
  }
  /// Destroys every queued task on the calling thread; a single load when none is queued.
  void drain() noexcept {
    if (head_.load(order::relaxed) == nullptr) return;
    host_task_base* task = head_.exchange(nullptr, order::acquire);
    while (task) {
      host_task_base* next = task->next;
      task->destroy(task);
      task = next;
    }
  }

 private:
  atomic<host_task_base*> head_{nullptr};
};

// Never destroyed: streams with static storage may be destroyed after it would have been.
inline deferred_tasks& deferred() {
  static deferred_tasks* queue = new deferred_tasks;
  return *queue;
}

// Per stream id: host functions not yet finished, and the first exception not yet rethrown.
class host_error_table {
 public:
  /// A host function was enqueued on stream `id`.
  void begin(unsigned long long id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entry* e = find(id);
    if (!e) {
      e = &entries_.push_back(entry{id, 0, false, nullptr});
      size_.store(entries_.size(), order::relaxed);
    }
    ++e->running;
  }
  /// A host function of stream `id` returned or threw (`error`). Runs on the callback thread:
  /// allocates nothing.
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
    if (orphan) report(std::move(orphan), id, "after its stream was destroyed");
  }
  /// The exception kept for stream `id`, once; null when none. One load when none is kept.
  std::exception_ptr take(cudaStream_t stream) noexcept {
    if (pending_.load(order::acquire) == 0) return nullptr;
    unsigned long long id = 0;
    if (cudaStreamGetId(stream, &id) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    entry* e = find(id);
    if (!e || !e->error) return nullptr;
    std::exception_ptr error = std::move(e->error);
    e->error = nullptr;
    pending_.fetch_sub(1, order::relaxed);
    forget_if_done(e);
    return error;
  }
  /// The owner of `stream` destroys it: a kept exception, and any its unfinished host functions
  /// throw later, go to the error handler.
  void stream_destroyed(cudaStream_t stream) noexcept {
    if (size_.load(order::relaxed) == 0) return;
    unsigned long long id = 0;
    if (cudaStreamGetId(stream, &id) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    stream_gone(id);
  }
  /// Stream `id` is gone (its owner destroyed it, or its thread exited: a per-thread stream).
  void stream_gone(unsigned long long id) noexcept {
    std::exception_ptr kept;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      entry* e = find(id);
      if (!e) return;
      if (e->error) {
        kept = std::move(e->error);
        e->error = nullptr;
        pending_.fetch_sub(1, order::relaxed);
      }
      e->stream_gone = true;
      forget_if_done(e);
    }
    if (kept) report(std::move(kept), id, "and its stream was destroyed before synchronize()");
  }

  /// Hands an exception nobody can rethrow to the error handler, as a host_function_error.
  static void report(std::exception_ptr error, unsigned long long stream_id,
                     const char* when) noexcept {
    std::string text = "a host function threw ";
    text += when;
    if (stream_id) text += " (stream id " + std::to_string(stream_id) + ")";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      text += ": ";
      text += e.what();
    } catch (...) {
      text += ": an exception not derived from std::exception";
    }
    try {
      handle_error(host_function_error(text, std::move(error)));
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
  // Drops the entry once nothing is left to do for it (no allocation).
  void forget_if_done(entry* e) noexcept {
    if (e->running > 0 || e->error) return;
    entries_.remove(e);
    size_.store(entries_.size(), order::relaxed);
  }

  std::mutex mutex_;
  detail::entries<entry> entries_;
  atomic<std::size_t> size_{0};
  atomic<int> pending_{0};
};

inline host_error_table& host_errors() {
  static host_error_table* table = new host_error_table;  // never destroyed, like deferred()
  return *table;
}

// A thread's per-thread default streams (one per context it used) die with the thread: when a
// thread that used host_call on one exits, its kept exception goes to the error handler and its
// entry is dropped.
class per_thread_stream_watch {
 public:
  void watch(unsigned long long id) {
    for (unsigned long long known : ids_)
      if (known == id) return;
    ids_.push_back(id);
  }
  ~per_thread_stream_watch() {
    for (unsigned long long id : ids_) host_errors().stream_gone(id);
  }

 private:
  entries<unsigned long long> ids_;
};

inline void watch_per_thread_stream(unsigned long long id) {
  thread_local per_thread_stream_watch watch;
  watch.watch(id);
}

template <class F>
struct host_task : host_task_base {
  F function;
  unsigned long long stream_id = 0;

  explicit host_task(F&& f, unsigned long long id) : function(std::move(f)), stream_id(id) {
    destroy = &destroy_task;
  }
  explicit host_task(const F& f, unsigned long long id) : function(f), stream_id(id) {
    destroy = &destroy_task;
  }
  static void destroy_task(host_task_base* self) noexcept { delete static_cast<host_task*>(self); }

  // Once, on a stream: the exception goes to the stream's table entry, the task is freed.
  static void CUDART_CB run_once(void* self) noexcept {
    auto* task = static_cast<host_task*>(self);
    std::exception_ptr error;
    try {
      task->function();
    } catch (...) {
      error = std::current_exception();
    }
    host_errors().finish(task->stream_id, std::move(error));
    if constexpr (std::is_trivially_destructible_v<F>)
      delete task;  // nothing of the user's runs: safe on this thread
    else
      deferred().push(task);
  }
  // On every launch of a graph: no stream to rethrow on, so exceptions go to the handler.
  static void CUDART_CB run_in_graph(void* self) noexcept {
    auto* task = static_cast<host_task*>(self);
    try {
      task->function();
    } catch (...) {
      host_error_table::report(std::current_exception(), 0, "in a graph");
    }
  }
  // The graph's user object was released for the last time (on a runtime thread).
  static void CUDART_CB release_from_graph(void* self) noexcept {
    deferred().push(static_cast<host_task*>(self));
  }
};

}  // namespace curt::detail
