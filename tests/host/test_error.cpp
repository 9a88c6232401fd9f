// Errors without a GPU: categories, messages, the exception hierarchy, CURT_CHECK, destructors.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/detail/driver.hpp>  // CUresult: error.hpp does not include <cuda.h>
#include <curt/error.hpp>

#include <stdexcept>
#include <string>

TEST_CASE("runtime codes have their own category with the CUDA name and text") {
  std::error_code code = curt::make_error_code(cudaErrorInvalidValue);
  CHECK(code.category() == curt::runtime_category());
  CHECK(std::string(code.category().name()) == "cuda_runtime");
  CHECK(code.value() == cudaErrorInvalidValue);
  CHECK_THAT(code.message(), ContainsSubstring("cudaErrorInvalidValue"));
  CHECK_THAT(code.message(), ContainsSubstring(cudaGetErrorString(cudaErrorInvalidValue)));
  CHECK(code != curt::make_error_code(CUDA_ERROR_INVALID_VALUE));  // other category
}

TEST_CASE("driver codes have their own category and a readable message without a driver") {
  std::error_code code = curt::make_error_code(CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(code.category() == curt::driver_category());
  CHECK(std::string(code.category().name()) == "cuda_driver");
  // With a driver the message is the driver's name; without one it is the number.
  std::string message = code.message();
  bool named = message.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos;
  bool numbered = message.find("CUresult 2") != std::string::npos;
  CHECK((named || numbered));
}

TEST_CASE("CURT_CHECK throws cuda_error naming the expression, the status and the location") {
  auto error = curt_test::require_cuda_error(
      [] { CURT_CHECK(cudaErrorInvalidValue); }, cudaErrorInvalidValue,
      {"cudaErrorInvalidValue failed", "invalid argument", "test_error.cpp:"});
  CHECK(error.call() == "cudaErrorInvalidValue");
  CHECK_THAT(error.where(), ContainsSubstring("test_error.cpp:"));
  CHECK_FALSE(error.from_driver());
  CHECK_NOTHROW(CURT_CHECK(cudaSuccess));
  CHECK_NOTHROW(CURT_CHECK(CUDA_SUCCESS));
}

TEST_CASE("CURT_CHECK takes driver results too") {
  try {
    CURT_CHECK(CUDA_ERROR_NOT_SUPPORTED);
    FAIL("no exception");
  } catch (const curt::cuda_error& error) {
    CHECK(error.from_driver());
    CHECK(error.status() == cudaErrorNotSupported);
    CHECK(error.code() == curt::make_error_code(CUDA_ERROR_NOT_SUPPORTED));
  }
}

TEST_CASE("out of memory is its own exception type, still a cuda_error and a system_error") {
  CHECK_THROWS_AS(CURT_CHECK(cudaErrorMemoryAllocation), curt::out_of_memory);
  CHECK_THROWS_AS(CURT_CHECK(CUDA_ERROR_OUT_OF_MEMORY), curt::out_of_memory);
  CHECK_THROWS_AS(CURT_CHECK(cudaErrorMemoryAllocation), std::system_error);
  CHECK_THROWS_AS(CURT_CHECK(cudaErrorMemoryAllocation), std::exception);
  try {
    CURT_CHECK(cudaErrorInvalidDevice);
  } catch (const curt::out_of_memory&) {
    FAIL("an invalid device is not out of memory");
  } catch (const curt::cuda_error& error) {
    CHECK(error.status() == cudaErrorInvalidDevice);
  }
}

TEST_CASE("an explanation from curt goes into the message") {
  curt::cuda_error error(cudaErrorInvalidConfiguration, "curt::launch(kernel)",
                         "block of 1025 threads exceeds the limit of 1024", "file.cpp:7");
  CHECK(std::string(error.what()) ==
        "curt::launch(kernel) failed: cudaErrorInvalidConfiguration (invalid configuration "
        "argument): block of 1025 threads exceeds the limit of 1024 at file.cpp:7");
}

namespace {
int handled = 0;
std::string last_message;
void count_errors(const std::exception& error) noexcept {
  ++handled;
  last_message = error.what();
}
}  // namespace

TEST_CASE("errors in destructors go to a replaceable handler, never throw") {
  handled = 0;
  auto previous = curt::set_error_handler(&count_errors);
  curt::detail::report(cudaErrorInvalidResourceHandle, "cudaStreamDestroy(stream)",
                               "here.cpp", 3);
  CHECK(handled == 1);
  CHECK_THAT(last_message, ContainsSubstring("cudaStreamDestroy(stream) failed"));
  CHECK_THAT(last_message, ContainsSubstring("cudaErrorInvalidResourceHandle"));
  curt::detail::report(cudaSuccess, "cudaStreamDestroy(stream)", "here.cpp", 3);
  CHECK(handled == 1);
  // The runtime unloading at exit is not an error worth reporting.
  curt::detail::report(cudaErrorCudartUnloading, "cudaFree(p)", "here.cpp", 4);
  CHECK(handled == 1);
  CHECK(curt::set_error_handler(previous) == &count_errors);
}
