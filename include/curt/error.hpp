// curt/error.hpp: CUDA errors as C++ exceptions.
//
// Every CUDA call curt makes is checked. A failure becomes a curt::cuda_error (a std::system_error)
// whose message names the call, its important arguments, the error's name and text, the source
// location and, where the driver logged more about it (cuLogs*), that text too.
// Out-of-memory failures are thrown as curt::out_of_memory so they can be caught on their own.
#pragma once

#include <curt/detail/atomic.hpp>
#include <curt/detail/config.hpp>

#include <cuda_runtime_api.h>  // not <cuda.h>: a tenth of a g++ translation unit for CUresult

#if defined(__unix__) || defined(__APPLE__)
#  include <pthread.h>  // pthread_self(): the thread id in the driver's log lines
#endif

#include <cstdio>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
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
  // Declared inline here, defined later: so the class has no key function, and its vtable (with
  // everything it reaches) is emitted only where the category is used, not in every file.
  inline std::string message(int code) const override;  // in detail/driver_lookup.hpp: asks the driver
  // A driver code names the same condition as the runtime code of its number wherever the
  // runtime has that number (98 of the 100 codes in 13.0), so both compare equal to it.
  inline std::error_condition default_error_condition(int code) const noexcept override;
};

}  // namespace detail

/// The error category of cudaError_t values (the runtime API).
inline const std::error_category& runtime_category() noexcept {
  // Never destroyed: destructors of static objects may still report errors at exit.
  static const auto* category = new detail::runtime_category_impl;
  return *category;
}

/// The error category of CUresult values (the driver API).
inline const std::error_category& driver_category() noexcept {
  static const auto* category = new detail::driver_category_impl;  // never destroyed, as above
  return *category;
}

inline std::error_code make_error_code(cudaError_t status) noexcept {
  return {static_cast<int>(status), runtime_category()};
}
namespace detail {
/// Whether E is the driver's result type, CUresult. This header does not include <cuda.h>, which
/// defines it; <curt/detail/driver_result.hpp> (included by <curt/detail/driver.hpp> and by every
/// curt header that includes <cuda.h>) says yes for CUresult.
template <class E>
struct is_driver_status : std::false_type {};
}  // namespace detail

/// A driver result (CUresult) as an error code of driver_category().
template <class E, std::enable_if_t<detail::is_driver_status<E>::value, int> = 0>
std::error_code make_error_code(E status) noexcept {
  return {static_cast<int>(status), driver_category()};
}
/// A condition that runtime and driver codes of the same meaning both compare equal to:
///   error.code() == curt::make_error_condition(cudaErrorInvalidValue)
/// holds for cudaErrorInvalidValue and CUDA_ERROR_INVALID_VALUE alike. (error.status() gives the
/// same answer as a cudaError_t.)
inline std::error_condition make_error_condition(cudaError_t status) noexcept {
  return {static_cast<int>(status), runtime_category()};
}

inline std::error_condition detail::driver_category_impl::default_error_condition(
    int code) const noexcept {
  const char* name = cudaGetErrorName(static_cast<cudaError_t>(code));
  bool runtime_knows = name && std::char_traits<char>::compare(name, "cudaError", 9) == 0;
  if (runtime_knows) return {code, runtime_category()};
  return {code, *this};
}

// The runtime and driver enums share their numbers for the conditions both know (checked in
// <curt/detail/driver_result.hpp>); status() relies on it to give one cudaError_t for either API.

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
  /// True when the error left the CUDA context unusable (a kernel fault, for instance): every
  /// later call in the process fails with it, and only a new process can use the device again.
  bool is_sticky() const noexcept { return is_sticky(code()); }
  static bool is_sticky(std::error_code code) noexcept {
    if (code.category() != runtime_category() && code.category() != driver_category()) return false;
    switch (code.value()) {  // the codes the 13.0 headers document as needing a new process
      case 226: case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718:
      case 719: case 721: case 810: case 911:
        return true;
      default:
        return false;
    }
  }
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

/// An exception a host function (stream_ref::host_call) threw that no synchronize() can rethrow:
/// its stream was destroyed first, or it ran as a node of a graph. original() is what it threw.
class host_function_error : public std::runtime_error {
 public:
  host_function_error(const std::string& what, std::exception_ptr original)
      : std::runtime_error(what), original_(std::move(original)) {}
  const std::exception_ptr& original() const noexcept { return original_; }

 private:
  std::exception_ptr original_;
};

/// Receives the errors curt cannot throw: a CUDA call that failed in a destructor (a cuda_error)
/// and a host function's exception that has no synchronize() left to rethrow it (a
/// host_function_error). It may be called on a CUDA callback thread, so it must not call CUDA.
using error_handler = void (*)(const std::exception& error) noexcept;

namespace detail {

inline void print_error(const std::exception& error) noexcept {
  std::fprintf(stderr, "curt: error not thrown (in a destructor or a host function): %s\n",
               error.what());
}

inline atomic<error_handler>& error_handler_slot() noexcept {
  static atomic<error_handler> slot{&print_error};
  return slot;
}

inline void handle_error(const std::exception& error) noexcept {
  error_handler_slot().load()(error);
}

// The thread id the driver writes into each log line ("[time][thread][CUDA][E] text").
inline std::string log_thread_tag() {
#if defined(__unix__) || defined(__APPLE__)
  return "][" + std::to_string(static_cast<unsigned long long>(pthread_self())) + "]";
#else
  return {};
#endif
}

// What the driver logged about the failure at hand, from this thread (defined with curt's driver
// calls, in detail/driver_lookup.hpp).
inline std::string take_driver_log();

inline std::string location(const char* file, int line) {
  return file ? std::string(file) + ":" + std::to_string(line) : std::string();
}

/// The one throw path, with the driver log already taken: clears the thread's last error, says
/// when the context is lost and picks the exception type. `explanation` is curt's own word on the
/// failure, when it has one.
[[noreturn]] CURT_COLD inline void throw_error_with_log(std::error_code code, std::string call,
                                                        std::string where, std::string explanation,
                                                        std::string log) {
  if (code.category() == runtime_category()) {
    // A failed runtime call also sets the thread's last error; a non-sticky one is cleared so
    // that the next unrelated check does not report it a second time.
    (void)cudaGetLastError();
  }
  if (cuda_error::is_sticky(code))
    explanation = "the CUDA context is lost: an earlier kernel or copy failed (a sticky error); "
                  "this call is not the cause, and every later CUDA call in this process fails "
                  "the same way, so the process must be restarted";
  bool oom = (code.category() == runtime_category() && code.value() == cudaErrorMemoryAllocation) ||
             (code.category() == driver_category() && code.value() == cudaErrorMemoryAllocation);
  if (oom)
    throw out_of_memory(code, std::move(call), std::move(explanation), std::move(where),
                        std::move(log));
  throw cuda_error(code, std::move(call), std::move(explanation), std::move(where), std::move(log));
}

/// Throws for a failed CUDA call, with what the driver logged about it.
[[noreturn]] CURT_COLD inline void throw_error(std::error_code code, std::string call,
                                               std::string where, std::string explanation = {}) {
  std::string log = take_driver_log();
  throw_error_with_log(code, std::move(call), std::move(where), std::move(explanation),
                       std::move(log));
}

[[noreturn]] CURT_COLD inline void throw_error(cudaError_t status, std::string call,
                                               const char* file, int line) {
  throw_error(make_error_code(status), std::move(call), location(file, line));
}
/// A failed driver call: `status` is the CUresult's value.
[[noreturn]] CURT_COLD inline void throw_driver_error(int status, std::string call,
                                                      const char* file, int line) {
  throw_error(std::error_code(status, driver_category()), std::move(call), location(file, line));
}

/// For errors curt finds itself, before calling CUDA: no driver log, no last error to clear.
[[noreturn]] CURT_COLD inline void raise(cudaError_t status, std::string call,
                                         std::string explanation, const char* file, int line) {
  throw cuda_error(status, std::move(call), std::move(explanation), location(file, line));
}

/// Throws unless status is success. `call` names what was called.
inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (CURT_UNLIKELY(status != cudaSuccess)) throw_error(status, call, file, line);
}
/// Throws unless the driver result `status` (a CUresult's value) is 0, CUDA_SUCCESS.
inline void check_driver(int status, const char* call, const char* file, int line) {
  if (CURT_UNLIKELY(status != 0)) throw_driver_error(status, call, file, line);
}
/// CURT_CHECK and CURT_DRIVER_CALL of a CUresult.
template <class E, std::enable_if_t<!std::is_same_v<E, cudaError_t>, int> = 0>
void check(E status, const char* call, const char* file, int line) {
  static_assert(is_driver_status<E>::value,
                "CURT_CHECK takes a cudaError_t or a CUresult; for a CUresult, include "
                "<curt/detail/driver.hpp> (this header does not include <cuda.h>)");
  check_driver(static_cast<int>(status), call, file, line);
}

/// One argument of a call, for the description of a failure: a word ("stream") or a named
/// number ({"device", 1}).
struct call_argument {
  call_argument(const char* word) noexcept : text(word) {}  // NOLINT: {"stream", what}
  call_argument(const char* name_, long long value_) noexcept : name(name_), value(value_) {}
  const char* text = nullptr;
  const char* name = nullptr;
  long long value = 0;
};

// "function(argument, name value, ...)", built only on failure.
CURT_COLD inline std::string describe_call(const char* function,
                                           std::initializer_list<call_argument> arguments) {
  std::string text = function;
  text += '(';
  const char* separator = "";
  for (const call_argument& a : arguments) {
    text += separator;
    separator = ", ";
    if (a.text) {
      text += a.text;
    } else {
      text += a.name;
      text += ' ';
      text += std::to_string(a.value);
    }
  }
  text += ')';
  return text;
}

/// Like check(), naming the call's arguments: check_call(status, "cudaDeviceGetLimit",
/// {{"limit", which}, {"device", ordinal}}, __FILE__, __LINE__). (A list rather than a lambda per
/// call site: every file that includes curt compiles these calls.)
inline void check_call(cudaError_t status, const char* function,
                       std::initializer_list<call_argument> arguments, const char* file, int line) {
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_error(status, describe_call(function, arguments), file, line);
}

// Set once a sticky failure in a destructor was reported: one flag for runtime and driver codes.
inline atomic<bool>& sticky_reported() noexcept {
  static atomic<bool> reported{false};
  return reported;
}

// Whether a destructor's failure with `code` goes unreported: while the process exits the
// runtime (cudaErrorCudartUnloading) or the driver (CUDA_ERROR_DEINITIALIZED) may be gone already,
// having freed everything itself; and once the context is lost, every destructor after the
// first fails the same way.
inline bool quiet_in_destructor(const std::error_code& code) noexcept {
  if (code.category() == runtime_category()) {
    if (code.value() == cudaErrorCudartUnloading) return true;
    (void)cudaGetLastError();
  } else if (code.category() == driver_category() && code.value() == 4) {
    return true;
  }
  return cuda_error::is_sticky(code) && sticky_reported().exchange(true);
}

/// For destructors: never throws; hands a failure to the error handler (unless
/// quiet_in_destructor: at exit, and after the first report of a lost context).
CURT_COLD inline void report_error(std::error_code code, const char* call, const char* file,
                                   int line) noexcept {
  if (quiet_in_destructor(code)) return;
  try {
    cuda_error error(code, call,
                     cuda_error::is_sticky(code)
                         ? "the CUDA context is lost (a sticky error); later failures of this "
                           "kind in destructors are not reported"
                         : std::string(),
                     location(file, line));
    handle_error(error);
  } catch (...) {
    // Building the message can only fail by running out of host memory: nothing left to do.
  }
}
/// For destructors that caught an error curt threw (the context could not be made current, a
/// lookup failed): the same rules as report_error, the error handed on as it was thrown.
CURT_COLD inline void report_caught(const std::exception& error) noexcept {
  if (auto* e = dynamic_cast<const cuda_error*>(&error))
    if (quiet_in_destructor(e->code())) return;
  handle_error(error);
}
inline void check_noexcept(cudaError_t status, const char* call, const char* file,
                           int line) noexcept {
  if (CURT_UNLIKELY(status != cudaSuccess)) report_error(make_error_code(status), call, file, line);
}
/// The same for a driver result (a CUresult's value).
inline void check_driver_noexcept(int status, const char* call, const char* file,
                                  int line) noexcept {
  if (CURT_UNLIKELY(status != 0))
    report_error(std::error_code(status, driver_category()), call, file, line);
}
template <class E, std::enable_if_t<is_driver_status<E>::value, int> = 0>
void check_noexcept(E status, const char* call, const char* file, int line) noexcept {
  check_driver_noexcept(static_cast<int>(status), call, file, line);
}
/// For destructors that call the driver, which destroys graphs and pools without a current
/// context (and makes none): `destroy` looks its function up and calls it; a failure goes
/// through report_error, a lookup that fails (the runtime unloading at exit) through
/// report_caught.
template <class Destroy>
void destroy_through_driver(Destroy destroy, const char* call, const char* file,
                            int line) noexcept {
  try {
    check_driver_noexcept(destroy(), call, file, line);
  } catch (const cuda_error& error) {
    report_caught(error);
  }
}

}  // namespace detail

/// Installs the handler for errors curt cannot throw (see error_handler); returns the previous
/// one. The default prints to stderr. A null handler restores the default.
inline error_handler set_error_handler(error_handler handler) noexcept {
  if (!handler) handler = &detail::print_error;
  return detail::error_handler_slot().exchange(handler);
}

/// Throws curt::cuda_error (or curt::out_of_memory) with the expression's text and location
/// when `expr`, a cudaError_t or CUresult, is not success.
#define CURT_CHECK(expr) ::curt::detail::check((expr), #expr, __FILE__, __LINE__)

}  // namespace curt

#include <curt/detail/driver_lookup.hpp>  // driver_error_name(), needed by driver_category's message()
