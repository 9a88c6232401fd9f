// curt::fill with a value whose bytes differ (cuMemsetD32Async / D16Async, a driver call) on a
// default stream, from a thread with no current context. Such a stream names no context
// (cuStreamGetCtx fails), so curt runs the call in the runtime's current device's primary
// context, as the runtime would for its own memset, and pops it afterwards. Before that fix the
// driver memset ran with no context: CUDA_ERROR_INVALID_CONTEXT (seen on the H200).
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

// Fills a fresh buffer on `which` default stream from a new thread; returns what the buffer
// holds afterwards (empty on a failure, with `error` set).
std::vector<float> fill_on_fresh_thread(bool per_thread, float value, std::size_t n,
                                        std::string& error, bool& started_without) {
  std::vector<float> back;
  curt_test::on_fresh_thread([&] {
    started_without = curt_test::current_context() == nullptr;
    curt::device d(0);
    curt::device_buffer<float> b(d, n);  // leaves no context (device_guard)
    {  // poisoned (NaN), in the device's context, leaving none behind
      curt::device_guard guard(d);
      if (cudaMemset(b.data(), 0xFF, b.size_bytes()) != cudaSuccess ||
          cudaDeviceSynchronize() != cudaSuccess) {
        error = "poisoning the buffer failed";
        return;
      }
    }
    curt::stream_ref s = per_thread ? curt::stream_ref::per_thread_default()
                                    : curt::stream_ref::legacy_default();
    try {
      curt::fill(b, value, s);
    } catch (const std::exception& e) {
      error = e.what();
      return;
    }
    if (curt_test::current_context() != nullptr) {
      error = "curt::fill left a context current on a thread that had none";
      return;
    }
    std::vector<float> host(n, -1.0f);
    curt::copy(host, b, s);
    s.synchronize();
    back = host;
  });
  return back;
}

// A value in [1.25, 1.75): its 4 bytes are never all equal, so fill takes the driver memset.
float random_non_uniform() { return curt_test::random_floats(1, 1.25f, 1.75f)[0]; }

}  // namespace


TEST_CASE("fill of a non-uniform value on the per-thread default stream, fresh thread") {
  const std::size_t n = static_cast<std::size_t>(curt_test::random_ints(1, 1000, 9000)[0]);
  const float value = random_non_uniform();
  std::string error;
  bool started_without = false;
  std::vector<float> back = fill_on_fresh_thread(true, value, n, error, started_without);
  REQUIRE(started_without);
  INFO("curt::fill threw: " << error);
  REQUIRE(error.empty());
  REQUIRE(back.size() == n);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(back[i] == value);
}

TEST_CASE("fill of a non-uniform value on the legacy default stream, fresh thread") {
  const std::size_t n = static_cast<std::size_t>(curt_test::random_ints(1, 1000, 9000)[0]);
  const float value = random_non_uniform();
  std::string error;
  bool started_without = false;
  std::vector<float> back = fill_on_fresh_thread(false, value, n, error, started_without);
  REQUIRE(started_without);
  INFO("curt::fill threw: " << error);
  REQUIRE(error.empty());
  REQUIRE(back.size() == n);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(back[i] == value);
}

TEST_CASE("control: fill of a uniform-byte value on the per-thread default stream works") {
  const std::size_t n = 4099;
  std::string error;
  bool started_without = false;
  std::vector<float> back = fill_on_fresh_thread(true, 0.0f, n, error, started_without);
  REQUIRE(started_without);
  INFO("curt::fill threw: " << error);
  REQUIRE(error.empty());
  REQUIRE(back.size() == n);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(back[i] == 0.0f);
}
