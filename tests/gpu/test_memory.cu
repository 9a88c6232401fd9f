// Buffers (curt/memory.hpp): every kind round-trips fresh random data; mapped pinned memory and
// mapped registered memory are written by a kernel and read by the host; managed memory is
// prefetched and used on both sides; registered host memory takes part in async copies; a kernel
// takes a cuda::std::span of a buffer through curt::launch and <<<>>>; empty, moved-from and
// released owners fail loudly, saying which; zero-size buffers; overflowing and impossible
// counts; registering memory twice; and the context rule on a thread that has no context.
//
// Every output is poisoned first (NaN bytes for floats, 0xFF bytes for integers) and compared
// with a CPU reference computed from the same fresh random inputs.
#include <catch.hpp>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>
#include <isolation.hpp>
#include <kernels.cuh>

#include "page_array.hpp"

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>
#include <curt/unified_memory.hpp>

#include <cuda/std/span>

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr unsigned block_size = 256;

curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, std::size_t(block_size)))),
                             dim3(block_size));
}

std::size_t random_size() { return static_cast<std::size_t>(curt_test::random_ints(1, 3000, 9000)[0]); }
float random_coefficient() { return curt_test::random_floats(1, 0.5f, 2.0f)[0]; }

// out[i] = a * in[i], through spans (the kernel sees sizes too).
__global__ void scale_span(cuda::std::span<const float> in, cuda::std::span<float> out, float a) {
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < out.size() && i < in.size()) out[i] = __fmul_rn(a, in[i]);
}

// data[i] = data[i] * a + b, in place.
__global__ void affine_in_place(float* data, int n, float a, float b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] = __fadd_rn(__fmul_rn(a, data[i]), b);
}

float affine_ref(float x, float a, float b) { return a * x + b; }

using curt_test::poisoned;

std::vector<int> random_int_vector(std::size_t n) {
  return curt_test::random_ints(n, std::numeric_limits<int>::min() / 2, std::numeric_limits<int>::max() / 2);
}

}  // namespace

TEST_CASE("every buffer kind round-trips fresh random data") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();

  SECTION("device_buffer: host -> device -> device -> host") {
    std::vector<float> x = curt_test::random_floats(n);
    curt::device_buffer<float> a(d, n), b(d, n);
    CHECK(a.size() == n);
    CHECK(a.size_bytes() == n * sizeof(float));
    CHECK(a.device() == d);
    CHECK(a.valid());
    curt::memset(a, 0xFF, s);
    curt::memset(b, 0xFF, s);
    curt::copy(a, x, s);
    curt::copy(b, a, s);
    std::vector<float> back = poisoned<float>(n);
    curt::copy(back, b, s);
    s.synchronize();
    curt_test::require_same_bytes(back, x);
  }
  SECTION("pinned_buffer: written and read by the host, through the device") {
    std::vector<int> x = random_int_vector(n);
    curt::pinned_buffer<int> in(d, n), out(d, n, curt::pinned_flags::portable);
    for (std::size_t i = 0; i < n; ++i) in[i] = x[i];
    std::memset(out.data(), 0xFF, out.size_bytes());
    curt::device_buffer<int> on_device(d, n);
    curt::copy(on_device, in, s);
    curt::copy(out, on_device, s);
    s.synchronize();
    curt_test::require_same_bytes(out, x);
    std::size_t visited = 0;
    for (int& v : out) {
      (void)v;
      ++visited;
    }
    CHECK(visited == n);
  }
  SECTION("pinned_buffer, write-combined: written by the host, read back through the device") {
    std::vector<float> x = curt_test::random_floats(n);
    curt::pinned_buffer<float> in(d, n, curt::pinned_flags::write_combined);
    CHECK(curt::has_flag(in.flags(), curt::pinned_flags::write_combined));
    std::memcpy(in.data(), x.data(), n * sizeof(float));  // write-combined: write, never read
    curt::device_buffer<float> on_device(d, n);
    std::vector<float> back = poisoned<float>(n);
    curt::copy(on_device, in, s);
    curt::copy(back, on_device, s);
    s.synchronize();
    curt_test::require_same_bytes(back, x);
  }
  SECTION("managed_buffer: written by the host, copied on the device, read by the host") {
    std::vector<float> x = curt_test::random_floats(n);
    curt::managed_buffer<float> a(d, n), b(d, n);
    for (std::size_t i = 0; i < n; ++i) a[i] = x[i];
    std::memset(b.data(), 0xFF, b.size_bytes());
    curt::copy(b, a, s);
    s.synchronize();
    curt_test::require_same_bytes(b, x);
  }
  SECTION("host_registration: registered host memory in async copies") {
    curt_test::page_array<float> x(curt_test::random_floats(n));
    curt_test::page_array<float> back(n);
    back.poison();
    curt::host_registration source(d, x), target(d, back);
    CHECK(source.size_bytes() == n * sizeof(float));
    CHECK(source.data() == static_cast<void*>(x.data()));
    CHECK(curt::pointer_attributes(x.data()).kind == curt::memory_kind::host);
    curt::device_buffer<float> on_device(d, n);
    curt::copy(on_device, x, s);
    curt::copy(back, on_device, s);
    s.synchronize();
    curt_test::require_same_bytes(back, x);
  }
}

TEST_CASE("mapped host memory is written by a kernel and read by the host") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  int count = static_cast<int>(n);
  float a = random_coefficient(), b = random_coefficient();
  std::vector<float> x = curt_test::random_floats(n);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = affine_ref(x[i], a, b);

  SECTION("pinned_buffer with pinned_flags::mapped") {
    curt::pinned_buffer<float> in(d, n, curt::pinned_flags::mapped),
        out(d, n, curt::pinned_flags::mapped | curt::pinned_flags::portable);
    std::memcpy(in.data(), x.data(), n * sizeof(float));
    std::memset(out.data(), 0xFF, out.size_bytes());
    REQUIRE(in.device_pointer() != nullptr);
    curt::launch(s, config_for(n), curt_test::slow_affine, in.device_pointer(),
                 out.device_pointer(), count, a, b, 0ull);
    s.synchronize();
    curt_test::require_same_bytes(out, want);
  }
  SECTION("pinned_buffer without flags, under unified addressing") {
    if (!d.attribute<cudaDevAttrUnifiedAddressing>()) {
      WARN("device 0 has no unified addressing: only mapped memory is reachable");
      return;
    }
    curt::pinned_buffer<float> in(d, n), out(d, n);
    std::memcpy(in.data(), x.data(), n * sizeof(float));
    std::memset(out.data(), 0xFF, out.size_bytes());
    CHECK(in.device_pointer() == in.data());
    curt::launch(s, config_for(n), curt_test::slow_affine,
                 static_cast<const float*>(in.device_pointer()), out.device_pointer(), count, a,
                 b, 0ull);
    s.synchronize();
    curt_test::require_same_bytes(out, want);
  }
  SECTION("host_registration with register_flags::mapped") {
    curt_test::page_array<float> in_host(x), out(n);
    out.poison();
    curt::host_registration in(d, in_host, curt::register_flags::mapped),
        target(d, out, curt::register_flags::mapped | curt::register_flags::portable);
    REQUIRE(in.device_pointer() != nullptr);
    curt::launch(s, config_for(n), curt_test::slow_affine,
                 static_cast<const float*>(in.device_pointer()),
                 static_cast<float*>(target.device_pointer()), count, a, b, 0ull);
    s.synchronize();
    curt_test::require_same_bytes(out, want);
  }
}

TEST_CASE("managed memory is prefetched and used on both sides") {
  curt::device d(0);
  REQUIRE(d.supports_concurrent_managed_access());
  curt::stream s(d);
  std::size_t n = random_size();
  int count = static_cast<int>(n);
  float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  std::vector<float> x = curt_test::random_floats(n);

  curt::managed_buffer<float> m(d, n);
  for (std::size_t i = 0; i < n; ++i) m[i] = x[i];                // host writes
  curt::prefetch(m, curt::memory_location::device(d), s);          // to the device
  curt::launch(s, config_for(n), affine_in_place, m.data(), count, a, b);  // device uses
  curt::prefetch(m, curt::memory_location::host(), s);             // back to the host
  s.synchronize();
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = affine_ref(x[i], a, b);
  curt_test::require_same_bytes(m, want);                                          // host reads

  for (std::size_t i = 0; i < n; ++i) m[i] = want[i] * c;          // host writes again
  curt::prefetch(m, curt::memory_location::device(d), s);
  curt::launch(s, config_for(n), affine_in_place, m.data(), count, a, b);
  s.synchronize();
  for (std::size_t i = 0; i < n; ++i) want[i] = affine_ref(want[i] * c, a, b);
  curt_test::require_same_bytes(m, want);

  SECTION("attached to one stream, then used on it") {
    curt::managed_buffer<float> h(d, n, curt::attach_flags::host);
    for (std::size_t i = 0; i < n; ++i) h[i] = x[i];
    h.attach(s);  // attach_flags::single
    curt::launch(s, config_for(n), affine_in_place, h.data(), count, a, b);
    s.synchronize();
    std::vector<float> once(n);
    for (std::size_t i = 0; i < n; ++i) once[i] = affine_ref(x[i], a, b);
    curt_test::require_same_bytes(h, once);
    h.attach(s, curt::attach_flags::global);
  }
}

TEST_CASE("a kernel takes a cuda::std::span of a buffer through curt::launch and <<<>>>") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  float a = random_coefficient();
  std::vector<float> x = curt_test::random_floats(n);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = a * x[i];

  curt::device_buffer<float> in(d, n), out(d, n);
  curt::copy(in, x, s);
  const curt::device_buffer<float>& const_in = in;

  curt::memset(out, 0xFF, s);
  curt::launch(s, config_for(n), scale_span, const_in, out, a);
  std::vector<float> back = poisoned<float>(n);
  curt::copy(back, out, s);
  s.synchronize();
  curt_test::require_same_bytes(back, want);

  curt::memset(out, 0xFF, s);
  scale_span<<<config_for(n).grid_dims(), block_size, 0, s>>>(in, out, a);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  back = poisoned<float>(n);
  curt::copy(back, out, s);
  s.synchronize();
  curt_test::require_same_bytes(back, want);

  // A view carries the buffer's pointer and size.
  cuda::std::span<float> view = out;
  CHECK(view.data() == out.data());
  CHECK(view.size() == out.size());
  cuda::std::span<const float> const_view = const_in;
  CHECK(const_view.data() == in.data());
}

TEST_CASE("empty, moved-from and released buffers fail every access, saying which") {
  curt::device d(0);
  curt::stream s(d);
  curt_test::page_array<float> host(std::vector<float>(16, 1.0f));

  curt::device_buffer<float> moved_from(d, 16);
  curt::device_buffer<float> owner = std::move(moved_from);
  CHECK_FALSE(moved_from.valid());
  CHECK(moved_from.size() == 0);
  CHECK(moved_from.empty());
  curt_test::require_cuda_error([&] { (void)moved_from.data(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from", "device_buffer<float>", "data()"});
  curt_test::require_cuda_error([&] { (void)moved_from.get(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from", "get()"});
  curt_test::require_cuda_error([&] { (void)moved_from.device(); },
                                cudaErrorInvalidResourceHandle, {"moved-from", "device()"});
  curt_test::require_cuda_error([&] { cuda::std::span<float> v = moved_from; (void)v; },
                                cudaErrorInvalidResourceHandle, {"moved-from"});
  curt_test::require_cuda_error([&] { curt::copy(moved_from, host, s); },
                                cudaErrorInvalidResourceHandle, {"moved-from", "device_buffer"});
  curt_test::require_cuda_error([&] { (void)moved_from.release(); },
                                cudaErrorInvalidResourceHandle, {"moved-from", "release()"});

  curt::device_buffer<float> empty(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)empty.data(); }, cudaErrorInvalidResourceHandle,
                                {"empty", "device_buffer<float>"});

  float* raw = owner.release();
  REQUIRE(raw != nullptr);
  curt_test::require_cuda_error([&] { (void)owner.data(); }, cudaErrorInvalidResourceHandle,
                                {"released", "device_buffer<float>"});
  // The released memory is the caller's: adopt it back, and it works and is freed once.
  owner = curt::device_buffer<float>::adopt(d, raw, 16);
  CHECK(owner.data() == raw);
  curt::copy(owner, host, s);
  s.synchronize();

  curt::pinned_buffer<int> pinned(d, 8);
  curt::pinned_buffer<int> pinned_owner = std::move(pinned);
  curt_test::require_cuda_error([&] { (void)pinned[0]; }, cudaErrorInvalidResourceHandle,
                                {"moved-from", "pinned_buffer<int>", "operator[]"});
  curt_test::require_cuda_error([&] { (void)pinned.begin(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from", "begin()"});
  if (d.attribute<cudaDevAttrUnifiedAddressing>())  // every device reaches it by its address
    CHECK(pinned_owner.device_pointer() == pinned_owner.data());
  else
    curt_test::require_cuda_error([&] { (void)pinned_owner.device_pointer(); },
                                  cudaErrorInvalidValue, {"pinned_flags::mapped"});

  curt::managed_buffer<double> managed(curt::no_handle);
  curt_test::require_cuda_error([&] { managed.attach(s); }, cudaErrorInvalidResourceHandle,
                                {"empty", "managed_buffer<double>", "attach()"});

  curt::host_registration registration(d, host);
  curt::host_registration registration_owner = std::move(registration);
  curt_test::require_cuda_error([&] { (void)registration.data(); },
                                cudaErrorInvalidResourceHandle,
                                {"moved-from", "host_registration"});
  curt_test::require_cuda_error([&] { (void)registration_owner.device_pointer(); },
                                cudaErrorInvalidValue, {"register_flags::mapped"});

  // Destroying owners that hold nothing reports nothing.
  curt_test::destructor_error_counter errors;
  {
    curt::device_buffer<float> a(curt::no_handle), b(d, 4);
    curt::device_buffer<float> c = std::move(b);
    float* freed_by_hand = c.release();
    CHECK(cudaFree(freed_by_hand) == cudaSuccess);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("registering host memory twice gives the runtime's error, explained") {
  curt::device d(0);
  curt_test::page_array<float> host(curt_test::random_floats(1024));
  curt::host_registration first(d, host);
  curt_test::require_cuda_error(
      [&] { curt::host_registration second(d, host); }, cudaErrorHostMemoryAlreadyRegistered,
      {"cudaHostRegister", "page-locked already", "register each range once"});
  // The first registration still works: an async copy through it.
  curt::stream s(d);
  curt::device_buffer<float> on_device(d, host.size());
  curt_test::page_array<float> back(host.size());
  back.poison();
  curt::host_registration target(d, back);
  curt::copy(on_device, host, s);
  curt::copy(back, on_device, s);
  s.synchronize();
  curt_test::require_same_bytes(back, host);
}

TEST_CASE("buffers of zero elements allocate nothing and are valid") {
  curt::device d(0);
  curt::stream s(d);
  curt::device_buffer<float> device(d, 0);
  curt::pinned_buffer<float> pinned(d, 0, curt::pinned_flags::mapped);
  curt::managed_buffer<float> managed(d, 0);
  std::vector<float> none;
  curt::host_registration registration(d, none);
  CHECK(device.valid());
  CHECK(device.empty());
  CHECK(device.data() == nullptr);
  CHECK(pinned.data() == nullptr);
  CHECK(pinned.device_pointer() == nullptr);
  CHECK(pinned.begin() == pinned.end());
  CHECK(managed.data() == nullptr);
  CHECK(registration.valid());
  CHECK(registration.size_bytes() == 0);
  curt::copy(device, none, s);
  curt::copy_and_wait(none, device, s);
  curt::fill(device, 1.0f, s);
  curt::memset(managed, 0, s);
  curt::prefetch(managed, curt::memory_location::device(d), s);
  managed.attach(s);
  cuda::std::span<float> view = device;
  CHECK(view.empty());
  s.synchronize();
  // Moving a zero-size buffer moves its validity.
  curt::device_buffer<float> moved = std::move(device);
  CHECK(moved.valid());
  CHECK_FALSE(device.valid());
}

TEST_CASE("overflowing counts are refused before CUDA; impossible ones are out of memory") {
  curt::device d(0);
  std::size_t too_many = std::numeric_limits<std::size_t>::max() / 4;
  curt_test::require_cuda_error([&] { curt::device_buffer<double> b(d, too_many); },
                                cudaErrorInvalidValue,
                                {"device_buffer<double>", "overflow", std::to_string(too_many).c_str()});
  curt_test::require_cuda_error([&] { curt::pinned_buffer<double> b(d, too_many); },
                                cudaErrorInvalidValue, {"pinned_buffer<double>", "overflow"});
  curt_test::require_cuda_error([&] { curt::managed_buffer<double> b(d, too_many); },
                                cudaErrorInvalidValue, {"managed_buffer<double>", "overflow"});
  // 1 PiB fits std::size_t but no device.
  curt_test::require_cuda_error<curt::out_of_memory>(
      [&] { curt::device_buffer<char> b(d, std::size_t(1) << 50); }, cudaErrorMemoryAllocation,
      {"cudaMalloc", "bytes 1125899906842624", "device 0"});
  // Nothing was left behind: allocation works afterwards.
  curt::device_buffer<float> fine(d, 1024);
  CHECK(fine.valid());
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("buffers leave no context on a thread that had none, also when freed there") {
  curt::device d(0);
  std::size_t n = random_size();
  std::vector<float> x = curt_test::random_floats(n);
  // Made on this thread, freed on the fresh one.
  auto made_here = std::make_unique<curt::device_buffer<float>>(d, n);

  std::vector<std::string> left_behind;
  bool started_without = false;
  std::vector<float> back;
  curt_test::on_fresh_thread([&] {
    started_without = curt_test::current_context() == nullptr;
    if (!started_without) return;
    auto step = [&](const char* what) {
      if (curt_test::current_context() == nullptr) return;
      left_behind.push_back(what);
      CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);  // go on from a clean thread
    };
    made_here.reset();
    step("~device_buffer (made on another thread)");
    {
      curt::device_buffer<float> b(d, n);
      step("device_buffer(device, count)");
      curt::pinned_buffer<float> p(d, n, curt::pinned_flags::mapped);
      step("pinned_buffer(device, count, mapped)");
      (void)p.device_pointer();
      step("pinned_buffer::device_pointer");
      curt::managed_buffer<float> m(d, n);
      step("managed_buffer(device, count)");
      curt_test::page_array<float> registered(n);
      registered.poison();
      curt::host_registration r(d, registered, curt::register_flags::mapped);
      step("host_registration(device, range, mapped)");
      (void)r.device_pointer();
      step("host_registration::device_pointer");
      curt::stream s(d);
      step("stream(device)");
      curt::copy(b, x, s);
      step("copy(device_buffer, vector, stream)");
      curt::copy(registered, b, s);
      step("copy(registered vector, device_buffer, stream)");
      curt::fill(b, 2.5f, s);
      step("fill(device_buffer, float, stream)");
      curt::memset(m, 0, s);
      step("memset(managed_buffer, 0, stream)");
      curt::prefetch(m, curt::memory_location::device(d), s);
      step("prefetch(managed_buffer, device, stream)");
      m.attach(s);
      step("managed_buffer::attach(stream)");
      s.synchronize();
      step("stream::synchronize");
      back.assign(registered.begin(), registered.end());
    }
    step("~device_buffer, ~pinned_buffer, ~managed_buffer, ~host_registration, ~stream");
  });
  REQUIRE(started_without);
  for (const std::string& what : left_behind)
    FAIL_CHECK("left a context current on a thread that had none: " << what);
  curt_test::require_same_bytes(back, x);
}
