// Driver contexts: curt never leaves a context behind on a thread that had none, never replaces a
// context the user made current, device_guard nests exactly, and stream.wait(stream) works in any
// context, also after a cudaDeviceReset that no curt owner outlived (owners alive across a reset
// are outside curt's contract; its own caches, of primary contexts among them, are not).
//
// Kernels compute on fresh random inputs in [1, 2) into outputs poisoned with 0xFF bytes (NaN as
// float) and are compared with the same arithmetic on the CPU. The producer in the cross-stream
// checks spins on %globaltimer, so it takes the same wall time under compute-sanitizer.
//
// The cudaDeviceReset test case comes last (Catch2 runs test cases in declaration order): a
// reset destroys everything on the device, so nothing of the other test cases may outlive it.
// Driver functions are reached through CURT_DRIVER_CALL: no test links libcuda.
#include <catch.hpp>
#include <isolation.hpp>
#include <kernels.cuh>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>
#include <error_recorder.hpp>

#include <curt/copy.hpp>
#include <curt/detail/driver.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/occupancy.hpp>
#include <curt/stream.hpp>
#include <curt/unified_memory.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <cuda/std/span>
#include <vector>

namespace {

using curt_test::on_fresh_thread;
using curt_test::current_context;

using namespace std::chrono_literals;
using curt_test::device_array;

// ---- device side ------------------------------------------------------------------------------

using curt_test::global_ns;

using curt_test::slow_affine;
using curt_test::square_plus;

// ---- host side --------------------------------------------------------------------------------

constexpr int block_size = 256;
unsigned blocks_for(int n) { return static_cast<unsigned>((n + block_size - 1) / block_size); }
curt::launch_config config_for(int n) { return curt::launch_config(dim3(blocks_for(n)), dim3(block_size)); }

float affine_ref(float x, float a, float b) { return a * x + b; }
float square_plus_ref(float v, float c) { return v * v + c; }
int random_size() { return curt_test::random_ints(1, 3000, 9000)[0]; }
float random_coefficient() { return curt_test::random_floats(1, 0.5f, 2.0f)[0]; }

CUcontext driver_context_of(cudaStream_t s) {
  CUcontext context = nullptr;
  CURT_DRIVER_CALL(cuStreamGetCtx, 9020, s, &context);
  return context;
}

using curt_test::user_context;

// What differs between `got` and `want`; empty when they agree. No Catch2: usable on any thread.
std::string difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " values, want " + std::to_string(want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!curt_test::close(got[i], want[i], 1e-6)) {
      if (bad++ == 0) first = i;
    }
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " differ; first at " +
         std::to_string(first) + ": got " + std::to_string(got[first]) + ", want " +
         std::to_string(want[first]);
}

// Checks made on a thread other than the test's: Catch2 v2 assertions are not thread-safe, so
// failures are noted there and reported on the test's thread (see on_fresh_thread_noted).
class notes {
 public:
  void check(bool ok, const char* what, int line) {
    if (!ok) failed.push_back("line " + std::to_string(line) + ": " + what);
  }
  void check_empty(const std::string& problem, const char* what, int line) {
    if (!problem.empty())
      failed.push_back("line " + std::to_string(line) + ": " + what + ": " + problem);
  }
  /// Like REQUIRE: stops the thread's body.
  void require(bool ok, const char* what, int line) {
    if (!ok) throw std::runtime_error("line " + std::to_string(line) + ": required " + what);
  }
  std::vector<std::string> failed;
};
#define NOTE_CHECK(n, ...) (n).check(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __LINE__)
#define NOTE_REQUIRE(n, ...) (n).require(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __LINE__)

// Runs `body(notes&)` on a new std::thread (which has no current context), then reports on this
// thread every failure it noted and what it threw, if anything.
template <class Body>
void on_fresh_thread_noted(Body body) {
  notes noted;
  std::string thrown;
  std::thread t([&] {
    try {
      body(noted);
    } catch (const std::exception& e) {
      thrown = e.what();
    } catch (...) {
      thrown = "an exception not derived from std::exception";
    }
  });
  t.join();
  for (const std::string& failure : noted.failed) FAIL_CHECK("on the thread: " << failure);
  if (!thrown.empty()) FAIL("the thread threw: " << thrown);
}

// A slow producer (curt::launch on `producer`) writes data = a * x + b; after
// consumer.wait(producer) the consumer computes out = data * data + c and copies it back. Correct
// only if the consumer really waited: without the wait it would read the poison while the
// producer still spins. Buffers live in the context current on the calling thread. Returns what
// went wrong (empty when nothing did); no Catch2 assertion, so it runs on any thread.
// Producer: a curt::stream owner (wait takes the owner's path: its context is known) or a
// stream_ref (the general path).
template <class Producer>
std::string wait_problem(const Producer& producer, curt::stream_ref consumer,
                         std::chrono::nanoseconds delay = 20ms) {
  int n = random_size();
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  device_array<float> dx(x), data(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  std::vector<float> back(std::size_t(n), -1.0f);

  curt::launch(producer, config_for(n), slow_affine, dx.get(), data.get(), n, a, b,
               static_cast<unsigned long long>(delay.count()));
  consumer.wait(producer);
  curt::launch(consumer, config_for(n), square_plus, data.get(), out.get(), n, c);
  CURT_CHECK(cudaMemcpyAsync(back.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, consumer));
  consumer.synchronize();

  std::vector<float> want(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) want[i] = square_plus_ref(affine_ref(x[i], a, b), c);
  std::string problem = difference(back, want);
  // The consumer waited for the producer, so it is done.
  if (!producer.ready()) problem += " the producer was not done after the consumer's synchronize()";
  producer.synchronize();
  return problem;
}

// wait_problem on the test's thread, as an assertion.
template <class Producer>
void check_wait_for_stream(const Producer& producer, curt::stream_ref consumer,
                           std::chrono::nanoseconds delay = 20ms) {
  std::string problem = wait_problem(producer, consumer, delay);
  INFO(problem);
  CHECK(problem.empty());
}

}  // namespace

TEST_CASE("a thread without a context keeps none: creation, queries, occupancy, launch, synchronize") {
  curt::device d(0);
  int n = random_size();
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  float a = random_coefficient(), b = random_coefficient();
  // Buffers made on this thread, in device 0's primary context, which curt's streams use too.
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  device_array<float> dx(x), dy(static_cast<std::size_t>(n));

  // Steps are noted on the thread and checked here: Catch2 v2 assertions are not thread-safe.
  std::vector<std::string> left_behind;       // documented to leave none: a failure
  std::vector<std::string> undocumented;      // not covered by the rule: reported only
  bool started_without = false;
  int blocks_per_sm = -1;
  cudaFuncAttributes attributes{};
  std::size_t stack = 0;
  curt::memory_info memory;
  on_fresh_thread([&] {
    started_without = current_context() == nullptr;
    if (!started_without) return;
    auto step = [&](std::vector<std::string>& list, const char* what) {
      if (current_context() == nullptr) return;
      list.push_back(what);
      CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);  // go on from a clean thread
    };
    curt::stream s(d);
    step(left_behind, "curt::stream(device)");
    curt::event done(d);
    step(left_behind, "curt::event(device)");
    blocks_per_sm = curt::max_active_blocks_per_multiprocessor(d, slow_affine, block_size);
    step(left_behind, "max_active_blocks_per_multiprocessor");
    attributes = curt::kernel_attributes(d, slow_affine);
    step(left_behind, "kernel_attributes");
    stack = d.limit(cudaLimitStackSize);
    step(left_behind, "device::limit");
    memory = d.memory_info();
    step(left_behind, "device::memory_info");
    (void)d.stream_priority_range();
    step(left_behind, "device::stream_priority_range");
    (void)s.device();
    step(left_behind, "stream::device");
    (void)s.priority();
    step(left_behind, "stream::priority");
    (void)s.flags();
    step(left_behind, "stream::flags");
    (void)s.id();
    step(left_behind, "stream::id");
    (void)s.is_capturing();
    step(left_behind, "stream::is_capturing");
    s.set_synchronization_policy(cudaSyncPolicyYield);
    (void)s.synchronization_policy();
    step(left_behind, "stream::set_synchronization_policy and synchronization_policy");
    curt::launch(s, config_for(n), slow_affine, dx.get(), dy.get(), n, a, b, 1'000'000ull);
    step(left_behind, "curt::launch");
    (void)s.ready();
    step(left_behind, "stream::ready");
    s.synchronize();
    step(left_behind, "stream::synchronize");
    s.host_call([] {});
    s.synchronize();
    step(left_behind, "stream::host_call");
    {
      curt::stream_timer timer(s);
      (void)timer.stop();
    }
    step(left_behind, "stream_timer (made, stopped and destroyed)");
    {
      curt::stream_timer timer(s);
      curt::stream_timer other(s);
      timer = std::move(other);  // destroys timer's own events
      curt::stream_timer moved(std::move(timer));
      (void)moved.stop();
    }
    step(left_behind, "stream_timer (move-assigned, moved, stopped and destroyed)");
    // Waits between a created stream and the default streams, both ways (a default stream names
    // the runtime device's primary context, popped again).
    s.wait(curt::stream_ref::legacy_default());
    step(left_behind, "stream.wait(legacy_default())");
    curt::stream_ref::legacy_default().wait(s);
    step(left_behind, "legacy_default().wait(stream)");
    curt::stream_ref::per_thread_default().wait(s);
    step(left_behind, "per_thread_default().wait(stream)");
    curt::stream_ref::legacy_default().wait(curt::stream_ref(s));
    step(left_behind, "legacy_default().wait(stream_ref)");
    s.synchronize();
    done.record(s);
    step(left_behind, "event::record");
    done.synchronize();
    step(left_behind, "event::synchronize");
    (void)done.ready();
    step(left_behind, "event::ready");
    s.wait(done);
    step(left_behind, "stream.wait(event)");
  });
  REQUIRE(started_without);
  for (const std::string& what : left_behind) {
    FAIL_CHECK("left a context current on a thread that had none: " << what);
  }
  if (!undocumented.empty()) {
    std::string list;
    for (const std::string& what : undocumented) list += " " + what;
    WARN("these made a context current on a thread that had none (not covered by curt's rule):"
         << list);
  }
  CHECK(blocks_per_sm > 0);
  CHECK(attributes.maxThreadsPerBlock >= block_size);
  CHECK(stack > 0);
  CHECK(memory.total == d.total_memory());
  CHECK(memory.free > 0);
  CHECK(memory.free <= memory.total);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  std::vector<float> want(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) want[i] = affine_ref(x[i], a, b);
  curt_test::require_close_all(dy.download(), want);
}

TEST_CASE("streams and events made under a user's driver context belong to it and keep it current") {
  curt::device d(0);
  // Checks on the threads are noted and reported here (Catch2 assertions are not thread-safe).
  on_fresh_thread_noted([&](notes& n) {
    NOTE_REQUIRE(n, current_context() == nullptr);
    user_context mine(0);
    NOTE_REQUIRE(n, mine.get() != nullptr);
    NOTE_REQUIRE(n, current_context() == mine.get());
    {
      curt::stream s(d), other(d);
      NOTE_CHECK(n, current_context() == mine.get());
      NOTE_CHECK(n, driver_context_of(s) == mine.get());
      NOTE_CHECK(n, driver_context_of(other) == mine.get());
      curt::event e(d);
      NOTE_CHECK(n, current_context() == mine.get());

      // Queries go through device_guard, which finds the user's context and leaves it alone.
      NOTE_CHECK(n, curt::max_active_blocks_per_multiprocessor(d, square_plus, block_size) > 0);
      NOTE_CHECK(n, curt::kernel_attributes(d, square_plus).maxThreadsPerBlock >= block_size);
      NOTE_CHECK(n, d.limit(cudaLimitStackSize) > 0);
      NOTE_CHECK(n, d.memory_info().total == d.total_memory());
      {
        curt::device_guard outer(d);
        NOTE_CHECK(n, current_context() == mine.get());
        curt::device_guard inner(d);
        NOTE_CHECK(n, current_context() == mine.get());
      }
      NOTE_CHECK(n, current_context() == mine.get());

      // Work runs in the user's context: buffers, launch, an event recorded there, a wait.
      int count = random_size();
      std::vector<float> x = curt_test::random_floats(std::size_t(count), 1.0f, 2.0f);
      float a = random_coefficient(), b = random_coefficient();
      {
        device_array<float> dx(x), dy(static_cast<std::size_t>(count));
        curt::launch(s, config_for(count), slow_affine, dx.get(), dy.get(), count, a, b,
                     2'000'000ull);
        e.record(s);  // throws if e were not of the stream's context
        other.wait(e);
        e.synchronize();
        NOTE_CHECK(n, e.ready());
        std::vector<float> want(static_cast<std::size_t>(count));
        for (int i = 0; i < count; ++i) want[i] = affine_ref(x[i], a, b);
        n.check_empty(difference(dy.download(), want), "the kernel's result", __LINE__);
        NOTE_CHECK(n, current_context() == mine.get());

        // stream.wait(stream) across streams of the user's context.
        n.check_empty(wait_problem(s, other), "other.wait(s)", __LINE__);
        n.check_empty(wait_problem(other, s, 10ms), "s.wait(other)", __LINE__);
        NOTE_CHECK(n, current_context() == mine.get());
      }
    }
    NOTE_CHECK(n, current_context() == mine.get());
  });
  // The user's context is gone (cuCtxDestroy) with every owner made in it; a new one may reuse its
  // handle: waits in the new one still work.
  on_fresh_thread_noted([&](notes& n) {
    for (int round = 0; round < 2; ++round) {
      user_context mine(0);
      {
        curt::stream p(d), c(d);
        NOTE_REQUIRE(n, driver_context_of(p) == mine.get());
        n.check_empty(wait_problem(p, c), round == 0 ? "context 0: c.wait(p)" : "context 1: c.wait(p)",
                      __LINE__);
      }
      NOTE_CHECK(n, current_context() == mine.get());
    }
  });
}

TEST_CASE("device_guard inside a pushed context of its device changes nothing; nested guards restore") {
  curt::device d(0);
  on_fresh_thread_noted([&](notes& n) {
    NOTE_REQUIRE(n, current_context() == nullptr);
    CUdevice dev = 0;
    CURT_DRIVER_CALL(cuDeviceGet, 2000, &dev, 0);
    CUcontext primary = nullptr;
    CURT_DRIVER_CALL(cuDevicePrimaryCtxRetain, 7000, &primary, dev);

    // No context: the outer guard pushes the primary one, the inner one finds it, both restore.
    {
      curt::device_guard outer(d);
      NOTE_CHECK(n, current_context() == primary);
      {
        curt::device_guard inner(d);
        NOTE_CHECK(n, current_context() == primary);
      }
      NOTE_CHECK(n, current_context() == primary);
    }
    NOTE_CHECK(n, current_context() == nullptr);

    // The primary context pushed by the user: guards push nothing, so one pop empties the stack.
    CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, primary);
    {
      curt::device_guard outer(d);
      NOTE_CHECK(n, current_context() == primary);
      curt::device_guard inner(d);
      NOTE_CHECK(n, current_context() == primary);
    }
    NOTE_CHECK(n, current_context() == primary);
    CUcontext popped = nullptr;
    CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
    NOTE_CHECK(n, popped == primary);
    NOTE_CHECK(n, current_context() == nullptr);

    // A user's context under the primary one on the stack: the guard keeps the user's current.
    CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, primary);
    {
      user_context mine(0);  // pushed on top
      NOTE_REQUIRE(n, current_context() == mine.get());
      {
        curt::device_guard outer(d);
        NOTE_CHECK(n, current_context() == mine.get());
        curt::device_guard inner(d);
        NOTE_CHECK(n, current_context() == mine.get());
      }
      NOTE_CHECK(n, current_context() == mine.get());
    }  // destroyed: popped, the primary context is current again
    NOTE_CHECK(n, current_context() == primary);
    CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
    NOTE_CHECK(n, popped == primary);
    NOTE_CHECK(n, current_context() == nullptr);
    CURT_DRIVER_CALL(cuDevicePrimaryCtxRelease, 11000, dev);
  });
}

// Copies on a stream inside a device_guard and after it, on a thread that had no context: the
// data arrive, and the thread is left with none.
TEST_CASE("copies inside a device_guard and after it leave the thread as it was") {
  curt::device d(0);
  const std::size_t count = static_cast<std::size_t>(random_size());
  const std::vector<int> in = curt_test::random_ints(count, -1000000, 1000000);
  curt::stream s(d);
  curt::device_buffer<int> buffer(d, count);
  std::vector<int> inside(count, -7777777), outside(count, -7777777);
  on_fresh_thread_noted([&](notes& n) {
    NOTE_REQUIRE(n, current_context() == nullptr);
    {
      curt::device_guard outer(d);
      {
        curt::device_guard inner(d);
        NOTE_CHECK(n, current_context() != nullptr);
      }
      curt::copy(buffer, in, s);
      curt::copy(inside, buffer, s);
      s.synchronize();
    }
    NOTE_CHECK(n, current_context() == nullptr);
    curt::copy(outside, buffer, s);  // runs in the stream's context, popped again
    s.synchronize();
    NOTE_CHECK(n, current_context() == nullptr);
  });
  CHECK(inside == in);
  CHECK(outside == in);
}

TEST_CASE("waiting on itself is a no-op that neither blocks nor fails") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  int n = random_size();
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  device_array<float> dx(x), data(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  curt_test::host_gate gate;
  // Launches come outside the gate: under compute-sanitizer a launch may block until its kernel
  // has run, which behind a closed gate would wait for the gate's timeout.
  curt::launch(s, config_for(n), slow_affine, dx.get(), data.get(), n, a, b, 1'000'000ull);
  gate.block(s);  // the stream is busy while it waits on itself
  auto start = std::chrono::steady_clock::now();
  s.wait(s);
  s.wait(curt::stream_ref(s.get()));
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < 5s);  // returned without waiting for the gate
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_FALSE(s.ready());
  gate.open();
  curt::launch(s, config_for(n), square_plus, data.get(), out.get(), n, c);
  s.synchronize();
  std::vector<float> want(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) want[i] = square_plus_ref(affine_ref(x[i], a, b), c);
  curt_test::require_close_all(out.download(), want);
}

// Last in the file: cudaDeviceReset destroys everything on device 0.
TEST_CASE("stream.wait(stream) works before and after cudaDeviceReset on the same thread") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  unsigned long long id_before = 0, id_after = 0;
  CUcontext before = nullptr;
  {
    curt::stream p(d), c(d);
    before = driver_context_of(p);
    CURT_DRIVER_CALL(cuCtxGetId, 12000, before, &id_before);
    check_wait_for_stream(p, c);  // through the owner's own event
    check_wait_for_stream(curt::stream_ref(p), c);  // through a ref: a temporary event
    check_wait_for_stream(c, p, 10ms);
  }  // every owner is gone before the reset
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaDeviceReset() == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  {
    curt::stream p(d), c(d);
    CUcontext after = driver_context_of(p);
    CURT_DRIVER_CALL(cuCtxGetId, 12000, after, &id_after);
    INFO("primary context " << before << " (id " << id_before << ") -> " << after << " (id "
                            << id_after << ")");
    CHECK(id_after != id_before);
    // curt's cached primary context was reset: new owners must still work in it.
    for (int round = 0; round < 2; ++round) {
      INFO("round " << round);
      check_wait_for_stream(p, c);
      check_wait_for_stream(curt::stream_ref(p), c);
    }
    check_wait_for_stream(c, p, 10ms);
    c.wait(c);
    CHECK(cudaGetLastError() == cudaSuccess);
  }
  // A second reset, waited across from a fresh thread too.
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaDeviceReset() == cudaSuccess);
  on_fresh_thread_noted([&](notes& n) {
    curt::device_guard guard(d);  // buffers need a context on this thread
    curt::stream p(d), c(d);
    n.check_empty(wait_problem(p, c), "c.wait(p) on a fresh thread", __LINE__);
  });
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  {
    curt::stream p(d), c(d);
    check_wait_for_stream(p, c);
  }
}

// Runs only in a child process (hidden), where no context exists yet. A device-less query on a
// thread with no context needs one: curt makes the runtime's current device's primary context
// current for the call, as the runtime would. Before the fix it released that context again at
// the end, which destroyed it when nothing else held it: every such call created a context
// (about 160 ms on the H200). Now the runtime initializes it (cudaInitDevice) and keeps it, as
// its own first call on the device would, and later calls reuse it.
TEST_CASE("a device-less query in a process without contexts (child)", "[.][no-context-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise: main() made no context
  std::vector<int> host(16, 7);
  std::vector<std::string> broken;
  std::vector<bool> active_after;
  std::vector<curt::memory_kind> kinds;
  on_fresh_thread([&] {
    for (int call = 0; call < 4; ++call) {
      kinds.push_back(curt::pointer_attributes(host.data()).kind);
      if (current_context() != nullptr) {
        broken.push_back("call " + std::to_string(call) + " left a context current");
        CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
      }
      active_after.push_back(curt_test::primary_active(0));
    }
  });
  for (const std::string& what : broken) FAIL_CHECK(what);
  REQUIRE(active_after.size() == 4u);
  for (std::size_t call = 0; call < active_after.size(); ++call) {
    INFO("call " << call);
    CHECK(active_after[call]);  // made once and kept, not destroyed again
    CHECK(kinds[call] == curt::memory_kind::unregistered);
  }
  std::printf("NO-CONTEXT-CHILD-REACHED-ITS-END\n");
  std::fflush(stdout);
}

TEST_CASE("a device-less query on a thread without a context makes the runtime device's primary "
          "context once and keeps it") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (the sanitizer makes contexts "
         "in it)");
    return;
  }
  curt_test::child_result child = curt_test::run_self("a device-less query in a process without contexts (child)");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find("NO-CONTEXT-CHILD-REACHED-ITS-END") != std::string::npos);
}

namespace {

// Runs `body` with the user's context `context` pushed, then pops it: the raw runtime calls of
// the setup need a current context, and the thread must have none again afterwards.
template <class Body>
void in_user_context(CUcontext context, Body body) {
  CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, context);
  body();
  CUcontext popped = nullptr;
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
}

}  // namespace

// Runs only in a child process (hidden), where device 0's primary context is inactive. A stream
// of a user's context U stands for a stream of another device (one GPU is enough): work on it
// from a thread with no context must run in U and never wake device 0's primary context, idle,
// captured or refused. A capture whose work invalidated it is still ended, a timer's events are
// destroyed in U, a refused graph launch is explained in U, memory queries run in the memory's
// context, and graphs, executable graphs and pools are destroyed through the driver. Before the
// fixes a stream whose capture was invalidated (cuStreamGetCtx fails then) was taken for a
// default stream (curt pushed the runtime device's primary context, which the failing call made
// active: on two GPUs device 0's, for a stream of device 1), every error thrown read the driver
// log through the runtime (which made device 0's primary context current), graph launch
// failures were explained in the runtime device's context, and memory queries and destructors
// took the runtime device's primary context when no primary context was active.
TEST_CASE("work on a stream of a context that is not current (child)", "[.][other-context-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise: main() made no context
  curt_test::user_context mine(0);  // current now
  const int n = random_size();
  const std::size_t bytes = sizeof(int) * static_cast<std::size_t>(n);
  cudaStream_t h = nullptr;
  int* a = nullptr;
  int* b = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaMalloc(&a, bytes) == cudaSuccess);
  REQUIRE(cudaMalloc(&b, bytes) == cudaSuccess);
  CUcontext popped = nullptr;
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  REQUIRE(popped == mine.get());
  REQUIRE(current_context() == nullptr);
  REQUIRE_FALSE(curt_test::primary_active(0));

  const curt::stream_ref s(h);
  cudaStream_t idle_handle = nullptr;  // a second stream of U, never captured on its own
  in_user_context(mine.get(), [&] {
    REQUIRE(cudaStreamCreateWithFlags(&idle_handle, cudaStreamNonBlocking) == cudaSuccess);
  });
  const curt::stream_ref idle(idle_handle);
  const cuda::std::span<int> da(a, static_cast<std::size_t>(n)), db(b, static_cast<std::size_t>(n));
  const std::vector<int> in = curt_test::random_ints(static_cast<std::size_t>(n), -1000000, 1000000);
  const int value = curt_test::random_ints(1, 2000000, 3000000)[0];  // never one of `in`
  std::vector<int> out(static_cast<std::size_t>(n), -7777777);
  std::vector<std::string> broken;
  auto after = [&](const std::string& what) {
    if (current_context() != nullptr) {
      broken.push_back(what + ": left a context current");
      CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
    }
    if (curt_test::primary_active(0))
      broken.push_back(what + ": made device 0's primary context active");
  };

  // 1. An idle stream: the copies run in U.
  on_fresh_thread([&] {
    curt::copy(da, in, s);
    after("copy to the device");
    curt::copy(db, da, s);
    after("copy on the device");
    curt::copy(out, db, s);
    after("copy to the host");
    s.synchronize();
    after("synchronize");
  });
  CHECK(out == in);

  // 2. A capture begun on this thread records a fill enqueued from a fresh thread (the driver
  // tells a capturing stream's context), and the graph writes it when launched.
  in_user_context(mine.get(), [&] {
    REQUIRE(cudaStreamBeginCapture(h, cudaStreamCaptureModeRelaxed) == cudaSuccess);
  });
  on_fresh_thread([&] {
    curt::fill(db, value, s);
    after("fill into a capture");
  });
  in_user_context(mine.get(), [&] {
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamEndCapture(h, &graph) == cudaSuccess);
    std::size_t nodes = 0;
    CHECK(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
    CHECK(nodes == 1u);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    REQUIRE(cudaMemcpy(out.data(), b, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(out == in);  // captured, not run
    REQUIRE(cudaGraphLaunch(exec, h) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(out.data(), b, bytes, cudaMemcpyDeviceToHost, h) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(h) == cudaSuccess);
    CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
    CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  });
  CHECK(out == std::vector<int>(static_cast<std::size_t>(n), value));

  // 3. The capture invalidated (a refused query): every stream operation is refused with the
  // capture's code, and none wakes a context.
  in_user_context(mine.get(), [&] {
    REQUIRE(cudaStreamBeginCapture(h, cudaStreamCaptureModeRelaxed) == cudaSuccess);
    CHECK(cudaStreamQuery(h) != cudaSuccess);  // not permitted in a capture: invalidates it
    (void)cudaGetLastError();
    cudaStreamCaptureStatus state = cudaStreamCaptureStatusNone;
    REQUIRE(cudaStreamIsCapturing(h, &state) == cudaSuccess);
    REQUIRE(state == cudaStreamCaptureStatusInvalidated);
  });
  on_fresh_thread([&] {
    // Runtime calls need the stream's context, which the driver no longer tells: refused there.
    auto refused = [&](const char* what, auto operation) {
      curt_test::require_cuda_error(operation, cudaErrorStreamCaptureInvalidated,
                                    {"cuStreamGetCtx", "no current context"});
      after(what);
    };
    refused("copy to the device", [&] { curt::copy(da, in, s); });
    refused("copy to the host", [&] { curt::copy(out, db, s); });
    refused("fill", [&] { curt::fill(da, value, s); });
    refused("host_call", [&] { s.host_call([] {}); });
    // Driver calls run in the stream's own context, where the driver refuses them itself.
    auto refused_by_driver = [&](const char* what, auto operation, const char* call) {
      curt_test::require_cuda_error(operation, cudaErrorStreamCaptureInvalidated, {call});
      after(what);
    };
    refused_by_driver("launch", [&] {
      curt::launch(s, curt::launch_config(dim3(blocks_for(n)), dim3(block_size)),
                   curt_test::slow_affine_int, static_cast<const int*>(a), b, n, 1, 0, 0ull);
    }, "curt::launch");
    // A query in a capture is refused as unsupported (as cudaStreamQuery is), not as invalidated.
    curt_test::require_cuda_error([&] { (void)s.ready(); }, cudaErrorStreamCaptureUnsupported,
                                  {"cuStreamQuery"});
    after("ready");
    // A wait on it, from an idle stream of U: the temporary event needs s's context.
    refused_by_driver("wait on it", [&] { idle.wait(s); }, "cuStreamGetCtx");
  });
  in_user_context(mine.get(), [&] {
    cudaGraph_t graph = nullptr;
    CHECK(cudaStreamEndCapture(h, &graph) == cudaErrorStreamCaptureInvalidated);
    (void)cudaGetLastError();
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  });
  auto capture_state = [&] {
    cudaStreamCaptureStatus state = cudaStreamCaptureStatusActive;
    in_user_context(mine.get(), [&] { CHECK(cudaStreamIsCapturing(h, &state) == cudaSuccess); });
    return state;
  };

  // 4. curt::capture from a fresh thread, whose work invalidates the capture: the driver no
  // longer tells the stream's context, yet curt ends the capture (in the context it learnt at
  // the begin) and says why the work failed.
  curt_test::error_recorder reports;
  on_fresh_thread([&] {
    curt_test::require_cuda_error(
        [&] { (void)curt::capture(s, [&] { (void)s.ready(); }, curt::capture_mode::relaxed); },
        cudaErrorStreamCaptureUnsupported, {"cuStreamQuery", "invalidated the capture"});
    after("curt::capture whose work invalidated it");
  });
  CHECK(capture_state() == cudaStreamCaptureStatusNone);
  CHECK(reports.count.load() == 0);

  // 5. A stream_timer destroyed while its stream's capture is invalidated destroys its events in
  // the context they were made in.
  {
    std::optional<curt::stream_timer> timer;
    on_fresh_thread([&] {
      timer.emplace(s);
      timer->record_stop();
      (void)timer->elapsed();
      after("stream_timer");
    });
    in_user_context(mine.get(), [&] {
      REQUIRE(cudaStreamBeginCapture(h, cudaStreamCaptureModeRelaxed) == cudaSuccess);
      CHECK(cudaStreamQuery(h) != cudaSuccess);  // invalidates the capture
      (void)cudaGetLastError();
    });
    on_fresh_thread([&] {
      timer.reset();
      after("destroying a stream_timer whose stream's capture is invalidated");
    });
    in_user_context(mine.get(), [&] {
      cudaGraph_t graph = nullptr;
      CHECK(cudaStreamEndCapture(h, &graph) == cudaErrorStreamCaptureInvalidated);
      (void)cudaGetLastError();
    });
    CHECK(reports.count.load() == 0);
  }

  // 6. A refused graph launch is explained in the stream's context: an executable graph whose
  // allocation node's memory was not freed cannot run again.
  {
    void* allocated = nullptr;
    std::optional<curt::graph_exec> exec;
    in_user_context(mine.get(), [&] {
      REQUIRE(cudaStreamBeginCapture(h, cudaStreamCaptureModeRelaxed) == cudaSuccess);
      REQUIRE(cudaMallocAsync(&allocated, 4096, h) == cudaSuccess);
      cudaGraph_t graph = nullptr;
      REQUIRE(cudaStreamEndCapture(h, &graph) == cudaSuccess);
      cudaGraphExec_t raw = nullptr;
      REQUIRE(cudaGraphInstantiate(&raw, graph, 0) == cudaSuccess);
      CHECK(cudaGraphDestroy(graph) == cudaSuccess);
      exec.emplace(curt::graph_exec::from_native_handle(raw));
    });
    on_fresh_thread([&] {
      exec->launch(s);
      s.synchronize();
      after("graph launch");
      curt_test::require_cuda_error([&] { exec->launch(s); }, cudaErrorInvalidValue,
                                    {"cuGraphLaunch", "auto_free_on_launch"});
      after("refused graph launch");
    });
    in_user_context(mine.get(), [&] {
      CHECK(cudaFree(allocated) == cudaSuccess);
      exec.reset();
    });
  }

  // 7. Queries about memory run in the memory's own context; graphs, executable graphs and pools
  // are destroyed through the driver, which needs none. (With no primary context active, any
  // other context curt could pick would be one it makes.)
  {
    int* managed = nullptr;
    cudaGraph_t raw_graph = nullptr;
    cudaGraphExec_t raw_exec = nullptr;
    std::optional<curt::graph> graph;
    std::optional<curt::graph_exec> exec;
    std::optional<curt::memory_pool> host_pool;
    in_user_context(mine.get(), [&] {
      REQUIRE(cudaMallocManaged(&managed, bytes) == cudaSuccess);
      REQUIRE(cudaGraphCreate(&raw_graph, 0) == cudaSuccess);
      cudaGraphNode_t node = nullptr;
      REQUIRE(cudaGraphAddEmptyNode(&node, raw_graph, nullptr, 0) == cudaSuccess);
      REQUIRE(cudaGraphInstantiate(&raw_exec, raw_graph, 0) == cudaSuccess);
      graph.emplace(curt::graph::from_native_handle(raw_graph));
      exec.emplace(curt::graph_exec::from_native_handle(raw_exec));
      host_pool.emplace(curt::memory_pool_properties::pinned_host());
    });
    on_fresh_thread([&] {
      CHECK(curt::pointer_attributes(a).kind == curt::memory_kind::device);
      after("pointer_attributes(device memory)");
      curt::advise(managed, bytes, curt::memory_advice::set_read_mostly,
                   curt::memory_location::none());
      after("advise(managed memory)");
      CHECK(curt::is_read_mostly(managed, bytes));
      after("is_read_mostly(managed memory)");
      CHECK(curt::pointer_attributes(managed).kind == curt::memory_kind::managed);
      after("pointer_attributes(managed memory)");
      exec.reset();
      after("destroying an executable graph");
      graph.reset();
      after("destroying a graph");
      host_pool.reset();
      after("destroying a pool of pinned host memory");
    });
    in_user_context(mine.get(), [&] { CHECK(cudaFree(managed) == cudaSuccess); });
    CHECK(reports.count.load() == 0);
  }

  // 8. A buffer allocated while U was current is freed in U from a thread with no context: the
  // memory comes back, and no other context is made (the primary one would not free it).
  {
    std::size_t free_before = 0, free_allocated = 0, free_after = 0, total = 0;
    std::optional<curt::device_buffer<int>> owned;
    in_user_context(mine.get(), [&] {
      REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
      owned.emplace(curt::device(0), std::size_t(64) << 20);  // 256 MiB
      curt::fill(*owned, value, s);
      REQUIRE(cudaStreamSynchronize(h) == cudaSuccess);
      REQUIRE(cudaMemGetInfo(&free_allocated, &total) == cudaSuccess);
    });
    REQUIRE(free_allocated + (std::size_t(128) << 20) < free_before);  // the premise
    on_fresh_thread([&] {
      owned.reset();
      after("destroying a buffer of U");
    });
    in_user_context(mine.get(), [&] {
      REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
    });
    CHECK(free_after + (std::size_t(32) << 20) > free_before);  // freed
    CHECK(reports.count.load() == 0);
  }

  // 9. A stream forked into a capture curt began (idle.wait(s)): once the capture is invalidated,
  // joining it back (s.wait(idle), also the last step of error paths) fails with the capture's
  // code and wakes no context, and the scope still ends the capture.
  on_fresh_thread([&] {
    std::optional<curt::capture_scope> scope;
    scope.emplace(s, curt::capture_mode::relaxed);
    idle.wait(s);  // the fork: idle joins the capture
    curt::fill(db, value, idle);
    s.wait(idle);  // a join while the capture is active
    after("fork and join in an active capture");
    idle.wait(s);  // forked again
    in_user_context(mine.get(), [&] {
      CHECK(cudaStreamQuery(idle_handle) != cudaSuccess);  // invalidates the capture
      (void)cudaGetLastError();
    });
    curt_test::require_cuda_error([&] { s.wait(idle); }, cudaErrorStreamCaptureInvalidated,
                                  {"the stream waited on"});
    after("join after the capture was invalidated");
    scope.reset();  // abandons the capture
    after("abandoning the capture");
  });
  CHECK(capture_state() == cudaStreamCaptureStatusNone);
  CHECK(reports.count.load() == 0);

  in_user_context(mine.get(), [&] {
    CHECK(cudaFree(a) == cudaSuccess);
    CHECK(cudaFree(b) == cudaSuccess);
    CHECK(cudaStreamDestroy(h) == cudaSuccess);
    CHECK(cudaStreamDestroy(idle_handle) == cudaSuccess);
  });
  for (const std::string& what : broken) FAIL_CHECK(what);
  CHECK_FALSE(curt_test::primary_active(0));
  std::printf("OTHER-CONTEXT-CHILD-REACHED-ITS-END\n");
  std::fflush(stdout);
}

TEST_CASE("work on a stream of another context from a thread without one, idle, captured or "
          "refused, never wakes device 0") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (the sanitizer makes contexts "
         "in it)");
    return;
  }
  curt_test::child_result child =
      curt_test::run_self("work on a stream of a context that is not current (child)");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find("OTHER-CONTEXT-CHILD-REACHED-ITS-END") != std::string::npos);
}

// copy_and_wait from a user's context's stream into host memory CUDA does not know, on a thread
// with no context, runs in the stream's context: it comes after the kernel queued there, and it
// wakes no primary context.
namespace {
constexpr const char* sync_copy_child = "a copy out of a user's context, waited for (child)";
constexpr const char* sync_copy_marker = "SYNC-COPY-CHILD-REACHED-ITS-END";
}  // namespace

TEST_CASE("a copy out of a user's context, waited for (child)", "[.][sync-copy-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise: nothing made a context yet
  const int n = 1 << 16;
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  const float a = random_coefficient(), b = random_coefficient();
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) {  // as slow_affine: a product rounded, then a sum rounded
    volatile float product = a * x[i];
    want[i] = product + b;
  }
  std::vector<float> back(n, -1.0f);

  curt::device d0(0);
  std::optional<curt_test::user_context> u;
  u.emplace(0);  // U, current on this thread
  std::optional<curt::stream> s;
  std::optional<curt::device_buffer<float>> dx, dy;
  s.emplace(d0);  // in U (device_guard keeps U)
  dx.emplace(d0, std::size_t(n));
  dy.emplace(d0, std::size_t(n));
  curt::copy_and_wait(*dx, x, *s);
  REQUIRE(cudaMemset(dy->data(), 0xFF, sizeof(float) * n) == cudaSuccess);  // poison (NaN)
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  // A producer on U's stream: it spins 300 ms, then writes dy.
  curt::launch(*s, curt::launch_config(dim3((n + 255) / 256), dim3(256)), curt_test::slow_affine,
               static_cast<const float*>(dx->data()), dy->data(), n, a, b, 300'000'000ull);
  CUcontext popped = nullptr;
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  REQUIRE(popped == u->get());
  REQUIRE_FALSE(curt_test::primary_active(0));  // still: everything so far ran in U

  bool left_context = true, woke_primary = true;
  std::string thrown;
  curt_test::on_fresh_thread([&] {
    try {
      curt::copy_and_wait(back, *dy, *s);  // device (U) -> std::vector
    } catch (const std::exception& e) {
      thrown = e.what();
    }
    left_context = curt_test::current_context() != nullptr;
    woke_primary = curt_test::primary_active(0);
  });
  INFO("copy threw: " << thrown);
  CHECK(thrown.empty());
  CHECK_FALSE(left_context);
  CHECK_FALSE(woke_primary);  // the copy is about U's memory: device 0's primary has no business
  std::size_t bad = 0;
  for (int i = 0; i < n; ++i) bad += back[i] != want[i];
  INFO(bad << " of " << n << " values differ from the producer's (poison: it did not wait)");
  CHECK(bad == 0);

  CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, u->get());
  s->synchronize();
  dx.reset();
  dy.reset();
  s.reset();
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  u.reset();
  std::printf("%s\n", sync_copy_marker);
  std::fflush(stdout);
}

TEST_CASE("a copy out of a user's context, waited for, runs in it from a thread with no context") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run");
    return;
  }
  curt_test::child_result child = curt_test::run_self(sync_copy_child);
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find(sync_copy_marker) != std::string::npos);
}

// A launch the driver refuses, on a stream of a user's context, from a thread with no context:
// the message names the kernel (a runtime query) and no primary context is made or left current.
namespace {
constexpr const char* launch_child = "a refused launch on a user's context's stream (child)";
constexpr const char* launch_marker = "REFUSED-LAUNCH-CHILD-REACHED-ITS-END";
}  // namespace

TEST_CASE("a refused launch on a user's context's stream (child)", "[.][refused-launch-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise
  curt::device d0(0);
  std::optional<curt_test::user_context> u;
  u.emplace(0);
  std::optional<curt::stream> s;
  s.emplace(d0);  // in U
  CUcontext popped = nullptr;
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  std::string message;
  bool left = true, woke = true;
  curt_test::on_fresh_thread([&] {
    try {  // a block of 4096 threads: the driver refuses it
      curt::launch(*s, curt::launch_config(dim3(1), dim3(4096)), curt_test::square_plus,
                   static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0, 1.0f);
    } catch (const curt::cuda_error& e) {
      message = e.what();
    }
    left = curt_test::current_context() != nullptr;
    woke = curt_test::primary_active(0);
  });
  INFO("message: " << message);
  CHECK_FALSE(message.empty());
  CHECK(message.find("square_plus") != std::string::npos);  // the name was read
  CHECK_FALSE(left);
  CHECK_FALSE(woke);
  CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, u->get());
  s.reset();
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  u.reset();
  std::printf("%s\n", launch_marker);
  std::fflush(stdout);
}

TEST_CASE("a refused launch on a stream of a user's context wakes no other context") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run");
    return;
  }
  curt_test::child_result child = curt_test::run_self(launch_child);
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find(launch_marker) != std::string::npos);
}
