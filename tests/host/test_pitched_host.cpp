// Pitched views and region copies without a GPU (include/curt/memory/pitched.hpp): the view's
// indexing over host memory with a pitch that is not a multiple of the element size, the view
// rules (const buffers give const elements, temporaries give no view and no region) as
// static_asserts, and the refusals made before CUDA is called, with the numbers in the message
// (a region outside its buffer, extents that differ, owners that hold nothing). Buffers with an
// extent of 0 allocate nothing, so no device is needed.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/launch.hpp>
#include <curt/pitched.hpp>

#include <cstddef>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using image = curt::pitched_buffer<float>;
using volume = curt::pitched_buffer_3d<int>;
using view2 = curt::pitched_view<float, 2>;
using const_view2 = curt::pitched_view<const float, 2>;

// A const buffer gives views of const elements; a temporary gives none.
static_assert(std::is_convertible_v<image&, view2>);
static_assert(std::is_convertible_v<image&, const_view2>);
static_assert(std::is_convertible_v<const image&, const_view2>);
static_assert(!std::is_convertible_v<const image&, view2>);
static_assert(!std::is_convertible_v<image&&, view2>);
static_assert(!std::is_convertible_v<image&&, const_view2>);
static_assert(!std::is_convertible_v<const image&&, const_view2>);
static_assert(std::is_convertible_v<volume&, curt::pitched_view<const int, 3>>);
static_assert(!std::is_convertible_v<volume&, curt::pitched_view<int, 2>>);  // no dimension change
static_assert(!std::is_convertible_v<image&, curt::pitched_view<double, 2>>);
static_assert(std::is_same_v<decltype(std::declval<image&>().view()), view2>);
static_assert(std::is_same_v<decltype(std::declval<const image&>().view()), const_view2>);
static_assert(std::is_same_v<decltype(std::declval<image&>().sub({0, 0, 1, 1})),
                             curt::pitched_region<float>>);
static_assert(std::is_same_v<decltype(std::declval<const image&>().sub({0, 0, 1, 1})),
                             curt::pitched_region<const float>>);

// view() and sub() of a temporary are deleted (detected here; tests/compile shows the error).
template <class B, class = void>
struct has_view : std::false_type {};
template <class B>
struct has_view<B, std::void_t<decltype(std::declval<B>().view())>> : std::true_type {};
template <class B, class = void>
struct has_sub : std::false_type {};
template <class B>
struct has_sub<B, std::void_t<decltype(std::declval<B>().sub({0, 0, 1, 1}))>> : std::true_type {};
static_assert(has_view<image&>::value && has_view<const image&>::value);
static_assert(!has_view<image>::value && !has_view<const image>::value);
static_assert(has_sub<volume&>::value && has_sub<const volume&>::value);
static_assert(!has_sub<volume>::value && !has_sub<const volume>::value);

// What curt::launch hands a functor for a buffer: its view, const for a const buffer; what it
// hands a __global__ function is the conversion above.
static_assert(std::is_same_v<curt::detail::kernel_argument_t<image&>, view2>);
static_assert(std::is_same_v<curt::detail::kernel_argument_t<const image&>, const_view2>);
static_assert(std::is_same_v<curt::detail::kernel_argument_t<volume&>,
                             curt::pitched_view<int, 3>>);

// Views are kernel parameters: trivially copyable, no more than a pointer, the pitch and the
// extents; a view of T is a view of const T, not the reverse.
static_assert(std::is_trivially_copyable_v<view2> && sizeof(view2) == 4 * sizeof(std::size_t));
static_assert(sizeof(curt::pitched_view<int, 3>) == 5 * sizeof(std::size_t));
static_assert(std::is_trivially_copyable_v<curt::pitched_region<float>>);
static_assert(std::is_convertible_v<view2, const_view2>);
static_assert(!std::is_convertible_v<const_view2, view2>);

// 12 bytes: a pitch of 40 bytes is not a whole number of them.
struct rgb {
  float r, g, b;
};

curt::device unused_device() { return curt::device::from_ordinal_unchecked(0); }

}  // namespace

TEST_CASE("a pitched view indexes rows and slices by the pitch in bytes") {
  const std::size_t width = 3, height = 4, depth = 2, pitch = 40;  // 3 * 12 = 36 bytes a row
  std::vector<unsigned char> memory(pitch * height * depth, 0xAB);
  std::vector<float> values = curt_test::random_floats(width * height * depth * 3);

  curt::pitched_view<rgb, 3> v(reinterpret_cast<rgb*>(memory.data()), pitch, width, height, depth);
  CHECK(v.width() == width);
  CHECK(v.height() == height);
  CHECK(v.depth() == depth);
  CHECK(v.pitch() == pitch);
  std::size_t i = 0;
  for (std::size_t z = 0; z < depth; ++z)
    for (std::size_t y = 0; y < height; ++y) {
      CHECK(reinterpret_cast<unsigned char*>(v.row(y, z)) ==
            memory.data() + (z * height + y) * pitch);
      for (std::size_t x = 0; x < width; ++x, i += 3) v(x, y, z) = {values[i], values[i + 1],
                                                                       values[i + 2]};
    }
  // Read back by hand: element (x, y, z) at z * height * pitch + y * pitch + x * 12 bytes, and
  // the 4 padding bytes of every row untouched.
  i = 0;
  std::size_t wrong = 0, padding_touched = 0;
  for (std::size_t z = 0; z < depth; ++z)
    for (std::size_t y = 0; y < height; ++y) {
      const unsigned char* row = memory.data() + (z * height + y) * pitch;
      for (std::size_t x = 0; x < width; ++x, i += 3) {
        rgb got;
        std::memcpy(&got, row + x * sizeof(rgb), sizeof(rgb));
        wrong += got.r != values[i] || got.g != values[i + 1] || got.b != values[i + 2];
      }
      for (std::size_t b = width * sizeof(rgb); b < pitch; ++b) padding_touched += row[b] != 0xAB;
    }
  CHECK(wrong == 0);
  CHECK(padding_touched == 0);

  // A 2D view; its const view sees the same elements.
  curt::pitched_view<rgb, 2> flat(reinterpret_cast<rgb*>(memory.data()), pitch, width, height);
  curt::pitched_view<const rgb, 2> reader = flat;
  CHECK(&reader(2, 3) == &flat(2, 3));
  CHECK(reinterpret_cast<const unsigned char*>(&reader(2, 3)) == memory.data() + 3 * pitch + 24);
  CHECK(reader.row(1) == flat.row(1));
  curt::pitched_view<float, 2> none;
  CHECK(none.data() == nullptr);
  CHECK(none.width() == 0);
}

TEST_CASE("a region outside its buffer is refused before CUDA, naming the numbers") {
  curt::device d = unused_device();
  image flat(d, 16, 0);  // 16 x 0: no allocation
  CHECK(flat.sub({0, 0, 16, 0}).box.width == 16);
  CHECK(flat.sub({16, 0, 0, 0}).box.x == 16);  // an empty region at the end
  curt_test::require_cuda_error([&] { (void)flat.sub({10, 0, 8, 0}); }, cudaErrorInvalidValue,
                                {"curt::pitched_buffer<float>(16 x 0).sub(8 x 0 at (10, 0))",
                                 "passes the buffer's width: x 10 + width 8 > 16"});
  curt_test::require_cuda_error([&] { (void)std::as_const(flat).sub({0, 1, 16, 0}); },
                                cudaErrorInvalidValue, {"height: y 1 + height 0 > 0"});
  // A 2D buffer is one slice deep.
  curt_test::require_cuda_error([&] { (void)flat.sub({0, 0, 1, 16, 0, 1}); },
                                cudaErrorInvalidValue,
                                {"(16 x 0).sub(16 x 0 x 1 at (0, 0, 1))", "depth: z 1 + depth 1 > 1"});
  // No overflow past the end of std::size_t.
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  curt_test::require_cuda_error([&] { (void)flat.sub({8, 0, huge, 0}); }, cudaErrorInvalidValue,
                                {"width: x 8 + width", "> 16"});

  curt::pitched_buffer_3d<int> slices(d, 0, 4, 3);  // 0 x 4 x 3
  curt_test::require_cuda_error([&] { (void)slices.sub({0, 0, 2, 0, 4, 2}); },
                                cudaErrorInvalidValue,
                                {"curt::pitched_buffer_3d<int>(0 x 4 x 3).sub(0 x 4 x 2 at (0, 0, 2))",
                                 "depth: z 2 + depth 2 > 3"});
  curt_test::require_cuda_error([&] { (void)slices.sub({0, 3, 0, 0, 2, 1}); },
                                cudaErrorInvalidValue, {"height: y 3 + height 2 > 4"});
}

// A region's box is a public member: one edited after sub() is checked again at the copy, and
// two overlapping boxes of one buffer (which cudaMemcpy3DAsync leaves undefined) are refused.
TEST_CASE("a region edited after sub() is checked again; overlapping regions of one buffer are "
          "refused") {
  std::vector<float> storage(8 * 8, 1.0f);
  const curt::pitched_view<float, 3> memory(storage.data(), 8 * sizeof(float), 8, 8, 1);
  curt::stream_ref s = curt::stream_ref::legacy_default();
  curt::pitched_region<float> a{memory, {0, 0, 0, 4, 4, 1}}, b{memory, {2, 2, 0, 4, 4, 1}};
  curt_test::require_cuda_error([&] { curt::copy(a, b, s); }, cudaErrorInvalidValue,
                                {"curt::copy(pitched destination, pitched source)",
                                 "the regions overlap in one buffer"});
  // A view of the same rows with another height (a 2D copy: only slice 0) overlaps as much.
  const curt::pitched_view<float, 3> shorter(storage.data(), 8 * sizeof(float), 8, 4, 1);
  curt::pitched_region<float> top{memory, {0, 0, 0, 4, 2, 1}}, c{shorter, {2, 1, 0, 4, 2, 1}};
  curt_test::require_cuda_error([&] { curt::copy(top, c, s); }, cudaErrorInvalidValue,
                                {"the regions overlap in one buffer"});
  a.box.x = 6;  // 6 + 4 > 8
  curt_test::require_cuda_error([&] { curt::copy(a, b, s); }, cudaErrorInvalidValue,
                                {"x 6 + width 4 > 8"});
  curt::device d = unused_device();
  image flat(d, 16, 0), narrow(d, 8, 0);
  curt::pitched_region<float> tile = flat.sub({0, 0, 8, 0});
  tile.box.x = 12;  // was checked at sub(); a copy of no rows would have called nothing
  curt_test::require_cuda_error([&] { curt::copy(tile, narrow.sub({0, 0, 8, 0}), s); },
                                cudaErrorInvalidValue, {"x 12 + width 8 > 16"});
}

TEST_CASE("region copies whose sides differ are refused before CUDA") {
  curt::device d = unused_device();
  curt::stream_ref s = curt::stream_ref::legacy_default();
  image flat(d, 16, 0), narrow(d, 8, 0);
  std::vector<float> three(3), none;
  // A dense side holds exactly the region's elements.
  curt_test::require_cuda_error(
      [&] { curt::copy(flat.sub({4, 0, 8, 0}), three, s); }, cudaErrorInvalidValue,
      {"curt::copy(pitched destination, dense source)", "8 x 0 at (4, 0)", "exactly that many (0)",
       "holds 3"});
  curt_test::require_cuda_error(
      [&] { curt::copy(three, std::as_const(flat).sub({0, 0, 16, 0}), s); },
      cudaErrorInvalidValue, {"curt::copy(dense destination, pitched source)", "holds 3"});
  // Two pitched sides have equal extents, whole buffers or regions.
  curt_test::require_cuda_error([&] { curt::copy(flat.sub({0, 0, 16, 0}), narrow, s); },
                                cudaErrorInvalidValue,
                                {"extents differ", "the destination is 16 x 0 at (0, 0)",
                                 "the source 8 x 0 at (0, 0)"});
  curt_test::require_cuda_error([&] { curt::copy(narrow, flat, s); }, cudaErrorInvalidValue,
                                {"the destination is 8 x 0", "the source 16 x 0"});
  curt::pitched_buffer_3d<float> deep(d, 8, 0, 2);
  curt_test::require_cuda_error([&] { curt::copy(narrow, deep, s); }, cudaErrorInvalidValue,
                                {"the destination is 8 x 0 at (0, 0)", "the source 8 x 0 x 2"});
  // A region outside its buffer never reaches a copy.
  curt_test::require_cuda_error([&] { curt::copy(none, flat.sub({0, 0, 17, 0}), s); },
                                cudaErrorInvalidValue, {"x 0 + width 17 > 16"});
  // Copies of nothing call nothing (no device here).
  curt::copy(flat.sub({3, 0, 5, 0}), none, s);
  curt::copy(none, flat.sub({3, 0, 5, 0}), s);
  curt::copy(narrow.sub({0, 0, 5, 0}), std::as_const(flat).sub({3, 0, 5, 0}), s);
  curt::copy(narrow, flat.sub({8, 0, 8, 0}), s);
  curt::copy(flat.sub({1, 0, 8, 0}), narrow, s);
}

TEST_CASE("owners that hold nothing give no view and no region") {
  curt::device d = unused_device();
  image flat(d, 16, 0);
  image moved = std::move(flat);
  curt_test::require_cuda_error([&] { (void)flat.view(); }, cudaErrorInvalidResourceHandle,
                                {"pitched_buffer<float>", "moved-from", "view()"});
  curt_test::require_cuda_error([&] { (void)flat.sub({0, 0, 0, 0}); },
                                cudaErrorInvalidResourceHandle, {"moved-from", "sub()"});
  std::vector<float> none;
  curt_test::require_cuda_error([&] { curt::copy(none, flat, curt::stream_ref::legacy_default()); },
                                cudaErrorInvalidResourceHandle, {"moved-from"});
  image empty(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)std::as_const(empty).view(); },
                                cudaErrorInvalidResourceHandle, {"pitched_buffer<float>"});
  // A buffer of 0 elements has a view of nothing.
  view2 v = moved;
  CHECK(v.data() == nullptr);
  CHECK(v.width() == 16);
  CHECK(v.height() == 0);
}
