// curt/execution/host_function.hpp: the tasks behind stream_ref::host_call and graph host nodes.
//
// A task owns the user's callable. It runs on a runtime thread where CUDA calls are not allowed,
// so once it has run (or its graph let it go) it is handed to detail::deferred(), which destroys
// it on a user thread (core/deferred.hpp); a trivially destructible callable is freed at once.
#pragma once

#include <curt/core/deferred.hpp>

#include <cuda_runtime_api.h>

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

namespace curt::detail {

template <class F>
struct host_task : deferred_task {
  F function;
  unsigned long long stream_id = 0;

  template <class G>
  host_task(G&& f, unsigned long long id) : function(std::forward<G>(f)), stream_id(id) {
    destroy = [](deferred_task* self) noexcept { delete static_cast<host_task*>(self); };
  }

  // Once, on a stream: an exception goes to the stream's entry, the task is freed.
  static void CUDART_CB run_once(void* self) noexcept {
    auto* task = static_cast<host_task*>(self);
    std::exception_ptr error;
    try {
      task->function();
    } catch (...) {
      error = std::current_exception();
    }
    deferred().finish(task->stream_id, std::move(error));
    if constexpr (std::is_trivially_destructible_v<F>)
      delete task;  // nothing of the user's runs: safe on this thread
    else
      deferred().push(task);
  }
  // On every launch of a graph: no stream to rethrow on, so exceptions go to the handler.
  static void CUDART_CB run_in_graph(void* self) noexcept {
    try {
      static_cast<host_task*>(self)->function();
    } catch (...) {
      deferred_work::report_orphan(std::current_exception(), 0, "in a graph");
    }
  }
  // The graph's user object was released for the last time (on a runtime thread).
  static void CUDART_CB release_from_graph(void* self) noexcept {
    deferred().push(static_cast<host_task*>(self));
  }
};

// Ties `owned` to `graph` (a user object, into `*object_out` if asked); destroyed on a user thread.
template <class Task>
Task& retain_in_graph(cudaGraph_t graph, std::unique_ptr<Task> owned,
                      cudaUserObject_t* object_out = nullptr) {
  cudaUserObject_t object = nullptr;
  check(cudaUserObjectCreate(&object, owned.get(), &Task::release_from_graph, 1,
                             cudaUserObjectNoDestructorSync),  // the only flag 13.0 accepts
        "cudaUserObjectCreate(graph-owned value)", __FILE__, __LINE__);
  Task* task = owned.release();  // the user object owns it now
  cudaError_t status = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    (void)cudaUserObjectRelease(object, 1);  // frees the task (through the deferred queue)
    check(status, "cudaGraphRetainUserObject(graph, graph-owned value)", __FILE__, __LINE__);
  }
  if (object_out) *object_out = object;
  return *task;
}

}  // namespace curt::detail
