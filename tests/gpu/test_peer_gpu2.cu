// Two devices (include/curt/peer.hpp): peer access queries and attributes, enable / disable /
// peer_access_scope and the state they leave (scopes overlapping without nesting, on one thread
// and on two, in a green context), peer copies both ways (with and without peer access), a kernel
// on device 0 reading and atomically updating device 1's memory, a pool of device 1 made
// accessible to device 0, the context rule on a fresh thread, and the errors.
//
// Labelled gpu2: main() exits with the skip code where fewer than two devices are visible.
// Tests that need a peer path between devices 0 and 1 say so and return where there is none.
#include <catch.hpp>
#include <isolation.hpp>
#include <expect.hpp>

#include <curt/copy.hpp>
#include <curt/detail/driver.hpp>
#include <curt/device.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/green_context.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/peer.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using curt_test::child_result;
using curt_test::current_context;
using curt_test::on_fresh_thread;
using curt_test::primary_active;
using curt_test::run_self;
using curt_test::under_compute_sanitizer;

// ---- device side ------------------------------------------------------------------------------

// local[i] = a * remote[i] + b: remote lives on another device.
__global__ void read_remote(const float* remote, float* local, int n, float a, float b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) local[i] = a * remote[i] + b;
}

// remote[i] = local[i] - c: writes another device's memory.
__global__ void write_remote(const float* local, float* remote, int n, float c) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) remote[i] = local[i] - c;
}

// Adds every value into remote_sum[i % buckets] atomically: remote_sum lives on another device.
__global__ void atomic_into_remote(const int* values, int n, int* remote_sum, int buckets) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(&remote_sum[i % buckets], values[i]);
}

// ---- host side --------------------------------------------------------------------------------

constexpr int block_size = 256;
curt::launch_config config_for(int n) {
  return curt::launch_config(dim3(static_cast<unsigned>((n + block_size - 1) / block_size)),
                             dim3(block_size));
}
int random_size() { return curt_test::random_ints(1, 5000, 50000)[0]; }
float random_coefficient() { return curt_test::random_floats(1, 0.5f, 2.0f)[0]; }

bool peer_path() {
  return curt::can_access_peer(curt::device(0), curt::device(1)) &&
         curt::can_access_peer(curt::device(1), curt::device(0));
}

// Copies a device range back on its own device's stream (pool memory of one device need not be
// accessible in another device's context, where a synchronous copy on a thread without a
// context would run).
template <class T, class Range>
std::vector<T> download(const Range& range, curt::stream_ref stream) {
  std::vector<T> host(range.size());
  curt::copy(host, range, stream);
  stream.synchronize();
  return host;
}

// Whether devices 0 and 1 have a peer path both ways; where not, warns that the test case has
// nothing to do and why (`needed_for` says what it needs the path for).
bool peer_path_or_warn(const char* needed_for) {
  if (peer_path()) return true;
  WARN("devices 0 and 1 have no peer path" << needed_for);
  return false;
}

// Random inputs of write_remote then read_remote (device 0's kernels on memory of device 1):
// x, the coefficients, and what comes back, a * (x - c) + b.
struct remote_round_trip {
  int n = random_size();
  std::size_t count = static_cast<std::size_t>(n);
  float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  std::vector<float> x = curt_test::random_floats(count, 5.0f, 10.0f);  // no result near 0
  std::vector<float> want() const {
    std::vector<float> w(count);
    for (std::size_t i = 0; i < count; ++i) w[i] = a * (x[i] - c) + b;
    return w;
  }
};

// Device 0's kernels write r's x, less c, into fresh memory of device 1 and read it back
// (write_remote, read_remote): what they computed, for r.want(). Needs peer access 0 -> 1, without
// which the kernels fault (a sticky error: device 0's context is lost).
std::vector<float> round_trip_through_device1(const remote_round_trip& r) {
  curt::device d0(0), d1(1);
  curt::stream s0(d0);
  curt::device_buffer<float> in(d0, r.count), out(d0, r.count), remote(d1, r.count);
  curt::copy(in, r.x, s0);
  curt::memset(out, 0xFF, s0);
  curt::launch(s0, config_for(r.n), write_remote, static_cast<const float*>(in.data()),
               remote.data(), r.n, r.c);
  curt::launch(s0, config_for(r.n), read_remote, static_cast<const float*>(remote.data()),
               out.data(), r.n, r.a, r.b);
  return download<float>(out, s0);
}

void wait_until(const std::atomic<bool>& flag) {
  while (!flag.load()) std::this_thread::yield();
}

void thread_require(bool ok, const char* what, int line) {
  if (!ok) throw std::runtime_error("line " + std::to_string(line) + ": required " + what);
}
#define THREAD_REQUIRE(...) thread_require(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __LINE__)

constexpr const char* child_test_name = "peer queries and access from device 1 (child)";
constexpr const char* child_marker = "PEER-CHILD-REACHED-ITS-END";

}  // namespace

TEST_CASE("peer access queries, link attributes and atomic capabilities") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d0(0), d1(1);
  int raw = -1;
  REQUIRE(cudaDeviceCanAccessPeer(&raw, 0, 1) == cudaSuccess);
  CHECK(curt::can_access_peer(d0, d1) == (raw != 0));
  CHECK_FALSE(curt::can_access_peer(d0, d0));  // a device needs no peer access to itself

  const curt::peer_link link = curt::peer_attributes(d0, d1);
  int raw_rank = -1, raw_atomics = -1;
  REQUIRE(cudaDeviceGetP2PAttribute(&raw_rank, cudaDevP2PAttrPerformanceRank, 0, 1) == cudaSuccess);
  REQUIRE(cudaDeviceGetP2PAttribute(&raw_atomics, cudaDevP2PAttrNativeAtomicSupported, 0, 1) ==
          cudaSuccess);
  CHECK(link.performance_rank == raw_rank);
  CHECK(link.native_atomics == (raw_atomics != 0));
  CHECK(link.access_supported == (raw != 0));
  CHECK(curt::peer_attribute(d0, d1, cudaDevP2PAttrPerformanceRank) == raw_rank);
  std::printf("link 0 -> 1: rank %d, access %d, native atomics %d, partial atomics %d, arrays %d\n",
              link.performance_rank, int(link.access_supported), int(link.native_atomics),
              int(link.partial_native_atomics), int(link.array_access));

  const unsigned add = curt::peer_atomic_capabilities(d0, d1, cudaAtomicOperationIntegerAdd);
  const unsigned cas = curt::peer_atomic_capabilities(d0, d1, cudaAtomicOperationCAS);
  std::printf("atomic capabilities 0 -> 1: integer add 0x%x, CAS 0x%x\n", add, cas);
  // Every operation, curt against the raw query. (Driver 580 on an NVLink H200 pair reports full
  // native atomics and a mask of 0 for each operation: the mask is no function of the attribute.)
  for (int o = cudaAtomicOperationIntegerAdd; o <= cudaAtomicOperationFloatMax; ++o) {
    const auto op = static_cast<cudaAtomicOperation>(o);
    unsigned raw_mask = 0xdeadbeefu;
    REQUIRE(cudaDeviceGetP2PAtomicCapabilities(&raw_mask, &op, 1, 0, 1) == cudaSuccess);
    CHECK(raw_mask != 0xdeadbeefu);
    CHECK(curt::peer_atomic_capabilities(d0, d1, op) == raw_mask);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("enable and disable are idempotent, and peer_access_scope disables only what it "
          "enabled") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": nothing to enable")) return;
  curt::device d0(0), d1(1);
  // Observed on a fresh thread (no context), asserted here.
  std::vector<int> answers;
  std::vector<std::string> broken;
  on_fresh_thread([&] {
    auto step = [&](const char* what) {
      if (current_context() != nullptr) {
        broken.push_back(std::string(what) + ": left a context current");
        CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
      }
      if (cudaGetLastError() != cudaSuccess) broken.push_back(std::string(what) + ": left an error");
    };
    (void)curt::disable_peer_access(d0, d1);  // a known start, whatever ran before
    step("disable (start)");
    answers.push_back(curt::enable_peer_access(d0, d1));   // 1: enabled now
    step("enable");
    answers.push_back(curt::enable_peer_access(d0, d1));   // 0: was enabled
    step("enable again");
    answers.push_back(curt::disable_peer_access(d0, d1));  // 1: was enabled
    step("disable");
    answers.push_back(curt::disable_peer_access(d0, d1));  // 0: was not
    step("disable again");
    {
      curt::peer_access_scope outer(d0, d1);
      answers.push_back(outer.enabled_here());  // 1
      {
        curt::peer_access_scope inner(d0, d1);
        answers.push_back(inner.enabled_here());  // 0
      }
      answers.push_back(curt::enable_peer_access(d0, d1));  // 0: the inner scope left it on
    }
    step("scopes");
    answers.push_back(curt::disable_peer_access(d0, d1));  // 0: the outer scope disabled it
    // Access enabled by someone else outlives a scope.
    answers.push_back(curt::enable_peer_access(d0, d1));  // 1
    { curt::peer_access_scope scope(d0, d1); }
    answers.push_back(curt::disable_peer_access(d0, d1));  // 1: still on after the scope
    step("a scope inside access enabled before");
  });
  for (const std::string& what : broken) FAIL_CHECK(what);
  const std::vector<int> want = {1, 0, 1, 0, 1, 0, 0, 0, 1, 1};
  CHECK(answers == want);
}

// Scopes that overlap without nesting: the first ends while the second is alive. Before the
// count, the first disabled the access it had enabled, and the second's kernels faulted.
TEST_CASE("peer_access_scopes ended in creation order keep the access until the last ends") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": nothing to enable")) return;
  curt::device d0(0), d1(1);
  const remote_round_trip r;
  for (int round = 0; round < 2; ++round) {
    const bool outside = round == 1;  // enabled before the scopes, by enable_peer_access
    INFO((outside ? "access enabled outside the scopes" : "access enabled by the first scope"));
    (void)curt::disable_peer_access(d0, d1);
    if (outside) REQUIRE(curt::enable_peer_access(d0, d1));
    std::optional<curt::peer_access_scope> first(std::in_place, d0, d1);
    std::optional<curt::peer_access_scope> second(std::in_place, d0, d1);
    CHECK(first->enabled_here() == !outside);
    CHECK_FALSE(second->enabled_here());
    first.reset();  // the second is alive
    // Still on: enabling finds it on (were it off, this turns it on: no fault below).
    CHECK_FALSE(curt::enable_peer_access(d0, d1));
    curt_test::require_close_all(round_trip_through_device1(r), r.want());
    second.reset();
    // Off again where the first scope enabled it; on where it was enabled outside the scopes.
    CHECK(curt::disable_peer_access(d0, d1) == outside);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

// A green context shares its device's primary context's peer access (seen on the H200: a scope
// of the primary context that ended turned the access off under a green context's scope too).
TEST_CASE("a peer_access_scope made in a green context counts with the primary context's") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": nothing to enable")) return;
  curt::device d0(0), d1(1);
  const remote_round_trip r;
  (void)curt::disable_peer_access(d0, d1);
  curt::green_context gc(d0, curt::device_sm_resource(d0).split(1, 0).group(0));
  std::optional<curt::peer_access_scope> first(std::in_place, d0, d1);  // the primary context's
  REQUIRE(first->enabled_here());
  std::vector<float> got;
  bool still_on = false;
  {
    curt::detail::context_scope in(gc.context());  // as a library working in the green context
    std::optional<curt::peer_access_scope> second(std::in_place, d0, d1);
    CHECK_FALSE(second->enabled_here());
    first.reset();  // the green context's scope is alive: the access stays on
    still_on = !curt::enable_peer_access(d0, d1);  // were it off, this turns it on: no fault
    got = round_trip_through_device1(r);           // device 0's kernels, in the green context
    second.reset();
  }
  CHECK(still_on);
  curt_test::require_close_all(got, r.want());
  INFO("the last scope, the green context's, turned off what the first enabled");
  CHECK_FALSE(curt::disable_peer_access(d0, d1));
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("peer_access_scopes on two threads: the first to end leaves the other its access") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": nothing to enable")) return;
  curt::device d0(0), d1(1);
  (void)curt::disable_peer_access(d0, d1);
  const remote_round_trip r;
  std::atomic<bool> a_made{false}, b_made{false}, a_ended{false};
  bool a_enabled = false, b_enabled = true, on_in_b = false;
  std::vector<float> got;
  std::string a_threw, b_threw;
  std::thread a([&] {
    try {
      curt::peer_access_scope scope(d0, d1);
      a_enabled = scope.enabled_here();
      a_made = true;
      wait_until(b_made);
    } catch (const std::exception& e) {
      a_threw = e.what();
    }
    a_made = true;
    a_ended = true;
  });
  std::thread b([&] {
    try {
      wait_until(a_made);
      curt::peer_access_scope scope(d0, d1);
      b_enabled = scope.enabled_here();
      b_made = true;
      wait_until(a_ended);
      on_in_b = !curt::enable_peer_access(d0, d1);  // were it off, this turns it on: no fault
      got = round_trip_through_device1(r);
    } catch (const std::exception& e) {
      b_threw = e.what();
    }
    b_made = true;
  });
  a.join();
  b.join();
  CHECK(a_threw.empty());
  CHECK(b_threw.empty());
  CHECK(a_enabled);
  CHECK_FALSE(b_enabled);
  CHECK(on_in_b);  // a ended, b alive: still on
  curt_test::require_close_all(got, r.want());
  CHECK_FALSE(curt::disable_peer_access(d0, d1));  // the last scope disabled what a enabled
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a user's context stays current through enable and disable") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn("")) return;
  curt::device d0(0), d1(1);
  CUcontext before = nullptr, after_enable = nullptr, after_disable = nullptr;
  bool enabled = false, disabled = false;
  on_fresh_thread([&] {
    curt::device_guard on_one(d1);  // device 1's context current, as a user's would be
    before = current_context();
    (void)curt::disable_peer_access(d0, d1);
    enabled = curt::enable_peer_access(d0, d1);
    after_enable = current_context();
    disabled = curt::disable_peer_access(d0, d1);
    after_disable = current_context();
  });
  REQUIRE(before != nullptr);
  CHECK(after_enable == before);
  CHECK(after_disable == before);
  CHECK(enabled);
  CHECK(disabled);
}

TEST_CASE("peer copies both ways, without and with peer access, match the data") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d0(0), d1(1);
  const bool path = peer_path();
  for (int round = 0; round < 2; ++round) {
    const bool with_access = round == 1;
    if (with_access && !path) break;
    INFO((with_access ? "with peer access" : "without peer access"));
    if (path) {
      (void)curt::disable_peer_access(d0, d1);
      (void)curt::disable_peer_access(d1, d0);
    }
    std::optional<curt::peer_access_scope> access01, access10;
    if (with_access) {
      access01.emplace(d0, d1);
      access10.emplace(d1, d0);
    }
    const std::size_t n = static_cast<std::size_t>(random_size());
    const std::vector<float> x = curt_test::random_floats(n, -100.0f, 100.0f);
    const std::vector<float> y = curt_test::random_floats(n, -100.0f, 100.0f);
    curt::stream s0(d0), s1(d1);
    curt::device_buffer<float> a0(d0, n), b0(d0, n), a1(d1, n), b1(d1, n);
    curt::memset(b0, 0xFF, s0);  // poisoned: NaN until a copy writes it
    curt::memset(a1, 0xFF, s1);
    curt::copy(a0, x, s0);
    curt::copy(b1, y, s1);
    s1.synchronize();
    curt::copy(a1, a0, s0);  // 0 -> 1 on device 0's stream
    s0.synchronize();
    curt::copy(b0, b1, s1);  // 1 -> 0 on device 1's stream
    s1.synchronize();
    CHECK(download<float>(a1, s1) == x);
    CHECK(download<float>(b0, s0) == y);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a kernel on device 0 reads, writes and atomically updates device 1's memory") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": kernels cannot address each other's memory")) return;
  curt::device d0(0), d1(1);
  const curt::peer_link link = curt::peer_attributes(d0, d1);
  curt::peer_access_scope access(d0, d1);
  const int n = random_size();
  const std::size_t count = static_cast<std::size_t>(n);
  const float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  // x in [5, 10]: a * x + b >= 3 and a * x + b - c >= 1, so no result is near zero, where the
  // kernel's fused multiply-add (nvcc contracts a * x + b) and the CPU's two roundings could
  // differ by more than the relative tolerance.
  const std::vector<float> x = curt_test::random_floats(count, 5.0f, 10.0f);
  curt::stream s0(d0), s1(d1);
  curt::device_buffer<float> remote(d1, count), remote_out(d1, count), local(d0, count);
  curt::copy(remote, x, s1);
  curt::memset(remote_out, 0xFF, s1);
  curt::memset(local, 0xFF, s0);
  s0.wait(s1);  // device 1's data is there before device 0's kernel reads it
  curt::launch(s0, config_for(n), read_remote, remote.data(), local.data(), n, a, b);
  curt::launch(s0, config_for(n), write_remote, static_cast<const float*>(local.data()),
               remote_out.data(), n, c);
  s0.synchronize();
  const std::vector<float> got_local = download<float>(local, s0);
  const std::vector<float> got_remote = download<float>(remote_out, s1);
  std::vector<float> want_local(count), want_remote(count);
  for (std::size_t i = 0; i < count; ++i) {
    want_local[i] = a * x[i] + b;
    want_remote[i] = want_local[i] - c;
  }
  curt_test::require_close_all(got_local, want_local);
  curt_test::require_close_all(got_remote, want_remote);

  if (!link.native_atomics) {
    WARN("the link 0 -> 1 has no native atomics: the atomic part is not run");
    return;
  }
  const int buckets = curt_test::random_ints(1, 3, 64)[0];
  const std::vector<int> values = curt_test::random_ints(count, -1000, 1000);
  const std::vector<int> start = curt_test::random_ints(static_cast<std::size_t>(buckets), -50, 50);
  curt::device_buffer<int> v0(d0, count), sums1(d1, static_cast<std::size_t>(buckets));
  curt::copy(v0, values, s0);
  curt::copy(sums1, start, s1);
  s0.wait(s1);
  curt::launch(s0, config_for(n), atomic_into_remote, static_cast<const int*>(v0.data()), n,
               sums1.data(), buckets);
  s0.synchronize();
  std::vector<int> want = start;
  for (std::size_t i = 0; i < count; ++i) want[i % std::size_t(buckets)] += values[i];
  CHECK(download<int>(sums1, s1) == want);
}

TEST_CASE("a pool on device 1, made accessible to device 0, serves a kernel on device 0") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": a pool of one cannot be accessible to the other")) return;
  curt::device d0(0), d1(1);
  // Pool access is apart from peer access: it works with peer access disabled.
  (void)curt::disable_peer_access(d0, d1);
  curt::memory_pool pool(curt::memory_pool_properties::device(d1));
  CHECK(pool.access(d1) == curt::pool_access::read_write);
  CHECK(pool.access(d0) == curt::pool_access::none);
  pool.set_access(d0, curt::pool_access::read_write);
  CHECK(pool.access(d0) == curt::pool_access::read_write);

  const int n = random_size();
  const std::size_t count = static_cast<std::size_t>(n);
  const float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  const std::vector<float> x = curt_test::random_floats(count, 5.0f, 10.0f);  // no result near 0
  curt::stream s0(d0), s1(d1);
  std::vector<float> got_in, got_out;
  {
    curt::async_buffer<float> in = pool.allocate<float>(count, s1);
    curt::async_buffer<float> out = pool.allocate<float>(count, s1);
    curt::copy(in, x, s1);
    curt::memset(out, 0xFF, s1);
    curt::device_buffer<float> local(d0, count);
    curt::memset(local, 0xFF, s0);
    s0.wait(s1);
    curt::launch(s0, config_for(n), read_remote, static_cast<const float*>(in.data()),
                 local.data(), n, a, b);
    curt::launch(s0, config_for(n), write_remote, static_cast<const float*>(local.data()),
                 out.data(), n, c);
    s1.wait(s0);  // the pool's buffers are freed on s1: after device 0's kernels
    got_in = download<float>(local, s0);
    got_out = download<float>(out, s1);
  }
  s1.synchronize();
  std::vector<float> want_in(count), want_out(count);
  for (std::size_t i = 0; i < count; ++i) {
    want_in[i] = a * x[i] + b;
    want_out[i] = want_in[i] - c;
  }
  curt_test::require_close_all(got_in, want_in);
  curt_test::require_close_all(got_out, want_out);
  pool.set_access(d0, curt::pool_access::none);
  CHECK(pool.access(d0) == curt::pool_access::none);
}

// Programming Guide 4.2.5.6: graph memory of one device, mapped for another's kernels.
// [no-memcheck]: memcheck 13.0 does not follow graph memory nodes ("Unsupported node type") and
// reports device 0's kernels' accesses to this memory as invalid (seen on the H200s).
TEST_CASE("a graph's memory on device 1, mapped for device 0, serves device 0's kernel nodes",
          "[no-memcheck]") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": graph memory of one cannot be mapped for the other")) return;
  curt::device d0(0), d1(1);
  (void)curt::disable_peer_access(d0, d1);  // the mapping is apart from peer access
  const remote_round_trip r;
  const int n = r.n;

  curt::stream s0(d0);
  curt::device_buffer<float> in(d0, r.count), out(d0, r.count);
  curt::copy(in, r.x, s0);
  curt::graph g = curt::graph::create();
  // Device 1 is resident (its entry is ignored), device 0 is named twice (once counts).
  auto remote = curt::add_allocation_node<float>(g, {}, d1, r.count, {d0, d1, d0});
  REQUIRE(remote.data() != nullptr);
  curt::graph_node written, read;
  {
    curt::device_guard on_device0(d0);  // kernel nodes run on the device they are added for
    written = curt::add_kernel_node(g, {remote}, config_for(n), write_remote,
                                    static_cast<const float*>(in.data()), remote.data(), n, r.c);
    read = curt::add_kernel_node(g, {written}, config_for(n), read_remote,
                                 static_cast<const float*>(remote.data()), out.data(), n, r.a, r.b);
  }
  (void)curt::add_free_node(g, {read}, remote);
  curt::graph_exec exec = g.instantiate();
  for (int launch = 0; launch < 2; ++launch) {  // the mapping holds at every launch
    curt::memset(out, 0xFF, s0);
    exec.launch(s0);
    curt_test::require_close_all(download<float>(out, s0), r.want());
  }

  // A device that does not exist is refused before CUDA adds the node, and the graph is unchanged.
  const std::size_t nodes = g.node_count();
  const curt::device missing = curt::device::from_ordinal_unchecked(curt::device_count() + 3);
  curt_test::require_any_cuda_error(
      [&] { (void)curt::add_allocation_node<float>(g, {}, d1, r.count, {missing}); },
      {"cudaDeviceCanAccessPeer", std::to_string(missing.ordinal()).c_str()});
  CHECK(g.node_count() == nodes);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// racecheck 13.0 says "Internal Sanitizer Error: Detected a failure to track a kernel launch"
// for this test alone (run test case by test case), and counts it as a hazard; the test passes.
TEST_CASE("a captured pool allocation keeps the access its pool gave when it was captured",
          "[no-memcheck][no-racecheck]") {
  REQUIRE(curt::device_count() >= 2);
  if (!peer_path_or_warn(": a pool of one cannot be accessible to the other")) return;
  curt::device d0(0), d1(1);
  (void)curt::disable_peer_access(d0, d1);
  const remote_round_trip r;
  const int n = r.n;

  curt::memory_pool pool(curt::memory_pool_properties::device(d1));
  pool.set_access(d0, curt::pool_access::read_write);
  curt::stream s0(d0), s1(d1);
  curt::device_buffer<float> in(d0, r.count), out(d0, r.count);
  curt::copy(in, r.x, s0);
  s0.synchronize();
  curt::capture_scope scope(s1);
  {
    curt::async_buffer<float> remote = pool.allocate<float>(r.count, s1);  // an allocation node
    s0.wait(s1);  // device 0's stream joins the capture
    curt::launch(s0, config_for(n), write_remote, static_cast<const float*>(in.data()),
                 remote.data(), n, r.c);
    curt::launch(s0, config_for(n), read_remote, static_cast<const float*>(remote.data()),
                 out.data(), n, r.a, r.b);
    s1.wait(s0);  // the free node (the buffer's destructor) comes after device 0's kernels
  }
  curt::graph g = scope.end();
  // Taking the access away now changes nothing for the captured allocation (4.2.5.6.2).
  pool.set_access(d0, curt::pool_access::none);
  curt::graph_exec exec = g.instantiate();
  curt::memset(out, 0xFF, s0);
  s0.synchronize();
  exec.launch(s1);
  s1.synchronize();
  curt_test::require_close_all(download<float>(out, s0), r.want());
}

TEST_CASE("peer errors say what is wrong", "[api-error]") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d0(0), d1(1);
  const int count = curt::device_count();
  curt_test::require_cuda_error([&] { (void)curt::enable_peer_access(d0, d0); },
                                cudaErrorInvalidDevice,
                                {"curt::enable_peer_access(device 0, peer 0)",
                                 "must be two different devices"});
  curt_test::require_cuda_error([&] { (void)curt::disable_peer_access(d1, d1); },
                                cudaErrorInvalidDevice,
                                {"curt::disable_peer_access(device 1, peer 1)",
                                 "must be two different devices"});
  curt_test::require_cuda_error(
      [&] { (void)curt::peer_attribute(d1, d1, cudaDevP2PAttrPerformanceRank); },
      cudaErrorInvalidDevice, {"curt::peer_attribute", "two different devices"});
  curt_test::require_cuda_error([&] { (void)curt::peer_access_scope(d0, d0); },
                                cudaErrorInvalidDevice, {"two different devices"});
  curt_test::require_cuda_error(
      [&] { (void)curt::peer_atomic_capabilities(d0, d0, cudaAtomicOperationCAS); },
      cudaErrorInvalidDevice, {"curt::peer_atomic_capabilities", "two different devices"});
  // A device that does not exist: curt::device refuses it, naming how many there are.
  curt_test::require_cuda_error([&] { (void)curt::device(count); }, cudaErrorInvalidDevice,
                                {"curt::device(", "CUDA device(s) visible"});
  // One built unchecked reaches the runtime, whose refusal names the call and the devices.
  const curt::device missing = curt::device::from_ordinal_unchecked(count + 3);
  const std::string peer_text = "peer " + std::to_string(count + 3);
  curt_test::require_cuda_error([&] { (void)curt::can_access_peer(d0, missing); },
                                cudaErrorInvalidDevice,
                                {"cudaDeviceCanAccessPeer", peer_text.c_str()});
  if (!peer_path()) {
    curt_test::require_any_cuda_error([&] { (void)curt::enable_peer_access(d0, d1); },
                                      {"cudaDeviceEnablePeerAccess", "cudaDeviceCanAccessPeer: 0"});
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

// Runs only in the child process (hidden): nothing in it has touched device 0.
TEST_CASE("peer queries and access from device 1 (child)", "[.][peer-child]") {
  REQUIRE(curt::device_count() >= 2);
  REQUIRE_FALSE(primary_active(0));  // the premise: a process that has not used device 0
  curt::device d0(0), d1(1);
  std::vector<std::string> broken;
  bool path = false;
  bool zero_after_queries = true;
  bool enabled = false;
  on_fresh_thread([&] {
    auto step = [&](const char* what) {
      if (current_context() != nullptr) {
        broken.push_back(std::string(what) + ": left a context current");
        CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
      }
    };
    path = curt::can_access_peer(d1, d0);
    step("can_access_peer");
    (void)curt::peer_attributes(d1, d0);
    step("peer_attributes");
    (void)curt::peer_atomic_capabilities(d1, d0, cudaAtomicOperationIntegerAdd);
    step("peer_atomic_capabilities");
    zero_after_queries = primary_active(0);  // queries make no context of device 0
    if (!path) return;
    {
      curt::peer_access_scope access(d1, d0);  // uses device 0: its context may be made now
      enabled = access.enabled_here();
      step("peer_access_scope (enable)");
      curt::device_buffer<float> remote(d0, 1024), local(d1, 1024);
      step("buffers");
      curt::stream s1(d1);
      const std::vector<float> ones(1024, 1.0f);
      curt::copy(remote, ones, s1);
      curt::launch(s1, config_for(1024), read_remote, static_cast<const float*>(remote.data()),
                   local.data(), 1024, 1.0f, 0.0f);
      s1.synchronize();
      step("a kernel on device 1 reading device 0");
    }
    step("peer_access_scope (disable)");
    THREAD_REQUIRE(cudaGetLastError() == cudaSuccess);
  });
  for (const std::string& what : broken) FAIL_CHECK(what);
  CHECK_FALSE(zero_after_queries);
  if (path) CHECK(enabled);
  std::printf("%s\n", child_marker);
  std::fflush(stdout);
}

TEST_CASE("peer queries make no context of an unused device, and enabling leaves none current") {
  REQUIRE(curt::device_count() >= 2);
  if (under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run");
    return;
  }
  child_result child = run_self(child_test_name);
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find(child_marker) != std::string::npos);
}
