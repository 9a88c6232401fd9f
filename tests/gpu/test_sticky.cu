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

#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>


#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
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
