// Copies, fills and memsets (curt/copy.hpp), pitched 2D and 3D buffers (curt/pitched.hpp) and
// pointer attributes (curt/memory.hpp): every direction synchronous and on a stream, size
// mismatches named in numbers, fills of 1-, 2-, 4-, 8- and 12-byte values by each of fill's
// paths (memset, driver memsets, curt's kernel, and from a host compiler's translation unit),
// pitched round trips with random extents whose layout is checked with the raw API, and the
// attributes of every kind of memory.
//
// Destinations are poisoned first (0xFF bytes) and compared with fresh random inputs.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include <kernels.cuh>

#include "page_array.hpp"

#include <curt/copy.hpp>
#include <curt/detail/driver.hpp>
#include <curt/device.hpp>
#include <curt/graph_capture.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/pitched.hpp>
#include <curt/span.hpp>
#include <curt/stream.hpp>

#include <cuda/std/array>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace curt_test {
// In test_copy_host_tu.cpp, compiled by the host compiler.
void fill_from_host_compiler(curt::device_buffer<std::uint16_t>& b, std::uint16_t value,
                             curt::stream_ref s);
void fill_from_host_compiler(curt::device_buffer<float>& b, float value, curt::stream_ref s);
void fill_from_host_compiler(curt::device_buffer<double>& b, double value, curt::stream_ref s);
}  // namespace curt_test

namespace {

struct rgb {
  float r, g, b;
};

std::size_t random_size() { return static_cast<std::size_t>(curt_test::random_ints(1, 3000, 9000)[0]); }

using curt_test::poisoned;

// Every element of `got` has the bytes of `value`.
template <class T>
void require_all(const std::vector<T>& got, const T& value) {
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &value, sizeof(T)) != 0) {
      if (bad++ == 0) first = i;
    }
  INFO(bad << " of " << got.size() << " differ from the fill value; first at " << first);
  CHECK(bad == 0);
}

template <class T>
std::vector<T> download(const curt::device_buffer<T>& b, curt::stream_ref s) {
  std::vector<T> v = poisoned<T>(b.size());
  curt::copy_and_wait(v, b, s);
  return v;
}

// A random value of T whose bytes are not all equal (so no plain memset can write it).
template <class T>
T random_mixed_value() {
  std::uniform_int_distribution<int> byte(0, 255);
  for (;;) {
    unsigned char bytes[sizeof(T)];
    for (auto& b : bytes) b = static_cast<unsigned char>(byte(curt_test::rng()));
    bool uniform = true;
    for (std::size_t i = 1; i < sizeof(T); ++i) uniform = uniform && bytes[i] == bytes[0];
    T value;
    std::memcpy(static_cast<void*>(&value), bytes, sizeof(T));
    if (!uniform) return value;
  }
}

float random_float() { return curt_test::random_floats(1, -100.0f, 100.0f)[0]; }

}  // namespace

namespace {

// Every direction, with copy_and_wait(dst, src, stream) or, when on_stream, copy(dst, src, stream)
// and a synchronize.
void check_every_direction(bool on_stream) {
  INFO((on_stream ? "copy(dst, src, stream)" : "copy_and_wait(dst, src, stream)"));
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  auto copy = [&](auto&& dst, const auto& src) {
    if (on_stream)
      curt::copy(dst, src, s);
    else
      curt::copy_and_wait(dst, src, s);
  };
  auto finish = [&] {
    if (on_stream) s.synchronize();
  };

  std::vector<float> x = curt_test::random_floats(n);
  curt::device_buffer<float> a(d, n), b(d, n);
  curt::memset(a, 0xFF, s);
  curt::memset(b, 0xFF, s);
  s.synchronize();

  copy(a, x);  // host (pageable) -> device
  copy(b, a);  // device -> device
  std::vector<float> back = poisoned<float>(n);
  copy(back, b);  // device -> host (pageable)
  finish();
  curt_test::require_same_bytes(back, x);

  curt::pinned_buffer<float> pinned(d, n);
  std::memset(pinned.data(), 0xFF, pinned.size_bytes());
  copy(pinned, x);  // host -> host (pageable -> pinned)
  finish();
  curt_test::require_same_bytes(pinned, x);
  std::vector<float> from_pinned = poisoned<float>(n);
  copy(from_pinned, pinned);  // host -> host (pinned -> pageable)
  finish();
  curt_test::require_same_bytes(from_pinned, x);

  curt::managed_buffer<float> managed(d, n);
  std::memset(managed.data(), 0xFF, managed.size_bytes());
  copy(managed, b);  // device -> managed
  finish();
  curt_test::require_same_bytes(managed, x);

  std::array<int, 257> small{};
  std::vector<int> small_x = curt_test::random_ints(small.size(), -1000000, 1000000);
  curt::device_buffer<int> small_device(d, small.size());
  copy(small_device, small_x);
  std::memset(small.data(), 0xFF, sizeof small);
  copy(small, small_device);  // device -> std::array
  finish();
  curt_test::require_same_bytes(small, small_x);

  // Parts of ranges through spans: the middle of b into the front of a fresh buffer.
  std::size_t offset = n / 3, count = n / 2;
  curt::device_buffer<float> part(d, count);
  curt::memset(part, 0xFF, s);
  s.synchronize();
  copy(curt::span(part), curt::span(std::as_const(b), offset, count));
  std::vector<float> part_back = poisoned<float>(count);
  copy(part_back, part);
  finish();
  curt_test::require_same_bytes(part_back, std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(offset),
                                             x.begin() + static_cast<std::ptrdiff_t>(offset + count)));
}

}  // namespace

TEST_CASE("copies run in every direction, waited for and on a stream") {
  check_every_direction(false);
  check_every_direction(true);
}

// A copy must come after the kernel that writes its source: curt::stream is non-blocking, so a
// stream-less cudaMemcpy would read the poison while the kernel still spins. copy_and_wait on the
// kernel's stream reads the kernel's results.
TEST_CASE("copy_and_wait reads what a kernel queued before it on the stream wrote") {
  curt::device d(0);
  curt::stream s(d);  // non-blocking
  const int n = static_cast<int>(random_size());
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  const float a = random_float(), b = random_float();
  curt::device_buffer<float> dx(d, std::size_t(n)), dy(d, std::size_t(n));
  curt::copy_and_wait(dx, x, s);
  curt::memset(dy, 0xFF, s);  // poison (NaN)
  curt::launch(s, curt::launch_config(dim3((n + 255) / 256), dim3(256)), curt_test::slow_affine,
               static_cast<const float*>(dx.data()), dy.data(), n, a, b, 100'000'000ull);
  std::vector<float> back = poisoned<float>(std::size_t(n));
  curt::copy_and_wait(back, dy, s);
  std::size_t bad = 0;
  for (int i = 0; i < n; ++i) {  // as slow_affine: a product rounded, then a sum rounded
    volatile float product = a * x[i];
    bad += back[i] != product + b;
  }
  INFO(bad << " of " << n << " differ from the kernel's results (NaN: the copy did not wait)");
  CHECK(bad == 0);
}

TEST_CASE("copy_and_wait refuses a capturing stream before it queues anything; the capture goes on",
          "[api-error]") {
  curt::device d(0);
  curt::stream s(d);
  std::vector<float> x = curt_test::random_floats(16);
  curt::device_buffer<float> b(d, 16);
  curt::capture_scope capture(s);
  curt_test::require_cuda_error([&] { curt::copy_and_wait(b, x, s); },
                                cudaErrorStreamCaptureUnsupported,
                                {"curt::copy_and_wait", "being captured", "nothing was queued"});
  CHECK(s.is_capturing());  // not invalidated
  curt::copy(b, x, s);      // the copy itself is captured
  curt::graph g = capture.end();
  CHECK(g.node_count() == 1);
}

TEST_CASE("copy_n, fill_n and memset_n work on raw pointers") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  std::vector<float> x = curt_test::random_floats(n);
  curt::device_buffer<float> a(d, n), b(d, n);
  curt::memset_n(a.data(), n, 0xFF, s);
  curt::copy_n(a.data(), x.data(), n, s);
  curt::copy_n(b.data(), static_cast<const float*>(a.data()), n, s);
  std::vector<float> back = poisoned<float>(n);
  curt::copy_n(back.data(), static_cast<const float*>(b.data()), n, s);
  s.synchronize();
  curt_test::require_same_bytes(back, x);

  const float value = random_mixed_value<float>();
  curt::fill_n(b.data() + 1, n - 2, value, s);  // not the first and the last element
  curt::memset_n(a.data(), n, 0, s);
  s.synchronize();
  std::vector<float> got = download(b, s);
  CHECK(std::memcmp(&got.front(), &x.front(), sizeof(float)) == 0);
  CHECK(std::memcmp(&got.back(), &x.back(), sizeof(float)) == 0);
  require_all(std::vector<float>(got.begin() + 1, got.end() - 1), value);
  require_all(download(a, s), 0.0f);
}

TEST_CASE("copies of different sizes are refused, naming both sizes") {
  curt::device d(0);
  curt::stream s(d);
  curt::device_buffer<float> ten(d, 10);
  std::vector<float> twelve(12, 1.0f);
  curt_test::require_cuda_error([&] { curt::copy(ten, twelve, s); }, cudaErrorInvalidValue,
                                {"curt::copy(destination of 10 elements, source of 12 elements)",
                                 "40 bytes", "48 bytes"});
  curt_test::require_cuda_error([&] { curt::copy_and_wait(twelve, ten, s); },
                                cudaErrorInvalidValue,
                                {"destination of 12 elements, source of 10 elements"});
  std::vector<double> three(3), four(4);
  curt_test::require_cuda_error([&] { curt::copy_and_wait(three, four, s); }, cudaErrorInvalidValue,
                                {"destination of 3 elements", "source of 4 elements"});
  curt_test::require_cuda_error([&] { (void)curt::span(ten, 8, 4); }, cudaErrorInvalidValue,
                                {"range of 10 elements, offset 8, count 4", "by 2 elements"});
  // Nothing was enqueued or left behind.
  s.synchronize();
  CHECK(cudaGetLastError() == cudaSuccess);
}

namespace {
// A trivially copyable range that holds its elements inside itself, as a user might write one:
// its type cannot be told from a view's, so curt refuses a temporary of it at run time.
struct inline_floats {
  float values[16];
  float* data() { return values; }
  const float* data() const { return values; }
  std::size_t size() const { return 16; }
};
}  // namespace

TEST_CASE("asynchronous copies refuse a temporary that holds its elements inside itself, before "
          "any CUDA call; the same range named is copied") {
  curt::device d(0);
  curt::stream s(d);
  std::vector<float> values = curt_test::random_floats(16);
  curt::device_buffer<float> b(d, 16);
  curt::pitched_buffer<float> p(d, 4, 4);
  curt::copy_and_wait(b, poisoned<float>(16), s);  // waited for: temporaries are fine
  curt::copy_and_wait(p, poisoned<float>(16), s);
  auto make_array = [&] {
    cuda::std::array<float, 16> a{};
    for (std::size_t i = 0; i < 16; ++i) a[i] = values[i];
    return a;
  };
  auto make_inline = [&] {
    inline_floats f{};
    for (std::size_t i = 0; i < 16; ++i) f.values[i] = values[i];
    return f;
  };
  const char* source = "curt::copy(dst, src, stream): the source";
  const char* destination = "curt::copy(dst, src, stream): the destination";
  curt_test::require_cuda_error([&] { curt::copy(b, make_array(), s); }, cudaErrorInvalidValue,
                                {source, "inside itself", "give it a name"});
  curt_test::require_cuda_error([&] { curt::copy(b, make_inline(), s); }, cudaErrorInvalidValue,
                                {source, "inside itself"});
  curt_test::require_cuda_error([&] { curt::copy(make_inline(), b, s); }, cudaErrorInvalidValue,
                                {destination, "inside itself"});
  curt_test::require_cuda_error([&] { curt::copy(cuda::std::array<float, 16>{}, p, s); },
                                cudaErrorInvalidValue,
                                {"curt::copy(dst, pitched, stream): the destination",
                                 "inside itself"});
  s.synchronize();
  CHECK(cudaGetLastError() == cudaSuccess);
  std::vector<float> back = poisoned<float>(16);
  curt::copy_and_wait(back, b, s);
  curt_test::require_same_bytes(back, poisoned<float>(16));  // nothing was copied

  // Named, they live until the stream is done: copied.
  cuda::std::array<float, 16> named_array = make_array();
  inline_floats named_inline{};
  curt::copy(b, named_array, s);
  curt::copy(named_inline, b, s);
  curt::copy(p, named_array, s);
  s.synchronize();
  curt_test::require_same_bytes(std::vector<float>(named_inline.values, named_inline.values + 16),
                                values);
  std::vector<float> from_pitched = poisoned<float>(16);
  curt::copy_and_wait(from_pitched, p, s);
  curt_test::require_same_bytes(from_pitched, values);
}

TEST_CASE("fills write 1-, 2-, 4-, 8- and 12-byte values by each path") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();

  SECTION("1 byte (cudaMemsetAsync)") {
    curt::device_buffer<std::uint8_t> b(d, n);
    curt::memset(b, 0xFF, s);
    auto value = static_cast<std::uint8_t>(curt_test::random_ints(1, 1, 254)[0]);
    curt::fill(b, value, s);
    s.synchronize();
    require_all(download(b, s), value);
  }
  SECTION("2 bytes (cuMemsetD16Async), also on a part of the buffer") {
    curt::device_buffer<std::uint16_t> b(d, n);
    curt::memset(b, 0xFF, s);
    auto value = random_mixed_value<std::uint16_t>();
    curt::fill(curt::span(b, 1, n - 2), value, s);  // not the first and the last element
    s.synchronize();
    std::vector<std::uint16_t> got = download(b, s);
    CHECK(got.front() == 0xFFFF);
    CHECK(got.back() == 0xFFFF);
    require_all(std::vector<std::uint16_t>(got.begin() + 1, got.end() - 1), value);
  }
  SECTION("4 bytes (cuMemsetD32Async) and a 4-byte value of equal bytes (cudaMemsetAsync)") {
    curt::device_buffer<float> b(d, n);
    curt::memset(b, 0xFF, s);
    float value = random_mixed_value<float>();
    curt::fill(b, value, s);
    s.synchronize();
    require_all(download(b, s), value);
    curt::device_buffer<std::int32_t> i(d, n);
    curt::memset(i, 0xFF, s);
    auto uniform = static_cast<std::int32_t>(0x01010101 * curt_test::random_ints(1, 1, 0x7e)[0]);
    curt::fill(i, uniform, s);
    s.synchronize();
    require_all(download(i, s), uniform);
  }
  SECTION("8 and 12 bytes (curt's kernel, in this nvcc translation unit)") {
    curt::device_buffer<double> b(d, n);
    curt::memset(b, 0xFF, s);
    double value = random_mixed_value<double>();
    curt::fill(b, value, s);
    curt::device_buffer<rgb> c(d, n);
    curt::memset(c, 0xFF, s);
    rgb color{random_float(), random_float(), random_float()};
    curt::fill(c, color, s);
    s.synchronize();
    require_all(download(b, s), value);
    require_all(download(c, s), color);
  }
  SECTION("from a host compiler's translation unit: memsets, and a clear refusal otherwise") {
    curt::device_buffer<std::uint16_t> b16(d, n);
    curt::device_buffer<float> b32(d, n);
    curt::memset(b16, 0xFF, s);
    curt::memset(b32, 0xFF, s);
    auto v16 = random_mixed_value<std::uint16_t>();
    float v32 = random_mixed_value<float>();
    curt_test::fill_from_host_compiler(b16, v16, s);
    curt_test::fill_from_host_compiler(b32, v32, s);
    s.synchronize();
    require_all(download(b16, s), v16);
    require_all(download(b32, s), v32);
    curt::device_buffer<double> b64(d, n);
    curt_test::require_cuda_error(
        [&] { curt_test::fill_from_host_compiler(b64, random_mixed_value<double>(), s); },
        cudaErrorInvalidValue, {"curt::fill(8-byte value)", "nvcc"});
  }
}

TEST_CASE("memset sets every byte") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();
  curt::device_buffer<std::uint32_t> b(d, n);
  auto byte = static_cast<unsigned char>(curt_test::random_ints(1, 1, 254)[0]);
  curt::memset(b, 0xFF, s);
  curt::memset(b, byte, s);
  s.synchronize();
  std::uint32_t want = 0x01010101u * byte;
  require_all(download(b, s), want);
}

TEST_CASE("pitched 2D buffers round-trip random extents, laid out row by row at the pitch") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t w = static_cast<std::size_t>(curt_test::random_ints(1, 1, 700)[0]);
  std::size_t h = static_cast<std::size_t>(curt_test::random_ints(1, 1, 60)[0]);
  INFO("extents " << w << " x " << h);
  std::vector<float> x = curt_test::random_floats(w * h);

  curt::pitched_buffer<float> p(d, w, h), q(d, w, h);
  CHECK(p.width() == w);
  CHECK(p.height() == h);
  CHECK(p.element_count() == w * h);
  CHECK(p.pitch() >= w * sizeof(float));
  curt::memset(p, 0xFF, s);
  curt::memset(q, 0xFF, s);
  curt::copy(p, x, s);
  s.synchronize();

  // The layout, read with the raw API: row y starts y * pitch bytes after data().
  std::vector<float> raw = poisoned<float>(w * h);
  REQUIRE(cudaMemcpy2D(raw.data(), w * sizeof(float), p.data(), p.pitch(), w * sizeof(float), h,
                       cudaMemcpyDeviceToHost) == cudaSuccess);
  curt_test::require_same_bytes(raw, x);

  curt::copy(q, p, s);  // pitched -> pitched
  std::vector<float> back = poisoned<float>(w * h);
  curt::copy(back, q, s);
  s.synchronize();
  curt_test::require_same_bytes(back, x);

  // Waited for, and a dense device range on the other side.
  curt::device_buffer<float> dense(d, w * h);
  curt::copy_and_wait(dense, q, s);
  curt::memset(p, 0xFF, s);
  curt::copy_and_wait(p, dense, s);
  back = poisoned<float>(w * h);
  curt::copy_and_wait(back, p, s);
  curt_test::require_same_bytes(back, x);

  std::vector<float> wrong(w * h + 1);
  std::string extents = std::to_string(w) + " x " + std::to_string(h);
  curt_test::require_cuda_error([&] { curt::copy(p, wrong, s); }, cudaErrorInvalidValue,
                                {extents.c_str(), "must hold exactly", "dense source"});
  curt::pitched_buffer<float> other(d, w + 1, h);
  curt_test::require_cuda_error([&] { curt::copy(other, p, s); }, cudaErrorInvalidValue,
                                {"extents differ"});

  curt::pitched_buffer<float> none(d, 0, h);
  CHECK(none.valid());
  CHECK(none.data() == nullptr);
  std::vector<float> nothing;
  curt::copy(none, nothing, s);
  curt::pitched_buffer<float> moved = std::move(p);
  curt_test::require_cuda_error([&] { curt::copy(p, x, s); }, cudaErrorInvalidResourceHandle,
                                {"moved-from", "pitched_buffer<float>"});
}

TEST_CASE("pitched 3D buffers round-trip random extents, laid out slice by slice") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t w = static_cast<std::size_t>(curt_test::random_ints(1, 1, 100)[0]);
  std::size_t h = static_cast<std::size_t>(curt_test::random_ints(1, 1, 20)[0]);
  std::size_t depth = static_cast<std::size_t>(curt_test::random_ints(1, 1, 10)[0]);
  INFO("extents " << w << " x " << h << " x " << depth);
  std::vector<int> x = curt_test::random_ints(w * h * depth, -1000000, 1000000);

  curt::pitched_buffer_3d<int> p(d, w, h, depth), q(d, w, h, depth);
  CHECK(p.depth() == depth);
  CHECK(p.pitch() >= w * sizeof(int));
  curt::memset(p, 0xFF, s);
  curt::memset(q, 0xFF, s);
  curt::copy(p, x, s);
  s.synchronize();

  // The layout with the raw API: slice z starts z * height * pitch bytes after data().
  std::vector<int> raw = poisoned<int>(w * h * depth);
  for (std::size_t z = 0; z < depth; ++z)
    REQUIRE(cudaMemcpy2D(raw.data() + z * w * h, w * sizeof(int),
                         reinterpret_cast<const char*>(p.data()) + z * h * p.pitch(), p.pitch(),
                         w * sizeof(int), h, cudaMemcpyDeviceToHost) == cudaSuccess);
  curt_test::require_same_bytes(raw, x);

  curt::copy(q, p, s);
  std::vector<int> back = poisoned<int>(w * h * depth);
  curt::copy(back, q, s);
  s.synchronize();
  curt_test::require_same_bytes(back, x);
  back = poisoned<int>(w * h * depth);
  curt::copy_and_wait(back, q, s);
  curt_test::require_same_bytes(back, x);

  std::vector<int> wrong(w * h * depth + 1);
  // The extent as a region's: " x depth" shown where the depth is not 1.
  std::string extents = std::to_string(w) + " x " + std::to_string(h) +
                        (depth != 1 ? " x " + std::to_string(depth) : std::string());
  curt_test::require_cuda_error([&] { curt::copy(wrong, p, s); }, cudaErrorInvalidValue,
                                {extents.c_str(), "dense destination"});
}

TEST_CASE("pointer attributes tell every kind of memory, its device and its pool") {
  curt::device d(0);
  curt::stream s(d);
  std::size_t n = random_size();

  curt::device_buffer<float> device(d, n);
  curt::pointer_info info = curt::pointer_attributes(device.data());
  CHECK(info.kind == curt::memory_kind::device);
  CHECK(info.device == 0);
  CHECK(info.device_pointer == device.data());
  CHECK(info.pool == nullptr);

  curt::pinned_buffer<float> pinned(d, n, curt::pinned_flags::mapped);
  info = curt::pointer_attributes(pinned.data());
  CHECK(info.kind == curt::memory_kind::host);
  CHECK(info.host_pointer == pinned.data());
  CHECK(info.device_pointer == pinned.device_pointer());
  CHECK(info.pool == nullptr);

  curt::managed_buffer<float> managed(d, n);
  info = curt::pointer_attributes(managed.data());
  CHECK(info.kind == curt::memory_kind::managed);
  CHECK(info.host_pointer == managed.data());
  CHECK(info.device_pointer == managed.data());
  CHECK(info.pool == nullptr);

  curt_test::page_array<float> registered(n);
  curt::host_registration registration(d, registered);
  info = curt::pointer_attributes(registered.data() + n / 2);  // inside the range
  CHECK(info.kind == curt::memory_kind::host);
  CHECK(info.host_pointer == registered.data() + n / 2);

  std::vector<float> pageable(n);
  info = curt::pointer_attributes(pageable.data());
  CHECK(info.kind == curt::memory_kind::unregistered);
  CHECK(info.device == -2);  // cudaInvalidDeviceId
  CHECK(info.device_pointer == nullptr);
  // CUDA 13.0 on the H200 gives the pointer itself (measured); the documentation names no value.
  CHECK((info.host_pointer == pageable.data() || info.host_pointer == nullptr));
  CHECK(info.pool == nullptr);

  // Stream-ordered memory names its pool.
  cudaMemPool_t default_pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&default_pool, 0) == cudaSuccess);
  void* from_pool = nullptr;
  REQUIRE(cudaMallocAsync(&from_pool, n * sizeof(float), s.get()) == cudaSuccess);
  s.synchronize();
  info = curt::pointer_attributes(from_pool);
  CHECK(info.kind == curt::memory_kind::device);
  CHECK(info.device == 0);
  CHECK(info.pool == default_pool);
  REQUIRE(cudaFreeAsync(from_pool, s.get()) == cudaSuccess);
  s.synchronize();
}

// A fill no memset can write runs curt's kernel: in the stream's own context, as curt::launch,
// also while another context of the device (a user's) is current. (It was a runtime launch in
// the current context.)
TEST_CASE("fill of a value no memset writes runs in the stream's context, another one current") {
  const std::size_t n = 1025 + static_cast<std::size_t>(curt_test::random_ints(1, 0, 999)[0]);
  const double value = 1.5 + curt_test::random_ints(1, 1, 1000)[0];  // 8 bytes that differ
  curt::device d0(0);
  std::string thrown, setup;
  std::vector<double> filled_back;
  curt_test::on_fresh_thread([&] {
    if (curt_test::current_context() != nullptr) {
      setup = "the fresh thread had a context";
      return;
    }
    curt::stream s(d0);                         // in device 0's primary context P
    curt::device_buffer<double> filled(d0, n);  // in P too
    {
      curt_test::user_context u(0);  // U current from here on
      try {
        curt::fill(filled, value, s);
      } catch (const std::exception& e) {
        thrown = e.what();
      }
      if (curt_test::current_context() != u.get()) setup = "U did not stay current";
      CUcontext popped = nullptr;
      CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
    }
    if (thrown.empty()) filled_back = download(filled, s);
  });
  REQUIRE(setup.empty());
  INFO("curt::fill threw: " << thrown);
  REQUIRE(thrown.empty());
  CHECK(filled_back == std::vector<double>(n, value));
}
