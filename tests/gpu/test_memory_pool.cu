// Memory pools (curt/memory_pool.hpp): properties and attributes, statistics, reuse policies,
// device / pinned host / host NUMA / managed pools, access, the rounded maximum size, async_buffer
// (frees on its stream, or another), owners that hold nothing, and allocation under capture.
//
// Rules these tests keep: a kernel touches host or managed pool memory only after set_access
// (before, it would fault with a sticky error and end the process's CUDA); fresh random data every
// run, outputs poisoned first, results checked against a CPU reference.
//
// [api-error] test cases make CUDA calls fail on purpose (compute-sanitizer's memcheck reports
// those unless run with --report-api-errors no).
#include <catch.hpp>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>
#include <kernels.cuh>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/launch.hpp>
#include <curt/memory_location.hpp>
#include <curt/memory_pool.hpp>
#include <curt/stream.hpp>

#include <cuda/std/span>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using curt_test::device_array;

constexpr std::size_t MiB = std::size_t(1) << 20;

// out[i] = a * in[i] + b (integers: exact on both sides).
__global__ void affine(const int* in, int* out, int n, int a, int b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a * in[i] + b;
}

// The same through spans (a kernel taking a view of a buffer).
__global__ void affine_span(cuda::std::span<const int> in, cuda::std::span<int> out, int a, int b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < static_cast<int>(in.size())) out[i] = a * in[i] + b;
}

__global__ void fill(int* out, int n, int value) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

curt::launch_config config_for(int n) {
  return curt::launch_config(dim3(static_cast<unsigned>((n + 255) / 256)), dim3(256));
}

int random_n() { return curt_test::random_ints(1, 1000, 20000)[0]; }

std::vector<int> expected_affine(const std::vector<int>& in, int a, int b) {
  std::vector<int> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = a * in[i] + b;
  return out;
}

// A host-addressable pool allocation (pinned host, host NUMA, managed) round trip: the host writes
// fresh data into `in` through its host_view(), a kernel (the device was given access) writes
// a*in+b into `out` through views of both, the host reads `out` back element by element.
void host_device_round_trip(curt::memory_pool_ref pool, curt::stream& s) {
  const int n = random_n();
  const int a = curt_test::random_ints(1, 2, 9)[0], b = curt_test::random_ints(1, -50, 50)[0];
  std::vector<int> values = curt_test::random_ints(std::size_t(n), -100000, 100000);
  curt::async_buffer<int> in = pool.allocate<int>(std::size_t(n), s);
  curt::async_buffer<int> out = pool.allocate<int>(std::size_t(n), s);
  REQUIRE(in.size() == std::size_t(n));
  REQUIRE(in.size_bytes() == std::size_t(n) * sizeof(int));
  // compute-sanitizer's initcheck does not see the host's stores into pool memory: a device
  // memset first, so that what the kernel reads counts as written there too.
  CURT_CHECK(cudaMemsetAsync(in.data(), 0, in.size_bytes(), s));
  s.synchronize();  // the allocations are done: the host may touch them
  REQUIRE(in.host_accessible());
  REQUIRE(out.host_accessible());
  const curt::host_view<int> in_host = in.host_view(), out_host = out.host_view();
  CHECK(in_host.data() == in.data());
  std::copy(values.begin(), values.end(), in_host.begin());
  for (int& v : out_host) v = -1;  // poison
  CHECK(out_host.end() - out_host.begin() == n);
  curt::launch(s, config_for(n), affine_span, std::as_const(in), out, a, b);
  s.synchronize();
  const std::vector<int> want = expected_affine(values, a, b);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) bad += out_host[i] != want[i];
  CHECK(bad == 0);
  const curt::async_buffer<int>& read_only = out;
  const curt::host_view<const int> back = read_only.host_view();
  CHECK(std::vector<int>(back.begin(), back.end()) == want);
}

cudaMemoryType pointer_type(const void* p) {
  cudaPointerAttributes attributes{};
  CURT_CHECK(cudaPointerGetAttributes(&attributes, p));
  return attributes.type;
}

}  // namespace

TEST_CASE("pool properties are kept by the owner; attributes read back as set", "[memory_pool]") {
  curt::device gpu(0);
  const std::size_t max = std::size_t(curt_test::random_ints(1, 1, 8)[0]) * 32 * MiB;
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu).max_size(max));

  CHECK(pool.properties().max_size() == max);
  CHECK(pool.properties().location() == curt::memory_location::device(gpu));
  CHECK(pool.properties().allocation_type() == cudaMemAllocationTypePinned);
  CHECK_FALSE(pool.properties().is_exportable());
  CHECK(pool.is_device_pool());
  CHECK_FALSE(pool.is_host_pool());
  CHECK(pool.max_size() == max);
  curt::memory_pool_ref ref = pool;
  CHECK(ref == pool);
  CHECK(ref.location() == curt::memory_location::device(gpu));

  const std::size_t threshold = std::size_t(curt_test::random_ints(1, 1, 1 << 30)[0]);
  pool.set_release_threshold(threshold);
  CHECK(ref.release_threshold() == threshold);
  pool.set_release_threshold(curt::memory_pool_ref::never_release);
  CHECK(pool.release_threshold() == ~std::size_t(0));

  const bool follow = pool.reuse_follow_event_dependencies();
  const bool opportunistic = pool.reuse_allow_opportunistic();
  const bool internal = pool.reuse_allow_internal_dependencies();
  // cuda_runtime_api.h documents all three as enabled by default.
  CHECK(follow);
  CHECK(opportunistic);
  CHECK(internal);
  pool.set_reuse_follow_event_dependencies(!follow);
  pool.set_reuse_allow_opportunistic(!opportunistic);
  pool.set_reuse_allow_internal_dependencies(!internal);
  CHECK(pool.reuse_follow_event_dependencies() == !follow);
  CHECK(pool.reuse_allow_opportunistic() == !opportunistic);
  CHECK(pool.reuse_allow_internal_dependencies() == !internal);
  pool.set_reuse_follow_event_dependencies(follow);
  CHECK(pool.reuse_follow_event_dependencies() == follow);

  // A device pool's own device reads and writes it.
  CHECK(pool.access(gpu) == curt::pool_access::read_write);

  // A new pool holds nothing yet.
  curt::memory_pool_statistics st = pool.statistics();
  CHECK(st.used == 0);
  CHECK(st.reserved == 0);
}

TEST_CASE("used and reserved memory move as the guide describes", "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const std::size_t bytes = std::size_t(curt_test::random_ints(1, 4, 16)[0]) * MiB;

  SECTION("release threshold 0: a synchronization gives the memory back to the system") {
    pool.set_release_threshold(0);
    curt::async_buffer<char> b = pool.allocate<char>(bytes, s);
    CHECK(pool.used_memory() >= bytes);
    CHECK(pool.reserved_memory() >= pool.used_memory());
    b.free();
    s.synchronize();  // the free is done; excess over the threshold (0) is released here
    CHECK(pool.used_memory() == 0);
    CHECK(pool.reserved_memory() == 0);
    CHECK(pool.used_memory_high() >= bytes);
    CHECK(pool.reserved_memory_high() >= bytes);
    pool.reset_high_watermarks();  // they take on the current values
    CHECK(pool.used_memory_high() == 0);
    CHECK(pool.reserved_memory_high() == 0);
  }
  SECTION("release threshold never: the pool keeps its memory until trim_to") {
    pool.set_release_threshold(curt::memory_pool_ref::never_release);
    {
      curt::async_buffer<char> b = pool.allocate<char>(bytes, s);
      CHECK(pool.used_memory() >= bytes);
    }  // freed on s
    s.synchronize();
    CHECK(pool.used_memory() == 0);
    CHECK(pool.reserved_memory() >= bytes);  // kept for reuse
    pool.trim_to(0);
    CHECK(pool.reserved_memory() == 0);
    curt::memory_pool_statistics st = pool.statistics();
    CHECK(st.used == 0);
    CHECK(st.reserved == 0);
    CHECK(st.used_high >= bytes);
  }
}

TEST_CASE("reuse policies: same stream, after a synchronization, through an event, never unordered",
          "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::stream other(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  pool.set_release_threshold(curt::memory_pool_ref::never_release);  // sync keeps freed blocks
  const std::size_t bytes = MiB;

  SECTION("a block freed on a stream serves the next allocation on that stream at once") {
    curt::async_buffer<char> first = pool.allocate<char>(bytes, s);
    char* address = first.data();
    first.free();
    curt::async_buffer<char> second = pool.allocate<char>(bytes, s);
    CHECK(static_cast<void*>(second.data()) == static_cast<void*>(address));
  }
  SECTION("after the freeing stream synchronized, any stream reuses the block") {
    curt::async_buffer<char> first = pool.allocate<char>(bytes, s);
    char* address = first.data();
    first.free();
    s.synchronize();
    curt::async_buffer<char> second = pool.allocate<char>(bytes, other);
    CHECK(static_cast<void*>(second.data()) == static_cast<void*>(address));
  }
  SECTION("a free pending on a blocked stream is reused through an event dependency only") {
    curt_test::host_gate gate;
    curt::async_buffer<char> first = pool.allocate<char>(bytes, s);
    char* address = first.data();
    gate.block(s);  // the free below cannot have run before open()
    first.free();

    // No ordering, no opportunity (the free has not run), no internal dependencies: a new block.
    pool.set_reuse_allow_internal_dependencies(false);
    curt::async_buffer<char> unordered = pool.allocate<char>(bytes, other);
    CHECK(static_cast<void*>(unordered.data()) != static_cast<void*>(address));

    // `other` waits for s past the free: with follow-event-dependencies the block is reused.
    CHECK(pool.reuse_follow_event_dependencies());
    other.wait(s);
    curt::async_buffer<char> ordered = pool.allocate<char>(bytes, other);
    CHECK(static_cast<void*>(ordered.data()) == static_cast<void*>(address));
    gate.open();
    other.synchronize();
    s.synchronize();
  }
}

TEST_CASE("device pools allocate memory kernels use, through views too", "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = random_n();
  const int a = 3, b = curt_test::random_ints(1, -50, 50)[0];
  std::vector<int> values = curt_test::random_ints(std::size_t(n), -100000, 100000);
  device_array<int> result(static_cast<std::size_t>(n));  // poisoned

  curt::async_buffer<int> in = pool.allocate<int>(std::size_t(n), s);
  curt::async_buffer<int> out = curt::allocate_async<int>(std::size_t(n), s);  // current pool
  CHECK(pointer_type(in.data()) == cudaMemoryTypeDevice);
  CURT_CHECK(cudaMemcpyAsync(in.data(), values.data(), in.size_bytes(), cudaMemcpyHostToDevice, s));
  curt::launch(s, config_for(n), affine_span, in, out, a, b);  // buffers as cuda::std::span
  CURT_CHECK(cudaMemcpyAsync(result.get(), out.data(), out.size_bytes(), cudaMemcpyDeviceToDevice,
                             s));
  s.synchronize();
  CHECK(result.download() == expected_affine(values, a, b));
}

TEST_CASE("a pinned host pool: no device access until set_access, then both sides use it",
          "[memory_pool]") {
  curt::device gpu(0);
  if (!gpu.attribute<cudaDevAttrHostMemoryPoolsSupported>()) {
    WARN("device 0 does not support host memory pools: skipped");
    return;
  }
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::pinned_host());
  CHECK(pool.is_host_pool());
  CHECK(pool.access(gpu) == curt::pool_access::none);  // the rule the header states
  pool.set_access(gpu, curt::pool_access::read_write);
  CHECK(pool.access(gpu) == curt::pool_access::read_write);
  host_device_round_trip(pool, s);

  curt::async_buffer<int> probe = pool.allocate<int>(16, s);
  s.synchronize();
  CHECK(pointer_type(probe.data()) == cudaMemoryTypeHost);
}

TEST_CASE("a pinned host pool made accessible from a device at creation", "[memory_pool]") {
  curt::device gpu(0);
  if (!gpu.attribute<cudaDevAttrHostMemoryPoolsSupported>()) {
    WARN("device 0 does not support host memory pools: skipped");
    return;
  }
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::pinned_host().max_size(64 * MiB), {gpu});
  CHECK(pool.access(gpu) == curt::pool_access::read_write);
  CHECK(pool.properties().max_size() == 64 * MiB);
  host_device_round_trip(pool, s);
}

TEST_CASE("a host NUMA node 0 pool: set_access, then both sides use it", "[memory_pool]") {
  curt::device gpu(0);
  if (!gpu.attribute<cudaDevAttrHostNumaMemoryPoolsSupported>()) {
    WARN("device 0 does not support host NUMA memory pools: skipped");
    return;
  }
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::host_numa(0));
  CHECK(pool.location() == curt::memory_location::host_numa(0));
  CHECK(pool.access(gpu) == curt::pool_access::none);
  pool.set_access({gpu}, curt::pool_access::read_write);
  CHECK(pool.access(gpu) == curt::pool_access::read_write);
  host_device_round_trip(pool, s);
}

TEST_CASE("a managed pool: set_access, then both sides use it", "[memory_pool]") {
  curt::device gpu(0);
  if (!gpu.supports_concurrent_managed_access()) {
    WARN("device 0 lacks concurrent managed access: skipped");
    return;
  }
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::managed());
  CHECK(pool.is_managed_pool());
  CHECK(pool.location().is_none());
  CHECK(pool.access(gpu) == curt::pool_access::none);
  pool.set_access(gpu, curt::pool_access::read_write);
  host_device_round_trip(pool, s);

  curt::async_buffer<int> probe = pool.allocate<int>(16, s);
  s.synchronize();
  CHECK(pointer_type(probe.data()) == cudaMemoryTypeManaged);
}

TEST_CASE("an async_buffer of device memory refuses host access, naming the pool's kind",
          "[memory_pool][api-error]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  curt::async_buffer<int> pooled = pool.allocate<int>(64, s);
  curt::async_buffer<int> current = curt::allocate_async<int>(64, s);
  curt::async_buffer<int> unknown = curt::memory_pool_ref(pool.get()).allocate<int>(64, s);
  s.synchronize();
  for (curt::async_buffer<int>* b : {&pooled, &current, &unknown}) {
    CHECK_FALSE(b->host_accessible());
    curt_test::require_cuda_error([&] { (void)b->host_view(); }, cudaErrorInvalidValue,
                                  {"curt::async_buffer<int>::host_view()", "host cannot address",
                                   "pinned host or managed"});
  }
  // Views still work: a kernel takes one through its span parameter.
  const int a = curt_test::random_ints(1, 2, 9)[0], b = curt_test::random_ints(1, -50, 50)[0];
  std::vector<int> values = curt_test::random_ints(64, -1000, 1000);
  curt::copy(pooled, values, s);
  curt::memset(current, 0xFF, s);  // poison
  curt::launch(s, config_for(64), affine_span, std::as_const(pooled), current, a, b);
  std::vector<int> back(64, 0);
  curt::copy_and_wait(back, current, s);
  CHECK(back == expected_affine(values, a, b));
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("default and current pools of each location", "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);

  cudaMemPool_t raw = nullptr;
  CURT_CHECK(cudaDeviceGetDefaultMemPool(&raw, 0));
  curt::memory_pool_ref device_default = curt::default_memory_pool(gpu);
  CHECK(device_default.get() == raw);
  CHECK(device_default.is_device_pool());
  CHECK(curt::default_memory_pool(curt::memory_location::device(gpu)) == device_default);
  CHECK(curt::current_memory_pool(gpu) == device_default);

  // Another current pool for the device: cudaMallocAsync (curt::allocate_async) uses it.
  curt::memory_pool mine(curt::memory_pool_properties::device(gpu));
  curt::set_current_memory_pool(mine);
  CHECK(curt::current_memory_pool(gpu) == mine);
  {
    curt::async_buffer<char> b = curt::allocate_async<char>(MiB, s);
    CHECK(mine.used_memory() >= MiB);
  }
  curt::set_current_memory_pool(device_default);
  CHECK(curt::current_memory_pool(gpu) == device_default);
  s.synchronize();

  if (gpu.attribute<cudaDevAttrHostMemoryPoolsSupported>()) {
    curt::memory_pool_ref host_default = curt::default_memory_pool(curt::memory_location::host());
    CHECK(host_default.is_host_pool());
    CHECK(curt::current_memory_pool(curt::memory_location::host()) == host_default);
    // The host side, which always has access.
    curt::async_buffer<int> h = host_default.allocate<int>(1024, s);
    s.synchronize();
    std::vector<int> values = curt_test::random_ints(1024, -1000, 1000);
    std::memcpy(h.data(), values.data(), h.size_bytes());
    CHECK(std::vector<int>(h.data(), h.data() + 1024) == values);
    CHECK(pointer_type(h.data()) == cudaMemoryTypeHost);
  }
  if (gpu.attribute<cudaDevAttrHostNumaMemoryPoolsSupported>()) {
    curt::memory_pool_ref numa = curt::default_memory_pool(curt::memory_location::host_numa(0));
    CHECK(numa.is_host_pool());
    CHECK(curt::current_memory_pool(curt::memory_location::host_numa(0)) == numa);
  }
  if (gpu.supports_concurrent_managed_access()) {
    curt::memory_pool_ref managed = curt::default_managed_memory_pool();
    CHECK(managed.is_managed_pool());
    CHECK(curt::current_managed_memory_pool() == managed);
    curt::memory_pool_ref on_device = curt::default_managed_memory_pool(curt::memory_location::device(gpu));
    CHECK(on_device.is_managed_pool());
    curt::async_buffer<int> m = managed.allocate<int>(1024, s);
    s.synchronize();
    std::vector<int> values = curt_test::random_ints(1024, -1000, 1000);
    std::memcpy(m.data(), values.data(), m.size_bytes());
    CHECK(std::vector<int>(m.data(), m.data() + 1024) == values);
    CHECK(pointer_type(m.data()) == cudaMemoryTypeManaged);
  }
}

TEST_CASE("allocation past the rounded maximum size raises out_of_memory", "[memory_pool][api-error]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  const std::size_t max = 40 * MiB;  // CUDA 13.0 rounds it up to 64 MiB
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu).max_size(max));
  {
    // Past the size asked for, within the rounded one: allowed.
    curt::async_buffer<char> within = pool.allocate<char>(48 * MiB, s);
    CHECK(within.size() == 48 * MiB);
  }
  s.synchronize();
  const std::size_t too_much = 65 * MiB;
  curt_test::require_cuda_error<curt::out_of_memory>(
      [&] { (void)pool.allocate<char>(too_much, s); }, cudaErrorMemoryAllocation,
      {"cudaMallocFromPoolAsync", "68157440", "maximum size is 41943040 bytes", "67108864"});
  CHECK(cudaGetLastError() == cudaSuccess);  // not left behind for the next check
  // The pool still works.
  curt::async_buffer<char> after = pool.allocate<char>(MiB, s);
  CHECK(after.valid());
}

TEST_CASE("async_buffer frees on its stream, in stream order, or on another stream",
          "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::stream other(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = random_n();
  const int value = curt_test::random_ints(1, 1, 1000000)[0];

  SECTION("destroyed while its stream is blocked: the free waits for the kernel before it") {
    curt_test::host_gate gate;
    {
      curt::async_buffer<int> b = pool.allocate<int>(std::size_t(n), s);
      CHECK(b.stream() == s);
      // The launch before the gate: under compute-sanitizer a launch may wait for its kernel,
      // which behind a closed gate would wait for the gate's timeout.
      curt::launch(s, config_for(n), fill, b.data(), n, value);
      gate.block(s);
    }  // cudaFreeAsync on s, after the kernel and the gate; nothing waits here
    CHECK_FALSE(s.ready());
    gate.open();
    s.synchronize();
    CHECK(pool.used_memory() == 0);
  }
  SECTION("freed on another stream ordered after its use") {
    curt::async_buffer<int> b = pool.allocate<int>(std::size_t(n), s);
    device_array<int> copy(static_cast<std::size_t>(n));
    curt::launch(s, config_for(n), fill, b.data(), n, value);
    CURT_CHECK(cudaMemcpyAsync(copy.get(), b.data(), b.size_bytes(), cudaMemcpyDeviceToDevice, s));
    other.wait(s);
    b.free(other);
    CHECK_FALSE(b.valid());
    CHECK(b.size() == 0);
    other.synchronize();
    s.synchronize();
    CHECK(pool.used_memory() == 0);
    CHECK(copy.download() == std::vector<int>(std::size_t(n), value));
    curt_test::require_cuda_error([&] { (void)b.data(); }, cudaErrorInvalidResourceHandle,
                                  {"async_buffer<int>::data()", "freed"});
    curt_test::require_cuda_error([&] { b.free(); }, cudaErrorInvalidResourceHandle,
                                  {"async_buffer<int>::free()", "freed"});
  }
  SECTION("used by a kernel on another stream: free_after orders the free after it") {
    // Without free_after, the free on s does not wait for the kernel on `other`, and the next
    // allocation on s takes the same memory while the kernel still writes it.
    device_array<int> in(static_cast<std::size_t>(n));
    in.upload(curt_test::random_ints(std::size_t(n), -1000, 1000));
    const int marker = curt_test::random_ints(1, -100000, -2000)[0];  // never in - 1 here
    void* first = nullptr;
    {
      curt::async_buffer<int> b = pool.allocate<int>(std::size_t(n), s);
      first = b.data();
      other.wait(s);  // the allocation comes before its use on `other`
      curt::launch(other, config_for(n), curt_test::slow_affine_int,
                   static_cast<const int*>(in.get()), b.data(), n, 1, -1, 200'000'000ull);
      b.free_after(other);
    }  // cudaFreeAsync on s
    curt::async_buffer<int> next = pool.allocate<int>(std::size_t(n), s);
    REQUIRE(static_cast<void*>(next.data()) == first);  // the premise: the memory is reused
    curt::launch(s, config_for(n), fill, next.data(), n, marker);
    std::vector<int> back(std::size_t(n), 0);
    curt::copy_and_wait(back, next, s);
    other.synchronize();
    std::size_t overwritten = 0;
    for (int v : back) overwritten += v != marker;
    INFO(overwritten << " of " << n << " elements written by the kernel after the free");
    CHECK(overwritten == 0);
  }
  SECTION("its curt::stream destroyed first lives until its buffers are freed") {
    // The member order { async_buffer b; stream s; } destroys the stream first. A raw probe
    // (cudaStreamGetId, cudaFreeAsync on a destroyed stream) ended with SIGSEGV.
    curt_test::destructor_error_counter destructor_errors;
    std::optional<curt::stream> gone(std::in_place, gpu);
    std::vector<int> back(std::size_t(n), 0);
    device_array<int> used_elsewhere(static_cast<std::size_t>(n));
    {
      curt::async_buffer<int> b = pool.allocate<int>(std::size_t(n), *gone);
      curt::async_buffer<int> c = curt::allocate_async<int>(std::size_t(n), *gone);
      curt::async_buffer<int> adopted = curt::async_buffer<int>::adopt(
          static_cast<int*>(pool.allocate_async(b.size_bytes(), 256, *gone)), b.size(), *gone);
      curt::launch(*gone, config_for(n), fill, b.data(), n, value);
      curt::launch(*gone, config_for(n), fill, c.data(), n, value + 1);
      other.wait(*gone);
      gone.reset();
      // Each still works on the stream: a copy on it, a free ordered after another stream.
      CURT_CHECK(cudaMemcpyAsync(back.data(), b.data(), b.size_bytes(), cudaMemcpyDefault,
                                 b.stream()));
      CURT_CHECK(cudaMemcpyAsync(used_elsewhere.get(), c.data(), c.size_bytes(),
                                 cudaMemcpyDeviceToDevice, other));
      c.free_after(other);
      c.free();
      CHECK_FALSE(c.valid());
    }  // b and adopted free on it; the last one destroys it
    CURT_CHECK(cudaDeviceSynchronize());
    CHECK(destructor_errors.count() == 0);
    CHECK(back == std::vector<int>(std::size_t(n), value));
    CHECK(used_elsewhere.download() == std::vector<int>(std::size_t(n), value + 1));
    CHECK(pool.used_memory() == 0);
  }
  SECTION("its curt::stream destroyed first: the free follows that stream's work, nothing waits") {
    // Work on another stream that only the host ends (a persistent kernel) must not hold the
    // buffer's destructor up (a device-wide wait would, until the gate's 30 s timeout), and the
    // free must still come after the stream's last work.
    curt_test::destructor_error_counter destructor_errors;
    curt_test::host_gate unrelated;
    unrelated.block(other);
    device_array<int> copy(static_cast<std::size_t>(n));
    std::optional<curt::stream> gone(std::in_place, gpu);
    void* first = nullptr;
    const auto start = std::chrono::steady_clock::now();
    {
      curt::async_buffer<int> b = pool.allocate<int>(std::size_t(n), *gone);
      first = b.data();
      curt::launch(*gone, config_for(n), fill, b.data(), n, value);
      CURT_CHECK(cudaMemcpyAsync(copy.get(), b.data(), b.size_bytes(), cudaMemcpyDeviceToDevice,
                                 *gone));
      gone.reset();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(seconds < 20.0);  // generous for compute-sanitizer; the gate holds for 30 s
    // Memory the pool hands out again must not be written before the copy above has read it.
    curt::async_buffer<int> next = pool.allocate<int>(std::size_t(n), s);
    INFO("the pool gave " << (static_cast<void*>(next.data()) == first ? "the same" : "other")
                          << " memory");
    curt::launch(s, config_for(n), fill, next.data(), n, value + 7);
    unrelated.open();
    CURT_CHECK(cudaDeviceSynchronize());
    CHECK(copy.download() == std::vector<int>(std::size_t(n), value));
    CHECK(destructor_errors.count() == 0);
  }
  SECTION("its curt::stream destroyed first, freed while another thread captures") {
    // Thread-local mode: a global-mode capture elsewhere refuses any stream-ordered free (CUDA
    // counts cudaFreeAsync as unsafe then), this one only what curt itself may add (a wait).
    curt_test::destructor_error_counter destructor_errors;
    std::optional<curt::stream> gone(std::in_place, gpu);
    std::optional<curt::async_buffer<int>> b(pool.allocate<int>(std::size_t(n), *gone));
    curt::launch(*gone, config_for(n), fill, b->data(), n, value);
    gone.reset();
    curt::stream capturing(gpu);
    device_array<int> target(static_cast<std::size_t>(n));
    std::promise<void> began, freed;
    std::string capture_error;
    std::size_t captured_nodes = 0;
    std::thread capturer([&] {
      bool signalled = false;
      try {
        curt::capture_scope capture(capturing, curt::capture_mode::thread_local_);
        curt::launch(capturing, config_for(n), fill, target.get(), n, value);
        began.set_value();
        signalled = true;
        freed.get_future().wait();
        captured_nodes = capture.end().nodes().size();
      } catch (const std::exception& e) {
        capture_error = e.what();
        if (!signalled) began.set_value();
      }
    });
    began.get_future().wait();
    b.reset();  // the free and the stream's destruction, during the capture
    freed.set_value();
    capturer.join();
    CHECK(capture_error == "");
    CHECK(captured_nodes == 1);
    CHECK(destructor_errors.count() == 0);
    CURT_CHECK(cudaDeviceSynchronize());
    CHECK(pool.used_memory() == 0);
  }
  SECTION("0 elements allocate nothing and free nothing") {
    curt::async_buffer<int> b = pool.allocate<int>(0, s);
    CHECK(b.valid());
    CHECK(b.empty());
    CHECK(b.data() == nullptr);
  }
}

TEST_CASE("owners that hold nothing fail loudly by name", "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));

  curt::async_buffer<float> b = pool.allocate<float>(256, s);
  curt::async_buffer<float> moved = std::move(b);
  CHECK(moved.valid());
  CHECK_FALSE(b.valid());
  CHECK(b.size() == 0);
  curt_test::require_cuda_error([&] { (void)b.data(); }, cudaErrorInvalidResourceHandle,
                                {"curt::async_buffer<float>::data()", "moved-from"});
  curt_test::require_cuda_error([&] { (void)b.stream(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from"});

  float* raw = moved.release();
  curt_test::require_cuda_error([&] { (void)moved.data(); }, cudaErrorInvalidResourceHandle,
                                {"released"});
  CURT_CHECK(cudaFreeAsync(raw, s));
  curt::async_buffer<float> adopted = curt::async_buffer<float>::adopt(
      static_cast<float*>(pool.allocate_async(64 * sizeof(float), 256, s)), 64, s);
  CHECK(adopted.size() == 64);

  curt::async_buffer<int> empty(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)empty.data(); }, cudaErrorInvalidResourceHandle,
                                {"empty"});

  curt::memory_pool moved_pool = std::move(pool);
  CHECK_FALSE(pool.valid());
  curt_test::require_cuda_error([&] { (void)pool.release_threshold(); },
                                cudaErrorInvalidResourceHandle, {"curt::memory_pool", "moved-from"});
  curt_test::require_cuda_error([&] { (void)pool.allocate<int>(1, s); },
                                cudaErrorInvalidResourceHandle, {"moved-from"});
  curt::memory_pool_ref ref_to_moved = pool;  // a ref carries the state too
  curt_test::require_cuda_error([&] { (void)ref_to_moved.get(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from"});

  curt::memory_pool empty_pool(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)empty_pool.used_memory(); },
                                cudaErrorInvalidResourceHandle, {"empty"});

  s.synchronize();
  cudaMemPool_t released = moved_pool.release();
  curt_test::require_cuda_error([&] { (void)moved_pool.get(); }, cudaErrorInvalidResourceHandle,
                                {"released"});
  s.synchronize();
  CURT_CHECK(cudaMemPoolDestroy(released));
}

TEST_CASE("allocation under stream capture becomes nodes that allocate and free on each launch",
          "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = random_n();
  const int a = curt_test::random_ints(1, 2, 9)[0], b = curt_test::random_ints(1, -50, 50)[0];
  device_array<int> in(static_cast<std::size_t>(n));
  device_array<int> out(static_cast<std::size_t>(n));

  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  try {
    curt::async_buffer<int> staged = pool.allocate<int>(std::size_t(n), s);      // pool
    curt::async_buffer<int> result = curt::allocate_async<int>(std::size_t(n), s);  // default
    curt::launch(s, config_for(n), affine, static_cast<const int*>(in.get()), staged.data(), n, a,
                 0);
    curt::launch(s, config_for(n), affine, static_cast<const int*>(staged.data()), result.data(),
                 n, 1, b);
    CURT_CHECK(cudaMemcpyAsync(out.get(), result.data(), result.size_bytes(),
                               cudaMemcpyDeviceToDevice, s));
  } catch (...) {  // the buffers' frees are nodes too; end the capture either way
    (void)cudaStreamEndCapture(s, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    throw;
  }  // both buffers freed on s: free nodes
  REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);

  std::size_t count = 0;
  CURT_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CURT_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  int allocs = 0, frees = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    CURT_CHECK(cudaGraphNodeGetType(node, &type));
    allocs += type == cudaGraphNodeTypeMemAlloc;
    frees += type == cudaGraphNodeTypeMemFree;
  }
  CHECK(allocs == 2);
  CHECK(frees == 2);

  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int launch = 0; launch < 3; ++launch) {
    INFO("launch " << launch);
    std::vector<int> values = curt_test::random_ints(std::size_t(n), -100000, 100000);
    in.upload(values);
    out.poison();
    CURT_CHECK(cudaGraphLaunch(exec, s));
    s.synchronize();
    CHECK(out.download() == expected_affine(values, a, b));
  }
  CURT_CHECK(cudaGraphExecDestroy(exec));
  CURT_CHECK(cudaGraphDestroy(graph));
}

TEST_CASE("refused arguments name the numbers", "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  curt_test::require_cuda_error([&] { (void)pool.allocate_sync(64, 3); }, cudaErrorInvalidValue,
                                {"allocate_sync()", "alignment 3"});
  curt_test::require_cuda_error([&] { (void)pool.allocate<double>(~std::size_t(0) / 4, s); },
                                cudaErrorInvalidValue, {"allocate<T>", "overflow"});
  curt_test::require_cuda_error(
      [&] {
        curt::memory_pool p(curt::memory_pool_properties::pinned_host().exportable());
      },
      cudaErrorInvalidValue, {"cannot be exported", "host_numa"});
  curt::memory_pool_ref bare(pool.get());  // a bare handle: location unknown
  CHECK_FALSE(bare.kind_known());
  curt_test::require_cuda_error([&] { curt::set_current_memory_pool(bare); },
                                cudaErrorInvalidValue, {"does not know the pool's location"});
}

TEST_CASE("synchronous allocations are ready for any stream when they return", "[memory_pool]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  const int n = random_n();
  const int value = curt_test::random_ints(1, 1, 1000000)[0];
  void* p = pool.allocate_sync(std::size_t(n) * sizeof(int));
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);
  CHECK(pool.used_memory() >= std::size_t(n) * sizeof(int));
  curt::launch(s, config_for(n), fill, static_cast<int*>(p), n, value);
  std::vector<int> back(static_cast<std::size_t>(n), 0);
  CURT_CHECK(cudaMemcpyAsync(back.data(), p, back.size() * sizeof(int), cudaMemcpyDeviceToHost, s));
  s.synchronize();
  CHECK(back == std::vector<int>(std::size_t(n), value));
  pool.deallocate_sync(p, std::size_t(n) * sizeof(int));
  CHECK(pool.allocate_sync(0) == nullptr);
}
