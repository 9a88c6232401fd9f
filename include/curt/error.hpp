// curt/error.hpp: CUDA errors as C++ exceptions.
//
// Every CUDA call curt makes is checked. A failure becomes a curt::cuda_error (a std::system_error)
// whose message names the call, its important arguments, the error's name and text, the source
// location and, where the driver logged more about it (cudaLogs*), that text too.
// Out-of-memory failures are thrown as curt::out_of_memory so they can be caught on their own.
#pragma once

#include <curt/detail/config.hpp>

#include <cuda.h>  // CUresult only: nothing here links the driver library
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

namespace curt {

namespace detail {

class runtime_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda_runtime"; }
  std::string message(int code) const override {
    auto status = static_cast<cudaError_t>(code);
    return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
  }
};

class driver_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda_driver"; }
  std::string message(int code) const override;  // in detail/driver.hpp: asks the driver
};

}  // namespace detail

/// The error category of cudaError_t values (the runtime API).
inline const std::error_category& runtime_category() noexcept {
  static const detail::runtime_category_impl category;
  return category;
}

/// The error category of CUresult values (the driver API).
inline const std::error_category& driver_category() noexcept {
  static const detail::driver_category_impl category;
  return category;
}

inline std::error_code make_error_code(cudaError_t status) noexcept {
  return {static_cast<int>(status), runtime_category()};
}
inline std::error_code make_error_code(CUresult status) noexcept {
  return {static_cast<int>(status), driver_category()};
}

// The runtime and driver enums share their numbers for the conditions both know; status()
// relies on it to give one cudaError_t for either API.
static_assert(int(CUDA_ERROR_INVALID_VALUE) == int(cudaErrorInvalidValue));
static_assert(int(CUDA_ERROR_OUT_OF_MEMORY) == int(cudaErrorMemoryAllocation));
static_assert(int(CUDA_ERROR_INVALID_DEVICE) == int(cudaErrorInvalidDevice));
static_assert(int(CUDA_ERROR_NOT_SUPPORTED) == int(cudaErrorNotSupported));
static_assert(int(CUDA_ERROR_NO_DEVICE) == int(cudaErrorNoDevice));

/// A failed CUDA call. code() carries the status in runtime_category() or driver_category().
class cuda_error : public std::system_error {
 public:
  /// `call` names what failed ("cudaMalloc(1048576 bytes)"); `explanation` says why in curt's
  /// words, when curt found the problem itself; `where` is "file:line".
  cuda_error(std::error_code code, std::string call, std::string explanation = {},
             std::string where = {}, std::string driver_log = {})
      : std::system_error(code),
        call_(std::move(call)),
        where_(std::move(where)),
        driver_log_(std::move(driver_log)) {
    message_ = call_ + " failed: " + code.message();
    if (!explanation.empty()) message_ += ": " + explanation;
    if (!where_.empty()) message_ += " at " + where_;
    if (!driver_log_.empty()) message_ += "; driver log: " + driver_log_;
  }

  cuda_error(cudaError_t status, std::string call, std::string explanation = {},
             std::string where = {}, std::string driver_log = {})
      : cuda_error(make_error_code(status), std::move(call), std::move(explanation),
                   std::move(where), std::move(driver_log)) {}

  const char* what() const noexcept override { return message_.c_str(); }

  /// The status as a runtime error code (driver codes map to the runtime code of that number).
  cudaError_t status() const noexcept { return static_cast<cudaError_t>(code().value()); }
  /// True when a driver API call (CUresult) failed.
  bool from_driver() const noexcept { return code().category() == driver_category(); }
  /// What was called, with the arguments that matter, e.g. "cudaMalloc(1048576 bytes)".
  const std::string& call() const noexcept { return call_; }
  /// "file:line" of the check that threw; empty when unknown.
  const std::string& where() const noexcept { return where_; }
  /// What the driver's error log said about this failure; empty when it said nothing.
  const std::string& driver_log() const noexcept { return driver_log_; }

 private:
  std::string call_;
  std::string where_;
  std::string driver_log_;
  std::string message_;
};

/// Out of device (or pinned host) memory: catchable apart from other CUDA errors.
class out_of_memory : public cuda_error {
 public:
  using cuda_error::cuda_error;
};

/// Called with the error of a CUDA call that failed in a destructor, where throwing is not allowed.
using destructor_error_handler = void (*)(const cuda_error&) noexcept;

namespace detail {

inline void print_destructor_error(const cuda_error& error) noexcept {
  std::fprintf(stderr, "curt: error in a destructor (not thrown): %s\n", error.what());
}

inline std::atomic<destructor_error_handler>& destructor_handler_slot() noexcept {
  static std::atomic<destructor_error_handler> slot{&print_destructor_error};
  return slot;
}

// The driver keeps a ring buffer of log lines (CUDA 12.9+). curt reads it only when a call fails,
// from a process-wide cursor, so the hot path never touches it. Before the first failure there is
// no cursor yet: then only the newest line is taken, which belongs to the failure at hand.
inline std::string take_driver_log() {
  static std::mutex mutex;
  static cudaLogIterator cursor = 0;
  static bool has_cursor = false;
  std::lock_guard<std::mutex> lock(mutex);
  std::string text(25600, '\0');  // the driver's documented maximum
  size_t size = text.size();
  cudaError_t status = cudaLogsDumpToMemory(has_cursor ? &cursor : nullptr, text.data(), &size, 0);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // the log is a best effort: leave no error behind
    return {};
  }
  text.resize(size);
  if (!has_cursor) {
    has_cursor = cudaLogsCurrent(&cursor, 0) == cudaSuccess;
    while (!text.empty() && text.back() == '\n') text.pop_back();
    auto newline = text.rfind('\n');
    if (newline != std::string::npos) text.erase(0, newline + 1);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

inline std::string location(const char* file, int line) {
  return file ? std::string(file) + ":" + std::to_string(line) : std::string();
}

/// The one throw path: attaches the driver log, clears the thread's last error and picks the
/// exception type. `explanation` is curt's own word on the failure, when it has one.
[[noreturn]] CURT_COLD inline void throw_error(std::error_code code, std::string call,
                                               std::string where, std::string explanation = {}) {
  std::string log = take_driver_log();
  if (code.category() == runtime_category()) {
    // A failed runtime call also sets the thread's last error; a non-sticky one is cleared so
    // that the next unrelated check does not report it a second time.
    (void)cudaGetLastError();
  }
  bool oom = (code.category() == runtime_category() && code.value() == cudaErrorMemoryAllocation) ||
             (code.category() == driver_category() && code.value() == CUDA_ERROR_OUT_OF_MEMORY);
  if (oom)
    throw out_of_memory(code, std::move(call), std::move(explanation), std::move(where),
                        std::move(log));
  throw cuda_error(code, std::move(call), std::move(explanation), std::move(where), std::move(log));
}

[[noreturn]] CURT_COLD inline void throw_error(cudaError_t status, std::string call,
                                               const char* file, int line) {
  throw_error(make_error_code(status), std::move(call), location(file, line));
}
[[noreturn]] CURT_COLD inline void throw_error(CUresult status, std::string call, const char* file,
                                               int line) {
  throw_error(make_error_code(status), std::move(call), location(file, line));
}

/// Throws unless status is success. `call` names what was called.
inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (CURT_UNLIKELY(status != cudaSuccess)) throw_error(status, call, file, line);
}
inline void check(CUresult status, const char* call, const char* file, int line) {
  if (CURT_UNLIKELY(status != CUDA_SUCCESS)) throw_error(status, call, file, line);
}

/// Like check(), but builds the description (with argument values) only on failure.
template <class Status, class Describe>
inline void check_with(Status status, Describe&& describe, const char* file, int line) {
  if (CURT_UNLIKELY(status != Status{})) throw_error(status, std::string(describe()), file, line);
}

/// For destructors: never throws; hands a failure to the destructor error handler.
CURT_COLD inline void report_error(cudaError_t status, const char* call, const char* file,
                                   int line) noexcept {
  // While the process exits the runtime may already be gone and has freed everything itself.
  if (status == cudaErrorCudartUnloading) return;
  (void)cudaGetLastError();
  try {
    cuda_error error(status, call, {}, location(file, line));
    destructor_handler_slot().load()(error);
  } catch (...) {
    // Building the message can only fail by running out of host memory: nothing left to do.
  }
}
inline void check_noexcept(cudaError_t status, const char* call, const char* file,
                           int line) noexcept {
  if (CURT_UNLIKELY(status != cudaSuccess)) report_error(status, call, file, line);
}

}  // namespace detail

/// Installs the handler for errors in destructors; returns the previous one. The default prints to
/// stderr. A null handler restores the default.
inline destructor_error_handler set_destructor_error_handler(
    destructor_error_handler handler) noexcept {
  if (!handler) handler = &detail::print_destructor_error;
  return detail::destructor_handler_slot().exchange(handler);
}

/// Throws curt::cuda_error (or curt::out_of_memory) with the expression's text and location
/// when `expr`, a cudaError_t or CUresult, is not success.
#define CURT_CHECK(expr) ::curt::detail::check((expr), #expr, __FILE__, __LINE__)

}  // namespace curt

#include <curt/detail/driver.hpp>  // driver_error_name(), needed by driver_category's message()
