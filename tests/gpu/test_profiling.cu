// Profiling on a device (include/curt/profiler.hpp, nvtx.hpp): a profiler scope starts and stops
// in the device's context, leaving a thread with no context without one and a user's context
// current; NVTX names for streams, events and devices return and leave the objects working (a
// named stream computes right, from fresh random inputs, inside NVTX ranges). Run without a tool:
// CUDA and NVTX then do nothing for these calls but return.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include <kernels.cuh>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/nvtx.hpp>
#include <curt/profiler.hpp>
#include <curt/stream.hpp>

#include <vector>

TEST_CASE("a profiler scope starts and stops in the device's context and leaves the thread as it "
          "was", "[profiler]") {
  const curt::device d(0);
  // Seen on the threads, checked here (Catch2's assertions are not thread-safe).
  bool had_context = true, inside_context = false, left_context = true;
  curt_test::on_fresh_thread([&] {
    had_context = curt_test::current_context() != nullptr;
    curt::profiler_scope scope(d);
    inside_context = curt_test::current_context() != nullptr;
    scope.stop();
    scope.stop();  // a second stop does nothing
    left_context = curt_test::current_context() != nullptr;
  });
  CHECK_FALSE(had_context);
  CHECK_FALSE(inside_context);  // the scope pushes d's context only for its calls
  CHECK_FALSE(left_context);

  CUcontext mine = nullptr, during = nullptr, after = nullptr;
  curt_test::on_fresh_thread([&] {
    curt_test::user_context user(0);
    mine = user.get();
    {
      curt::profiler_scope scope(d);  // runs in the user's context, which stays current
      during = curt_test::current_context();
    }
    after = curt_test::current_context();
  });
  CHECK(mine != nullptr);
  CHECK(during == mine);
  CHECK(after == mine);
}

TEST_CASE("NVTX names of a stream, an event and a device return, and the named objects work",
          "[nvtx]") {
  static const curt::nvtx::domain domain("curt test_profiling");
  const curt::device d(0);
  curt::stream s(d);
  curt::event done(d);
  curt::nvtx::name(d, "test device");
  curt::nvtx::name(s, "test stream");
  curt::nvtx::name(done, "test event");
  curt::nvtx::name(curt::stream_ref::per_thread_default(), "per-thread default stream");

  const int n = curt_test::random_ints(1, 1000, 50000)[0];
  const auto count = static_cast<std::size_t>(n);
  const std::vector<float> x = curt_test::random_floats(count);
  const float a = curt_test::random_floats(1, 0.5f, 2.0f)[0];
  const float b = curt_test::random_floats(1, -1.0f, 1.0f)[0];
  curt::device_buffer<float> dx(d, count), dy(d, count);
  std::vector<float> back(count, -1.0f);
  {
    curt::nvtx::scoped_range range(domain, "affine", curt::nvtx::color::rgb(0, 160, 255), n);
    curt::copy(dx, x, s);
    curt::launch(s, curt::launch_config(curt::ceil_div(n, 256), 256), curt_test::slow_affine,
                 static_cast<const float*>(dx.data()), dy.data(), n, a, b, 0ull);
    done.record(s);
    curt::nvtx::mark(domain, "queued");
    done.synchronize();
    curt::copy_and_wait(back, dy, s);
  }
  std::vector<float> want(count);
  for (std::size_t i = 0; i < count; ++i) want[i] = a * x[i] + b;
  curt_test::require_close_all(back, want);
  CHECK(done.ready());
}
