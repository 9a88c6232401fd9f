// Pitched views and region copies (curt/pitched.hpp) on a device: kernels that write f(x, y) and
// f(x, y, z) through curt::pitched_view for every element of 2D and 3D buffers of random extents
// (a __global__ function given the buffer through curt::launch, a device lambda given a const
// buffer), and copies of random regions in every direction (host and device dense ranges, regions
// of other pitched buffers, whole buffers, a 2D buffer and a slice of a 3D one), each checked
// element by element against a CPU model of the whole destination: the region holds the source,
// everything around it what it held before.
//
// Inputs are fresh random numbers (the seed is printed); destinations are poisoned first (0xFF
// bytes) or filled with other random numbers, so an element left unwritten shows.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/pitched.hpp>
#include <curt/span.hpp>
#include <curt/stream.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

// f(x, y) in floats that hold it exactly (x < 2^10, y < 2^7, seed < 2^10).
__host__ __device__ float f2(std::size_t x, std::size_t y, int seed) {
  return static_cast<float>(static_cast<int>(x) * 1024 + static_cast<int>(y) * 7 + seed);
}
__host__ __device__ int f3(std::size_t x, std::size_t y, std::size_t z, int seed) {
  return static_cast<int>(x * 131 + y * 1013 + z * 100003) ^ seed;
}

__global__ void write_f2(curt::pitched_view<float, 2> v, int seed) {
  std::size_t x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < v.width() && y < v.height()) v(x, y) = f2(x, y, seed);
}

__global__ void write_f3(curt::pitched_view<int, 3> v, int seed) {
  std::size_t x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y, z = blockIdx.z;
  if (x < v.width() && y < v.height() && z < v.depth()) v.row(y, z)[x] = f3(x, y, z, seed);
}

std::size_t random_in(int lo, int hi) {
  return static_cast<std::size_t>(curt_test::random_ints(1, lo, hi)[0]);
}

using curt_test::poisoned;

// A random region inside width x height x depth, at least one element in each direction.
curt::region random_region(std::size_t width, std::size_t height, std::size_t depth) {
  std::size_t x = random_in(0, static_cast<int>(width) - 1);
  std::size_t y = random_in(0, static_cast<int>(height) - 1);
  std::size_t z = random_in(0, static_cast<int>(depth) - 1);
  return {x, y, z, random_in(1, static_cast<int>(width - x)),
          random_in(1, static_cast<int>(height - y)), random_in(1, static_cast<int>(depth - z))};
}

// The same extent as `r`, at a random place inside width x height x depth (which must fit it).
curt::region moved_region(const curt::region& r, std::size_t width, std::size_t height,
                          std::size_t depth) {
  return {random_in(0, static_cast<int>(width - r.width)),
          random_in(0, static_cast<int>(height - r.height)),
          random_in(0, static_cast<int>(depth - r.depth)), r.width, r.height, r.depth};
}

std::string text(const curt::region& r) {
  return std::to_string(r.width) + " x " + std::to_string(r.height) + " x " +
         std::to_string(r.depth) + " at (" + std::to_string(r.x) + ", " + std::to_string(r.y) +
         ", " + std::to_string(r.z) + ")";
}

// The CPU model of a copy into region `r` of a dense width x height x depth array `before`: the
// region's elements from `box` (row-major, r's extent), the others as before.
template <class T>
std::vector<T> with_box(std::vector<T> before, std::size_t width, std::size_t height,
                        const curt::region& r, const std::vector<T>& box) {
  for (std::size_t z = 0; z < r.depth; ++z)
    for (std::size_t y = 0; y < r.height; ++y)
      for (std::size_t x = 0; x < r.width; ++x)
        before[((r.z + z) * height + r.y + y) * width + r.x + x] =
            box[(z * r.height + y) * r.width + x];
  return before;
}

// The elements of region `r` of a dense width x height x depth array, row-major.
template <class T>
std::vector<T> box_of(const std::vector<T>& all, std::size_t width, std::size_t height,
                      const curt::region& r) {
  std::vector<T> box;
  for (std::size_t z = 0; z < r.depth; ++z)
    for (std::size_t y = 0; y < r.height; ++y)
      for (std::size_t x = 0; x < r.width; ++x)
        box.push_back(all[((r.z + z) * height + r.y + y) * width + r.x + x]);
  return box;
}

// Every element of a pitched buffer (read back densely) equal to the model's, reporting how many
// differ inside region `r` and around it.
template <class T, int D>
void require_buffer(const curt::basic_pitched_buffer<T, D>& p, const std::vector<T>& model,
                    const curt::region& r, curt::stream_ref s) {
  std::vector<T> got = poisoned<T>(p.element_count());
  curt::copy_and_wait(got, p, s);
  REQUIRE(got.size() == model.size());
  std::size_t inside = 0, around = 0, first = model.size();
  const std::size_t w = p.width(), h = p.height();
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (std::memcmp(&got[i], &model[i], sizeof(T)) == 0) continue;
    if (first == model.size()) first = i;
    std::size_t x = i % w, y = i / w % h, z = i / (w * h);
    bool in = x >= r.x && x < r.x + r.width && y >= r.y && y < r.y + r.height && z >= r.z &&
              z < r.z + r.depth;
    ++(in ? inside : around);
  }
  INFO("region " << text(r) << " of " << w << " x " << h << ": " << inside
                 << " wrong inside, " << around << " wrong around; first at index " << first);
  CHECK(inside == 0);
  CHECK(around == 0);
}

}  // namespace

TEST_CASE("a kernel writes f(x, y) through the view of a 2D pitched buffer") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t w = random_in(1, 700), h = random_in(1, 100);
  const int seed = curt_test::random_ints(1, 0, 1023)[0];
  INFO("extents " << w << " x " << h << ", seed " << seed);
  curt::pitched_buffer<float> image(d, w, h), twice(d, w, h);
  curt::memset(image, 0xFF, s);
  curt::memset(twice, 0xFF, s);

  // The buffer converts to the kernel's parameter.
  curt::launch(s, curt::launch_config(dim3(curt::ceil_div(w, 128), h), 128), write_f2, image,
               seed);
  std::vector<float> want(w * h);
  for (std::size_t y = 0; y < h; ++y)
    for (std::size_t x = 0; x < w; ++x) want[y * w + x] = f2(x, y, seed);
  require_buffer(image, want, {0, 0, w, h}, s);

  // A device lambda: a const buffer gives a view of const float, the other a view of float.
  curt::launch(
      s, curt::launch_config(dim3(curt::ceil_div(w, 128), h), 128),
      [] __device__(curt::pitched_view<const float, 2> in, curt::pitched_view<float, 2> out) {
        std::size_t x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
        if (x < in.width()) out(x, y) = 2.0f * in(x, y);
      },
      std::as_const(image), twice);
  for (float& x : want) x *= 2.0f;
  require_buffer(twice, want, {0, 0, w, h}, s);

  // view() is the same view, and <<<>>> takes the buffer as curt::launch does.
  curt::pitched_view<const float, 2> v = std::as_const(image).view();
  CHECK(v.data() == image.data());
  CHECK(v.pitch() == image.pitch());
  CHECK(v.width() == w);
  CHECK(v.height() == h);
  curt::memset(twice, 0xFF, s);
  write_f2<<<dim3(curt::ceil_div(w, 128), h), 128, 0, s.get()>>>(twice, seed + 1);
  for (std::size_t y = 0; y < h; ++y)
    for (std::size_t x = 0; x < w; ++x) want[y * w + x] = f2(x, y, seed + 1);
  require_buffer(twice, want, {0, 0, w, h}, s);
}

TEST_CASE("a kernel writes f(x, y, z) through the view of a 3D pitched buffer") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t w = random_in(1, 300), h = random_in(1, 40), depth = random_in(1, 20);
  const int seed = curt_test::random_ints(1, 0, 1 << 30)[0];
  INFO("extents " << w << " x " << h << " x " << depth << ", seed " << seed);
  curt::pitched_buffer_3d<int> volume(d, w, h, depth);
  curt::memset(volume, 0xFF, s);
  curt::launch(s, curt::launch_config(dim3(curt::ceil_div(w, 64), h, depth), 64), write_f3, volume,
               seed);
  std::vector<int> want(w * h * depth);
  for (std::size_t z = 0; z < depth; ++z)
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t x = 0; x < w; ++x) want[(z * h + y) * w + x] = f3(x, y, z, seed);
  require_buffer(volume, want, {0, 0, 0, w, h, depth}, s);
  CHECK(volume.view().depth() == depth);
}

TEST_CASE("2D region copies in every direction write the region and nothing around it") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t w = random_in(2, 500), h = random_in(2, 80);
  const std::size_t w2 = random_in(2, 500), h2 = random_in(2, 80);
  INFO("extents " << w << " x " << h << " and " << w2 << " x " << h2);
  curt::pitched_buffer<float> a(d, w, h), b(d, w2, h2);
  std::vector<float> a_all = curt_test::random_floats(w * h);
  std::vector<float> b_all = curt_test::random_floats(w2 * h2);
  curt::copy(a, a_all, s);
  curt::copy(b, b_all, s);

  // Host -> region.
  curt::region r = random_region(w, h, 1);
  std::vector<float> box = curt_test::random_floats(r.width * r.height);
  curt::copy(a.sub(r), box, s);
  a_all = with_box(a_all, w, h, r, box);
  require_buffer(a, a_all, r, s);

  // Region -> host, into the middle of a poisoned vector whose ends stay poisoned.
  r = random_region(w, h, 1);
  const std::size_t n = r.width * r.height, guard = 5;
  std::vector<float> host = poisoned<float>(n + 2 * guard);
  curt::copy_and_wait(curt::span(host, guard, n), std::as_const(a).sub(r), s);
  std::vector<float> want = poisoned<float>(n + 2 * guard);
  std::vector<float> expected = box_of(a_all, w, h, r);
  std::copy(expected.begin(), expected.end(), want.begin() + guard);
  curt_test::require_same_bytes(host, want);

  // Region -> device dense -> region of the other buffer, elsewhere.
  r = random_region(w, h, 1);
  if (r.width > w2) r.width = w2;
  if (r.height > h2) r.height = h2;
  curt::device_buffer<float> dense(d, r.width * r.height);
  curt::memset(dense, 0xFF, s);
  curt::copy(dense, a.sub(r), s);
  curt::region at = moved_region(r, w2, h2, 1);
  curt::copy(b.sub(at), dense, s);
  b_all = with_box(b_all, w2, h2, at, box_of(a_all, w, h, r));
  require_buffer(b, b_all, at, s);

  // Region -> region of another buffer.
  r = random_region(w2, h2, 1);
  if (r.width > w) r.width = w;
  if (r.height > h) r.height = h;
  at = moved_region(r, w, h, 1);
  curt::copy(a.sub(at), std::as_const(b).sub(r), s);
  a_all = with_box(a_all, w, h, at, box_of(b_all, w2, h2, r));
  require_buffer(a, a_all, at, s);

  // Region -> region of the same buffer, not overlapping: the left half onto the right half.
  if (w >= 2) {
    curt::region left{0, 0, w / 2, h}, right{w - w / 2, 0, w / 2, h};
    curt::copy(a.sub(right), a.sub(left), s);
    a_all = with_box(a_all, w, h, right, box_of(a_all, w, h, left));
    require_buffer(a, a_all, right, s);
  }

  // Whole buffer <-> region: a small buffer written from a region, then written into another.
  r = random_region(w, h, 1);
  curt::pitched_buffer<float> small(d, r.width, r.height);
  curt::memset(small, 0xFF, s);
  curt::copy(small, a.sub(r), s);
  require_buffer(small, box_of(a_all, w, h, r), {0, 0, r.width, r.height}, s);
  if (r.width <= w2 && r.height <= h2) {
    at = moved_region(r, w2, h2, 1);
    curt::copy(b.sub(at), small, s);
    b_all = with_box(b_all, w2, h2, at, box_of(a_all, w, h, r));
    require_buffer(b, b_all, at, s);
  }

  // Refusals with real buffers, before anything is queued.
  std::string numbers = "x " + std::to_string(w) + " + width 1 > " + std::to_string(w);
  curt_test::require_cuda_error([&] { (void)a.sub({w, 0, 1, 1}); }, cudaErrorInvalidValue,
                                {numbers.c_str()});
  curt_test::require_cuda_error([&] { curt::copy(a.sub({0, 0, 1, 2}), b.sub({0, 0, 2, 1}), s); },
                                cudaErrorInvalidValue, {"extents differ", "1 x 2", "2 x 1"});
  s.synchronize();
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("3D region copies in every direction write the region and nothing around it") {
  curt::device d(0);
  curt::stream s(d);
  const std::size_t w = random_in(2, 120), h = random_in(2, 30), depth = random_in(2, 12);
  INFO("extents " << w << " x " << h << " x " << depth);
  curt::pitched_buffer_3d<int> a(d, w, h, depth), b(d, w, h, depth);
  std::vector<int> a_all = curt_test::random_ints(w * h * depth, -1000000, 1000000);
  std::vector<int> b_all = curt_test::random_ints(w * h * depth, -1000000, 1000000);
  curt::copy(a, a_all, s);
  curt::copy(b, b_all, s);

  // Host -> region.
  curt::region r = random_region(w, h, depth);
  std::vector<int> box = curt_test::random_ints(r.width * r.height * r.depth, -9, 9);
  curt::copy(a.sub(r), box, s);
  a_all = with_box(a_all, w, h, r, box);
  require_buffer(a, a_all, r, s);

  // Region -> host.
  r = random_region(w, h, depth);
  std::vector<int> host = poisoned<int>(r.width * r.height * r.depth);
  curt::copy_and_wait(host, a.sub(r), s);
  curt_test::require_same_bytes(host, box_of(a_all, w, h, r));

  // Region -> region of another buffer, elsewhere; and through device memory back again.
  curt::region at = moved_region(r, w, h, depth);
  curt::copy(b.sub(at), a.sub(r), s);
  b_all = with_box(b_all, w, h, at, box_of(a_all, w, h, r));
  require_buffer(b, b_all, at, s);
  curt::device_buffer<int> dense(d, r.width * r.height * r.depth);
  curt::copy(dense, std::as_const(b).sub(at), s);
  curt::region back = moved_region(r, w, h, depth);
  curt::copy(a.sub(back), dense, s);
  a_all = with_box(a_all, w, h, back, box_of(b_all, w, h, at));
  require_buffer(a, a_all, back, s);

  // A 2D buffer and one slice of the 3D buffer (a region one deep).
  curt::pitched_buffer<int> plane(d, w, h);
  curt::memset(plane, 0xFF, s);
  const std::size_t z = random_in(0, static_cast<int>(depth) - 1);
  curt::copy(plane, a.sub({0, 0, z, w, h, 1}), s);
  require_buffer(plane, box_of(a_all, w, h, {0, 0, z, w, h, 1}), {0, 0, w, h}, s);
  std::vector<int> flat = curt_test::random_ints(w * h, -1000000, 1000000);
  curt::copy(plane, flat, s);
  curt::copy(b.sub({0, 0, z, w, h, 1}), plane, s);
  b_all = with_box(b_all, w, h, {0, 0, z, w, h, 1}, flat);
  require_buffer(b, b_all, {0, 0, z, w, h, 1}, s);

  std::string numbers = "z " + std::to_string(depth - 1) + " + depth 2 > " + std::to_string(depth);
  curt_test::require_cuda_error([&] { (void)a.sub({0, 0, depth - 1, 1, 1, 2}); },
                                cudaErrorInvalidValue, {numbers.c_str()});
  std::vector<int> wrong(r.width * r.height * r.depth + 1);
  curt_test::require_cuda_error([&] { curt::copy(wrong, a.sub(r), s); }, cudaErrorInvalidValue,
                                {"dense destination", "must hold exactly"});
  s.synchronize();
  CHECK(cudaGetLastError() == cudaSuccess);
}
