// Device queries that must behave on any machine, with or without a GPU.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/device.hpp>
#include <curt/version.hpp>

TEST_CASE("device_count never throws and agrees with devices()") {
  int count = -1;
  CHECK_NOTHROW(count = curt::device_count());
  CHECK(count >= 0);
  CHECK(curt::devices().size() == count);
  int seen = 0;
  for (curt::device d : curt::devices()) CHECK(d.ordinal() == seen++);
  CHECK(seen == count);
}

TEST_CASE("no_device_reason is empty exactly when a device is usable") {
  std::string why = curt::no_device_reason();
  CHECK(why.empty() == (curt::device_count() > 0));
  if (!why.empty()) CHECK_THAT(why, ContainsSubstring("no CUDA"));
}

TEST_CASE("an ordinal past the device count names the ordinal and the count") {
  int count = curt::device_count();
  std::string ordinal = std::to_string(count + 3);
  curt_test::require_cuda_error([&] { curt::device d(count + 3); }, cudaErrorInvalidDevice,
                                {("curt::device(" + ordinal + ")").c_str(),
                                 (std::to_string(count) + " CUDA device(s) visible").c_str()});
  curt_test::require_cuda_error([] { curt::device d(-1); }, cudaErrorInvalidDevice,
                                {"curt::device(-1)"});
}

TEST_CASE("versions decode the runtime's encoding") {
  constexpr curt::version v = curt::version::from_encoded(12080);
  STATIC_REQUIRE(v.major == 12);
  STATIC_REQUIRE(v.minor == 8);
  STATIC_REQUIRE(v.encoded() == 12080);
  CHECK(v.to_string() == "12.8");
  CHECK(curt::version{12, 8} < curt::version{13, 0});
  CHECK(curt::runtime_version().encoded() == CUDART_VERSION);
  curt::version driver = curt::driver_version();
  CHECK((driver.encoded() == 0) == (curt::no_device_reason().rfind("no CUDA driver", 0) == 0));
}

TEST_CASE("curt's version: the CMake project's, in macros and as a curt::version") {
  constexpr curt::version v = curt::library_version();
  STATIC_REQUIRE(v.major == CURT_VERSION_MAJOR);
  STATIC_REQUIRE(v.minor == CURT_VERSION_MINOR);
  STATIC_REQUIRE(v.patch == CURT_VERSION_PATCH);
  STATIC_REQUIRE(CURT_VERSION == v.major * 10000 + v.minor * 100 + v.patch);
  CHECK(std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch) ==
        CURT_TEST_PROJECT_VERSION);
  CHECK(curt::version{0, 1, 2}.to_string() == "0.1.2");
  CHECK(curt::version{0, 1, 2} > curt::version{0, 1});
  CHECK(curt::version{0, 1, 2} < curt::version{0, 2});
  CHECK(curt::version{1, 0} > curt::version{0, 9, 9});
  CHECK(curt::version{13, 0} != curt::version{13, 0, 1});
  STATIC_REQUIRE(CURT_CUDA_OLDEST_SUPPORTED <= CURT_CUDA_NEWEST_CHECKED);
  CHECK(CUDART_VERSION >= CURT_CUDA_OLDEST_SUPPORTED);
}

TEST_CASE("compute capabilities compare as numbers") {
  curt::compute_capability hopper{9, 0}, ampere{8, 6};
  CHECK(hopper.as_int() == 90);
  CHECK(ampere < hopper);
  CHECK(hopper >= ampere);
}

TEST_CASE("UUIDs print in nvidia-smi's form") {
  curt::device_uuid id;
  for (int i = 0; i < 16; ++i) id.bytes[i] = static_cast<unsigned char>(0x10 * (i % 16) + i % 7);
  CHECK(id.to_string() == "GPU-00112233-4455-6670-8192-a3b4c5d6e0f1");
}

TEST_CASE("properties of an unchecked ordinal past the device count are an error, not a read") {
  curt::device unchecked = curt::device::from_ordinal_unchecked(curt::device_count() + 2);
  curt_test::require_cuda_error([&] { (void)unchecked.properties(); }, cudaErrorInvalidDevice,
                                {"cudaGetDeviceProperties(device", "CUDA device(s) visible"});
}
