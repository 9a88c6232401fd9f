// Every wrapped device property against the raw runtime calls.
#include <catch.hpp>
#include <isolation.hpp>
#include <expect.hpp>

#include <curt/device.hpp>
#include <curt/detail/driver.hpp>

#include <cstring>
#include <stdexcept>

namespace {
int raw_attribute(cudaDeviceAttr attribute, int ordinal) {
  int value = 0;
  REQUIRE(cudaDeviceGetAttribute(&value, attribute, ordinal) == cudaSuccess);
  return value;
}
}  // namespace

TEST_CASE("device_count and devices() match cudaGetDeviceCount") {
  int raw = 0;
  REQUIRE(cudaGetDeviceCount(&raw) == cudaSuccess);
  CHECK(curt::device_count() == raw);
  CHECK(curt::devices().size() == raw);
  CHECK(curt::no_device_reason().empty());
}

TEST_CASE("properties and attributes match the raw API on every device") {
  for (curt::device d : curt::devices()) {
    int ordinal = d.ordinal();
    cudaDeviceProp raw{};
    REQUIRE(cudaGetDeviceProperties(&raw, ordinal) == cudaSuccess);
    INFO("device " << ordinal << ": " << raw.name);
    CHECK(d.name() == raw.name);
    CHECK(d.compute_capability().major == raw.major);
    CHECK(d.compute_capability().minor == raw.minor);
    CHECK(d.compute_capability().major == raw_attribute(cudaDevAttrComputeCapabilityMajor, ordinal));
    CHECK(std::memcmp(d.uuid().bytes.data(), raw.uuid.bytes, 16) == 0);
    CHECK(d.properties().totalGlobalMem == raw.totalGlobalMem);
    CHECK(d.total_memory() == raw.totalGlobalMem);

    CHECK(d.multiprocessor_count() == raw_attribute(cudaDevAttrMultiProcessorCount, ordinal));
    CHECK(d.warp_size() == raw_attribute(cudaDevAttrWarpSize, ordinal));
    CHECK(d.max_threads_per_block() == raw_attribute(cudaDevAttrMaxThreadsPerBlock, ordinal));
    CHECK(d.max_threads_per_multiprocessor() ==
          raw_attribute(cudaDevAttrMaxThreadsPerMultiProcessor, ordinal));
    CHECK(d.max_blocks_per_multiprocessor() ==
          raw_attribute(cudaDevAttrMaxBlocksPerMultiprocessor, ordinal));
    CHECK(d.max_block_dims()[0] == raw_attribute(cudaDevAttrMaxBlockDimX, ordinal));
    CHECK(d.max_block_dims()[1] == raw_attribute(cudaDevAttrMaxBlockDimY, ordinal));
    CHECK(d.max_block_dims()[2] == raw_attribute(cudaDevAttrMaxBlockDimZ, ordinal));
    CHECK(d.max_grid_dims()[0] == raw_attribute(cudaDevAttrMaxGridDimX, ordinal));
    CHECK(d.max_grid_dims()[1] == raw_attribute(cudaDevAttrMaxGridDimY, ordinal));
    CHECK(d.max_grid_dims()[2] == raw_attribute(cudaDevAttrMaxGridDimZ, ordinal));
    CHECK(d.shared_memory_per_block() ==
          std::size_t(raw_attribute(cudaDevAttrMaxSharedMemoryPerBlock, ordinal)));
    CHECK(d.max_shared_memory_per_block_optin() ==
          std::size_t(raw_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal)));
    CHECK(d.shared_memory_per_multiprocessor() ==
          std::size_t(raw_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal)));
    CHECK(d.registers_per_block() == raw_attribute(cudaDevAttrMaxRegistersPerBlock, ordinal));
    CHECK(d.l2_cache_size() == raw_attribute(cudaDevAttrL2CacheSize, ordinal));
    CHECK(d.persisting_l2_cache_max_size() ==
          raw_attribute(cudaDevAttrMaxPersistingL2CacheSize, ordinal));
    CHECK(d.access_policy_max_window_size() ==
          raw_attribute(cudaDevAttrMaxAccessPolicyWindowSize, ordinal));
    CHECK(d.memory_bus_width() == raw_attribute(cudaDevAttrGlobalMemoryBusWidth, ordinal));
    CHECK(d.supports_cooperative_launch() ==
          (raw_attribute(cudaDevAttrCooperativeLaunch, ordinal) != 0));
    CHECK(d.supports_cluster_launch() == (raw_attribute(cudaDevAttrClusterLaunch, ordinal) != 0));
    CHECK(d.supports_memory_pools() ==
          (raw_attribute(cudaDevAttrMemoryPoolsSupported, ordinal) != 0));
    CHECK(d.supports_managed_memory() == (raw_attribute(cudaDevAttrManagedMemory, ordinal) != 0));
    CHECK(d.supports_concurrent_managed_access() ==
          (raw_attribute(cudaDevAttrConcurrentManagedAccess, ordinal) != 0));
    CHECK(d.supports_stream_priorities() ==
          (raw_attribute(cudaDevAttrStreamPrioritiesSupported, ordinal) != 0));
    CHECK(d.is_integrated() == (raw_attribute(cudaDevAttrIntegrated, ordinal) != 0));

    // Generic and typed attributes.
    CHECK(d.attribute(cudaDevAttrL2CacheSize) == raw_attribute(cudaDevAttrL2CacheSize, ordinal));
    bool cooperative = d.attribute<cudaDevAttrCooperativeLaunch>();
    static_assert(std::is_same_v<decltype(d.attribute<cudaDevAttrCooperativeLaunch>()), bool>);
    static_assert(std::is_same_v<decltype(d.attribute<cudaDevAttrWarpSize>()), int>);
    CHECK(cooperative == (raw_attribute(cudaDevAttrCooperativeLaunch, ordinal) != 0));
    CHECK(d.attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>() ==
          raw_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));

    char bus[32] = {};
    REQUIRE(cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) == cudaSuccess);
    CHECK(d.pci_bus_id() == bus);
    CHECK(d.pci_bus_id().size() >= 7);
  }
}

TEST_CASE("an invalid attribute id is a cuda_error naming the attribute and device") {
  curt::device d(0);
  curt_test::require_cuda_error([&] { (void)d.attribute(static_cast<cudaDeviceAttr>(100000)); },
                                cudaErrorInvalidValue,
                                {"cudaDeviceGetAttribute(attribute 100000, device 0)"});
}

TEST_CASE("memory info matches cudaMemGetInfo on the current device") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  curt::memory_info info = d.memory_info();
  CHECK(info.total == total);
  CHECK(info.total == d.total_memory());
  CHECK(info.free <= info.total);
  CHECK(info.free > 0);
}

TEST_CASE("limits read and write what the raw API sees, and bad ones are errors") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::size_t raw = 0;
  REQUIRE(cudaDeviceGetLimit(&raw, cudaLimitStackSize) == cudaSuccess);
  CHECK(d.limit(cudaLimitStackSize) == raw);
  std::size_t wanted = raw + 1024 * (1 + curt_test::rng()() % 4);
  d.set_limit(cudaLimitStackSize, wanted);
  std::size_t now = 0;
  REQUIRE(cudaDeviceGetLimit(&now, cudaLimitStackSize) == cudaSuccess);
  CHECK(now >= wanted);  // the runtime may round up
  CHECK(d.limit(cudaLimitStackSize) == now);
  d.set_limit(cudaLimitStackSize, raw);
  auto error = curt_test::require_cuda_error(
      [&] { d.set_limit(static_cast<cudaLimit>(1000), 1); }, cudaErrorInvalidValue,
      {"cudaDeviceSetLimit(limit 1000, value 1, device 0)"});
  // The driver logs which of its functions refused (CUDA 12.9+ error log).
  CHECK_THAT(error.driver_log(), ContainsSubstring("cuCtxSetLimit"));
  CHECK_THAT(error.what(), ContainsSubstring("driver log: "));
}

TEST_CASE("device_guard pushes the device's primary context and restores exactly what was current") {
  // On a thread that never chose a device: no context before, the device's primary context
  // inside, none after (also when the scope is left by an exception). Noted on the thread and
  // checked here: Catch2's assertions are for the test thread.
  const int last = curt::device_count() - 1;
  const CUcontext unset = reinterpret_cast<CUcontext>(1);  // not a context: the thread did not run
  CUcontext before = unset, inside = nullptr, after = unset, after_throw = unset, primary = nullptr;
  int device_inside = -1;
  curt_test::on_fresh_thread([&] {
    before = curt_test::current_context();
    {
      curt::device_guard guard{curt::device(last)};
      inside = curt_test::current_context();
      device_inside = curt::current_device().ordinal();
    }
    after = curt_test::current_context();
    try {
      curt::device_guard guard{curt::device(last)};
      throw std::runtime_error("leave the scope early");
    } catch (const std::runtime_error&) {
    }
    after_throw = curt_test::current_context();
  });
  CUdevice device = 0;
  CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, last);
  CURT_DRIVER_CALL(cuDevicePrimaryCtxRetain, 7000, &primary, device);
  CURT_DRIVER_CALL(cuDevicePrimaryCtxRelease, 11000, device);
  CHECK(before == nullptr);
  CHECK(inside == primary);
  CHECK(device_inside == last);
  CHECK(after == nullptr);
  CHECK(after_throw == nullptr);

  // Where a context of the device is current already, the guard changes nothing.
  REQUIRE(cudaSetDevice(last) == cudaSuccess);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // makes the primary context current
  CUcontext current = curt_test::current_context();
  REQUIRE(current == primary);
  {
    curt::device_guard guard{curt::device(last)};
    CHECK(curt_test::current_context() == current);
  }
  CHECK(curt_test::current_context() == current);
  // set_current_device is the one call that changes the current device.
  curt::set_current_device(curt::device(0));
  int raw = -1;
  REQUIRE(cudaGetDevice(&raw) == cudaSuccess);
  CHECK(raw == 0);
}

TEST_CASE("synchronize and the stream priority range match the raw API") {
  curt::device d(0);
  CHECK_NOTHROW(d.synchronize());
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  int least = 0, greatest = 0;
  REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
  auto range = d.stream_priority_range();
  CHECK(range.first == greatest);
  CHECK(range.second == least);
}

TEST_CASE("runtime and driver versions match the raw API and the driver entry points") {
  int runtime = 0, driver = 0;
  REQUIRE(cudaRuntimeGetVersion(&runtime) == cudaSuccess);
  REQUIRE(cudaDriverGetVersion(&driver) == cudaSuccess);
  CHECK(curt::runtime_version().encoded() == runtime);
  CHECK(curt::driver_version().encoded() == driver);
  CHECK(curt::driver_version() >= curt::runtime_version());
  int from_driver = 0;
  CURT_DRIVER_CALL(cuDriverGetVersion, 2020, &from_driver);
  CHECK(from_driver == driver);
}
