// Arrays, textures and surfaces (curt/array.hpp, curt/texture.hpp) on a device: round trips host
// -> array -> host for 1D, 2D, 3D and layered arrays of several channel formats, pitched <->
// array and array <-> array copies, texture fetches with point filtering (exact) and linear
// filtering (against a CPU bilinear reference within the bound of the hardware's 8-bit weights),
// clamp, wrap and border at the edges, a surface written and read by kernels, textures over
// linear memory (tex1Dfetch) and pitched memory (tex2D), and a thread left without a context.
//
// Inputs are fresh random values in [1, 2] (no zeros: relative errors mean something); every
// output is poisoned (0xFF bytes, a NaN for floats) before the kernel or copy that writes it.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>

#include <curt/array.hpp>
#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/pitched.hpp>
#include <curt/stream.hpp>
#include <curt/texture.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void fetch_2d(cudaTextureObject_t texture, const float2* at, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(texture, at[i].x, at[i].y);
}

__global__ void fetch_linear(cudaTextureObject_t texture, const int* index, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float>(texture, index[i]);
}

// Writes 2 * in + 1 into the surface (x in bytes), then reads it back into out, element by element.
__global__ void surface_write(cudaSurfaceObject_t surface, const float* in, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < width && y < height) surf2Dwrite(2.0f * in[y * width + x] + 1.0f, surface, x * 4, y);
}
__global__ void surface_read(cudaSurfaceObject_t surface, float* out, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < width && y < height) out[y * width + x] = surf2Dread<float>(surface, x * 4, y);
}

std::size_t random_extent(int lo, int hi) {
  return static_cast<std::size_t>(curt_test::random_ints(1, lo, hi)[0]);
}

using curt_test::poisoned;

// Random elements of T whose bytes are 1..255 each (no zero byte, no NaN).
template <class T>
std::vector<T> random_elements(std::size_t n) {
  std::vector<int> bytes = curt_test::random_ints(n * sizeof(T), 1, 255);
  std::vector<T> v(n);
  auto* raw = reinterpret_cast<unsigned char*>(v.data());
  for (std::size_t i = 0; i < bytes.size(); ++i) raw[i] = static_cast<unsigned char>(bytes[i]);
  return v;
}
template <>
std::vector<float> random_elements<float>(std::size_t n) {
  return curt_test::random_floats(n, 1.0f, 2.0f);
}

// host -> array -> host; then array -> device buffer -> a second array -> host (make() gives an
// array of the same shape).
template <class T, class Make>
void round_trip(Make make, curt::stream_ref s) {
  curt::cuda_array<T> array = make();
  INFO("extents " << array.width() << " x " << array.height() << " x " << array.depth()
                  << ", layers " << array.layers());
  const std::vector<T> x = random_elements<T>(array.element_count());
  std::vector<T> back = poisoned<T>(x.size());
  curt::copy(array, x, s);
  curt::copy_and_wait(back, array, s);
  curt_test::require_same_bytes(back, x);

  curt::device_buffer<T> dense(array.device(), x.size());
  curt::memset(dense, 0xFF, s);
  curt::copy(dense, array, s);
  curt::cuda_array<T> other = make();
  curt::copy(other, dense, s);
  curt::cuda_array<T> third = make();
  curt::copy(third, other, s);  // array -> array
  back = poisoned<T>(x.size());
  curt::copy_and_wait(back, third, s);
  curt_test::require_same_bytes(back, x);

  std::vector<T> wrong(x.size() + 1);
  curt_test::require_cuda_error([&] { curt::copy(array, wrong, s); }, cudaErrorInvalidValue,
                                {"extents differ", std::to_string(x.size() + 1).c_str()});
}

// The texel a point-filtered, clamped fetch at coordinate c (in elements) reads along an extent n.
int clamped(float c, int n) {
  return std::min(std::max(static_cast<int>(std::floor(c)), 0), n - 1);
}

// Runs fetch_2d at `at` and returns what it read (the output poisoned with NaN first).
std::vector<float> fetch(const curt::texture_object& texture, const std::vector<float2>& at,
                         curt::stream_ref s) {
  const int n = static_cast<int>(at.size());
  curt::device_buffer<float2> where(texture.device(), at.size());
  curt::device_buffer<float> out(texture.device(), at.size());
  curt::copy(where, at, s);
  curt::memset(out, 0xFF, s);
  curt::launch(s, curt::launch_config(curt::ceil_div(n, 128), 128), fetch_2d, texture.get(),
               where.data(), out.data(), n);
  std::vector<float> got = poisoned<float>(at.size());
  curt::copy_and_wait(got, out, s);
  return got;
}

}  // namespace

TEST_CASE("arrays of every shape round-trip host -> array -> host, and through device memory") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t w = random_extent(1, 700), h = random_extent(1, 60), z = random_extent(1, 9);
  round_trip<int>([&] { return curt::cuda_array<int>::one_d(d, w); }, s);
  round_trip<float>([&] { return curt::cuda_array<float>::two_d(d, w, h); }, s);
  round_trip<uchar4>([&] { return curt::cuda_array<uchar4>::three_d(d, w % 100 + 1, h, z); }, s);
  round_trip<float2>([&] { return curt::cuda_array<float2>::layered_1d(d, w, z); }, s);
  round_trip<short>([&] { return curt::cuda_array<short>::layered_2d(d, w % 200 + 1, h, z); }, s);

  curt::cuda_array<float> a = curt::cuda_array<float>::layered_2d(d, 5, 4, 3);
  CHECK(a.width() == 5);
  CHECK(a.height() == 4);
  CHECK(a.depth() == 1);
  CHECK(a.layers() == 3);
  CHECK(a.element_count() == 60);
  CHECK(a.device() == d);
  // The raw description of what was made agrees.
  cudaChannelFormatDesc channel{};
  cudaExtent extent{};
  unsigned flags = 0;
  REQUIRE(cudaArrayGetInfo(&channel, &extent, &flags, a.get()) == cudaSuccess);
  CHECK(extent.width == 5);
  CHECK(extent.height == 4);
  CHECK(extent.depth == 3);
  CHECK((flags & cudaArrayLayered) != 0);
  CHECK(channel.f == cudaChannelFormatKindFloat);
  CHECK(channel.x == 32);

  // adopt: an array made with the raw API, freed by its owner.
  cudaArray_t raw = nullptr;
  const cudaChannelFormatDesc ints = cudaCreateChannelDesc<int>();
  REQUIRE(cudaMalloc3DArray(&raw, &ints, {16, 2, 0}) == cudaSuccess);
  curt::cuda_array<int> adopted = curt::cuda_array<int>::adopt(d, raw, {16, 2, 0}, 0);
  CHECK(adopted.element_count() == 32);
  std::vector<int> values = curt_test::random_ints(32, 1, 1 << 30), back = poisoned<int>(32);
  curt::copy(adopted, values, s);
  curt::copy_and_wait(back, adopted, s);
  curt_test::require_same_bytes(back, values);
}

TEST_CASE("pitched buffers and arrays copy both ways, 2D, 3D and layered") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t w = random_extent(1, 300), h = random_extent(1, 40), z = random_extent(1, 6);
  INFO("extents " << w << " x " << h << " x " << z);
  {
    const std::vector<float> x = curt_test::random_floats(w * h, 1.0f, 2.0f);
    curt::pitched_buffer<float> from(d, w, h), to(d, w, h);
    curt::cuda_array<float> array = curt::cuda_array<float>::two_d(d, w, h);
    curt::copy(from, x, s);
    curt::memset(to, 0xFF, s);
    curt::copy(array, from, s);
    curt::copy(to, array, s);
    std::vector<float> back = poisoned<float>(x.size());
    curt::copy_and_wait(back, to, s);
    curt_test::require_same_bytes(back, x);
    curt::pitched_buffer<float> narrow(d, w + 1, h);
    curt_test::require_cuda_error([&] { curt::copy(array, narrow, s); }, cudaErrorInvalidValue,
                                  {"extents differ", "pitched buffer"});
  }
  for (bool layered : {false, true}) {
    const std::vector<int> x = curt_test::random_ints(w * h * z, 1, 1 << 30);
    curt::pitched_buffer_3d<int> from(d, w, h, z), to(d, w, h, z);
    curt::cuda_array<int> array = layered ? curt::cuda_array<int>::layered_2d(d, w, h, z)
                                          : curt::cuda_array<int>::three_d(d, w, h, z);
    curt::copy(from, x, s);
    curt::memset(to, 0xFF, s);
    curt::copy(array, from, s);
    curt::copy(to, array, s);
    std::vector<int> back = poisoned<int>(x.size());
    curt::copy_and_wait(back, to, s);
    curt_test::require_same_bytes(back, x);
  }
}

TEST_CASE("point-filtered fetches are exact; clamp, border and wrap at the edges") {
  curt::device d(0);
  curt::stream s(d);
  const int w = static_cast<int>(random_extent(2, 300)), h = static_cast<int>(random_extent(2, 50));
  INFO("extents " << w << " x " << h);
  const std::vector<float> texels = curt_test::random_floats(std::size_t(w) * h, 1.0f, 2.0f);
  curt::cuda_array<float> image = curt::cuda_array<float>::two_d(d, w, h);
  curt::copy(image, texels, s);
  const auto texel = [&](int x, int y) { return texels[std::size_t(y) * w + x]; };

  // Inside, away from texel boundaries (fractions 0.1 to 0.9), and up to 3 texels outside.
  std::vector<float2> at;
  for (float f : curt_test::random_floats(2000, 0.0f, 1.0f)) {
    const auto i = static_cast<float>(curt_test::random_ints(1, -3, w + 2)[0]);
    const auto j = static_cast<float>(curt_test::random_ints(1, -3, h + 2)[0]);
    at.push_back({i + 0.1f + 0.8f * f, j + 0.9f - 0.8f * f});
  }
  {
    curt::texture_object clamp(image);  // the defaults: clamp, point, coordinates in elements
    CHECK(clamp.device() == d);
    const std::vector<float> got = fetch(clamp, at, s);
    std::vector<float> want;
    for (const float2& c : at) want.push_back(texel(clamped(c.x, w), clamped(c.y, h)));
    curt_test::require_same_bytes(got, want);
  }
  {
    const float border = 3.5f;  // no texel's value (they are in [1, 2])
    curt::texture_object framed(
        image,
        curt::texture_description().address(curt::address_mode::border).border_color(border));
    const std::vector<float> got = fetch(framed, at, s);
    std::vector<float> want;
    for (const float2& c : at) {
      const bool inside = c.x >= 0 && c.x < w && c.y >= 0 && c.y < h;
      want.push_back(inside ? texel(clamped(c.x, w), clamped(c.y, h)) : border);
    }
    curt_test::require_same_bytes(got, want);
  }
  {
    // Wrap: normalized coordinates of texel centres shifted by whole turns (-2 to 2).
    curt::texture_object tiled(
        image,
        curt::texture_description().address(curt::address_mode::wrap).normalized_coordinates());
    std::vector<float2> turns;
    std::vector<float> want;
    for (int k = 0; k < 500; ++k) {
      const std::vector<int> r = curt_test::random_ints(4, -2, 2);
      const int i = (r[0] + 2) * (w - 1) / 4, j = (r[1] + 2) * (h - 1) / 4;
      turns.push_back({(i + 0.5f) / w + float(r[2]), (j + 0.5f) / h + float(r[3])});
      want.push_back(texel(i, j));
    }
    curt_test::require_same_bytes(fetch(tiled, turns, s), want);
  }
}

TEST_CASE("linear filtering matches a CPU bilinear reference within the 8-bit weights' bound") {
  curt::device d(0);
  curt::stream s(d);
  const int w = static_cast<int>(random_extent(2, 200)), h = static_cast<int>(random_extent(2, 40));
  INFO("extents " << w << " x " << h);
  const std::vector<float> texels = curt_test::random_floats(std::size_t(w) * h, 1.0f, 2.0f);
  curt::cuda_array<float> image = curt::cuda_array<float>::two_d(d, w, h);
  curt::copy(image, texels, s);
  curt::texture_object smooth(image, curt::texture_description().filter(curt::filter_mode::linear));
  std::vector<float2> at;
  const std::vector<float> xs = curt_test::random_floats(3000, -1.0f, w + 1.0f);
  const std::vector<float> ys = curt_test::random_floats(3000, -1.0f, h + 1.0f);
  for (std::size_t k = 0; k < xs.size(); ++k) at.push_back({xs[k], ys[k]});
  const std::vector<float> got = fetch(smooth, at, s);

  // The reference: the four texels around (x - 0.5, y - 0.5), clamped, weighted by the
  // fractions a and b. The hardware keeps each weight in 9-bit fixed point with 8 fractional
  // bits (CUDA Programming Guide, "Linear Filtering"), so a and b are off by less than 2^-8.
  // The result's derivative in a is (1 - b)(T10 - T00) + b (T11 - T01), at most the spread of
  // the four texels (max - min), and likewise in b: the error is below 2 * 2^-8 * spread, plus
  // float rounding of the interpolation (a few ulp of values in [1, 2]: 1e-6).
  std::size_t bad = 0, first = 0;
  double worst = 0;
  for (std::size_t k = 0; k < at.size(); ++k) {
    const double x = double(at[k].x) - 0.5, y = double(at[k].y) - 0.5;
    const double x0 = std::floor(x), y0 = std::floor(y), a = x - x0, b = y - y0;
    const auto t = [&](double i, double j) {
      return double(texels[std::size_t(clamped(float(j), h)) * w + clamped(float(i), w)]);
    };
    const double t00 = t(x0, y0), t10 = t(x0 + 1, y0), t01 = t(x0, y0 + 1), t11 = t(x0 + 1, y0 + 1);
    const double want =
        (1 - a) * (1 - b) * t00 + a * (1 - b) * t10 + (1 - a) * b * t01 + a * b * t11;
    const double spread = std::max({t00, t10, t01, t11}) - std::min({t00, t10, t01, t11});
    const double error = std::fabs(got[k] - want), bound = 2.0 * spread / 256.0 + 1e-6;
    worst = std::max(worst, error / bound);
    if (!(error <= bound) && bad++ == 0) first = k;
  }
  INFO(bad << " of " << at.size() << " outside the bound; first at (" << at[first].x << ", "
           << at[first].y << "): got " << got[first] << "; worst error / bound " << worst);
  CHECK(bad == 0);
}

TEST_CASE("a surface written by a kernel, read by another, and copied back") {
  curt::device d(0);
  curt::stream s(d);
  const int w = static_cast<int>(random_extent(1, 500)), h = static_cast<int>(random_extent(1, 40));
  INFO("extents " << w << " x " << h);
  const std::size_t n = std::size_t(w) * h;
  const std::vector<float> x = curt_test::random_floats(n, 1.0f, 2.0f);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = 2.0f * x[i] + 1.0f;  // exact: 2x is

  curt::cuda_array<float> canvas =
      curt::cuda_array<float>::two_d(d, w, h, curt::array_flags::surface_load_store);
  curt::surface_object surface(canvas);
  CHECK(surface.device() == d);
  std::vector<float> poison = poisoned<float>(n);
  curt::copy(canvas, poison, s);
  curt::device_buffer<float> in(d, n), out(d, n);
  curt::copy(in, x, s);
  curt::memset(out, 0xFF, s);
  const curt::launch_config config(dim3(unsigned(curt::ceil_div(w, 128)), unsigned(h)), 128);
  curt::launch(s, config, surface_write, surface.get(), in.data(), w, h);
  curt::launch(s, config, surface_read, surface.get(), out.data(), w, h);
  std::vector<float> read = poisoned<float>(n), copied = poisoned<float>(n);
  curt::copy(read, out, s);
  curt::copy_and_wait(copied, canvas, s);
  curt_test::require_same_bytes(read, want);
  curt_test::require_same_bytes(copied, want);

  curt::cuda_array<float> plain = curt::cuda_array<float>::two_d(d, w, h);
  curt_test::require_cuda_error([&] { curt::surface_object refused(plain); }, cudaErrorInvalidValue,
                                {"surface_load_store"});
}

TEST_CASE("textures over linear memory (tex1Dfetch) and over pitched memory (tex2D)") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t n = random_extent(1, 100000);
  const std::vector<float> x = curt_test::random_floats(n, 1.0f, 2.0f);
  curt::device_buffer<float> values(d, n);
  curt::copy(values, x, s);
  curt::texture_object linear(values);
  const std::vector<int> index = curt_test::random_ints(4096, 0, static_cast<int>(n) - 1);
  curt::device_buffer<int> where(d, index.size());
  curt::device_buffer<float> out(d, index.size());
  curt::copy(where, index, s);
  curt::memset(out, 0xFF, s);
  curt::launch(s, curt::launch_config(32, 128), fetch_linear, linear.get(), where.data(),
               out.data(), static_cast<int>(index.size()));
  std::vector<float> got = poisoned<float>(index.size()), want;
  curt::copy_and_wait(got, out, s);
  for (int i : index) want.push_back(x[std::size_t(i)]);
  curt_test::require_same_bytes(got, want);

  const int w = static_cast<int>(random_extent(1, 400)), h = static_cast<int>(random_extent(1, 50));
  INFO("pitched extents " << w << " x " << h);
  const std::vector<float> texels = curt_test::random_floats(std::size_t(w) * h, 1.0f, 2.0f);
  curt::pitched_buffer<float> image(d, w, h);
  curt::copy(image, texels, s);
  curt::texture_object pitched(image);
  std::vector<float2> centres;
  want.clear();
  for (int k = 0; k < 2000; ++k) {
    const std::vector<int> r = curt_test::random_ints(2, 0, 1 << 20);
    const int i = r[0] % w, j = r[1] % h;
    centres.push_back({i + 0.5f, j + 0.5f});
    want.push_back(texels[std::size_t(j) * w + i]);
  }
  curt_test::require_same_bytes(fetch(pitched, centres, s), want);
}

// CUDA refuses memory past its texture limits with a bare "invalid argument"; curt then names the
// limit (asked only after the refusal).
TEST_CASE("memory past the device's texture limits is refused naming the limit") {
  curt::device d(0);
  const cudaDeviceProp& p = d.properties();
  // Pitched: one row more than a pitched texture may have (a narrow image: a few MiB).
  const std::size_t rows = static_cast<std::size_t>(p.maxTexture2DLinear[1]) + 1;
  curt::pitched_buffer<float> tall(d, 16, rows);
  const std::string pitched_limit = "pitched textures are at most " +
                                    std::to_string(p.maxTexture2DLinear[0]) + " x " +
                                    std::to_string(p.maxTexture2DLinear[1]);
  curt_test::require_cuda_error([&] { curt::texture_object t(tall); }, cudaErrorInvalidValue,
                                {"cudaCreateTextureObject", pitched_limit.c_str()});
  // Linear: one element more than a linear float texture may hold, where that fits in memory.
  const cudaChannelFormatDesc format = cudaCreateChannelDesc<float>();
  std::size_t most = 0;
  REQUIRE(cudaDeviceGetTexture1DLinearMaxWidth(&most, &format, d.ordinal()) == cudaSuccess);
  INFO("linear float textures hold at most " << most << " elements");
  REQUIRE((most + 1) * sizeof(float) < d.memory_info().free / 2);
  curt::device_buffer<float> long_one(d, most + 1);
  curt_test::require_cuda_error(
      [&] { curt::texture_object t(long_one); }, cudaErrorInvalidValue,
      {("hold at most " + std::to_string(most)).c_str()});
}

TEST_CASE(
    "a thread with no context makes and destroys arrays, textures and surfaces, and is "
    "left with none") {
  curt::device d(0);
  curt_test::on_fresh_thread([&] {
    REQUIRE(curt_test::current_context() == nullptr);
    {
      curt::stream s(d);
      auto array = curt::cuda_array<float>::two_d(d, 8, 8, curt::array_flags::surface_load_store);
      curt::texture_object texture(array);
      curt::surface_object surface(array);
      std::vector<float> x = curt_test::random_floats(64, 1.0f, 2.0f), back = poisoned<float>(64);
      curt::copy(array, x, s);
      curt::copy_and_wait(back, array, s);
      curt_test::require_same_bytes(back, x);
      CHECK(curt_test::current_context() == nullptr);
    }
    CHECK(curt_test::current_context() == nullptr);
  });
}
