// Test helpers for context and fault tests: work on a fresh thread (which has no current
// context), a child process that runs one hidden test case of this executable, and the driver's
// view of contexts. Driver functions are reached through CURT_DRIVER_CALL: no test links libcuda.
#pragma once

#include "catch.hpp"

#include <curt/detail/driver.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

namespace curt_test {

/// The calling thread's current driver context (null when it has none).
inline CUcontext current_context() {
  CUcontext context = nullptr;
  CURT_DRIVER_CALL(cuCtxGetCurrent, 4000, &context);
  return context;
}

/// Whether device `ordinal`'s primary context is active (exists) in this process.
inline bool primary_active(int ordinal) {
  CUdevice device = 0;
  CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  unsigned flags = 0;
  int active = 0;
  CURT_DRIVER_CALL(cuDevicePrimaryCtxGetState, 7000, device, &flags, &active);
  return active != 0;
}

// A driver context of device `ordinal`, made by the user (not the primary one); current after
// creation, as cuCtxCreate leaves it. Destroyed (and so popped) by the destructor.
class user_context {
 public:
  explicit user_context(int ordinal) {
    CUdevice device = 0;
    CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
    CURT_DRIVER_CALL(cuCtxCreate, 12050, &context_, nullptr, 0u, device);
  }
  ~user_context() {
    curt::detail::report(CURT_DRIVER_FUNCTION(cuCtxDestroy, 4000)(context_),
                                 "cuCtxDestroy(test context)", __FILE__, __LINE__);
  }
  user_context(const user_context&) = delete;
  user_context& operator=(const user_context&) = delete;
  CUcontext get() const { return context_; }

 private:
  CUcontext context_ = nullptr;
};

/// Runs `body` on a new std::thread and fails the test with what it threw, if anything.
template <class Body>
void on_fresh_thread(Body body) {
  std::exception_ptr error;
  std::thread t([&] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
  });
  t.join();
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      FAIL("the thread threw: " << e.what());
    }
  }
}

/// True inside compute-sanitizer, which injects its library through the environment (and
/// follows child processes).
inline bool under_compute_sanitizer() {
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string text(*entry);
    if (text.find("compute-sanitizer") != std::string::npos ||
        text.find("sanitizer-collection") != std::string::npos ||
        text.rfind("NV_SANITIZER", 0) == 0)
      return true;
  }
  return false;
}

struct child_result {
  int exit_code = -1;
  std::string output;
};

/// Runs this executable again with only `test_name` (a hidden "[.]" test case), capturing its
/// stdout and stderr. (/proc/self/exe is read here: inside popen's shell it would be the shell.)
inline child_result run_self(const std::string& test_name) {
  std::array<char, 4096> path{};
  ssize_t length = readlink("/proc/self/exe", path.data(), path.size() - 1);
  REQUIRE(length > 0);
  auto quote = [](const std::string& text) {
    std::string quoted = "'";
    for (char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return quoted + "'";
  };
  std::string spec;  // a comma in a Catch2 test spec separates names: escape it
  for (char ch : test_name) spec += ch == ',' ? std::string("\\,") : std::string(1, ch);
  std::string command = quote(std::string(path.data(), static_cast<std::size_t>(length))) + " " +
                        quote(spec) + " 2>&1";
  std::fflush(nullptr);
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  child_result result;
  std::array<char, 4096> buffer{};
  std::size_t got = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), got);
  int status = pclose(pipe);
  REQUIRE(status != -1);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace curt_test
