// curt/core/error.hpp: CUDA errors as C++ exceptions.
//
// Every CUDA call curt makes is checked. A failure becomes a curt::cuda_error (a std::system_error)
// whose message names the call, its important arguments, the error's name and text, the source
// location and, where the driver logged more about it (cuLogs*), that text too. Out-of-memory
// failures are curt::out_of_memory, catchable on their own. Errors that cannot be thrown (in a
// destructor, in a host function nobody synchronizes with) go to one handler, set_error_handler.
//
// Inside: detail::check (throws on failure), throw_error (the one throw path for CUDA's failures),
// raise (mistakes curt finds before calling CUDA) and report (for destructors: never throws).
#pragma once

#include <curt/core/atomic.hpp>
#include <curt/core/config.hpp>

#include <cuda_runtime_api.h>  // not <cuda.h>: a tenth of a g++ translation unit for CUresult

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace curt {

inline const std::error_category& runtime_category() noexcept;  // below

namespace detail {

/// printf's text as a std::string: what curt's messages are built with, far cheaper to compile
/// than chains of std::string's + (and checked against the arguments by the compiler).
CURT_PRINTF_LIKE(1, 2) inline std::string fmt(const char* format, ...) {
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int size = std::vsnprintf(nullptr, 0, format, args);
  std::string text(size > 0 ? static_cast<std::size_t>(size) : 0, '\0');
  if (size > 0) std::vsnprintf(&text[0], text.size() + 1, format, again);
  va_end(again);
  va_end(args);
  return text;
}
class runtime_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda_runtime"; }
  std::string message(int code) const override {
    auto status = static_cast<cudaError_t>(code);
    return fmt("%s (%s)", cudaGetErrorName(status), cudaGetErrorString(status));
  }
};

class driver_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "cuda_driver"; }
  // Declared inline here and defined in core/driver.hpp (it asks the driver), so the class has
  // no key function and its vtable is emitted only where the category is used.
  inline std::string message(int code) const override;
  // A driver code names the same condition as the runtime code of its number wherever the
  // runtime has that number (98 of the 100 codes in 13.0), so both compare equal to it.
  std::error_condition default_error_condition(int code) const noexcept override {
    const char* name = cudaGetErrorName(static_cast<cudaError_t>(code));
    if (name && std::char_traits<char>::compare(name, "cudaError", 9) == 0)
      return {code, runtime_category()};
    return {code, *this};
  }
};

/// Another API's status enum: a specialization gives its error category (category()), its exception
/// type (error) and what the API says of its last failure (explain()). <curt/driver.hpp> makes one
/// for CUresult (this header does not include <cuda.h>), <curt/nccl.hpp> for ncclResult_t.
template <class E>
struct status_traits;
template <class E, class = void>
struct has_status_traits : std::false_type {};
template <class E>
struct has_status_traits<E, std::void_t<decltype(status_traits<E>::category())>>
    : std::true_type {};

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
/// A CUresult (driver_category()), or another API's status curt knows, as its category's code.
template <class E, std::enable_if_t<detail::has_status_traits<E>::value, int> = 0>
std::error_code make_error_code(E status) noexcept {
  return {static_cast<int>(status), detail::status_traits<E>::category()};
}
/// A condition that runtime and driver codes of one meaning both equal: for cudaErrorInvalidValue
/// and CUDA_ERROR_INVALID_VALUE, error.code() == curt::make_error_condition(cudaErrorInvalidValue).
inline std::error_condition make_error_condition(cudaError_t status) noexcept {
  return {static_cast<int>(status), runtime_category()};
}

/// A failed CUDA call. code() carries the status in runtime_category() or driver_category().
class cuda_error : public std::system_error {
 public:
  /// `call` names what failed ("cudaMalloc(bytes 1048576)"); `explanation` says why in curt's
  /// words, when curt found the problem itself; `where` is "file:line".
  cuda_error(std::error_code code, std::string call, std::string explanation = {},
             std::string where = {}, std::string driver_log = {})
      : std::system_error(code),
        call_(std::move(call)),
        where_(std::move(where)),
        driver_log_(std::move(driver_log)) {
    message_ = detail::fmt("%s failed: %s%s%s%s%s%s%s", call_.c_str(), code.message().c_str(),
                           explanation.empty() ? "" : ": ", explanation.c_str(),
                           where_.empty() ? "" : " at ", where_.c_str(),
                           driver_log_.empty() ? "" : "; driver log: ", driver_log_.c_str());
  }
  cuda_error(cudaError_t status, std::string call, std::string explanation = {},
             std::string where = {}, std::string driver_log = {})
      : cuda_error(make_error_code(status), std::move(call), std::move(explanation),
                   std::move(where), std::move(driver_log)) {}  ///< For a cudaError_t.

  /// "<call> failed: <error>: <explanation> at <where>; driver log: <log>", less the empty parts.
  const char* what() const noexcept override { return message_.c_str(); }

  /// The status as a runtime error code (the two enums share their numbers).
  cudaError_t status() const noexcept { return static_cast<cudaError_t>(code().value()); }
  /// True when a driver API call (CUresult) failed.
  bool from_driver() const noexcept { return code().category() == driver_category(); }
  /// What was called, with the arguments that matter, e.g. "cudaMalloc(bytes 1048576)".
  const std::string& call() const noexcept { return call_; }
  /// True when the error left the CUDA context unusable (a kernel fault, for instance): every
  /// later call in the process fails with it, and only a new process can use the device again.
  bool is_sticky() const noexcept { return is_sticky(code()); }
  /// The same for any `code`: false unless of runtime_category() or driver_category().
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
  /// "file:line" of the check that threw, and what the driver's log said of it; empty if none. @{
  const std::string& where() const noexcept { return where_; }
  const std::string& driver_log() const noexcept { return driver_log_; }  ///@}

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
  /// `what` is the message; `original`, what the host function threw, is kept for original().
  host_function_error(const std::string& what, std::exception_ptr original)
      : std::runtime_error(what), original_(std::move(original)) {}
  const std::exception_ptr& original() const noexcept { return original_; }  ///< What it threw.

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

// memcpy without <cstring> (which alone costs g++ a hundredth of a translation unit).
inline void copy_bytes(void* to, const void* from, std::size_t n) noexcept {
  std::char_traits<char>::copy(static_cast<char*>(to), static_cast<const char*>(from), n);
}

// What the driver logged about the failure at hand, from this thread (core/driver.hpp).
inline std::string take_driver_log();

inline std::string location(const char* file, int line) {
  return file ? fmt("%s:%d", file, line) : std::string();
}

template <class Error>  // throw_error's part independent of `explain` (compiled once per Error)
[[noreturn]] CURT_COLD void throw_explained(std::error_code code, std::string& call,
                                            const char* file, int line, std::string& explanation,
                                            std::string& log) {
  if (cuda_error::is_sticky(code))  // every later call fails: what curt found does not matter
    explanation = "the CUDA context is lost: an earlier kernel or copy failed (a sticky error); "
                  "this call is not the cause, and every later CUDA call in this process fails "
                  "the same way, so the process must be restarted";
  const bool cuda = code.category() == runtime_category() || code.category() == driver_category();
  if (cuda && code.value() == cudaErrorMemoryAllocation)  // the same number in both categories
    throw out_of_memory(code, std::move(call), std::move(explanation), location(file, line),
                        std::move(log));
  throw Error(code, std::move(call), std::move(explanation), location(file, line), std::move(log));
}

/// What throw_error says about a failure, only referred to: a text, or a function returning one
/// (run on the throw path only). One type for all, so throw_error is not compiled per lambda.
struct explainer {
  explainer(const char* t = "") noexcept : text(t) {}             // NOLINT: implicit
  explainer(const std::string& t) noexcept : text(t.c_str()) {}  // NOLINT
  template <class F>  // NOLINTNEXTLINE
  explainer(const F& f) noexcept : function(&f), call(&invoke<F>) {}
  template <class F>
  static std::string invoke(const void* f) { return (*static_cast<const F*>(f))(); }
  std::string operator()() const { return call ? call(function) : std::string(text); }
  const char* text = "";
  const void* function = nullptr;
  std::string (*call)(const void*) = nullptr;
};
/// The throw path of a failed call: reads the driver's log before `explain` (what curt found; it
/// may call CUDA and log more), clears the thread's last error, says when the context is lost, and
/// throws Error (a cuda_error) or, for CUDA's out-of-memory codes, out_of_memory.
template <class Error = cuda_error>
[[noreturn]] CURT_COLD void throw_error(std::error_code code, std::string call, const char* file,
                                        int line, explainer explain = "") {
  std::string log = take_driver_log();
  // A failed runtime call also sets the thread's last error; a non-sticky one is cleared so that
  // the next unrelated check does not report it a second time (only this one: a driver call's
  // failure, reported in the runtime's category, leaves a user's pending error alone).
  if (code.category() == runtime_category() && cudaPeekAtLastError() == code.value())
    (void)cudaGetLastError();
  std::string explanation = cuda_error::is_sticky(code) ? std::string() : explain();
  throw_explained<Error>(code, call, file, line, explanation, log);
}

/// For mistakes curt finds itself, before calling CUDA: no driver log, no last error to clear.
[[noreturn]] CURT_COLD inline void raise(cudaError_t status, std::string call,
                                         std::string explanation, const char* file, int line) {
  throw cuda_error(status, std::move(call), std::move(explanation), location(file, line));
}

/// An argument in a failed call's description: a word ("stream") or a named number ({"device", 1}).
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
  std::string text = fmt("%s(", function);
  const char* separator = "";
  for (const call_argument& a : arguments) {
    text += separator;
    separator = ", ";
    text += a.text ? fmt("%s", a.text) : fmt("%s %lld", a.name, a.value);
  }
  return text + ')';
}

/// Throws unless `status`, from `call`, is success (0): a cudaError_t, a driver result (a CUresult,
/// or its int from curt's own driver calls), or another API's status with status_traits (NCCL's).
template <class Status>
void check(Status status, const char* call, const char* file, int line) {
  if constexpr (std::is_same_v<Status, cudaError_t>) {
    if (CURT_UNLIKELY(status != cudaSuccess))
      throw_error(make_error_code(status), call, file, line);
  } else if constexpr (std::is_same_v<Status, int>) {
    if (CURT_UNLIKELY(status != 0))
      throw_error(std::error_code(status, driver_category()), call, file, line);
  } else {
    static_assert(has_status_traits<Status>::value,
                  "CURT_CHECK takes a cudaError_t or a CUresult; for a CUresult, include "
                  "<curt/driver.hpp> (this header does not include <cuda.h>)");
    using traits = status_traits<Status>;
    if (CURT_UNLIKELY(static_cast<int>(status) != 0))
      throw_error<typename traits::error>(
          std::error_code(static_cast<int>(status), traits::category()), call, file, line,
          [] { return traits::explain(); });
  }
}
/// With the arguments: check(status, "cudaDeviceGetLimit", {{"limit", which}, {"device", ordinal}},
/// __FILE__, __LINE__) (a list, not a lambda per call site: every includer compiles these).
inline void check(cudaError_t status, const char* function,
                  std::initializer_list<call_argument> arguments, const char* file, int line) {
  if (CURT_UNLIKELY(status != cudaSuccess))
    throw_error(make_error_code(status), describe_call(function, arguments), file, line);
}

// Set once a sticky failure in a destructor was reported: one flag for runtime and driver codes.
inline atomic<bool>& sticky_reported() noexcept {
  static atomic<bool> reported{false};
  return reported;
}

/// For destructors: hands `error` to the error handler and never throws. Quiet while the process
/// exits (the runtime unloading, the driver deinitialized: CUDA freed everything itself) and,
/// once the context is lost, after the first report (every destructor fails the same way).
CURT_COLD inline void report(const std::exception& error) noexcept {
  if (auto* e = dynamic_cast<const cuda_error*>(&error)) {
    const std::error_code code = e->code();
    if (code == std::error_code(cudaErrorCudartUnloading, runtime_category()) ||
        code == std::error_code(4 /* CUDA_ERROR_DEINITIALIZED */, driver_category()))
      return;
    if (code.category() == runtime_category() && cudaPeekAtLastError() == code.value())
      (void)cudaGetLastError();
    if (cuda_error::is_sticky(code) && sticky_reported().exchange(true)) return;
  }
  error_handler_slot().load()(error);
}
/// The same for a failed status (a cudaError_t or a driver result's int); nothing on success.
template <class Status>
void report(Status status, const char* call, const char* file, int line) noexcept {
  if (CURT_LIKELY(static_cast<int>(status) == 0)) return;
  try {
    std::error_code code(static_cast<int>(status), std::is_same_v<Status, cudaError_t>
                                                       ? runtime_category()
                                                       : driver_category());
    report(cuda_error(code, call,
                      cuda_error::is_sticky(code)
                          ? "the CUDA context is lost (a sticky error); later failures of this "
                            "kind in destructors are not reported"
                          : std::string(),
                      location(file, line)));
  } catch (...) {  // building the message ran out of host memory: nothing left to do
  }
}

}  // namespace detail

/// Installs the handler for errors curt cannot throw (see error_handler); returns the previous
/// one. The default prints to stderr. A null handler restores the default.
inline error_handler set_error_handler(error_handler handler) noexcept {
  if (!handler) handler = &detail::print_error;
  return detail::error_handler_slot().exchange(handler);
}

/// If `expr` (a cudaError_t or CUresult) fails, throws cuda_error (or out_of_memory) naming it.
#define CURT_CHECK(expr) ::curt::detail::check((expr), #expr, __FILE__, __LINE__)

}  // namespace curt

#include <curt/core/driver.hpp>  // take_driver_log() and driver_category's message()
