// Real failures from the GPU: type, status and message of each.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/device.hpp>
#include <curt/detail/driver.hpp>

#include <cstring>

TEST_CASE("an invalid device from the runtime is a cuda_error with its call and status") {
  int count = curt::device_count();
  auto error = curt_test::require_cuda_error(
      [&] { CURT_CHECK(cudaSetDevice(count + 7)); }, cudaErrorInvalidDevice,
      {"cudaSetDevice(count + 7) failed", "cudaErrorInvalidDevice", "test_error.cu:"});
  CHECK(error.code() == curt::make_error_code(cudaErrorInvalidDevice));
  // The error does not linger as the thread's last error.
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an invalid value is reported with its status") {
  curt_test::require_cuda_error([] { CURT_CHECK(cudaMemset(nullptr, 0, 16)); },
                                cudaErrorInvalidValue, {"cudaMemset(nullptr, 0, 16)"});
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an absurd allocation throws out_of_memory and leaves the device usable") {
  void* p = nullptr;
  std::size_t absurd = std::size_t(1) << 52;  // 4 PiB
  auto error = curt_test::require_cuda_error<curt::out_of_memory>(
      [&] { CURT_CHECK(cudaMalloc(&p, absurd)); }, cudaErrorMemoryAllocation,
      {"cudaMalloc(&p, absurd) failed", "cudaErrorMemoryAllocation"});
  CHECK(p == nullptr);
  INFO("driver log: " << error.driver_log());
  // The device is still fine: allocate, fill with a random byte, read it back.
  unsigned char byte = static_cast<unsigned char>(1 + curt_test::rng()() % 255);
  CURT_CHECK(cudaMalloc(&p, 4096));
  CURT_CHECK(cudaMemset(p, byte, 4096));
  unsigned char back[4096];
  std::memset(back, 0, sizeof back);
  CURT_CHECK(cudaMemcpy(back, p, sizeof back, cudaMemcpyDeviceToHost));
  CURT_CHECK(cudaFree(p));
  for (unsigned char b : back) REQUIRE(b == byte);
}

TEST_CASE("a failing driver call is a cuda_error in the driver category") {
  CUuuid uuid{};
  try {
    CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, curt::device_count() + 5);
    FAIL("no exception");
  } catch (const curt::cuda_error& error) {
    INFO(error.what());
    CHECK(error.from_driver());
    CHECK(error.code() == curt::make_error_code(CUDA_ERROR_INVALID_DEVICE));
    CHECK_THAT(error.what(), ContainsSubstring("cuDeviceGetUuid failed"));
    CHECK_THAT(error.what(), ContainsSubstring("CUDA_ERROR_INVALID_DEVICE"));
  }
}

TEST_CASE("driver entry points agree with the runtime") {
  CUuuid uuid{};
  CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, 0);
  CHECK(std::memcmp(uuid.bytes, curt::device(0).uuid().bytes.data(), 16) == 0);
}

TEST_CASE("a missing driver symbol names the function") {
  curt_test::require_cuda_error(
      [] { (void)curt::detail::find_driver_function("cuNoSuchFunction", 12000); },
      cudaErrorSymbolNotFound, {"cuNoSuchFunction", "is not provided by this CUDA"});
}

TEST_CASE("a driver function asked for in an ABI older than it names function and version") {
  // cuGreenCtxCreate arrived with CUDA 12.4: there is no 11.0 version of it.
  curt_test::require_cuda_error(
      [] { (void)curt::detail::find_driver_function("cuGreenCtxCreate", 11000); },
      cudaErrorSymbolNotFound, {"cuGreenCtxCreate", "only in an ABI newer than CUDA 11.0"});
}

TEST_CASE("a driver that is older than the version asked for is named as such") {
  curt::version driver = curt::driver_version();
  int too_new = (driver.major + 1) * 1000;
  curt_test::require_cuda_error(
      [&] { (void)curt::detail::find_driver_function("cuFutureFunction", too_new); },
      cudaErrorInsufficientDriver,
      {"cuFutureFunction needs a CUDA", "this driver supports CUDA"});
}
