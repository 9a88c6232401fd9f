// curt/profiling/profiler.hpp: the region a profiler collects (cudaProfilerStart / Stop), as a
// scope. With Nsight Systems' `--capture-range=cudaProfilerApi` (or Nsight Compute's
// `--profile-from-start off`) what runs between a scope's start and its stop is collected:
//
//   {
//     curt::profiler_scope profiled(gpu);  // cudaProfilerStart in gpu's context
//     run_the_interesting_part();
//   }                                     // cudaProfilerStop, the same way
//
// CUDA scopes both calls to the current context: they run in the device's context
// (device_guard), so no other device's context is made or touched. Without a profiler attached
// both succeed and do nothing. Like any CUDA call, the start may fail with an error of earlier
// asynchronous work.
//
// Scopes do not nest: CUDA counts neither starts nor stops, so the first stop ends collection,
// also for a scope still open around it (a library's scope inside the caller's, or one on
// another thread). Keep one scope at a time per process; curt keeps no count (that would be
// process-wide state for what one scope per process already gives). nsys ends its capture at the
// first stop unless told `--capture-range-end=repeat`, which collects each later scope too.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/error.hpp>

#include <cuda_profiler_api.h>

#include <optional>

namespace curt {
namespace detail {

/// cudaProfilerStart or cudaProfilerStop (`function`, named `name`) in d's context. A failure to
/// make that context current (no driver, no device) is reported as the call's own failure.
inline void profiler_call(cudaError_t (*function)(), const char* name, device d) {
  std::optional<device_guard> in;
  try {
    in.emplace(d);
  } catch (const cuda_error& e) {
    raise(e.status(), describe_call(name, {{"device", d.ordinal()}}),
          fmt("it runs in device %d's context, which could not be made current (%s)", d.ordinal(),
              e.what()),
          __FILE__, __LINE__);
  }
  check(function(), name, {{"device", d.ordinal()}}, __FILE__, __LINE__);
}

}  // namespace detail

/// Starts the profiler's collection for device `d` (cudaProfilerStart) and stops it when the
/// scope ends (cudaProfilerStop; a failure there goes to the error handler, never thrown) or at
/// stop(). Not nestable: its stop ends collection for any other scope still open (see above).
/// Neither copied nor moved: it starts and stops on the thread that made it.
class profiler_scope {
 public:
  /// Starts collection in d's context; throws a cuda_error if CUDA refuses.
  explicit profiler_scope(curt::device d) : device_(d) {
    detail::profiler_call(&cudaProfilerStart, "cudaProfilerStart", d);
  }
  ~profiler_scope() {
    if (!running_) return;
    try {
      detail::profiler_call(&cudaProfilerStop, "cudaProfilerStop", device_);
    } catch (const std::exception& e) {
      detail::report(e);
    }
  }
  profiler_scope(const profiler_scope&) = delete;
  profiler_scope& operator=(const profiler_scope&) = delete;

  /// Stops the collection now, throwing a cuda_error if CUDA refuses; the destructor then does
  /// nothing. A second stop() does nothing either.
  void stop() {
    if (!running_) return;
    running_ = false;
    detail::profiler_call(&cudaProfilerStop, "cudaProfilerStop", device_);
  }
  curt::device device() const noexcept { return device_; }  ///< The device it started for.

 private:
  curt::device device_;
  bool running_ = true;
};

}  // namespace curt
