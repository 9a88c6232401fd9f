// main() of every test executable. GPU tests (CURT_GPU_TEST) first make sure a device can be used,
// and otherwise say why and exit with the skip code, which CTest reports as skipped.
#if __has_include(<catch2/catch_session.hpp>)
#  include <catch2/catch_session.hpp>
#else
#  define CATCH_CONFIG_RUNNER
#  include <catch2/catch.hpp>
#endif

#include <curt/device.hpp>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
#ifdef CURT_GPU_TEST
  std::string why = curt::no_device_reason();
#ifdef CURT_GPU_TEST_MIN_DEVICES
  if (why.empty() && curt::device_count() < CURT_GPU_TEST_MIN_DEVICES)
    why = "needs " + std::to_string(CURT_GPU_TEST_MIN_DEVICES) + " CUDA devices, " +
          std::to_string(curt::device_count()) + " visible";
#endif
  if (!why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return CURT_SKIP_CODE;
  }
#endif
  return Catch::Session().run(argc, argv);
}
