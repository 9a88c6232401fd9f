// Events against the raw runtime: every flag combination, recording and waiting, elapsed time of
// spinning kernels, the errors of untimed, unrecorded and unfinished events, interprocess handles,
// stream_timer, ownership.
//
// Test cases tagged [api-error] make CUDA calls fail on purpose (and compare with the raw call's
// failure); compute-sanitizer's memcheck reports those calls unless run with
// --report-api-errors no, so a sanitizer run may leave them out with the filter "~[api-error]".
//
// Spinning kernels read %globaltimer, so they last as long under compute-sanitizer as without it.
// Checks that need work to be still running either hold the stream at a host function (certain) or
// are made only when the host measured that the kernel cannot have finished yet.
#include <catch.hpp>
#include <spin.cuh>
#include <isolation.hpp>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>

#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/stream.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using curt_test::destructor_error_counter;
using curt_test::device_array;
using curt_test::host_gate;

using curt_test::global_ns;

// Spins for at least `ns` by %globaltimer and, when `spun` is given, stores how long it spun.
__global__ void spin_kernel(unsigned long long ns, unsigned long long* spun) {
  unsigned long long start = global_ns(), now = start;
  while (now - start < ns) now = global_ns();
  if (spun) *spun = now - start;
}

// y[i] = a * x[i] + b.
__global__ void affine_kernel(const float* x, float* y, int n, float a, float b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
}

void require_launched() { REQUIRE(cudaGetLastError() == cudaSuccess); }

unsigned long long to_ns(std::chrono::nanoseconds t) { return static_cast<unsigned long long>(t.count()); }

// A random spin time in [base, base + 1 ms), whole microseconds.
std::chrono::microseconds random_spin(std::chrono::milliseconds base) {
  return std::chrono::microseconds(base) +
         std::chrono::microseconds(curt_test::random_ints(1, 0, 999)[0]);
}

// The events' clock ticks about every half microsecond and %globaltimer about every microsecond:
// a measured time may fall short of the spin by that much.
constexpr curt::event_duration timer_slack{0.01f};  // 10 us
// Not a performance test: only absurd times fail (a sanitizer makes launches slow).
constexpr curt::event_duration absurd{10'000.0f};

struct named_flags {
  curt::event_flags flags;
  const char* name;
};
// Every combination CUDA allows (interprocess needs timing off).
const named_flags allowed_flags[] = {
    {curt::event_flags::none, "none"},
    {curt::event_flags::timing, "timing"},
    {curt::event_flags::blocking_sync, "blocking_sync"},
    {curt::event_flags::timing | curt::event_flags::blocking_sync, "timing | blocking_sync"},
    {curt::event_flags::interprocess, "interprocess"},
    {curt::event_flags::interprocess | curt::event_flags::blocking_sync,
     "interprocess | blocking_sync"},
};

// cudaEventElapsedTime's status, leaving no error behind.
cudaError_t raw_elapsed(cudaEvent_t start, cudaEvent_t stop, float* ms) {
  cudaError_t status = cudaEventElapsedTime(ms, start, stop);
  (void)cudaGetLastError();
  return status;
}

// curt::elapsed must do what the raw call does: the same value, or a cuda_error of the same status.
void check_elapsed_like_raw(curt::event_ref start, curt::event_ref stop,
                            std::initializer_list<const char*> fragments) {
  float raw_ms = -1.0f;
  cudaError_t raw = raw_elapsed(start.get(), stop.get(), &raw_ms);
  INFO("cudaEventElapsedTime: " << cudaGetErrorName(raw));
  if (raw == cudaSuccess) {
    curt::event_duration t{};
    REQUIRE_NOTHROW(t = curt::elapsed(start, stop));
    CHECK(t.count() == raw_ms);
  } else {
    curt_test::require_cuda_error([&] { (void)curt::elapsed(start, stop); }, raw, fragments);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

bool all_zero(const cudaIpcEventHandle_t& h) {
  return std::all_of(std::begin(h.reserved), std::end(h.reserved), [](char c) { return c == 0; });
}

}  // namespace

TEST_CASE("events of every allowed flag combination record, synchronize and query like raw ones") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  device_array<unsigned long long> spun(1);
  spun.poison();
  for (const named_flags& f : allowed_flags) {
    INFO("flags " << f.name);
    curt::event e(d, f.flags);
    REQUIRE(e.get() != nullptr);
    cudaEvent_t raw = nullptr;
    REQUIRE(cudaEventCreateWithFlags(&raw, curt::event::to_native(f.flags)) == cudaSuccess);

    // Nothing recorded yet: complete.
    CHECK(e.ready());
    CHECK(cudaEventQuery(e.get()) == cudaSuccess);
    CHECK(cudaEventQuery(raw) == cudaSuccess);

    spin_kernel<<<1, 1, 0, s>>>(to_ns(1ms), spun.get());
    require_launched();
    s.record(e);
    REQUIRE(cudaEventRecord(raw, s) == cudaSuccess);
    e.synchronize();
    CHECK(e.ready());
    CHECK(cudaEventQuery(e.get()) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(raw) == cudaSuccess);
    CHECK(cudaEventQuery(raw) == cudaSuccess);
    // The kernel before the event has finished.
    CHECK(spun.download()[0] >= to_ns(1ms));

    REQUIRE(cudaEventDestroy(raw) == cudaSuccess);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("elapsed() works exactly for event_flags::timing, as with the raw flags", "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  for (const named_flags& f : allowed_flags) {
    INFO("flags " << f.name);
    curt::event e(d, f.flags), e2(d, f.flags);
    e.record(s);
    spin_kernel<<<1, 1, 0, s>>>(to_ns(100us), nullptr);
    require_launched();
    e2.record(s);
    e2.synchronize();
    float ms = 0.0f;
    CHECK((raw_elapsed(e.get(), e2.get(), &ms) == cudaSuccess) ==
          curt::has_flag(f.flags, curt::event_flags::timing));
    check_elapsed_like_raw(e, e2, {"cuEventElapsedTime(start, stop)", "event_flags::timing"});
    if (curt::has_flag(f.flags, curt::event_flags::timing))
      CHECK(curt::elapsed(e, e2) >= curt::event_duration(100us) - timer_slack);
  }
}

TEST_CASE("timed_event is always timed, with the flags added to it") {
  curt::device d(0);
  curt::stream s(d);
  for (curt::event_flags extra : {curt::event_flags::none, curt::event_flags::blocking_sync}) {
    INFO("blocking_sync " << curt::has_flag(extra, curt::event_flags::blocking_sync));
    curt::timed_event start(d, extra), stop(d, extra);
    std::chrono::microseconds spin = random_spin(2ms);
    s.record(start);
    spin_kernel<<<1, 1, 0, s>>>(to_ns(spin), nullptr);
    require_launched();
    s.record(stop);
    stop.synchronize();
    CHECK(curt::elapsed(start, stop) >= curt::event_duration(spin) - timer_slack);
  }
  curt_test::require_cuda_error(
      [&] { curt::timed_event e(d, curt::event_flags::interprocess); }, cudaErrorInvalidValue,
      {"interprocess", "timing"});
  curt::timed_event empty(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)empty.get(); }, cudaErrorInvalidResourceHandle,
                                {"empty"});
}

TEST_CASE("ready() follows the captured work, as cudaEventQuery does") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  curt::event e(d, curt::event_flags::blocking_sync);

  SECTION("behind a long kernel") {
    auto spin = 20ms;
    auto start = std::chrono::steady_clock::now();
    spin_kernel<<<1, 1, 0, s>>>(to_ns(spin), nullptr);
    require_launched();
    e.record(s);
    bool ready = e.ready();
    cudaError_t raw = cudaEventQuery(e.get());
    auto asked = std::chrono::steady_clock::now() - start;
    if (asked < spin - 2ms) {
      CHECK_FALSE(ready);
      CHECK(raw == cudaErrorNotReady);
    } else {
      WARN("the launch took "
           << std::chrono::duration_cast<std::chrono::microseconds>(asked).count()
           << " us (blocking launches?): ready() not checked while the kernel runs");
    }
    e.synchronize();
    CHECK(e.ready());
    CHECK(cudaEventQuery(e.get()) == cudaSuccess);
  }
  SECTION("behind a host function that has not returned") {
    host_gate gate;
    gate.block(s);
    s.record(e);
    CHECK_FALSE(e.ready());
    CHECK(cudaEventQuery(e.get()) == cudaErrorNotReady);
    // A later wait on the event holds another stream too.
    curt::stream other(d);
    other.wait(e);
    spin_kernel<<<1, 1, 0, other>>>(1000ull, nullptr);
    require_launched();
    CHECK_FALSE(other.ready());
    gate.open();
    e.synchronize();
    CHECK(e.ready());
    other.synchronize();
    CHECK(other.ready());
  }
  SECTION("re-recorded: the event follows its latest record") {
    s.record(e);
    e.synchronize();
    CHECK(e.ready());
    host_gate gate;
    gate.block(s);
    s.record(e);
    CHECK_FALSE(e.ready());
    gate.open();
    e.synchronize();
    CHECK(e.ready());
  }
}

TEST_CASE("elapsed() times a spinning kernel, as cudaEventElapsedTime does, in chrono units") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  curt::event start(d, curt::event_flags::timing), stop(d, curt::event_flags::timing);
  device_array<unsigned long long> spun(1);
  spun.poison();

  std::chrono::microseconds spin = random_spin(5ms);
  INFO("spin " << spin.count() << " us");
  s.record(start);
  spin_kernel<<<1, 1, 0, s>>>(to_ns(spin), spun.get());
  require_launched();
  s.record(stop);
  stop.synchronize();

  auto t = curt::elapsed(start, stop);
  static_assert(std::is_same_v<decltype(t), curt::event_duration>);
  static_assert(std::is_same_v<decltype(t), std::chrono::duration<float, std::milli>>);
  float raw_ms = 0.0f;
  REQUIRE(cudaEventElapsedTime(&raw_ms, start.get(), stop.get()) == cudaSuccess);
  INFO("elapsed " << t.count() << " ms");
  CHECK(t.count() == raw_ms);
  CHECK(t >= curt::event_duration(spin) - timer_slack);
  CHECK(t < absurd);
  // What the kernel itself measured fits inside the events.
  unsigned long long spun_ns = spun.download()[0];
  CHECK(spun_ns >= to_ns(spin));
  CHECK(t >= curt::event_duration(std::chrono::nanoseconds(spun_ns)) - timer_slack);
  // Converts to any chrono duration.
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t);
  CHECK(us >= spin - std::chrono::microseconds(10));
  // The same events give the same time again.
  CHECK(curt::elapsed(start, stop) == t);
}

TEST_CASE("elapsed() of an event made without event_flags::timing names the flag", "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  curt::event timed(d, curt::event_flags::timing), untimed(d), timed2(d, curt::event_flags::timing);
  s.record(timed);
  s.record(untimed);
  s.record(timed2);
  s.synchronize();

  float ms = 0.0f;
  CHECK(raw_elapsed(timed.get(), untimed.get(), &ms) == cudaErrorInvalidResourceHandle);
  auto error = curt_test::require_cuda_error(
      [&] { (void)curt::elapsed(timed, untimed); }, cudaErrorInvalidResourceHandle,
      {"cuEventElapsedTime(start, stop)", "event_flags::timing"});
  CHECK_FALSE(error.from_driver());
  CHECK(cudaGetLastError() == cudaSuccess);
  // Either side, or both.
  curt_test::require_cuda_error([&] { (void)curt::elapsed(untimed, timed); },
                                cudaErrorInvalidResourceHandle, {"event_flags::timing"});
  curt_test::require_cuda_error([&] { (void)curt::elapsed(untimed, untimed); },
                                cudaErrorInvalidResourceHandle, {"event_flags::timing"});
  CHECK(cudaGetLastError() == cudaSuccess);
  // The two timed ones still work.
  CHECK_NOTHROW(curt::elapsed(timed, timed2));
  check_elapsed_like_raw(timed, timed2, {});
}

TEST_CASE("elapsed() of unrecorded or unfinished events is the raw API's error, explained",
          "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  curt::event start(d, curt::event_flags::timing), stop(d, curt::event_flags::timing);

  SECTION("never recorded") {
    check_elapsed_like_raw(start, stop, {"cuEventElapsedTime(start, stop)", "be recorded"});
    s.record(start);
    s.synchronize();
    check_elapsed_like_raw(start, stop, {"cuEventElapsedTime(start, stop)", "be recorded"});
  }
  SECTION("recorded behind work that has not finished") {
    host_gate gate;
    s.record(start);
    gate.block(s);
    s.record(stop);
    float ms = 0.0f;
    CHECK(raw_elapsed(start.get(), stop.get(), &ms) == cudaErrorNotReady);
    curt_test::require_cuda_error([&] { (void)curt::elapsed(start, stop); }, cudaErrorNotReady,
                                  {"cuEventElapsedTime(start, stop)", "synchronize first"});
    CHECK(cudaGetLastError() == cudaSuccess);
    gate.open();
    stop.synchronize();
    curt::event_duration t{};
    REQUIRE_NOTHROW(t = curt::elapsed(start, stop));
    CHECK(t.count() >= 0.0f);
    check_elapsed_like_raw(start, stop, {});
  }
}

TEST_CASE("interprocess with timing is refused before any event is made", "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  using curt::event_flags;
  curt_test::require_cuda_error([&] { curt::event e(d, event_flags::interprocess | event_flags::timing); },
                                cudaErrorInvalidValue, {"interprocess", "timing"});
  curt_test::require_cuda_error(
      [&] {
        curt::event e(d, event_flags::interprocess | event_flags::timing | event_flags::blocking_sync);
      },
      cudaErrorInvalidValue, {"interprocess"});
  // The raw API refuses the same flags too.
  cudaEvent_t raw = nullptr;
  cudaError_t status = cudaEventCreateWithFlags(&raw, cudaEventInterprocess);
  (void)cudaGetLastError();
  CHECK(status != cudaSuccess);
  if (status == cudaSuccess) (void)cudaEventDestroy(raw);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("ipc_handle() of an interprocess event is what cudaIpcGetEventHandle gives") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  if (!d.attribute<cudaDevAttrIpcEventSupport>()) {
    WARN("device 0 does not support interprocess events");
    return;
  }
  curt::stream s(d);
  for (curt::event_flags flags :
       {curt::event_flags::interprocess, curt::event_flags::interprocess | curt::event_flags::blocking_sync}) {
    INFO("blocking_sync " << curt::has_flag(flags, curt::event_flags::blocking_sync));
    curt::event e(d, flags);
    cudaIpcEventHandle_t raw_handle{};
    REQUIRE(cudaIpcGetEventHandle(&raw_handle, e.get()) == cudaSuccess);
    cudaIpcEventHandle_t handle{};
    REQUIRE_NOTHROW(handle = e.ipc_handle());
    CHECK_FALSE(all_zero(handle));
    CHECK(std::memcmp(&handle, &raw_handle, sizeof handle) == 0);
    // Still an ordinary event in this process.
    s.record(e);
    e.synchronize();
    CHECK(e.ready());
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("ipc_handle() of any other event is the raw API's error, explained", "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  for (const named_flags& f : allowed_flags) {
    if (curt::has_flag(f.flags, curt::event_flags::interprocess)) continue;
    INFO("flags " << f.name);
    curt::event e(d, f.flags);
    cudaIpcEventHandle_t raw_handle{};
    cudaError_t raw = cudaIpcGetEventHandle(&raw_handle, e.get());
    (void)cudaGetLastError();
    INFO("cudaIpcGetEventHandle: " << cudaGetErrorName(raw));
    REQUIRE(raw != cudaSuccess);
    curt_test::require_cuda_error([&] { (void)e.ipc_handle(); }, raw,
                                  {"cudaIpcGetEventHandle(event)", "event_flags::interprocess",
                                   "cudaEventInterprocess | cudaEventDisableTiming"});
    CHECK(cudaGetLastError() == cudaSuccess);
  }
}

TEST_CASE("stream_timer times the region between its construction and stop()") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  std::chrono::microseconds spin = random_spin(3ms);
  INFO("spin " << spin.count() << " us");

  curt::stream_timer timer(s);
  spin_kernel<<<1, 1, 0, s>>>(to_ns(spin), nullptr);
  require_launched();
  curt::event_duration t = timer.stop();
  INFO("timed " << t.count() << " ms");
  CHECK(t >= curt::event_duration(spin) - timer_slack);
  CHECK(t < absurd);

  // stop() records only the first time: work after it is not counted by a second stop().
  spin_kernel<<<1, 1, 0, s>>>(to_ns(10ms), nullptr);
  require_launched();
  curt::event_duration again = timer.stop();
  CHECK(again == t);
  s.synchronize();

  // Also on a raw stream handle.
  cudaStream_t raw = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) == cudaSuccess);
  {
    curt::stream_timer raw_timer(raw);
    spin_kernel<<<1, 1, 0, raw>>>(to_ns(spin), nullptr);
    require_launched();
    CHECK(raw_timer.stop() >= curt::event_duration(spin) - timer_slack);
  }
  REQUIRE(cudaStreamDestroy(raw) == cudaSuccess);
}

TEST_CASE("a stream waits on an event recorded on another stream") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream producer(d), consumer(d);
  curt::event done(d);
  int n = curt_test::random_ints(1, 2000, 6000)[0];
  std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n), 1.0f, 2.0f);
  float a = curt_test::random_floats(1, 0.5f, 2.0f)[0], b = curt_test::random_floats(1, 0.5f, 2.0f)[0];
  device_array<float> dx(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n)),
      z(static_cast<std::size_t>(n));
  dx.upload(x);
  y.poison();
  z.poison();
  // The producer spins first, then computes y; the consumer computes z from y only after `done`.
  spin_kernel<<<1, 1, 0, producer>>>(to_ns(15ms), nullptr);
  require_launched();
  affine_kernel<<<(n + 255) / 256, 256, 0, producer>>>(dx.get(), y.get(), n, a, b);
  require_launched();
  done.record(producer);
  consumer.wait(done);
  affine_kernel<<<(n + 255) / 256, 256, 0, consumer>>>(y.get(), z.get(), n, a, b);
  require_launched();
  consumer.synchronize();
  CHECK(done.ready());
  std::vector<float> got = z.download();
  std::size_t bad = 0;
  for (int i = 0; i < n; ++i) {
    float want = a * (a * x[i] + b) + b;
    if (!curt_test::close(got[i], want, 1e-6)) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("from_native_handle adopts a raw event and release() gives it back") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  destructor_error_counter errors;
  curt::stream s(d);

  cudaEvent_t raw = nullptr;
  REQUIRE(cudaEventCreate(&raw) == cudaSuccess);  // timing on
  {
    curt::event adopted = curt::event::from_native_handle(raw);
    CHECK(adopted.get() == raw);
    curt::event stop(d, curt::event_flags::timing);
    s.record(adopted);
    spin_kernel<<<1, 1, 0, s>>>(to_ns(1ms), nullptr);
    require_launched();
    s.record(stop);
    stop.synchronize();
    CHECK(curt::elapsed(adopted, stop) >= curt::event_duration(1ms) - timer_slack);
    cudaEvent_t back = adopted.release();
    CHECK(back == raw);
    CHECK_FALSE(adopted.valid());
    CHECK_THROWS_WITH(adopted.get(), ContainsSubstring("released"));
  }  // the released wrapper destroys nothing
  CHECK(cudaEventQuery(raw) == cudaSuccess);
  REQUIRE(cudaEventRecord(raw, s) == cudaSuccess);
  REQUIRE(cudaEventSynchronize(raw) == cudaSuccess);
  CHECK(cudaEventDestroy(raw) == cudaSuccess);

  // An adopted event is destroyed by its owner, without error.
  cudaEvent_t owned = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&owned, cudaEventDisableTiming) == cudaSuccess);
  {
    curt::event adopted = curt::event::from_native_handle(owned);
    adopted.record(s);
    adopted.synchronize();
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("moving an event moves the handle, empties the source and destroys exactly once") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  destructor_error_counter errors;
  {
    curt::stream s(d);
    curt::event a(d, curt::event_flags::timing);
    cudaEvent_t handle = a.get();

    curt::event b(std::move(a));
    CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state
    CHECK_THROWS_WITH(a.get(), ContainsSubstring("moved-from"));
    CHECK(b.get() == handle);

    curt::event c(d);
    c = std::move(b);  // destroys c's own event, takes b's
    CHECK_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): the moved-from state
    CHECK_THROWS_WITH(b.get(), ContainsSubstring("moved-from"));
    CHECK(c.get() == handle);

    curt::event& alias = c;
    c = std::move(alias);  // self-move keeps the event
    CHECK(c.get() == handle);

    a = curt::event(d, curt::event_flags::timing);  // a moved-from event can be assigned again
    REQUIRE(a.get() != nullptr);
    CHECK(a.get() != handle);

    // The moved event kept its timing flag: time a kernel with it.
    s.record(c);
    spin_kernel<<<1, 1, 0, s>>>(to_ns(1ms), nullptr);
    require_launched();
    s.record(a);
    a.synchronize();
    CHECK(curt::elapsed(c, a) >= curt::event_duration(1ms) - timer_slack);

    curt::event_ref ref = c;
    CHECK(ref == c);
    CHECK(ref.get() == handle);
    CHECK(ref != a);
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// An interprocess event shared with a child process: the child opens it on device 0 from a thread
// with no context (and is left with none), sees it unfinished while this process holds its stream
// at a gate, tells this process so through a file, and then waits for it to finish.
namespace {
constexpr const char* ipc_child = "an event opened from another process (child)";
constexpr const char* ipc_marker = "IPC-EVENT-CHILD-REACHED-ITS-END";

std::string to_hex(const cudaIpcEventHandle_t& handle) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&handle);
  std::string text;
  for (std::size_t i = 0; i < sizeof handle; ++i) {
    char pair[3];
    std::snprintf(pair, sizeof pair, "%02x", bytes[i]);
    text += pair;
  }
  return text;
}

cudaIpcEventHandle_t from_hex(const std::string& text) {
  cudaIpcEventHandle_t handle{};
  REQUIRE(text.size() == 2 * sizeof handle);
  auto* bytes = reinterpret_cast<unsigned char*>(&handle);
  for (std::size_t i = 0; i < sizeof handle; ++i)
    bytes[i] = static_cast<unsigned char>(std::stoul(text.substr(2 * i, 2), nullptr, 16));
  return handle;
}
}  // namespace

TEST_CASE("an event opened from another process (child)", "[.][ipc-event-child]") {
  const char* handle_text = std::getenv("CURT_TEST_IPC_EVENT");
  const char* signal_path = std::getenv("CURT_TEST_IPC_SIGNAL");
  REQUIRE(handle_text != nullptr);
  REQUIRE(signal_path != nullptr);
  const cudaIpcEventHandle_t handle = from_hex(handle_text);
  curt_test::on_fresh_thread([&] {
    curt::event opened = curt::event::from_ipc_handle(handle, curt::device(0));
    CHECK(curt_test::current_context() == nullptr);
    CHECK_FALSE(opened.ready());  // the parent's stream is held before the record
    std::FILE* signal = std::fopen(signal_path, "w");
    REQUIRE(signal != nullptr);
    std::fclose(signal);
    opened.synchronize();  // returns once the parent opened its gate
    CHECK(opened.ready());
  });
  std::printf("%s\n", ipc_marker);
  std::fflush(stdout);
}

TEST_CASE("an interprocess event is opened and waited for by another process") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run");
    return;
  }
  curt::device d(0);
  if (!d.attribute<cudaDevAttrIpcEventSupport>()) {
    WARN("device 0 does not support interprocess events");
    return;
  }
  curt::stream s(d);
  curt::event e(d, curt::event_flags::interprocess);
  host_gate gate;
  gate.block(s);
  s.record(e);
  cudaIpcEventHandle_t handle{};
  curt_test::on_fresh_thread([&] {
    handle = e.ipc_handle();
    CHECK(curt_test::current_context() == nullptr);  // left as it was
  });
  const std::string signal_path =
      "/tmp/curt-ipc-event-" + std::to_string(static_cast<long>(getpid()));
  std::remove(signal_path.c_str());
  REQUIRE(setenv("CURT_TEST_IPC_EVENT", to_hex(handle).c_str(), 1) == 0);
  REQUIRE(setenv("CURT_TEST_IPC_SIGNAL", signal_path.c_str(), 1) == 0);
  std::atomic<bool> child_signalled{false};
  std::thread opener([&] {  // opens the gate once the child saw the event unfinished
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::FILE* f = std::fopen(signal_path.c_str(), "r")) {
        std::fclose(f);
        child_signalled = true;
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    gate.open();
  });
  curt_test::child_result child = curt_test::run_self(ipc_child);
  opener.join();
  std::remove(signal_path.c_str());
  INFO("child output:\n" << child.output);
  CHECK(child_signalled);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find(ipc_marker) != std::string::npos);
  e.synchronize();
}
