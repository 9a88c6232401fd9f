// curt::profiler_scope on any machine (include/curt/profiling/profiler.hpp): without a usable
// device the start is refused with an error that names cudaProfilerStart and the device, and why
// (its context could not be made current); with one, a scope starts and stops (without a
// profiler attached CUDA does nothing) and a later stop() does nothing.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/device.hpp>
#include <curt/profiler.hpp>

#include <type_traits>

static_assert(!std::is_copy_constructible_v<curt::profiler_scope> &&
              !std::is_move_constructible_v<curt::profiler_scope>);

TEST_CASE("a profiler scope starts and stops, or says why it cannot", "[profiler]") {
  const curt::device d = curt::device::from_ordinal_unchecked(0);
  if (curt::device_count() == 0) {
    curt_test::require_any_cuda_error([&] { curt::profiler_scope scope(d); },
                                      {"cudaProfilerStart(device 0)",
                                       "device 0's context, which could not be made current"});
    return;
  }
  curt::profiler_scope scope(d);
  CHECK(scope.device() == d);
  CHECK_NOTHROW(scope.stop());
  CHECK_NOTHROW(scope.stop());  // stopped already: nothing to do
}
