// Hardening checks that need no GPU: ceil_div at the edges of its types, the comparison operators
// of version and compute_capability, device_range's iterator category, sticky errors and error
// conditions, where curt's own errors point, the report-once rule of the error handler, and what a
// stream_ref made from a runtime 0 means. Runs in CI also under ASan and UBSan.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/detail/driver.hpp>  // CUresult: error.hpp does not include <cuda.h>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <thread>
#include <type_traits>

namespace {

// ---- ceil_div ---------------------------------------------------------------------------------

static_assert(std::is_same_v<decltype(curt::ceil_div(1, 2)), int>);
static_assert(std::is_same_v<decltype(curt::ceil_div(std::size_t{1}, 2)), std::size_t>);
static_assert(std::is_same_v<decltype(curt::ceil_div(1, 2u)), std::common_type_t<int, unsigned>>);
static_assert(std::is_same_v<decltype(curt::ceil_div(1LL, 2)), long long>);
static_assert(std::is_same_v<decltype(curt::ceil_div(short{1}, short{2})),
                             std::common_type_t<short, short>>);
static_assert(std::is_same_v<decltype(curt::ceil_div(std::uint32_t{1}, std::uint64_t{2})),
                             std::uint64_t>);

// Near INT_MAX: (count + per_block - 1) / per_block would overflow here.
static_assert(curt::ceil_div(INT_MAX, 256) == 8388608);
static_assert(curt::ceil_div(INT_MAX - 1, INT_MAX) == 1);
static_assert(curt::ceil_div(INT_MAX, INT_MAX) == 1);
static_assert(curt::ceil_div(INT_MAX, 1) == INT_MAX);
static_assert(curt::ceil_div(INT_MAX - 255, 256) == 8388607);  // 2^31 - 256 = 256 * 8388607
// Zero and exact multiples.
static_assert(curt::ceil_div(0, 256) == 0);
static_assert(curt::ceil_div(0, 1) == 0);
static_assert(curt::ceil_div(256, 256) == 1);
static_assert(curt::ceil_div(257, 256) == 2);
static_assert(curt::ceil_div(255, 256) == 1);
static_assert(curt::ceil_div(1, 256) == 1);
static_assert(curt::ceil_div(1024, 32) == 32);
// Above 2^32 in size_t.
static_assert(curt::ceil_div(std::size_t{1} << 40, std::size_t{256}) == (std::size_t{1} << 32));
static_assert(curt::ceil_div((std::size_t{1} << 40) + 1, 256) == (std::size_t{1} << 32) + 1);
static_assert(curt::ceil_div(SIZE_MAX, std::size_t{1} << 32) == (std::size_t{1} << 32));
static_assert(curt::ceil_div(SIZE_MAX, SIZE_MAX) == 1);
static_assert(curt::ceil_div(SIZE_MAX - 1, SIZE_MAX) == 1);

// ---- version and compute_capability -----------------------------------------------------------

template <class T>
constexpr bool orders_strictly(T low, T high) {
  return low < high && !(high < low) && high > low && !(low > high) && low <= high &&
         !(high <= low) && high >= low && !(low >= high) && low != high && !(low == high);
}
template <class T>
constexpr bool orders_equal(T a, T b) {
  return a == b && !(a != b) && !(a < b) && !(b < a) && !(a > b) && !(b > a) && a <= b &&
         b <= a && a >= b && b >= a;
}

static_assert(orders_strictly(curt::version{12, 8}, curt::version{13, 0}));
static_assert(orders_strictly(curt::version{13, 0}, curt::version{13, 1}));
static_assert(orders_strictly(curt::version{9, 9}, curt::version{10, 0}));
static_assert(orders_equal(curt::version{13, 0}, curt::version{13, 0}));
static_assert(orders_equal(curt::version::from_encoded(12080), curt::version{12, 8}));

static_assert(orders_strictly(curt::compute_capability{8, 9}, curt::compute_capability{9, 0}));
static_assert(orders_strictly(curt::compute_capability{9, 0}, curt::compute_capability{10, 0}));
static_assert(orders_strictly(curt::compute_capability{8, 0}, curt::compute_capability{8, 6}));
static_assert(orders_equal(curt::compute_capability{9, 0}, curt::compute_capability{9, 0}));

// ---- device_range -----------------------------------------------------------------------------

static_assert(std::is_same_v<std::iterator_traits<curt::device_range::iterator>::iterator_category,
                             std::input_iterator_tag>);
static_assert(std::is_same_v<curt::device_range::iterator::iterator_category,
                             std::input_iterator_tag>);

// ---- the error handler ------------------------------------------------------------------------

std::atomic<int> handled{0};
std::atomic<int> handled_cuda_errors{0};
std::atomic<int> last_status{0};
std::atomic<bool> last_was_sticky{false};

void recording_handler(const std::exception& error) noexcept {
  handled.fetch_add(1);
  if (auto* cuda = dynamic_cast<const curt::cuda_error*>(&error)) {
    handled_cuda_errors.fetch_add(1);
    last_status.store(static_cast<int>(cuda->status()));
    last_was_sticky.store(cuda->is_sticky());
  }
}

class handler_scope {
 public:
  handler_scope() : previous_(curt::set_error_handler(&recording_handler)) {
    handled = 0;
    handled_cuda_errors = 0;
    last_status = 0;
    last_was_sticky = false;
  }
  ~handler_scope() { curt::set_error_handler(previous_); }
  handler_scope(const handler_scope&) = delete;
  handler_scope& operator=(const handler_scope&) = delete;

 private:
  curt::error_handler previous_;
};

}  // namespace

TEST_CASE("ceil_div rounds up at run time as it does at compile time, near the type's limits") {
  // The same values through run-time variables (UBSan would see an overflow here).
  volatile int int_max = INT_MAX;
  int big = int_max;
  CHECK(curt::ceil_div(big, 256) == 8388608);
  CHECK(curt::ceil_div(big - 1, big) == 1);
  CHECK(curt::ceil_div(big, big) == 1);
  volatile std::size_t above = (std::size_t{1} << 33) + 7;
  std::size_t n = above;
  CHECK(curt::ceil_div(n, std::size_t{8}) == (std::size_t{1} << 30) + 1);
  CHECK(curt::ceil_div(n - 7, 8) == (std::size_t{1} << 30));
  auto random = curt_test::random_ints(64, 0, INT_MAX);
  for (int count : random) {
    int per = 1 + count % 1024;
    long long want = (static_cast<long long>(count) + per - 1) / per;
    INFO(count << " / " << per);
    CHECK(curt::ceil_div(count, per) == want);
  }
}

TEST_CASE("is_sticky is true for the errors that lose the context, in both categories") {
  CHECK(curt::cuda_error::is_sticky(curt::make_error_code(cudaErrorIllegalAddress)));
  CHECK(curt::cuda_error::is_sticky(curt::make_error_code(cudaErrorLaunchFailure)));
  CHECK(curt::cuda_error::is_sticky(curt::make_error_code(cudaErrorAssert)));
  CHECK(curt::cuda_error::is_sticky(curt::make_error_code(CUDA_ERROR_ILLEGAL_ADDRESS)));
  CHECK(curt::cuda_error::is_sticky(curt::make_error_code(CUDA_ERROR_LAUNCH_FAILED)));
  CHECK_FALSE(curt::cuda_error::is_sticky(curt::make_error_code(cudaErrorInvalidValue)));
  CHECK_FALSE(curt::cuda_error::is_sticky(curt::make_error_code(cudaErrorMemoryAllocation)));
  CHECK_FALSE(curt::cuda_error::is_sticky(curt::make_error_code(CUDA_ERROR_INVALID_VALUE)));
  CHECK_FALSE(curt::cuda_error::is_sticky(curt::make_error_code(cudaErrorNotReady)));
  // Only CUDA categories: 700 in another category is not a lost context.
  CHECK_FALSE(curt::cuda_error::is_sticky(std::error_code(700, std::generic_category())));
  // Through an exception object too.
  CHECK(curt::cuda_error(cudaErrorIllegalAddress, "call").is_sticky());
  CHECK_FALSE(curt::cuda_error(cudaErrorInvalidValue, "call").is_sticky());
}

TEST_CASE("runtime and driver codes of one meaning compare equal to the same error condition") {
  struct pair {
    cudaError_t runtime;
    CUresult driver;
  };
  const pair same[] = {
      {cudaErrorInvalidValue, CUDA_ERROR_INVALID_VALUE},
      {cudaErrorMemoryAllocation, CUDA_ERROR_OUT_OF_MEMORY},
      {cudaErrorInvalidResourceHandle, CUDA_ERROR_INVALID_HANDLE},
      {cudaErrorIllegalAddress, CUDA_ERROR_ILLEGAL_ADDRESS},
  };
  for (const pair& p : same) {
    INFO("runtime " << int(p.runtime) << ", driver " << int(p.driver));
    std::error_condition condition = curt::make_error_condition(p.runtime);
    CHECK(curt::make_error_code(p.runtime) == condition);
    CHECK(curt::make_error_code(p.driver) == condition);
    CHECK_FALSE(curt::make_error_code(p.driver) != condition);
    // The codes themselves stay apart: they are of different categories.
    CHECK(curt::make_error_code(p.runtime) != curt::make_error_code(p.driver));
    // And neither matches another condition.
    for (const pair& other : same) {
      if (other.runtime == p.runtime) continue;
      std::error_condition different = curt::make_error_condition(other.runtime);
      CHECK(curt::make_error_code(p.runtime) != different);
      CHECK(curt::make_error_code(p.driver) != different);
    }
  }
  // Through the exception's code() as the README shows.
  curt::cuda_error from_driver(curt::make_error_code(CUDA_ERROR_OUT_OF_MEMORY), "cuMemAlloc");
  CHECK(from_driver.from_driver());
  CHECK(from_driver.code() == curt::make_error_condition(cudaErrorMemoryAllocation));
  CHECK(from_driver.status() == cudaErrorMemoryAllocation);
}

TEST_CASE("a sticky error's message says the context is lost and the call is not the cause") {
  auto built = curt_test::require_cuda_error(
      [] {
        curt::detail::throw_error(curt::make_error_code(cudaErrorIllegalAddress),
                                  "cudaMemcpy(somewhere)", "here.cpp", 1);
      },
      cudaErrorIllegalAddress, {"cudaMemcpy(somewhere)", "context is lost", "not the cause"});
  CHECK(built.is_sticky());
  CHECK(built.where() == "here.cpp:1");

  auto checked = curt_test::require_cuda_error([] { CURT_CHECK(cudaErrorIllegalAddress); },
                                               cudaErrorIllegalAddress,
                                               {"context is lost", "not the cause",
                                                "test_hardening.cpp:"});
  CHECK(checked.is_sticky());

  auto driver = curt_test::require_cuda_error([] { CURT_CHECK(CUDA_ERROR_ILLEGAL_ADDRESS); },
                                              cudaErrorIllegalAddress,
                                              {"context is lost", "not the cause"});
  CHECK(driver.from_driver());

  // A non-sticky error does not say so.
  auto plain = curt_test::require_cuda_error([] { CURT_CHECK(cudaErrorInvalidValue); },
                                             cudaErrorInvalidValue, {"invalid argument"});
  CHECK_THAT(plain.what(), !ContainsSubstring("context is lost"));
}

TEST_CASE("errors curt raises itself carry the file and line of the header") {
  auto error = curt_test::require_cuda_error(
      [] { (void)curt::event::to_native(curt::event_flags::interprocess | curt::event_flags::timing); },
      cudaErrorInvalidValue, {"event.hpp:", "interprocess"});
  CHECK_FALSE(error.where().empty());
  CHECK_THAT(error.where(), ContainsSubstring("event.hpp:"));
  // The line number follows the colon.
  std::string where = error.where();
  std::size_t colon = where.rfind(':');
  REQUIRE(colon != std::string::npos);
  REQUIRE(colon + 1 < where.size());
  CHECK(std::stoi(where.substr(colon + 1)) > 0);

  // The same for a use of an owner that holds no handle.
  curt::event empty(curt::no_handle);
  auto no_handle = curt_test::require_cuda_error([&] { (void)empty.get(); },
                                                 cudaErrorInvalidResourceHandle, {"empty"});
  CHECK_FALSE(no_handle.where().empty());
}

TEST_CASE("the error handler gets destructor errors; a sticky one is reported once only") {
  handler_scope scope;

  // A non-sticky error is reported, as a cuda_error with its status.
  curt::detail::report(cudaErrorInvalidValue, "cudaSomething(a)", __FILE__, __LINE__);
  CHECK(handled.load() == 1);
  CHECK(handled_cuda_errors.load() == 1);
  CHECK(last_status.load() == int(cudaErrorInvalidValue));
  CHECK_FALSE(last_was_sticky.load());

  // Success is not reported.
  curt::detail::report(cudaSuccess, "cudaSomething(b)", __FILE__, __LINE__);
  CHECK(handled.load() == 1);

  // The first sticky error is reported (the process-wide flag is reset for the test); the second
  // and third never are.
  curt::detail::sticky_reported().store(false);
  curt::detail::report(cudaErrorIllegalAddress, "cudaFree(first)", __FILE__, __LINE__);
  int after_first = handled.load();
  CHECK(after_first == 2);
  CHECK(last_status.load() == int(cudaErrorIllegalAddress));
  CHECK(last_was_sticky.load());
  curt::detail::report(cudaErrorIllegalAddress, "cudaFree(second)", __FILE__, __LINE__);
  curt::detail::report(cudaErrorLaunchFailure, "cudaFree(third)", __FILE__, __LINE__);
  CHECK(handled.load() == after_first);

  // Non-sticky ones are still reported, each of them.
  curt::detail::report(cudaErrorInvalidValue, "cudaSomething(c)", __FILE__, __LINE__);
  CHECK(handled.load() == after_first + 1);
  CHECK(last_status.load() == int(cudaErrorInvalidValue));
  curt::detail::report(cudaErrorNotReady, "cudaSomething(d)", __FILE__, __LINE__);
  CHECK(handled.load() == after_first + 2);
  CHECK(last_status.load() == int(cudaErrorNotReady));
  CHECK(handled_cuda_errors.load() == handled.load());
}

TEST_CASE("sticky runtime and driver errors share one report: the first of either kind only") {
  handler_scope scope;
  curt::detail::sticky_reported().store(false);
  curt::detail::report(CUDA_ERROR_ILLEGAL_ADDRESS, "cuMemFree(x)", __FILE__, __LINE__);
  CHECK(handled.load() == 1);
  CHECK(last_was_sticky.load());
  curt::detail::report(CUDA_ERROR_ILLEGAL_ADDRESS, "cuMemFree(y)", __FILE__, __LINE__);
  curt::detail::report(CUDA_ERROR_LAUNCH_FAILED, "cuMemFree(z)", __FILE__, __LINE__);
  curt::detail::report(cudaErrorIllegalAddress, "cudaFree(after a driver one)", __FILE__,
                               __LINE__);
  CHECK(handled.load() == 1);
  // A non-sticky driver error still is.
  curt::detail::report(CUDA_ERROR_INVALID_VALUE, "cuMemFree(w)", __FILE__, __LINE__);
  CHECK(handled.load() == 2);
  CHECK(last_status.load() == int(cudaErrorInvalidValue));
}

TEST_CASE("a stream_ref from a runtime 0 handle is the legacy default stream") {
  cudaStream_t zero = nullptr;
  curt::stream_ref from_zero(zero);
  CHECK(from_zero == curt::stream_ref::legacy_default());
  CHECK(from_zero == cudaStreamLegacy);
  CHECK(from_zero != curt::stream_ref::per_thread_default());
  CHECK(from_zero.valid());
  CHECK(from_zero.get() == cudaStreamLegacy);
  cudaStream_t converted = from_zero;
  CHECK(converted == cudaStreamLegacy);
  CHECK(curt::stream_ref::per_thread_default().get() == cudaStreamPerThread);
  // A non-zero handle stays as it is.
  cudaStream_t other = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000});
  CHECK(curt::stream_ref(other) == other);
}

TEST_CASE("a failed call is described with its arguments, words and named numbers") {
  CHECK(curt::detail::describe_call("cudaSomething", {}) == "cudaSomething()");
  CHECK(curt::detail::describe_call("cudaStreamGetAttribute", {"stream", "memory sync domain"}) ==
        "cudaStreamGetAttribute(stream, memory sync domain)");
  CHECK(curt::detail::describe_call("cudaDeviceSetLimit",
                                    {{"limit", 1000}, {"value", 1LL << 40}, {"device", -1}}) ==
        "cudaDeviceSetLimit(limit 1000, value 1099511627776, device -1)");
  try {
    curt::detail::check(cudaErrorInvalidValue, "cudaFuncSetAttribute",
                             {"kernel", {"carveout", 50}}, "here.cpp", 7);
    FAIL("check_call did not throw");
  } catch (const curt::cuda_error& e) {
    CHECK(e.call() == "cudaFuncSetAttribute(kernel, carveout 50)");
    CHECK(e.where() == "here.cpp:7");
    CHECK(e.status() == cudaErrorInvalidValue);
  }
  CHECK_NOTHROW(curt::detail::check(cudaSuccess, "cudaFine", {{"device", 0}}, "here.cpp", 8));
}
