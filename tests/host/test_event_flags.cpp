// Event flags and stream handles without a GPU: how curt's named flags map to the runtime's
// cudaEvent* bits, the one combination CUDA forbids, and what a stream_ref converts to.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/cccl.hpp>
#include <curt/event.hpp>
#include <curt/stream.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

// Every combination of the three named flags: bit 0 timing, bit 1 blocking_sync, bit 2 interprocess.
curt::event_flags combination(unsigned bits) {
  curt::event_flags flags = curt::event_flags::none;
  if (bits & 1u) flags = flags | curt::event_flags::timing;
  if (bits & 2u) flags = flags | curt::event_flags::blocking_sync;
  if (bits & 4u) flags = flags | curt::event_flags::interprocess;
  return flags;
}

cudaStream_t fake_stream(std::uintptr_t value) { return reinterpret_cast<cudaStream_t>(value); }
cudaEvent_t fake_event(std::uintptr_t value) { return reinterpret_cast<cudaEvent_t>(value); }

// A handle value that is none of the runtime's special streams (0, legacy 1, per-thread 2); it is
// never passed to CUDA.
std::uintptr_t random_handle_value() {
  std::uniform_int_distribution<std::uintptr_t> dist(0x1000, 0xffffff);
  return dist(curt_test::rng()) * 16;
}

}  // namespace

TEST_CASE("event flags combine with | and are tested with has_flag at compile time") {
  using curt::event_flags;
  constexpr event_flags both = event_flags::timing | event_flags::blocking_sync;
  STATIC_REQUIRE(curt::has_flag(both, event_flags::timing));
  STATIC_REQUIRE(curt::has_flag(both, event_flags::blocking_sync));
  STATIC_REQUIRE_FALSE(curt::has_flag(both, event_flags::interprocess));
  STATIC_REQUIRE_FALSE(curt::has_flag(event_flags::none, event_flags::timing));
  STATIC_REQUIRE((event_flags::none | event_flags::interprocess) == event_flags::interprocess);
  STATIC_REQUIRE(std::is_same_v<std::underlying_type_t<event_flags>, unsigned>);
  // The three flags are distinct bits.
  STATIC_REQUIRE((static_cast<unsigned>(event_flags::timing) &
                  static_cast<unsigned>(event_flags::blocking_sync)) == 0);
  STATIC_REQUIRE((static_cast<unsigned>(event_flags::timing) &
                  static_cast<unsigned>(event_flags::interprocess)) == 0);
  STATIC_REQUIRE((static_cast<unsigned>(event_flags::blocking_sync) &
                  static_cast<unsigned>(event_flags::interprocess)) == 0);
}

TEST_CASE("each allowed combination maps to the runtime's event flags") {
  using curt::event_flags;
  // The default is the cheap event: timing off.
  CHECK(curt::event::to_native(event_flags::none) == unsigned(cudaEventDisableTiming));
  CHECK(curt::event::to_native(event_flags::timing) == unsigned(cudaEventDefault));
  CHECK(curt::event::to_native(event_flags::blocking_sync) ==
        unsigned(cudaEventDisableTiming | cudaEventBlockingSync));
  CHECK(curt::event::to_native(event_flags::timing | event_flags::blocking_sync) ==
        unsigned(cudaEventBlockingSync));
  CHECK(curt::event::to_native(event_flags::interprocess) ==
        unsigned(cudaEventDisableTiming | cudaEventInterprocess));
  CHECK(curt::event::to_native(event_flags::interprocess | event_flags::blocking_sync) ==
        unsigned(cudaEventDisableTiming | cudaEventInterprocess | cudaEventBlockingSync));

  // All eight combinations against the rule, in a random order (no state carries between calls).
  std::vector<unsigned> order = {0, 1, 2, 3, 4, 5, 6, 7};
  std::shuffle(order.begin(), order.end(), curt_test::rng());
  for (unsigned bits : order) {
    event_flags flags = combination(bits);
    INFO("flags " << bits);
    bool timing = bits & 1u, blocking = bits & 2u, interprocess = bits & 4u;
    if (timing && interprocess) continue;  // the next test case
    unsigned expected = (timing ? 0u : unsigned(cudaEventDisableTiming)) |
                        (blocking ? unsigned(cudaEventBlockingSync) : 0u) |
                        (interprocess ? unsigned(cudaEventInterprocess) : 0u);
    unsigned native = curt::event::to_native(flags);
    CHECK(native == expected);
    // No bit the runtime does not define.
    CHECK((native & ~unsigned(cudaEventDisableTiming | cudaEventBlockingSync |
                              cudaEventInterprocess)) == 0u);
    // CUDA requires timing off for interprocess events: every mapping we produce satisfies it.
    if (native & cudaEventInterprocess) CHECK((native & cudaEventDisableTiming) != 0u);
  }
}

TEST_CASE("interprocess with timing is an invalid-value error, as CUDA would report it") {
  using curt::event_flags;
  auto error = curt_test::require_cuda_error(
      [] { (void)curt::event::to_native(event_flags::interprocess | event_flags::timing); },
      cudaErrorInvalidValue, {"curt::event(interprocess | timing)", "interprocess", "timing"});
  CHECK_FALSE(error.from_driver());
  CHECK(error.code() == curt::make_error_code(cudaErrorInvalidValue));
  CHECK(error.call() == "curt::event(interprocess | timing)");
  curt_test::require_cuda_error(
      [] {
        (void)curt::event::to_native(event_flags::interprocess | event_flags::timing |
                                     event_flags::blocking_sync);
      },
      cudaErrorInvalidValue, {"interprocess"});
}

TEST_CASE("event durations are std::chrono milliseconds") {
  STATIC_REQUIRE(std::is_same_v<curt::event_duration::period, std::milli>);
  STATIC_REQUIRE(std::is_floating_point_v<curt::event_duration::rep>);
  std::uniform_real_distribution<float> dist(0.5f, 100.0f);
  float ms = dist(curt_test::rng());
  curt::event_duration d(ms);
  auto us = std::chrono::duration_cast<std::chrono::duration<double, std::micro>>(d);
  CHECK(curt_test::close(us.count(), double(ms) * 1000.0, 1e-6));
}

TEST_CASE("stream flags are the runtime's stream flags") {
  STATIC_REQUIRE(static_cast<unsigned>(curt::stream_flags::non_blocking) ==
                 unsigned(cudaStreamNonBlocking));
  STATIC_REQUIRE(static_cast<unsigned>(curt::stream_flags::blocking) == unsigned(cudaStreamDefault));
}

TEST_CASE("stream_ref converts to and from cudaStream_t and compares by handle") {
  STATIC_REQUIRE(std::is_convertible_v<cudaStream_t, curt::stream_ref>);
  STATIC_REQUIRE(std::is_convertible_v<curt::stream_ref, cudaStream_t>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<curt::stream_ref>);
  STATIC_REQUIRE(sizeof(curt::stream_ref) == sizeof(cudaStream_t));
  // An owning stream is not copyable, only movable; its ref is.
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<curt::stream>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<curt::stream>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<curt::stream>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<curt::stream>);
  STATIC_REQUIRE(std::is_convertible_v<curt::stream&, curt::stream_ref>);
  STATIC_REQUIRE(std::is_convertible_v<curt::stream&, cudaStream_t>);

  std::uintptr_t value = random_handle_value();
  curt::stream_ref a(fake_stream(value));
  curt::stream_ref b = fake_stream(value);  // implicit
  curt::stream_ref c(fake_stream(value + 16));
  CHECK(a.get() == fake_stream(value));
  cudaStream_t raw = a;  // implicit
  CHECK(raw == fake_stream(value));
  auto takes_raw = [](cudaStream_t s) { return s; };
  CHECK(takes_raw(a) == fake_stream(value));
  CHECK(a == b);
  CHECK_FALSE(a != b);
  CHECK(a != c);
  CHECK_FALSE(a == c);
  CHECK(a == curt::stream_ref(fake_stream(value)));
  CHECK(curt::stream_ref(fake_stream(value + 16)) == c);

  // Literal 0 and nullptr are not streams; a raw handle that is 0 at run time is the default
  // stream it means in this translation unit (legacy here), never a ref holding 0.
  STATIC_REQUIRE_FALSE(std::is_constructible_v<curt::stream_ref, int>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<curt::stream_ref, std::nullptr_t>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<int, curt::stream_ref>);
  cudaStream_t zero{};
  curt::stream_ref from_zero(zero);
  CHECK(from_zero.get() == cudaStreamLegacy);
  CHECK(from_zero == curt::stream_ref::legacy_default());
}

TEST_CASE("the default streams are the runtime's special handles") {
  curt::stream_ref legacy = curt::stream_ref::legacy_default();
  curt::stream_ref per_thread = curt::stream_ref::per_thread_default();
  CHECK(legacy.get() == cudaStreamLegacy);
  CHECK(per_thread.get() == cudaStreamPerThread);
  CHECK(legacy != per_thread);
  CHECK(legacy != cudaStream_t{});
  CHECK(per_thread != cudaStream_t{});
  CHECK(legacy == curt::stream_ref::legacy_default());
  CHECK(per_thread == curt::stream_ref::per_thread_default());
  cudaStream_t raw_legacy = legacy, raw_per_thread = per_thread;
  CHECK(raw_legacy == cudaStreamLegacy);
  CHECK(raw_per_thread == cudaStreamPerThread);
}

TEST_CASE("cccl() gives CCCL's cuda::stream_ref of the same stream, and only explicitly") {
  // Implicit conversions to both cudaStream_t and cuda::stream_ref would make calls that accept
  // either ambiguous: the CCCL one must be asked for.
  STATIC_REQUIRE_FALSE(std::is_convertible_v<curt::stream_ref, ::cuda::stream_ref>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<curt::stream_ref>().cccl()), ::cuda::stream_ref>);

  std::uintptr_t value = random_handle_value();
  curt::stream_ref ours(fake_stream(value));
  ::cuda::stream_ref theirs = ours.cccl();
  CHECK(theirs.get() == fake_stream(value));
  CHECK(theirs == ::cuda::stream_ref(fake_stream(value)));
  CHECK(theirs != ::cuda::stream_ref(fake_stream(value + 16)));
  CHECK(curt::to_cccl(ours).get() == fake_stream(value));
  CHECK(curt::stream_ref::legacy_default().cccl().get() == cudaStreamLegacy);
  CHECK(curt::stream_ref::per_thread_default().cccl().get() == cudaStreamPerThread);
}

TEST_CASE("a CCCL cuda::stream_ref converts implicitly to curt::stream_ref") {
  STATIC_REQUIRE(std::is_convertible_v<::cuda::stream_ref, curt::stream_ref>);
  std::uintptr_t value = random_handle_value();
  ::cuda::stream_ref theirs(fake_stream(value));
  curt::stream_ref ours = theirs;  // implicit
  CHECK(ours.get() == fake_stream(value));
  auto takes_curt = [](curt::stream_ref s) { return s.get(); };
  CHECK(takes_curt(theirs) == fake_stream(value));
}

TEST_CASE("event_ref wraps a handle without owning it and compares by handle") {
  STATIC_REQUIRE(std::is_convertible_v<cudaEvent_t, curt::event_ref>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<curt::event_ref, int>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<curt::event_ref, std::nullptr_t>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<curt::event_ref>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<curt::event>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<curt::event>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<curt::event>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<curt::event>);
  STATIC_REQUIRE(std::is_convertible_v<curt::event&, curt::event_ref>);
  // A stream is not an event and the other way round.
  STATIC_REQUIRE_FALSE(std::is_convertible_v<curt::event_ref, curt::stream_ref>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<curt::stream_ref, curt::event_ref>);

  std::uintptr_t value = random_handle_value();
  curt::event_ref a(fake_event(value));
  curt::event_ref b = fake_event(value);
  curt::event_ref c(fake_event(value + 16));
  CHECK(a.get() == fake_event(value));
  CHECK(a == b);
  CHECK_FALSE(a != b);
  CHECK(a != c);
}
