// Virtual memory management (include/curt/memory/virtual_memory.hpp) on a GPU: mappings with data
// checked against the CPU, virtual aliases, growth that keeps data and data(), shrink_to_fit,
// access refused before set_access (the fault in a child process) and given after, granularity
// errors with the device's numbers, compression and fabric handles where supported (the refusal
// naming the attribute where not), POSIX fd sharing with another process (vmm_peer, started with
// posix_spawn as test_memory_pool_ipc does), and no primary context woken by the VMM calls.
// Every input is fresh random data; outputs are poisoned before the kernels that write them.
// [fault] and [no-context] run a hidden test case in a child process (skipped under
// compute-sanitizer); [api-error] makes CUDA refuse on purpose.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>

#include "ipc_channel.hpp"

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/driver.hpp>
#include <curt/error.hpp>
#include <curt/launch.hpp>
#include <curt/peer.hpp>
#include <curt/stream.hpp>
#include <curt/virtual_memory.hpp>

#include <cuda_runtime.h>
#include <cuda/std/span>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#ifndef CURT_VMM_PEER_PATH
#error "CURT_VMM_PEER_PATH (the vmm_peer executable) must be defined by the build"
#endif

namespace {

using curt_test::child_result;
using curt_test::run_self;

constexpr const char* fault_child_marker = "VMM-FAULT-CHILD-REACHED-ITS-END";
constexpr const char* no_context_marker = "VMM-NO-CONTEXT-CHILD-REACHED-ITS-END";

__global__ void affine(const int* in, int* out, std::size_t n, int a, int b) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = a * in[i] + b;
}
// Writes value(i, step) into [from, to): the growth test's pattern.
__global__ void stamp(cuda::std::span<int> all, std::size_t from, std::size_t to, int step) {
  const std::size_t i = from + blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < to && i < all.size()) all[i] = static_cast<int>(i * 2654435761u) ^ (step << 24);
}
__global__ void write_one(int* p, int value) { *p = value; }

int expected_stamp(std::size_t i, int step) {
  return static_cast<int>(i * 2654435761u) ^ (step << 24);
}
curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>((n + 255) / 256 ? (n + 255) / 256 : 1)),
                             dim3(256));
}
int driver_attribute(int ordinal, CUdevice_attribute attribute) {
  CUdevice device = 0;
  CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  int value = 0;
  CURT_DRIVER_CALL(cuDeviceGetAttribute, 2000, &value, attribute, device);
  return value;
}
bool contains(const std::string& text, const char* fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace

TEST_CASE("granularity: powers of two, sizes rounded up, errors with the device's numbers",
          "[vmm]") {
  curt::device gpu(0);
  const auto where = curt::memory_location::device(gpu);
  const std::size_t minimum = curt::granularity(where);
  const std::size_t recommended = curt::granularity(where, curt::granularity_kind::recommended);
  INFO("minimum " << minimum << ", recommended " << recommended);
  REQUIRE(minimum > 0);
  CHECK((minimum & (minimum - 1)) == 0);
  CHECK(recommended >= minimum);
  CHECK(recommended % minimum == 0);

  const std::size_t asked = minimum + std::size_t(curt_test::random_ints(1, 1, 4095)[0]);
  curt::physical_memory memory(where, asked);
  CHECK(memory.size() == 2 * minimum);
  CHECK(memory.granularity() == minimum);
  CHECK(memory.location() == where);
  CHECK(memory.handle_type() == curt::shareable_handle::none);
  CHECK_FALSE(memory.is_compressed());

  curt::address_range range(4 * minimum, minimum);
  CHECK(range.size() == 4 * minimum);
  CHECK(reinterpret_cast<std::uintptr_t>(range.data()) % minimum == 0);
  const std::string odd = std::to_string(minimum / 2);
  const std::string want =
      "size " + odd + " is not a multiple of the granularity " + std::to_string(minimum);
  curt_test::require_cuda_error([&] { curt::mapping m(range, 0, memory, minimum / 2); },
                                cudaErrorInvalidValue, {"curt::mapping", want.c_str()});
  const std::string past = std::to_string(2 * minimum) + " bytes at offset " +
                           std::to_string(3 * minimum) + " pass the end";
  curt_test::require_cuda_error([&] { curt::mapping m(range, 3 * minimum, memory); },
                                cudaErrorInvalidValue, {past.c_str()});
  // Memory that holds nothing (granularity 0) is named before any size check divides by it: a
  // SIGFPE before the fix (lab review, shown with a faked driver).
  curt::physical_memory moved = std::move(memory);
  curt_test::require_cuda_error([&] { curt::mapping m(range, 0, memory, minimum); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::physical_memory::get()", "moved-from"});
  curt_test::require_cuda_error([&] { curt::mapping m(range, 0, memory); },
                                cudaErrorInvalidResourceHandle, {"moved-from"});
}

TEST_CASE("a mapping round trip keeps the data; two mappings of one allocation alias", "[vmm]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  const auto where = curt::memory_location::device(gpu);
  const std::size_t g = curt::granularity(where);
  const std::size_t n = std::size_t(curt_test::random_ints(1, 1000, int(g / sizeof(int) * 2))[0]);
  const int a = curt_test::random_ints(1, 2, 9)[0], b = curt_test::random_ints(1, -50, 50)[0];
  std::vector<int> x = curt_test::random_ints(n, -100000, 100000);

  curt::physical_memory in_memory(where, n * sizeof(int));
  curt::physical_memory out_memory(where, n * sizeof(int));
  curt::address_range range(4 * in_memory.size(), g);
  std::vector<int> y(n);
  {
    curt::mapping in(range, 0, in_memory);
    curt::mapping out(range, in_memory.size(), out_memory);
    in.set_access(gpu, curt::memory_access::read_write);
    out.set_access({gpu}, curt::memory_access::read_write);
    CHECK(in.access(gpu) == curt::memory_access::read_write);
    CHECK(in.size() == in_memory.size());
    curt::copy(cuda::std::span<int>(in.data<int>(), n), x, s);
    curt::memset(cuda::std::span<int>(out.data<int>(), n), 0xFF, s);  // poison
    curt::launch(s, config_for(n), affine, static_cast<const int*>(in.data<int>()), out.data<int>(),
                 n, a, b);
    curt::copy_and_wait(y, cuda::std::span<int>(out.data<int>(), n), s);
  }  // both unmapped; the physical memory stays with its owners
  CHECK(y == curt_test::affine_ref(x, a, b));

  // Map the input's memory again, twice, at other offsets: both aliases read what was written.
  curt::mapping first(range, 2 * in_memory.size(), in_memory);
  curt::mapping second(range, 3 * in_memory.size(), in_memory);
  first.set_access(gpu, curt::memory_access::read_write);
  second.set_access(gpu, curt::memory_access::read);
  CHECK(second.access(gpu) == curt::memory_access::read);
  std::vector<int> again(n, 0);
  curt::copy_and_wait(again, cuda::std::span<int>(second.data<int>(), n), s);
  CHECK(again == x);
  curt::launch(s, config_for(1), write_one, first.data<int>(), 12345);  // via one alias...
  int seen = 0;
  curt::copy_and_wait(cuda::std::span<int>(&seen, 1), cuda::std::span<int>(second.data<int>(), 1),
                      s);
  CHECK(seen == 12345);  // ...seen through the other after the kernel
}

TEST_CASE("a growable buffer grows without moving and keeps its data", "[vmm]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  const std::size_t g = curt::granularity(curt::memory_location::device(gpu));
  const std::size_t per_granule = g / sizeof(int);
  curt::growable_buffer<int> buffer(gpu, 64 * per_granule);
  CHECK(buffer.max_size() == 64 * per_granule);
  CHECK(buffer.size() == 0);
  CHECK(buffer.capacity() == 0);
  CHECK(buffer.granularity() == g);
  CHECK(buffer.access(gpu) == curt::memory_access::read_write);  // remembered, nothing mapped yet
  int* const start = buffer.data();
  REQUIRE(start != nullptr);

  // Grow in random steps; each step stamps only its new elements while the old ones stay.
  std::size_t size = 0;
  int steps = 0;
  std::vector<int> step_of;  // which step wrote each element
  while (size < 40 * per_granule) {
    const std::size_t grow = std::size_t(curt_test::random_ints(1, 1, int(5 * per_granule))[0]);
    const std::size_t next = size + grow;
    buffer.resize(next);
    ++steps;
    CHECK(buffer.data() == start);  // never moved
    CHECK(buffer.size() == next);
    CHECK(buffer.capacity() >= next);
    CHECK(buffer.capacity() % per_granule == 0);
    curt::launch(s, config_for(grow), stamp, buffer, size, next, steps);  // the buffer as a span
    step_of.resize(next, steps);
    size = next;
  }
  CHECK(buffer.access(gpu) == curt::memory_access::read_write);  // the latest chunk's, driver's
  std::vector<int> back(size, 0);
  curt::copy_and_wait(back, buffer, s);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < size; ++i) bad += back[i] != expected_stamp(i, step_of[i]);
  INFO(steps << " steps to " << size << " ints");
  CHECK(bad == 0);

  // Shrinking releases the mappings past size(); the rest keeps its data; it grows again.
  const std::size_t mapped_before = buffer.capacity();
  const std::size_t kept = size / 3;
  buffer.resize(kept);
  CHECK(buffer.capacity() == mapped_before);  // resize() never unmaps
  buffer.shrink_to_fit();
  CHECK(buffer.capacity() < mapped_before);
  CHECK(buffer.capacity() >= kept);
  std::vector<int> kept_back(kept, 0);
  curt::copy_and_wait(kept_back, buffer, s);
  bad = 0;
  for (std::size_t i = 0; i < kept; ++i) bad += kept_back[i] != expected_stamp(i, step_of[i]);
  CHECK(bad == 0);
  buffer.reserve(50 * per_granule);
  CHECK(buffer.capacity() == 50 * per_granule);
  CHECK(buffer.size() == kept);
  buffer.resize(50 * per_granule);
  curt::fill(buffer, 7, s);
  std::vector<int> sevens(buffer.size(), 0);
  curt::copy_and_wait(sevens, buffer, s);
  CHECK(sevens == std::vector<int>(buffer.size(), 7));
  CHECK(buffer.data() == start);

  // Past the reserved addresses: refused with the numbers, nothing changed.
  const std::string reserved = std::to_string(64 * g) + " bytes of addresses";
  curt_test::require_cuda_error([&] { buffer.resize(64 * per_granule + 1); }, cudaErrorInvalidValue,
                                {"growable_buffer", reserved.c_str()});
  CHECK(buffer.size() == 50 * per_granule);

  // The default maximum: the device's memory.
  curt::growable_buffer<char> big(gpu);
  CHECK(big.max_size() >= gpu.properties().totalGlobalMem);
  big.resize(3);
  CHECK(big.capacity() == g);
}

TEST_CASE("a growable buffer keeps other devices' access as it grows", "[vmm]") {
  if (curt::device_count() < 2 || !curt::can_access_peer(curt::device(1), curt::device(0))) {
    WARN("needs a second device that can access device 0: skipped");
    return;
  }
  curt::device gpu(0), peer(1);
  curt::growable_buffer<float> buffer(gpu, std::size_t(1) << 24);
  buffer.resize(1000);
  buffer.set_access({gpu, peer}, curt::memory_access::read_write);
  CHECK(buffer.access(peer) == curt::memory_access::read_write);
  buffer.resize(std::size_t(1) << 23);  // a new chunk: given the remembered access
  CHECK(buffer.access(peer) == curt::memory_access::read_write);
  buffer.set_access(peer, curt::memory_access::read);
  buffer.resize(std::size_t(1) << 24);
  CHECK(buffer.access(peer) == curt::memory_access::read);
  CHECK(buffer.access(gpu) == curt::memory_access::read_write);
}

TEST_CASE("vmm fault child", "[.][vmm-fault-child]") {
  curt::device gpu(0);
  curt::stream s(gpu);
  const auto where = curt::memory_location::device(gpu);
  curt::physical_memory memory(where, 1);
  curt::address_range range(memory.size());
  curt::mapping map(range, 0, memory);  // no set_access: no device may touch it
  CHECK(map.access(gpu) == curt::memory_access::none);
  curt::launch(s, config_for(1), write_one, map.data<int>(), 1);
  try {
    s.synchronize();
    FAIL("a kernel wrote to a mapping without access and nothing failed");
  } catch (const curt::cuda_error& error) {
    std::printf("fault: %s\n", error.what());
    CHECK(error.is_sticky());
  }
  std::printf("%s\n", fault_child_marker);
}

TEST_CASE("access: refused before set_access (a fault, in a child), given after", "[vmm][fault]") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the faulting child is not run");
  } else {
    child_result child = run_self("vmm fault child");
    INFO("child output:\n" << child.output);
    CHECK(child.exit_code == 0);
    CHECK(contains(child.output, fault_child_marker));
    CHECK(contains(child.output, "fault: "));
  }
  // After set_access the same kernel works.
  curt::device gpu(0);
  curt::stream s(gpu);
  curt::physical_memory memory(curt::memory_location::device(gpu), 1);
  curt::address_range range(memory.size());
  curt::mapping map(range, 0, memory);
  map.set_access(gpu, curt::memory_access::read_write);
  const int value = curt_test::random_ints(1, 1, 1 << 30)[0];
  curt::launch(s, config_for(1), write_one, map.data<int>(), value);
  int back = 0;
  curt::copy_and_wait(cuda::std::span<int>(&back, 1), cuda::std::span<int>(map.data<int>(), 1), s);
  CHECK(back == value);
}

TEST_CASE("vmm no context child", "[.][vmm-no-context-child]") {
  REQUIRE(curt_test::current_context() == nullptr);
  REQUIRE_FALSE(curt_test::primary_active(0));
  curt::device gpu(0);
  const auto where = curt::memory_location::device(gpu);
  std::vector<std::string> woke;
  auto step = [&](const char* what) {
    if (curt_test::current_context() != nullptr || curt_test::primary_active(0))
      woke.push_back(what);
  };
  const std::size_t g = curt::granularity(where);
  step("granularity");
  {
    curt::physical_memory memory(where, 3 * g);
    step("physical_memory");
    curt::address_range range(4 * g, g);
    step("address_range");
    curt::mapping map(range, g, memory);
    step("mapping");
    map.set_access(gpu, curt::memory_access::read_write);
    step("set_access");
    (void)map.access(gpu);
    step("access");
    curt::growable_buffer<int> buffer(gpu, 16 * g);
    buffer.resize(5 * g / sizeof(int));
    buffer.resize(9 * g / sizeof(int));
    buffer.resize(g);
    buffer.shrink_to_fit();
    step("growable_buffer resize, shrink_to_fit");
  }
  step("unmap, release, free");
  for (const std::string& what : woke) std::printf("woke a context: %s\n", what.c_str());
  CHECK(woke.empty());
  std::printf("%s\n", no_context_marker);
}

TEST_CASE("the VMM calls make no context current and wake no primary context",
          "[vmm][no-context]") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child is not run (the sanitizer makes contexts)");
    return;
  }
  child_result child = run_self("vmm no context child");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(contains(child.output, no_context_marker));
}

TEST_CASE("compression where supported; refused naming the attribute where not",
          "[vmm][api-error]") {
  curt::device gpu(0);
  const auto where = curt::memory_location::device(gpu);
  if (!driver_attribute(0, CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED)) {
    curt_test::require_cuda_error(
        [&] {
          curt::physical_memory m(where, 1, curt::shareable_handle::none,
                                  curt::compression::generic);
        },
        cudaErrorNotSupported,
        {"unsupported", "CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED"});
    return;
  }
  const std::size_t g = curt::granularity(where, curt::granularity_kind::minimum,
                                          curt::shareable_handle::none, curt::compression::generic);
  curt::physical_memory memory(where, g, curt::shareable_handle::none, curt::compression::generic);
  std::printf("compressible memory asked on device 0: is_compressed() %d, granularity %zu\n",
              int(memory.is_compressed()), g);
  curt::stream s(gpu);
  curt::address_range range(memory.size(), g);
  curt::mapping map(range, 0, memory);
  map.set_access(gpu, curt::memory_access::read_write);
  const std::size_t n = memory.size() / sizeof(int);
  std::vector<int> x = curt_test::random_ints(n, -1000, 1000), back(n, 0);
  curt::copy(cuda::std::span<int>(map.data<int>(), n), x, s);
  curt::copy_and_wait(back, cuda::std::span<int>(map.data<int>(), n), s);
  CHECK(back == x);
}

TEST_CASE("fabric handles where supported; refused naming the attribute where not",
          "[vmm][api-error]") {
  curt::device gpu(0);
  const auto where = curt::memory_location::device(gpu);
  if (!driver_attribute(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)) {
    curt_test::require_cuda_error(
        [&] { curt::physical_memory m(where, 1, curt::shareable_handle::fabric); },
        cudaErrorNotSupported, {"unsupported", "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED"});
    return;
  }
  // Supported by the device; exporting also needs an IMEX channel, which a machine may lack.
  try {
    curt::physical_memory memory(where, 1, curt::shareable_handle::fabric);
    curt::fabric_handle handle = memory.export_fabric();
    curt::physical_memory same = curt::physical_memory::import(handle, memory.size());
    CHECK(same.size() == memory.size());
    std::printf("fabric handle exported and imported\n");
  } catch (const curt::cuda_error& error) {
    std::printf("fabric: %s\n", error.what());
    CHECK((error.status() == 800 || error.status() == cudaErrorNotSupported));
  }
  // A memory made without a fabric handle type does not export one, and curt says why.
  curt::physical_memory plain(where, 1);
  curt_test::require_any_cuda_error([&] { (void)plain.export_fabric(); },
                                    {"cuMemExportToShareableHandle", "shareable_handle"});
}

TEST_CASE("physical memory shared with another process through a POSIX fd",
          "[vmm][ipc][api-error]") {
  ipc_test::peer_process peer(CURT_VMM_PEER_PATH);  // first: before any CUDA call of this test
  curt::device gpu(0);
  const auto where = curt::memory_location::device(gpu);
  if (!driver_attribute(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)) {
    curt_test::require_cuda_error(
        [&] { curt::physical_memory m(where, 1, curt::shareable_handle::posix_fd); },
        cudaErrorNotSupported, {"CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"});
    return;  // the peer gets EOF and exits
  }
  const int n = curt_test::random_ints(1, 1000, 200000)[0];
  const int a = curt_test::random_ints(1, 2, 9)[0], b = curt_test::random_ints(1, -50, 50)[0];
  std::vector<int> x = curt_test::random_ints(std::size_t(n), -100000, 100000);
  const std::size_t g =
      curt::granularity(where, curt::granularity_kind::minimum, curt::shareable_handle::posix_fd);
  const std::size_t half = (std::size_t(n) * sizeof(int) + g - 1) / g * g;
  curt::physical_memory memory(where, 2 * half, curt::shareable_handle::posix_fd);
  CHECK(memory.handle_type() == curt::shareable_handle::posix_fd);
  curt::address_range range(memory.size(), g);
  curt::mapping map(range, 0, memory);
  map.set_access(gpu, curt::memory_access::read_write);
  int* in = map.data<int>();
  int* out = reinterpret_cast<int*>(map.data<char>() + half);
  curt::stream s(gpu);
  curt::copy(cuda::std::span<int>(in, std::size_t(n)), x, s);
  curt::memset(cuda::std::span<int>(out, std::size_t(n)), 0xFF, s);  // poison
  s.synchronize();

  ipc_test::vmm_request q;
  q.bytes = memory.size();
  q.out_offset = half;
  q.n = n;
  q.a = a;
  q.b = b;
  {
    curt::posix_fd fd = memory.export_posix_fd();
    REQUIRE(ipc_test::send_message(peer.socket(), &q, sizeof q, fd.get()));
  }
  ipc_test::vmm_reply r;
  const bool replied = ipc_test::receive_message(peer.socket(), &r, sizeof r);
  const int exit_code = replied ? peer.wait() : -1;
  INFO("peer message: " << r.message);
  REQUIRE(replied);
  CHECK(exit_code == 0);
  CHECK(r.ok == 1);
  CHECK(r.access_read_write == 1);
  CHECK(r.no_context_woken == 1);
  long long sum = 0;
  for (int v : x) sum += v;
  CHECK(r.sum_read == sum);
  std::vector<int> back(std::size_t(n), 0);
  curt::copy_and_wait(back, cuda::std::span<int>(out, std::size_t(n)), s);
  CHECK(back == curt_test::affine_ref(x, a, b));

  // Memory made without a POSIX fd handle type exports none, and curt says why.
  curt::physical_memory plain(where, 1);
  curt_test::require_any_cuda_error([&] { (void)plain.export_posix_fd(); },
                                    {"cuMemExportToShareableHandle", "shareable_handle"});
}

TEST_CASE("host NUMA physical memory where the device supports it", "[vmm]") {
  curt::device gpu(0);
  const int node = gpu.attribute(cudaDevAttrHostNumaId);
  if (node < 0 ||
      !driver_attribute(0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)) {
    WARN("no host NUMA node or no host NUMA VMM support: skipped");
    return;
  }
  curt::stream s(gpu);
  curt::physical_memory memory(curt::memory_location::host_numa(node), 1);
  curt::address_range range(memory.size(), memory.granularity());
  curt::mapping map(range, 0, memory);
  map.set_access(gpu, curt::memory_access::read_write);
  const std::size_t n = memory.size() / sizeof(int);
  std::vector<int> x = curt_test::random_ints(n, -1000, 1000), y(n, 0);
  curt::copy(cuda::std::span<int>(map.data<int>(), n), x, s);
  curt::launch(s, config_for(n), affine, static_cast<const int*>(map.data<int>()), map.data<int>(),
               n, 3, 1);  // in place
  curt::copy_and_wait(y, cuda::std::span<int>(map.data<int>(), n), s);
  CHECK(y == curt_test::affine_ref(x, 3, 1));
}
