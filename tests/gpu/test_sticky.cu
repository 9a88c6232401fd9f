// Sticky errors and the driver log.
//
// A kernel fault loses the CUDA context for the rest of the process, so the faulting part runs in
// a child process: the [fault] test case re-runs this executable (/proc/self/exe) with a hidden
// test case ("[.][fault-child]") and checks the child's exit code (0: its assertions passed) and
// output. The sanitizer run leaves [fault] out (scripts/gpu-check.sh).
//
// Test cases tagged [api-error] make CUDA calls fail on purpose (compute-sanitizer's memcheck
// reports those unless run with --report-api-errors no).
#include <catch.hpp>
#include <isolation.hpp>
#include <device_array.hpp>
#include <expect.hpp>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using curt_test::run_self;
using curt_test::child_result;

using curt_test::device_array;

constexpr const char* child_test_name = "sticky fault child";
constexpr const char* child_marker = "STICKY-FAULT-CHILD-REACHED-ITS-END";

__global__ void write_through(int* p, int value) { *p = value; }

__global__ void add_one(const int* in, int* out, int n) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + 1;
}

// The child's error handler: counts and keeps the messages (it must not call CUDA).
std::mutex handled_mutex;
std::vector<std::string> handled;
void keep_error(const std::exception& error) noexcept {
  try {
    std::lock_guard<std::mutex> lock(handled_mutex);
    handled.emplace_back(error.what());
  } catch (...) {
  }
}

bool contains(const std::string& text, const char* fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace

TEST_CASE("sticky fault child", "[.][fault-child]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::error_handler previous = curt::set_error_handler(&keep_error);
  const int n = curt_test::random_ints(1, 1000, 5000)[0];
  std::vector<int> values = curt_test::random_ints(std::size_t(n), -1000000, 1000000);
  const curt::launch_config config(dim3(static_cast<unsigned>((n + 127) / 128)), dim3(128));

  {
    // Owners made before the fault, destroyed after it.
    std::vector<curt::stream> streams;
    std::vector<curt::event> events;
    for (int i = 0; i < 10; ++i) {
      streams.emplace_back(d);
      events.emplace_back(d);
    }
    curt::stream s(d);
    int* in = nullptr;
    int* out = nullptr;
    REQUIRE(cudaMalloc(&in, sizeof(int) * std::size_t(n)) == cudaSuccess);
    REQUIRE(cudaMalloc(&out, sizeof(int) * std::size_t(n)) == cudaSuccess);
    REQUIRE(cudaMemcpy(in, values.data(), sizeof(int) * std::size_t(n), cudaMemcpyHostToDevice) ==
            cudaSuccess);
    // A healthy launch first: the context works until the fault.
    curt::launch(s, config, add_one, in, out, n);
    s.synchronize();
    std::vector<int> back(std::size_t(n), 0);
    REQUIRE(cudaMemcpy(back.data(), out, sizeof(int) * std::size_t(n), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    for (int i = 0; i < n; ++i) REQUIRE(back[std::size_t(i)] == values[std::size_t(i)] + 1);
    CHECK(handled.empty());

    // The fault: a write through a null pointer.
    curt::launch(s, curt::launch_config(dim3(1), dim3(1)), write_through, static_cast<int*>(nullptr),
                 42);
    try {
      s.synchronize();
      FAIL("synchronize() after an illegal address did not throw");
    } catch (const curt::cuda_error& error) {
      INFO("what(): " << error.what());
      std::printf("fault: %s\n", error.what());
      CHECK(error.is_sticky());
      CHECK(curt::cuda_error::is_sticky(error.code()));
      CHECK(error.status() == cudaErrorIllegalAddress);
    }

    // The next, correct launch fails too; curt says the context is lost and does not diagnose it.
    try {
      curt::launch(s, config, add_one, in, out, n);
      s.synchronize();
      FAIL("a launch after the fault did not throw");
    } catch (const curt::cuda_error& error) {
      std::string what = error.what();
      INFO("what(): " << what);
      std::printf("next launch: %s\n", what.c_str());
      CHECK(error.is_sticky());
      CHECK(contains(what, "context is lost"));
      CHECK(contains(what, "not the cause"));
      CHECK_FALSE(contains(what, "exceeds"));
    }

    // Creation throws, with the same story.
    for (int i = 0; i < 20; ++i) {
      INFO("creation " << i);
      try {
        if (i % 2 == 0) {
          curt::stream extra(d);
        } else {
          curt::event extra(d);
        }
        FAIL("creating a stream or event after the fault did not throw");
      } catch (const curt::cuda_error& error) {
        INFO("what(): " << error.what());
        CHECK(error.is_sticky());
        CHECK(contains(error.what(), "context is lost"));
      }
    }
    int current = -1;  // the runtime still answers this
    CHECK(cudaGetDevice(&current) == cudaSuccess);
    CHECK(current == 0);
    (void)cudaFree(in);   // fail the same way; not curt's business
    (void)cudaFree(out);
    (void)cudaGetLastError();
  }  // 11 streams and 10 events destroyed: each fails, one report

  {
    std::lock_guard<std::mutex> lock(handled_mutex);
    INFO(handled.size() << " errors reported by destructors since the fault");
    for (const std::string& message : handled) std::printf("handler: %s\n", message.c_str());
    REQUIRE(handled.size() == 1);
    CHECK(contains(handled[0], "context is lost"));
  }
  curt::set_error_handler(previous);
  std::printf("%s\n", child_marker);
  std::fflush(stdout);
}

// A kernel fault in a user's context U while device 0's primary context is inactive (U stands
// for another device's context): the driver no longer tells U's streams' context, and a thread
// without a context that waits on one must get the sticky code, not a fallback that wakes device 0.
TEST_CASE("fault in another context child", "[.][other-fault-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise: main() made no context
  curt::set_error_handler(&keep_error);
  curt_test::user_context mine(0);  // current now
  cudaStream_t faulted = nullptr, other = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&faulted, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess);
  write_through<<<1, 1, 0, faulted>>>(nullptr, 42);
  REQUIRE(cudaStreamSynchronize(faulted) == cudaErrorIllegalAddress);
  CUcontext popped = nullptr;
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  REQUIRE(popped == mine.get());

  std::vector<std::string> problems;
  curt_test::on_fresh_thread([&] {
    auto sticky = [&](const char* what, auto operation) {
      try {
        operation();
        problems.push_back(std::string(what) + " did not throw");
      } catch (const curt::cuda_error& error) {
        std::printf("%s: %s\n", what, error.what());
        if (!error.is_sticky()) problems.push_back(std::string(what) + ": not the sticky code");
        if (!contains(error.what(), "context is lost"))
          problems.push_back(std::string(what) + ": does not say the context is lost");
      }
      if (curt_test::current_context() != nullptr) {
        problems.push_back(std::string(what) + ": left a context current");
        CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
      }
      if (curt_test::primary_active(0))
        problems.push_back(std::string(what) + ": made device 0's primary context active");
    };
    sticky("wait on the faulted context's stream",
           [&] { curt::stream_ref(other).wait(curt::stream_ref(faulted)); });
    sticky("the same wait again", [&] { curt::stream_ref(other).wait(curt::stream_ref(faulted)); });
    sticky("synchronize", [&] { curt::stream_ref(faulted).synchronize(); });
  });
  for (const std::string& problem : problems) FAIL_CHECK(problem);
  CHECK(handled.empty());
  std::printf("%s\n", child_marker);
  std::fflush(stdout);
}

TEST_CASE("after a fault in another context, a wait from a thread without one says the context "
          "is lost and wakes nothing",
          "[fault]") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (the sanitizer makes contexts "
         "in it)");
    return;
  }
  child_result child = run_self("fault in another context child");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(contains(child.output, child_marker));
}

// Owners in static storage (an application's global "engine") die after main, when the runtime
// and the driver may have shut down and freed everything themselves: nothing is reported then.
namespace {
constexpr const char* exit_report_marker = "REPORTED-AT-EXIT: ";
struct exit_holder {
  std::optional<curt::stream> stream;
  std::optional<curt::event> event;
  std::optional<curt::device_buffer<int>> buffer;
};
exit_holder at_exit;  // made before main, before any CUDA call: destroyed after CUDA's exit hooks
void report_at_exit(const std::exception& error) noexcept {
  std::printf("%s%s\n", exit_report_marker, error.what());
  std::fflush(stdout);
}
}  // namespace

TEST_CASE("owners destroyed at exit child", "[.][exit-child]") {
  curt::device d(0);
  curt::set_error_handler(&report_at_exit);  // kept: it must see the exit
  at_exit.stream.emplace(d);
  at_exit.event.emplace(d);
  at_exit.buffer.emplace(d, 4096);
  curt::fill(*at_exit.buffer, 7, *at_exit.stream);
  at_exit.event->record(*at_exit.stream);
  at_exit.stream->synchronize();
  std::printf("%s\n", child_marker);
  std::fflush(stdout);
}

TEST_CASE("a stream, an event and a buffer destroyed after main report nothing") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (its owners are freed by the "
         "driver at exit, which the leak check counts)");
    return;
  }
  child_result child = run_self("owners destroyed at exit child");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(contains(child.output, child_marker));
  CHECK_FALSE(contains(child.output, exit_report_marker));
}

TEST_CASE("a kernel fault is sticky: the next launch and creations say the context is lost",
          "[fault]") {
  child_result child = run_self(child_test_name);
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(contains(child.output, child_marker));
  CHECK(contains(child.output, "context is lost"));
  // The child ran its test case and nothing else (a hidden one, chosen by name).
  CHECK_FALSE(contains(child.output, "No tests ran"));
}

TEST_CASE("a refused launch's driver log holds only this thread's lines, none of the diagnosis",
          "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  device_array<int> buffer(1024);

  // Another thread fails an allocation first: the driver logs it, on that thread.
  cudaError_t other_status = cudaSuccess;
  std::thread other([&] {
    void* p = nullptr;
    if (cudaSetDevice(0) != cudaSuccess) return;
    other_status = cudaMalloc(&p, std::size_t(1) << 52);  // 4 PiB
    (void)cudaGetLastError();
  });
  other.join();
  REQUIRE(other_status == cudaErrorMemoryAllocation);

  try {
    curt::launch(s, curt::launch_config(dim3(1), dim3(1025)), add_one, buffer.get(), buffer.get(),
                 0);
    FAIL("a block of 1025 threads was not refused");
  } catch (const curt::cuda_error& error) {
    const std::string log = error.driver_log();
    INFO("what(): " << error.what());
    INFO("driver_log(): " << log);
    CHECK(contains(error.what(), "exceeds the device's limit of"));  // the diagnosis ran
    CHECK((contains(log, "cuLaunchKernel") || contains(log, "Returning")));
    CHECK_FALSE(contains(log, "cuMemAlloc"));
    CHECK_FALSE(contains(log, "cuFuncGetAttribute"));
    CHECK_FALSE(contains(log, "cuOccupancy"));
    // Every line of it is this thread's.
    const std::string tag = curt::detail::log_thread_tag();
    std::size_t start = 0;
    while (start < log.size()) {
      std::size_t end = log.find('\n', start);
      if (end == std::string::npos) end = log.size();
      std::string line = log.substr(start, end - start);
      INFO("line: " << line);
      CHECK(line.find(tag) != std::string::npos);
      start = end + 1;
    }
  }
  CHECK(cudaGetLastError() == cudaSuccess);

  // The other thread's failure is in the driver's whole log (else the check above proves little).
  std::string all(25600, '\0');
  std::size_t size = all.size();
  if (cudaLogsDumpToMemory(nullptr, all.data(), &size, 0) == cudaSuccess) {
    all.resize(std::min(size, all.size()));
    if (!contains(all, "cuMemAlloc"))
      WARN("the driver's log has no cuMemAlloc line for the other thread's failed allocation");
  }
  (void)cudaGetLastError();
}

// The driver tags each line with the thread's pthread_t only: lines of failures curt never read
// (a raw call's that the caller handled, or those of a thread that has exited and whose id the
// next thread got) carry the same tag as the failure at hand. Only that failure's lines are kept.
TEST_CASE("a refused launch's driver log holds none of the thread's earlier failures, nor an "
          "exited thread's of the same id",
          "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  device_array<int> buffer(1024);
  // Returns the log of a refused launch (a block of 1025 threads); throws nothing. No Catch2
  // here: it runs on another thread too.
  auto refused_launch_log = [&]() -> std::string {
    try {
      curt::launch(s, curt::launch_config(dim3(1), dim3(1025)), add_one, buffer.get(),
                   buffer.get(), 0);
    } catch (const curt::cuda_error& error) {
      return error.driver_log();
    }
    return "(the launch was not refused)";
  };
  (void)refused_launch_log();  // after it, curt reads the log from its cursor
  const std::size_t huge = std::size_t(1) << 52;  // 4 PiB: refused, and logged by the driver

  // An earlier failure of this thread, which the caller handled.
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, huge) == cudaErrorMemoryAllocation);
  (void)cudaGetLastError();
  std::string log = refused_launch_log();
  INFO("after this thread's handled failure, driver_log(): " << log);
  CHECK(contains(log, "Returning"));
  CHECK_FALSE(contains(log, "cuMemAlloc"));

  // A failure of a thread that then exits; the next thread usually gets its pthread_t.
  pthread_t failed_thread{}, next_thread{};
  cudaError_t failed_status = cudaSuccess;
  std::thread failing([&] {
    failed_thread = pthread_self();
    void* q = nullptr;
    if (cudaSetDevice(0) == cudaSuccess) failed_status = cudaMalloc(&q, huge);
    (void)cudaGetLastError();
  });
  failing.join();
  REQUIRE(failed_status == cudaErrorMemoryAllocation);
  std::string next_log;
  std::thread next([&] {
    next_thread = pthread_self();
    next_log = refused_launch_log();
  });
  next.join();
  INFO("on the next thread, driver_log(): " << next_log);
  if (!pthread_equal(failed_thread, next_thread))
    WARN("the next thread got another id: its half of this test proves less this run");
  CHECK(contains(next_log, "Returning"));
  CHECK_FALSE(contains(next_log, "cuMemAlloc"));
  CHECK(cudaGetLastError() == cudaSuccess);
}
