// Host functions (stream_ref::host_call) beyond the basics of test_stream.cu: under stream capture
// (a host node that runs on every launch of the graph and is owned by the graph), exceptions keyed
// by stream id (never by a reused handle value or thread id), captures destroyed on a user thread
// (so they may own CUDA resources), and failures that leak nothing.
//
// Kernels compute on fresh random inputs into outputs poisoned first (all bytes 0xFF, -1 as int)
// and are compared with the CPU. Asynchronous destruction is polled with a timeout.
//
// Test cases tagged [api-error] make CUDA calls fail on purpose (see test_stream.cu).
#include <catch.hpp>
#include <error_recorder.hpp>
#include <isolation.hpp>
#include <lifetime_probe.hpp>
#include <kernels.cuh>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>

#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using curt_test::device_array;
using curt_test::host_gate;

// ---- device side ------------------------------------------------------------------------------

using curt_test::global_ns;

// y[i] = a * x[i] + b, after every thread spun for delay_ns.
constexpr auto affine = curt_test::slow_affine_int;

// ---- host side --------------------------------------------------------------------------------

constexpr int block_size = 256;

curt::launch_config config_for(int n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, block_size))),
                             dim3(block_size));
}

int random_size() { return curt_test::random_ints(1, 1000, 5000)[0]; }
int random_coefficient() { return curt_test::random_ints(1, 2, 50)[0]; }
std::vector<int> random_inputs(int n) { return curt_test::random_ints(std::size_t(n), 0, 100000); }
using curt_test::affine_ref;

// Pinned host memory, poisoned (0xFF bytes) when made and on request.
class pinned_ints {
 public:
  explicit pinned_ints(int n) : n_(n) {
    CURT_CHECK(cudaMallocHost(&p_, bytes()));
    poison();
  }
  ~pinned_ints() {
    if (p_) curt::detail::report(cudaFreeHost(p_), "cudaFreeHost(test)", __FILE__, __LINE__);
  }
  pinned_ints(const pinned_ints&) = delete;
  pinned_ints& operator=(const pinned_ints&) = delete;
  int* get() const { return p_; }
  std::size_t bytes() const { return std::size_t(n_) * sizeof(int); }
  void poison() const { std::memset(static_cast<void*>(p_), 0xFF, bytes()); }
  std::vector<int> to_vector() const { return std::vector<int>(p_, p_ + n_); }

 private:
  int* p_ = nullptr;
  int n_;
};

using curt_test::destroyed_on;
using curt_test::lifetime;
using curt_test::probe;

using curt_test::error_recorder;

using curt_test::eventually;

class graph_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string random_message(const char* prefix) {
  return std::string(prefix) + " #" + std::to_string(curt_test::random_ints(1, 0, 1 << 30)[0]);
}

// The report of a host function's exception whose stream is gone: its message, the stream's id.
void check_gone_stream_report(error_recorder& errors, const std::string& message,
                              unsigned long long id) {
  CHECK(errors.host_function_errors.load() == 1);
  std::string what = errors.message(0);
  INFO("what(): " << what);
  CHECK_THAT(what, ContainsSubstring(message));
  CHECK_THAT(what, ContainsSubstring("destroyed"));
  CHECK_THAT(what, ContainsSubstring(std::to_string(id)));
}

void end_capture(cudaStream_t s, cudaGraph_t* graph) {
  REQUIRE(cudaStreamEndCapture(s, graph) == cudaSuccess);
  REQUIRE(*graph != nullptr);
}

}  // namespace

TEST_CASE("a host function captured into a graph runs on every launch and is freed with the graph") {
  curt::device d(0);
  curt::stream s(d);
  int n = random_size();
  int a = random_coefficient(), b = random_coefficient();
  device_array<int> dx(static_cast<std::size_t>(n)), dy(static_cast<std::size_t>(n));
  pinned_ints back(n);

  struct observations {
    std::atomic<int> calls{0};
    std::mutex mutex;
    std::vector<std::vector<int>> seen;
  };
  auto seen = std::make_shared<observations>();
  auto life = std::make_shared<lifetime>();
  const int* host_copy = back.get();

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  REQUIRE(s.is_capturing());
  curt::launch(s, config_for(n), affine, dx.get(), dy.get(), n, a, b, 2'000'000ull);
  REQUIRE(cudaMemcpyAsync(back.get(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost, s) ==
          cudaSuccess);
  s.host_call([seen, host_copy, n, p = probe(life)] {
    seen->calls.fetch_add(1);
    std::lock_guard<std::mutex> lock(seen->mutex);
    seen->seen.emplace_back(host_copy, host_copy + n);
  });
  cudaGraph_t graph = nullptr;
  end_capture(s, &graph);
  CHECK_FALSE(s.is_capturing());
  // Captured, not run.
  CHECK(seen->calls.load() == 0);

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  // The executable graph keeps the function alive on its own.
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  graph = nullptr;

  std::vector<std::vector<int>> wants;
  for (int launch = 0; launch < 3; ++launch) {
    std::vector<int> x = random_inputs(n);
    dx.upload(x);
    dy.poison();
    back.poison();
    wants.push_back(affine_ref(x, a, b));
    REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
    s.synchronize();
    CHECK(seen->calls.load() == launch + 1);
  }
  CHECK(seen->calls.load() == 3);
  {
    std::lock_guard<std::mutex> lock(seen->mutex);
    REQUIRE(seen->seen.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("launch " << i);
      CHECK(seen->seen[i] == wants[i]);
    }
  }
  // Still owned by the executable graph: not freed, whatever drains.
  std::this_thread::sleep_for(20ms);
  s.synchronize();
  s.host_call([] {});
  s.synchronize();
  CHECK(life->destroyed.load() == 0);

  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(eventually([&] { return life->destroyed.load() >= 1; }, [&] { s.synchronize(); }));
  std::this_thread::sleep_for(20ms);
  s.synchronize();
  CHECK(life->destroyed.load() == 1);
  {
    std::lock_guard<std::mutex> lock(life->mutex);
    CHECK(life->destroyed_on == std::this_thread::get_id());
  }
  CHECK(seen->calls.load() == 3);  // and it never ran again
}

TEST_CASE("a captured host function is freed when the executable goes before the graph") {
  curt::device d(0);
  curt::stream s(d);
  auto life = std::make_shared<lifetime>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  s.host_call([calls, p = probe(life)] { calls->fetch_add(1); });
  cudaGraph_t graph = nullptr;
  end_capture(s, &graph);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  s.synchronize();
  CHECK(calls->load() == 2);
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  std::this_thread::sleep_for(20ms);
  s.synchronize();
  CHECK(life->destroyed.load() == 0);  // the graph still holds it
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(eventually([&] { return life->destroyed.load() >= 1; }, [&] { s.synchronize(); }));
  std::this_thread::sleep_for(20ms);
  s.synchronize();
  CHECK(life->destroyed.load() == 1);
}

TEST_CASE("a captured host function whose graph is never instantiated is freed with it") {
  curt::device d(0);
  curt::stream s(d);
  auto life = std::make_shared<lifetime>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  s.host_call([calls, p = probe(life)] { calls->fetch_add(1); });
  cudaGraph_t graph = nullptr;
  end_capture(s, &graph);
  s.synchronize();
  CHECK(life->destroyed.load() == 0);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  // Freed at a drain point: here an event's synchronize().
  curt::event e(d);
  CHECK(eventually([&] { return life->destroyed.load() >= 1; }, [&] {
    e.record(s);
    e.synchronize();
  }));
  std::this_thread::sleep_for(20ms);
  s.synchronize();
  CHECK(life->destroyed.load() == 1);
  CHECK(calls->load() == 0);  // never ran
  {
    std::lock_guard<std::mutex> lock(life->mutex);
    CHECK(life->destroyed_on == std::this_thread::get_id());
  }
}

TEST_CASE("an exception from a host function in a graph goes to the error handler, every launch") {
  curt::device d(0);
  curt::stream s(d);
  error_recorder errors;
  std::string message = random_message("graph node failure");
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  s.host_call([message] { throw graph_failure(message); });
  cudaGraph_t graph = nullptr;
  end_capture(s, &graph);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);

  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  // The graph's exception is not the stream's: synchronize() does not rethrow it.
  CHECK_NOTHROW(s.synchronize());
  CHECK(errors.count.load() == 1);
  CHECK(errors.host_function_errors.load() == 1);
  std::string what = errors.message(0);
  INFO("what(): " << what);
  CHECK_THAT(what, ContainsSubstring(message));
  CHECK_THAT(what, ContainsSubstring("in a graph"));
  std::exception_ptr original = errors.original(0);
  REQUIRE(original != nullptr);
  try {
    std::rethrow_exception(original);
  } catch (const graph_failure& e) {
    CHECK(std::string(e.what()) == message);
  } catch (...) {
    FAIL("original() is not the graph_failure the host function threw");
  }

  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  CHECK_NOTHROW(s.synchronize());
  CHECK(errors.count.load() == 2);
  CHECK_THAT(errors.message(1), ContainsSubstring(message));

  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
  s.synchronize();
  CHECK(errors.count.load() == 2);
}

TEST_CASE("an exception of a stream destroyed before its host function ran goes to the handler") {
  curt::device d(0);
  error_recorder errors;
  std::string message = random_message("late failure");
  auto ran = std::make_shared<std::atomic<bool>>(false);
  unsigned long long id = 0;
  // A gate like host_gate's, with a short safety timeout: under compute-sanitizer
  // cudaStreamDestroy waits for the stream's work, so the gate opens by its timeout there.
  auto open = std::make_shared<std::atomic<bool>>(false);
  {
    curt::stream s(d);
    id = s.id();
    s.host_call([open] {
      auto deadline = std::chrono::steady_clock::now() + 3s;
      while (!open->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50us);
    });
    s.host_call([message, ran] {
      ran->store(true);
      throw std::runtime_error(message);
    });
  }  // destroyed without synchronize, the function (normally) still held at the gate
  // The count first: the function sets `ran` before it throws, so a count of 0 read before a
  // `ran` still false cannot be a report that came later.
  const int count_at_destruction = errors.count.load();
  if (!ran->load()) {
    CHECK(count_at_destruction == 0);
  } else {
    WARN("the stream's destruction waited for its work (a sanitizer?): the exception was kept "
         "and reported by the destructor instead");
  }
  open->store(true);
  CHECK(eventually([&] { return errors.count.load() >= 1; }, [] {}));
  CHECK(ran->load());
  std::this_thread::sleep_for(20ms);
  CHECK(errors.count.load() == 1);
  check_gone_stream_report(errors, message, id);
  std::exception_ptr original = errors.original(0);
  REQUIRE(original != nullptr);
  CHECK_THROWS_AS(std::rethrow_exception(original), std::runtime_error);

  // Fresh streams (which reuse handle values) have nothing to rethrow.
  std::vector<curt::stream> fresh;
  for (int i = 0; i < 64; ++i) fresh.emplace_back(d);
  for (auto& f : fresh) {
    CHECK(f.id() != id);
    CHECK_NOTHROW(f.synchronize());
  }
  fresh.clear();
  CHECK(errors.count.load() == 1);
}

TEST_CASE("an exception kept for a stream destroyed before synchronize() goes to the handler") {
  curt::device d(0);
  error_recorder errors;
  std::string message = random_message("kept failure");
  auto ran = std::make_shared<std::atomic<bool>>(false);
  std::vector<cudaStream_t> handles;
  {
    curt::stream s(d);
    handles.push_back(s.get());
    s.host_call([message, ran] {
      ran->store(true);
      throw std::runtime_error(message);
    });
    // Wait for it through an event: that does not take the stream's exception.
    curt::event done(d);
    done.record(s);
    done.synchronize();
    CHECK(ran->load());
    CHECK(errors.count.load() == 0);
  }
  // Reported by the destructor itself.
  CHECK(errors.count.load() == 1);
  CHECK(errors.host_function_errors.load() == 1);
  std::string what = errors.message(0);
  INFO("what(): " << what);
  CHECK_THAT(what, ContainsSubstring(message));
  CHECK_THAT(what, ContainsSubstring("destroyed"));

  std::vector<curt::stream> fresh;
  for (int i = 0; i < 64; ++i) fresh.emplace_back(d);
  for (auto& f : fresh) CHECK_NOTHROW(f.synchronize());
  CHECK(errors.count.load() == 1);
}

TEST_CASE("a stream its buffers keep after its owner died keeps its host exceptions until it goes") {
  curt::device d(0);
  error_recorder errors;
  std::string message = random_message("after the owner");
  std::optional<curt::stream> owner(std::in_place, d);
  std::optional<curt::async_buffer<int>> buffer(curt::allocate_async<int>(1024, *owner));
  const unsigned long long id = owner->id();
  curt::stream_ref s = buffer->stream();

  SECTION("a function queued before the owner died throws after: the stream's synchronize rethrows") {
    auto open = std::make_shared<std::atomic<bool>>(false);
    s.host_call([open] {
      auto deadline = std::chrono::steady_clock::now() + 3s;
      while (!open->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50us);
    });
    s.host_call([message] { throw graph_failure(message); });
    owner.reset();  // the stream lives on in the buffer: not an orphaned exception
    open->store(true);
    try {
      s.synchronize();
      FAIL("synchronize() did not rethrow the host function's exception");
    } catch (const graph_failure& e) {
      CHECK(std::string(e.what()) == message);
    }
    CHECK(errors.count.load() == 0);
  }
  SECTION("a function queued through the buffer's stream: reported when the last buffer goes") {
    owner.reset();
    s.host_call([message] { throw graph_failure(message); });
    curt::event done(d);  // waits without taking the exception
    done.record(s);
    done.synchronize();
    CHECK(errors.count.load() == 0);
    buffer.reset();  // destroys the stream
    REQUIRE(errors.count.load() == 1);
    check_gone_stream_report(errors, message, id);
    CHECK_FALSE(curt::detail::deferred().has_errors());  // nothing left kept for good
  }
}

TEST_CASE("a thread's per-thread stream does not inherit an earlier thread's host exception, which is reported when that thread exits") {
  curt::device d(0);
  error_recorder errors;
  std::string message = random_message("per-thread failure");

  unsigned long long first_id = 0;
  bool first_ran = false;
  std::exception_ptr first_failure;
  std::thread first([&] {
    try {
      curt::stream_ref pt = curt::stream_ref::per_thread_default();
      first_id = pt.id();
      auto ran = std::make_shared<std::atomic<bool>>(false);
      pt.host_call([message, ran] {
        ran->store(true);
        throw std::runtime_error(message);
      });
      curt::event done(d);
      done.record(pt);
      done.synchronize();
      first_ran = ran->load();
    } catch (...) {
      first_failure = std::current_exception();
    }
  });
  first.join();
  if (first_failure) std::rethrow_exception(first_failure);
  REQUIRE(first_ran);

  unsigned long long second_id = 0;
  bool second_threw_unexpectedly = false;
  std::string unexpected;
  int control_rethrows = 0;
  bool control_message_ok = false;
  bool second_sync_clean = false;
  std::exception_ptr second_failure;
  std::thread second([&] {
    try {
      curt::stream_ref pt = curt::stream_ref::per_thread_default();
      second_id = pt.id();
      try {
        pt.synchronize();
      } catch (const std::exception& e) {
        second_threw_unexpectedly = true;
        unexpected = e.what();
      }
      // Control: its own exception is rethrown by its own synchronize(), once.
      std::string own = message + " (second thread)";
      pt.host_call([own] { throw std::runtime_error(own); });
      try {
        pt.synchronize();
      } catch (const std::runtime_error& e) {
        ++control_rethrows;
        control_message_ok = std::string(e.what()) == own;
      }
      try {
        pt.synchronize();
        second_sync_clean = true;
      } catch (...) {
        ++control_rethrows;
      }
    } catch (...) {
      second_failure = std::current_exception();
    }
  });
  second.join();
  if (second_failure) std::rethrow_exception(second_failure);
  INFO("unexpected exception: " << unexpected);
  CHECK_FALSE(second_threw_unexpectedly);
  CHECK(second_id != first_id);
  CHECK(control_rethrows == 1);
  CHECK(control_message_ok);
  CHECK(second_sync_clean);
  // The first thread's stream died with the thread, its exception never rethrown: it went to the
  // error handler once, naming that stream; the second thread's was rethrown, not reported.
  REQUIRE(errors.count.load() == 1);
  CHECK_THAT(errors.message(0), ContainsSubstring(message));
  CHECK_THAT(errors.message(0), ContainsSubstring("stream id " + std::to_string(first_id)));
}

TEST_CASE("a stream's own exception is rethrown exactly once, by its own synchronize()") {
  curt::device d(0);
  error_recorder errors;
  std::string message = random_message("own failure");
  curt::stream s(d);
  curt::stream other(d);
  s.host_call([message] { throw graph_failure(message); });
  other.host_call([] {});
  CHECK_NOTHROW(other.synchronize());
  try {
    s.synchronize();
    FAIL("synchronize() did not rethrow the host function's exception");
  } catch (const graph_failure& e) {
    CHECK(std::string(e.what()) == message);
  }
  CHECK_NOTHROW(s.synchronize());
  CHECK(errors.count.load() == 0);
}

TEST_CASE("host functions destroy their captures on a user thread, so they may own CUDA resources") {
  curt::device d(0);
  curt::stream s(d);
  error_recorder errors;
  REQUIRE(cudaGetLastError() == cudaSuccess);

  int n = random_size();
  int a = random_coefficient(), b = random_coefficient();
  std::vector<int> x = random_inputs(n);
  device_array<int> dx(x), dy(static_cast<std::size_t>(n));
  pinned_ints back(n);

  curt::event owned_event(d);
  curt::stream owned_stream(d);
  // The captured stream has work of its own, done before the host function runs.
  curt::launch(owned_stream, config_for(n), affine, dx.get(), dy.get(), n, a, b, 1'000'000ull);
  owned_event.record(owned_stream);
  s.wait(owned_event);
  REQUIRE(cudaMemcpyAsync(back.get(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost, s) ==
          cudaSuccess);

  auto life = std::make_shared<lifetime>();
  auto token = std::make_shared<int>(0);
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto seen = std::make_shared<std::vector<int>>();
  const int* host_copy = back.get();
  s.host_call([e = std::move(owned_event), st = std::move(owned_stream), p = probe(life), token,
               calls, seen, host_copy, n] {
    // Owned here, valid, and never used for CUDA calls on this thread.
    if (e.valid() && st.valid()) seen->assign(host_copy, host_copy + n);
    calls->fetch_add(1);
  });
  CHECK_FALSE(owned_event.valid());
  CHECK_FALSE(owned_stream.valid());
  CHECK(token.use_count() == 2);  // the test's and the callable's
  s.synchronize();

  CHECK(calls->load() == 1);
  CHECK(*seen == affine_ref(x, a, b));
  CHECK(life->destroyed.load() == 1);
  CHECK(token.use_count() == 1);
  {
    std::lock_guard<std::mutex> lock(life->mutex);
    CHECK(life->destroyed_on == std::this_thread::get_id());
  }
  // cudaEventDestroy and cudaStreamDestroy ran where CUDA calls are allowed: nothing reported,
  // no error left behind.
  CHECK(errors.count.load() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
  // The stream still works.
  dy.poison();
  back.poison();
  curt::launch(s, config_for(n), affine, dx.get(), dy.get(), n, b, a, 0ull);
  REQUIRE(cudaMemcpyAsync(back.get(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost, s) ==
          cudaSuccess);
  s.synchronize();
  CHECK(back.to_vector() == affine_ref(x, b, a));
  CHECK(errors.count.load() == 0);
}

TEST_CASE("a host function's capture is destroyed by the stream's destructor without synchronize") {
  curt::device d(0);
  error_recorder errors;
  auto life = std::make_shared<lifetime>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  {
    curt::stream s(d);
    curt::event inner(d);
    s.host_call([e = std::move(inner), p = probe(life), calls] { calls->fetch_add(1); });
    curt::event done(d);
    done.record(s);
    // Wait for it through cudaEventSynchronize directly: not a curt drain point.
    REQUIRE(cudaEventSynchronize(done.get()) == cudaSuccess);
    CHECK(calls->load() == 1);
  }  // the stream's destructor drains
  CHECK(life->destroyed.load() == 1);
  {
    std::lock_guard<std::mutex> lock(life->mutex);
    CHECK(life->destroyed_on == std::this_thread::get_id());
  }
  CHECK(errors.count.load() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a trivially destructible host function runs and sees the work before it") {
  curt::device d(0);
  curt::stream s(d);
  int n = random_size();
  int a = random_coefficient(), b = random_coefficient();
  std::vector<int> x = random_inputs(n);
  device_array<int> dx(x), dy(static_cast<std::size_t>(n));
  pinned_ints back(n);
  std::vector<int> seen(static_cast<std::size_t>(n), -1);
  std::atomic<int> calls{0};

  curt::launch(s, config_for(n), affine, dx.get(), dy.get(), n, a, b, 2'000'000ull);
  REQUIRE(cudaMemcpyAsync(back.get(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost, s) ==
          cudaSuccess);
  int* out = seen.data();
  const int* in = back.get();
  std::atomic<int>* counter = &calls;
  auto function = [out, in, n, counter] {
    std::memcpy(out, in, std::size_t(n) * sizeof(int));
    counter->fetch_add(1);
  };
  static_assert(std::is_trivially_destructible_v<decltype(function)>);
  s.host_call(function);
  s.synchronize();
  CHECK(calls.load() == 1);
  CHECK(seen == affine_ref(x, a, b));
}

TEST_CASE("host_call on an invalidated capture throws and leaks nothing", "[api-error]") {
  curt::device d(0);
  curt::stream s(d);
  error_recorder errors;
  auto life = std::make_shared<lifetime>();
  auto calls = std::make_shared<std::atomic<int>>(0);

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  // Querying a capturing stream is not allowed and invalidates the capture.
  CHECK(cudaStreamQuery(s.get()) != cudaSuccess);
  (void)cudaGetLastError();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(s.get(), &status) == cudaSuccess);
  REQUIRE(status == cudaStreamCaptureStatusInvalidated);

  bool threw = false;
  try {
    s.host_call([p = probe(life), calls] { calls->fetch_add(1); });
  } catch (const curt::cuda_error& e) {
    threw = true;
    INFO("what(): " << e.what());
    // Refused as a capture error (by cudaLaunchHostFunc, or already by cudaStreamGetId, which
    // the 13.0 driver refuses on a stream whose capture was invalidated).
    CHECK((e.status() == cudaErrorStreamCaptureInvalidated ||
           e.status() == cudaErrorStreamCaptureUnsupported));
  }
  CHECK(threw);
  // Freed at once, on this thread, and exactly once.
  CHECK(life->destroyed.load() == 1);

  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
  CHECK(graph == nullptr);

  // The stream works again, with nothing kept for it.
  auto after = std::make_shared<std::atomic<int>>(0);
  s.host_call([after] { after->fetch_add(1); });
  CHECK_NOTHROW(s.synchronize());
  CHECK(after->load() == 1);
  CHECK(calls->load() == 0);
  CHECK(life->destroyed.load() == 1);
  CHECK(errors.count.load() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// The drain destroys finished host functions' callables, whose captures may free CUDA memory:
// that free must not invalidate a global-mode capture (curt's default) on another thread. CUDA
// itself refuses a poll (cuEventQuery, cuStreamQuery) from a thread in global mode while another
// thread captures in global mode, and the refusal invalidates that capture (CUDA 13.0, measured);
// a thread that polls meanwhile switches to thread-local mode, as CUDA's documentation advises.
TEST_CASE("a drain on one thread does not break another thread's global-mode capture") {
  curt::device d(0);
  curt_test::error_recorder reports;
  curt::stream polled(d), captured(d);
  const std::size_t bytes = std::size_t(256) << 20;  // 256 MiB: its return is measurable
  std::atomic<bool> ran{false}, capturing{false}, drained{false};
  auto life = std::make_shared<lifetime>();

  // A host function keeps a buffer alive until the stream reaches it (the advertised use).
  std::size_t free_before = 0, free_after = 0, total = 0;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  {
    auto kept = std::make_shared<curt::device_buffer<unsigned char>>(d, bytes);
    polled.host_call([kept, &ran, p = probe(life)] { ran = true; });
  }
  while (!ran) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // run_once pushed the task
  curt::event done(d);
  done.record(polled);

  std::string end_error;
  std::size_t nodes = 0;
  std::thread capturer([&] {
    try {
      curt::capture_scope scope(captured);  // capture_mode::global, curt's default
      curt::launch(captured, curt::launch_config(dim3(1), dim3(32)), curt_test::square_plus,
                   static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0, 1.0f);
      capturing = true;
      while (!drained) std::this_thread::yield();
      curt::graph g = scope.end();
      nodes = g.node_count();
    } catch (const std::exception& e) {
      end_error = e.what();
      capturing = true;
    }
  });
  while (!capturing) std::this_thread::yield();
  std::string poll_error;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess);
  try {
    (void)done.ready();  // a poll on this thread: the drain destroys the buffer here
  } catch (const std::exception& e) {
    poll_error = e.what();
  }
  cudaStreamCaptureMode during = mode;
  REQUIRE(cudaThreadExchangeStreamCaptureMode(&during) == cudaSuccess);
  CHECK(during == cudaStreamCaptureModeThreadLocal);  // the drain gave the thread's mode back
  drained = true;
  capturer.join();
  CHECK(life->destroyed.load() == 1);  // by the poll's drain, on this thread
  CHECK(destroyed_on(*life) == std::this_thread::get_id());

  INFO("the poll: " << (poll_error.empty() ? "returned" : poll_error));
  CHECK(poll_error.empty());

  INFO("the other thread's capture: " << (end_error.empty() ? "ended" : end_error));
  CHECK(end_error.empty());
  CHECK(nodes == 1u);
  INFO("reports: " << reports.count.load() << (reports.count.load() ? ", first: " + reports.message(0) : ""));
  CHECK(reports.count.load() == 0);
  polled.synchronize();
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  if (!curt_test::under_compute_sanitizer())  // memcheck holds freed memory back for a while
    CHECK(free_after + (std::size_t(64) << 20) > free_before);  // the 256 MiB came back
}
