// Unified memory hints (curt/unified_memory.hpp): prefetches to the device and the host are
// read back as the range's last prefetch location; advice (preferred location, read-mostly,
// accessed-by) is read back as set and as unset; data stays intact through all of it; a
// prefetch on a capturing stream is refused with a clear error and the capture stays valid
// (a kernel captured after it runs when the graph is launched); a prefetch of memory that is
// not managed is refused by the runtime, explained; on a thread with no current context the
// advice and the queries work and leave none current.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include <kernels.cuh>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/memory_location.hpp>
#include <curt/stream.hpp>
#include <curt/unified_memory.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr unsigned block_size = 256;

curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, std::size_t(block_size)))),
                             dim3(block_size));
}

// Several pages, so that the range spans more than one.
std::size_t random_size() {
  return static_cast<std::size_t>(curt_test::random_ints(1, 1 << 16, 1 << 18)[0]);
}
float random_coefficient() { return curt_test::random_floats(1, 0.5f, 2.0f)[0]; }

void require_values(const curt::managed_buffer<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(got[i] == want[i])) {
      if (bad++ == 0) first = i;
    }
  INFO(bad << " of " << want.size() << " differ; first at " << first);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("prefetches move managed memory and are read back as the last prefetch location") {
  curt::device d(0);
  REQUIRE(d.supports_concurrent_managed_access());
  curt::stream s(d);
  std::size_t n = random_size();
  std::vector<float> x = curt_test::random_floats(n);
  curt::managed_buffer<float> m(d, n);
  std::memcpy(m.data(), x.data(), m.size_bytes());

  CHECK(curt::last_prefetch_location(m).is_none());  // never prefetched

  curt::prefetch(m, curt::memory_location::device(d), s);
  s.synchronize();
  curt::memory_location on_device = curt::last_prefetch_location(m);
  INFO("after a prefetch to the device: " << on_device.describe());
  CHECK(on_device == curt::memory_location::device(d));
  CHECK(on_device.id() == 0);

  // The NUMA node nearest this thread (cuda13-facts: read back with that type).
  curt::prefetch(m, curt::memory_location::host_numa_current(), s);
  s.synchronize();
  curt::memory_location near_host = curt::last_prefetch_location(m);
  INFO("after a prefetch to host_numa_current(): " << near_host.describe());
  CHECK(near_host.is_host());
  CHECK(near_host.type() == cudaMemLocationTypeHostNumaCurrent);

  curt::prefetch(m.data(), m.size_bytes(), curt::memory_location::device(0), s);
  curt::prefetch(m, curt::memory_location::host(), s);
  s.synchronize();
  curt::memory_location on_host = curt::last_prefetch_location(m);
  INFO("after a prefetch to host(): " << on_host.describe());
  CHECK(on_host.is_host());

  require_values(m, x);
}

TEST_CASE("advice is read back as set and as unset, and the data stays intact") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  std::vector<float> x = curt_test::random_floats(n);
  float a = random_coefficient(), b = random_coefficient();
  curt::managed_buffer<float> m(d, n), out(d, n);
  std::memcpy(m.data(), x.data(), m.size_bytes());
  std::memset(out.data(), 0xFF, out.size_bytes());

  SECTION("read-mostly") {
    CHECK_FALSE(curt::is_read_mostly(m));
    curt::advise(m, curt::memory_advice::set_read_mostly);
    CHECK(curt::is_read_mostly(m));
    CHECK(curt::is_read_mostly(m.data(), m.size_bytes()));
    // Read on the device (read-only copies), written into another buffer.
    curt::prefetch(m, curt::memory_location::device(d), s);
    curt::launch(s, config_for(n), curt_test::slow_affine, m.data(), out.data(),
                 static_cast<int>(n), a, b, 0ull);
    s.synchronize();
    curt::advise(m, curt::memory_advice::unset_read_mostly);
    CHECK_FALSE(curt::is_read_mostly(m));
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = a * x[i] + b;
    require_values(out, want);
    require_values(m, x);
  }
  SECTION("preferred location") {
    CHECK(curt::preferred_location(m).is_none());
    curt::advise(m, curt::memory_advice::set_preferred_location, curt::memory_location::device(d));
    curt::memory_location preferred = curt::preferred_location(m);
    INFO("preferred after advising the device: " << preferred.describe());
    CHECK(preferred == curt::memory_location::device(d));
    curt::advise(m, curt::memory_advice::set_preferred_location, curt::memory_location::host());
    preferred = curt::preferred_location(m);
    INFO("preferred after advising the host: " << preferred.describe());
    CHECK(preferred.is_host());
    curt::advise(m, curt::memory_advice::unset_preferred_location, curt::memory_location::host());
    CHECK(curt::preferred_location(m).is_none());
    // The location is ignored for unset: it may be left out too.
    curt::advise(m, curt::memory_advice::set_preferred_location, curt::memory_location::device(d));
    curt::advise(m, curt::memory_advice::unset_preferred_location);
    CHECK(curt::preferred_location(m).is_none());
    require_values(m, x);
  }
  SECTION("accessed by") {
    CHECK_FALSE(curt::accessed_by(m).contains(curt::memory_location::device(d)));
    curt::advise(m, curt::memory_advice::set_accessed_by, curt::memory_location::device(d));
    curt::location_list list = curt::accessed_by(m);
    CHECK(list.contains(curt::memory_location::device(d)));
    CHECK(list.size() >= 1);
    curt::advise(m, curt::memory_advice::unset_accessed_by, curt::memory_location::device(d));
    CHECK_FALSE(curt::accessed_by(m).contains(curt::memory_location::device(d)));
    require_values(m, x);
  }
}

TEST_CASE("a prefetch on a capturing stream is refused and the capture stays valid") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  int count = static_cast<int>(n);
  float a = random_coefficient(), b = random_coefficient();
  std::vector<float> x = curt_test::random_floats(n);
  curt::managed_buffer<float> m(d, n);
  curt::device_buffer<float> in(d, n), out(d, n);
  curt::copy(in, x, s);
  curt::memset(out, 0xFF, s);
  s.synchronize();

  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  curt_test::require_cuda_error(
      [&] { curt::prefetch(m, curt::memory_location::device(d), s); },
      cudaErrorStreamCaptureUnsupported,
      {"curt::prefetch", "being captured", "capture is intact", "device 0"});
  CHECK(s.is_capturing());
  curt::launch(s, config_for(n), curt_test::slow_affine, in.data(), out.data(),
               count, a, b, 0ull);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  std::size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  CHECK(nodes == 1);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
  s.synchronize();
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);

  std::vector<float> back(n);
  curt::copy(back, out, s);
  s.synchronize();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!(back[i] == a * x[i] + b)) ++bad;
  CHECK(bad == 0);
  // The stream works as before: a prefetch outside capture goes through.
  curt::prefetch(m, curt::memory_location::device(d), s);
  s.synchronize();
  CHECK(curt::last_prefetch_location(m) == curt::memory_location::device(d));
}

TEST_CASE("prefetching memory that is not managed is refused by the runtime, explained") {
  curt::device d(0);
  curt::stream s(d);
  curt::device_buffer<float> device(d, 1 << 16);
  // The documented refusal is cudaErrorInvalidValue ("the memory range must refer to managed
  // memory"); the message names the call and, for that status, says what the range must be.
  bool refused = false;
  try {
    curt::prefetch(device, curt::memory_location::host(), s);
  } catch (const curt::cuda_error& error) {
    refused = true;
    INFO("what(): " << error.what());
    CHECK_THAT(error.what(), ContainsSubstring("cudaMemPrefetchAsync"));
    CHECK_THAT(error.what(), ContainsSubstring("host"));
    CHECK(error.status() == cudaErrorInvalidValue);
    if (error.status() == cudaErrorInvalidValue)
      CHECK_THAT(error.what(), ContainsSubstring("managed memory"));
    CHECK_FALSE(error.is_sticky());
  }
  CHECK(refused);
  s.synchronize();  // the stream is unharmed
}

TEST_CASE("on a thread with no current context, advice, range queries and pointer attributes "
          "work and leave none current") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  std::vector<float> x = curt_test::random_floats(n);
  curt::managed_buffer<float> m(d, n);
  std::memcpy(m.data(), x.data(), m.size_bytes());
  curt::prefetch(m, curt::memory_location::device(d), s);
  s.synchronize();
  curt_test::on_fresh_thread([&] {
    REQUIRE(curt_test::current_context() == nullptr);
    CHECK(curt::last_prefetch_location(m) == curt::memory_location::device(d));
    CHECK(curt_test::current_context() == nullptr);
    CHECK_FALSE(curt::is_read_mostly(m));
    CHECK(curt_test::current_context() == nullptr);
    curt::advise(m, curt::memory_advice::set_read_mostly);  // no location: curt passes one
    CHECK(curt_test::current_context() == nullptr);
    CHECK(curt::is_read_mostly(m));
    curt::advise(m, curt::memory_advice::unset_read_mostly);
    CHECK_FALSE(curt::is_read_mostly(m));
    curt::advise(m, curt::memory_advice::set_preferred_location, curt::memory_location::device(d));
    CHECK(curt::preferred_location(m) == curt::memory_location::device(d));
    curt::advise(m, curt::memory_advice::set_accessed_by, curt::memory_location::device(d));
    CHECK(curt::accessed_by(m).contains(curt::memory_location::device(d)));
    CHECK(curt::pointer_attributes(m.data()).kind == curt::memory_kind::managed);
    CHECK(curt_test::current_context() == nullptr);
  });
  require_values(m, x);
}

TEST_CASE("memory locations describe themselves and compare by type and id") {
  curt::device d(0);
  CHECK(curt::memory_location::device(d).describe() == "device 0");
  CHECK(curt::memory_location::host().describe() == "host");
  CHECK(curt::memory_location::host_numa(1).describe() == "host NUMA node 1");
  CHECK(curt::memory_location::device(d) == curt::memory_location::device(0));
  CHECK(curt::memory_location::device(d) != curt::memory_location::host());
  CHECK(curt::memory_location::host_numa(0) != curt::memory_location::host_numa(1));
  cudaMemLocation native = curt::memory_location::device(d).native();
  CHECK(native.type == cudaMemLocationTypeDevice);
  CHECK(native.id == 0);
  curt_test::require_cuda_error([] { (void)curt::memory_location::device(curt::device_count()); },
                                cudaErrorInvalidDevice, {"curt::device"});
}
