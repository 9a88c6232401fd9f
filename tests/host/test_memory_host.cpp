// What curt's memory layer refuses or decides before calling CUDA, checked without a GPU:
// overflowing counts, size mismatches between host ranges, empty / moved-from / released owners
// of zero-size buffers (which allocate nothing), adopt rules, subspan bounds, a fill the host
// compiler cannot do, memory locations, and the view rules (const owners give const elements,
// temporaries give no view) as static_asserts against a view type of our own.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/copy.hpp>
#include <curt/memory.hpp>
#include <curt/memory_location.hpp>
#include <curt/pitched.hpp>
#include <curt/span.hpp>
#include <curt/unified_memory.hpp>

#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// A span-like view of our own: element_type and a (pointer, size) constructor.
template <class T>
struct my_view {
  using element_type = T;
  my_view(T* d, std::size_t n) : data(d), size(n) {}
  T* data;
  std::size_t size;
};

using device_floats = curt::device_buffer<float>;
using pinned_floats = curt::pinned_buffer<float>;
using managed_floats = curt::managed_buffer<float>;

// Const-correct views, none from temporaries.
static_assert(std::is_convertible_v<device_floats&, my_view<float>>);
static_assert(std::is_convertible_v<device_floats&, my_view<const float>>);
static_assert(std::is_convertible_v<const device_floats&, my_view<const float>>);
static_assert(!std::is_convertible_v<const device_floats&, my_view<float>>);
static_assert(!std::is_convertible_v<device_floats&&, my_view<const float>>);
static_assert(!std::is_convertible_v<device_floats&&, my_view<float>>);
static_assert(std::is_convertible_v<pinned_floats&, my_view<float>>);
static_assert(!std::is_convertible_v<const pinned_floats&, my_view<float>>);
static_assert(!std::is_convertible_v<pinned_floats&&, my_view<const float>>);
static_assert(std::is_convertible_v<managed_floats&, my_view<float>>);
static_assert(!std::is_convertible_v<managed_floats&&, my_view<const float>>);
// The same with cuda::std::span, which also has a range constructor for pinned and managed
// buffers (begin()/end()): exactly one conversion applies, never two.
static_assert(std::is_convertible_v<device_floats&, cuda::std::span<float>>);
static_assert(std::is_convertible_v<const device_floats&, cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<const device_floats&, cuda::std::span<float>>);
static_assert(!std::is_convertible_v<device_floats&&, cuda::std::span<const float>>);
static_assert(std::is_convertible_v<pinned_floats&, cuda::std::span<float>>);
static_assert(std::is_convertible_v<const managed_floats&, cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<const managed_floats&, cuda::std::span<float>>);
static_assert(!std::is_convertible_v<pinned_floats&&, cuda::std::span<const float>>);
// Const temporaries neither (a function returning a const buffer by value).
static_assert(!std::is_convertible_v<const device_floats&&, cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<const pinned_floats&&, cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<const managed_floats&&, cuda::std::span<const float>>);
static_assert(!std::is_convertible_v<const device_floats&&, my_view<const float>>);
// Views of other element types do not convert.
static_assert(!std::is_convertible_v<device_floats&, my_view<double>>);
static_assert(!std::is_convertible_v<device_floats&, my_view<int>>);
// Owners are move-only.
static_assert(!std::is_copy_constructible_v<device_floats> && !std::is_copy_assignable_v<device_floats>);
static_assert(std::is_nothrow_move_constructible_v<device_floats> &&
              std::is_nothrow_move_assignable_v<device_floats>);
static_assert(std::is_nothrow_move_constructible_v<pinned_floats>);
static_assert(std::is_nothrow_move_constructible_v<managed_floats>);
static_assert(std::is_nothrow_move_constructible_v<curt::host_registration>);
static_assert(!std::is_copy_constructible_v<curt::host_registration>);
static_assert(!std::is_copy_constructible_v<curt::pitched_buffer<float>>);
static_assert(std::is_nothrow_move_constructible_v<curt::pitched_buffer_3d<float>>);
// Elements of const buffers are const; of others, not.
static_assert(std::is_same_v<decltype(std::declval<const device_floats&>().data()), const float*>);
static_assert(std::is_same_v<decltype(std::declval<device_floats&>().data()), float*>);
static_assert(std::is_same_v<decltype(std::declval<const pinned_floats&>()[0]), const float&>);
// curt::span: const ranges give const elements; temporaries give none.
template <class T, class = void>
struct can_span : std::false_type {};
template <class T>
struct can_span<T, std::void_t<decltype(curt::span(std::declval<T>()))>> : std::true_type {};
static_assert(can_span<std::vector<float>&>::value);
static_assert(!can_span<std::vector<float>>::value);
static_assert(!can_span<device_floats>::value);
static_assert(!can_span<const device_floats>::value);
static_assert(std::is_same_v<decltype(curt::span(std::declval<const device_floats&>())),
                             cuda::std::span<const float>>);
static_assert(std::is_same_v<decltype(curt::span(std::declval<device_floats&>())),
                             cuda::std::span<float>>);
// A temporary view is no owner: it gives the span of what it views.
static_assert(can_span<cuda::std::span<float>>::value);
static_assert(!can_span<std::array<float, 4>>::value);
// Flags combine.
static_assert(curt::has_flag(curt::pinned_flags::mapped | curt::pinned_flags::portable,
                             curt::pinned_flags::portable));
static_assert(!curt::has_flag(curt::pinned_flags::mapped, curt::pinned_flags::write_combined));
static_assert(curt::has_flag(curt::register_flags::read_only | curt::register_flags::mapped,
                             curt::register_flags::read_only));
// Locations are literal values.
static_assert(curt::memory_location::host() == curt::memory_location::host());
static_assert(curt::memory_location::host_numa(1) != curt::memory_location::host_numa(2));
static_assert(curt::memory_location().is_none());
static_assert(curt::memory_location::host_numa_current().is_host());

// A device that is never used: every check below refuses before CUDA is called.
curt::device unused_device() { return curt::device::from_ordinal_unchecked(0); }

}  // namespace

TEST_CASE("element counts whose bytes overflow std::size_t are refused before CUDA") {
  curt::device d = unused_device();
  std::size_t too_many = std::numeric_limits<std::size_t>::max() / 8 + 1;
  std::string count = std::to_string(too_many);
  curt_test::require_cuda_error([&] { curt::device_buffer<double> b(d, too_many); },
                                cudaErrorInvalidValue,
                                {"curt::device_buffer<double>", "overflow", count.c_str(), "8 bytes"});
  curt_test::require_cuda_error([&] { curt::pinned_buffer<double> b(d, too_many); },
                                cudaErrorInvalidValue, {"curt::pinned_buffer<double>", "overflow"});
  curt_test::require_cuda_error([&] { curt::managed_buffer<double> b(d, too_many); },
                                cudaErrorInvalidValue, {"curt::managed_buffer<double>", "overflow"});
  curt_test::require_cuda_error(
      [&] { (void)curt::device_buffer<double>::adopt(d, nullptr, too_many); },
      cudaErrorInvalidValue, {"overflow"});
  curt_test::require_cuda_error([&] { curt::pitched_buffer<double> b(d, too_many, 1); },
                                cudaErrorInvalidValue, {"pitched_buffer<double>", "overflows"});
  curt_test::require_cuda_error(
      [&] { curt::pitched_buffer_3d<float> b(d, 1u << 20, 1u << 20, std::size_t(1) << 30); },
      cudaErrorInvalidValue, {"pitched_buffer_3d<float>", "overflows"});
}

TEST_CASE("zero-size buffers allocate nothing, and owners without memory say which state") {
  curt::device d = unused_device();
  curt::device_buffer<float> zero(d, 0);
  CHECK(zero.valid());
  CHECK(zero.empty());
  CHECK(zero.size() == 0);
  CHECK(zero.size_bytes() == 0);
  CHECK(zero.data() == nullptr);
  CHECK(zero.device() == d);
  my_view<float> view = zero;
  CHECK(view.data == nullptr);
  CHECK(view.size == 0);

  curt::device_buffer<float> moved = std::move(zero);
  CHECK(moved.valid());
  CHECK_FALSE(zero.valid());
  curt_test::require_cuda_error([&] { (void)zero.data(); }, cudaErrorInvalidResourceHandle,
                                {"curt::device_buffer<float>::data()", "moved-from"});
  CHECK(moved.release() == nullptr);
  curt_test::require_cuda_error([&] { (void)moved.get(); }, cudaErrorInvalidResourceHandle,
                                {"released", "get()"});
  curt::pinned_buffer<int> empty(curt::no_handle);
  CHECK(empty.size() == 0);
  curt_test::require_cuda_error([&] { (void)empty.begin(); }, cudaErrorInvalidResourceHandle,
                                {"curt::pinned_buffer<int>::begin()", "empty"});
  curt::managed_buffer<float> managed_zero(d, 0, curt::attach_flags::host);
  CHECK(managed_zero.begin() == managed_zero.end());
  curt_test::require_cuda_error(
      [&] { curt::managed_buffer<float> b(d, 0, curt::attach_flags::single); },
      cudaErrorInvalidValue, {"attach_flags::global or attach_flags::host"});

  // Copies from an owner without memory name it before anything else.
  std::vector<float> host(4);
  curt_test::require_cuda_error(
      [&] { curt::copy(host, zero, curt::stream_ref::legacy_default()); },
      cudaErrorInvalidResourceHandle, {"moved-from"});

  // adopt: null only with a count of 0.
  curt_test::require_cuda_error([&] { (void)curt::device_buffer<float>::adopt(d, nullptr, 3); },
                                cudaErrorInvalidValue, {"adopt", "count of 0"});
  CHECK(curt::device_buffer<float>::adopt(d, nullptr, 0).valid());

  // Registrations of nothing register nothing; a null pointer with bytes is refused.
  std::vector<float> none;
  curt::host_registration nothing(d, none);
  CHECK(nothing.valid());
  CHECK(nothing.size_bytes() == 0);
  curt_test::require_cuda_error([&] { curt::host_registration r(d, nullptr, 16); },
                                cudaErrorInvalidValue, {"null"});
  curt::host_registration moved_registration = std::move(nothing);
  curt_test::require_cuda_error([&] { (void)nothing.get(); }, cudaErrorInvalidResourceHandle,
                                {"host_registration", "moved-from"});

  // Pitched buffers with an extent of 0.
  curt::pitched_buffer<float> flat(d, 16, 0);
  CHECK(flat.valid());
  CHECK(flat.data() == nullptr);
  CHECK(flat.element_count() == 0);
  curt::pitched_buffer_3d<float> thin(d, 4, 4, 0);
  CHECK(thin.depth() == 0);
  CHECK(thin.element_count() == 0);
  // A released owner keeps no extent, as a moved-from one (no allocation: width 0).
  curt::pitched_buffer_3d<float> slices(d, 0, 4, 3);
  CHECK(slices.depth() == 3);
  CHECK(slices.release() == nullptr);
  CHECK(slices.depth() == 0);
  CHECK(slices.height() == 0);
  curt_test::require_cuda_error([&] { (void)slices.native(); }, cudaErrorInvalidResourceHandle,
                                {"pitched_buffer_3d<float>", "released"});
}

TEST_CASE("copies between host ranges of different sizes are refused before CUDA") {
  std::vector<float> three(3);
  std::array<float, 5> five{};
  curt_test::require_cuda_error(
      [&] { curt::copy(three, five, curt::stream_ref::legacy_default()); },
      cudaErrorInvalidValue,
      {"destination of 3 elements", "source of 5 elements", "12 bytes", "20 bytes"});
  curt_test::require_cuda_error(
      [&] { curt::copy(five, three, curt::stream_ref::legacy_default()); },
      cudaErrorInvalidValue, {"destination of 5 elements", "source of 3 elements"});
  curt::device d = unused_device();
  curt::pitched_buffer<float> image(d, 0, 7);
  std::vector<float> pixels(3);
  curt_test::require_cuda_error(
      [&] { curt::copy(image, pixels, curt::stream_ref::legacy_default()); },
      cudaErrorInvalidValue, {"0 x 7", "must hold exactly", "holds 3"});
  // Copies of nothing call nothing.
  std::vector<float> empty_a, empty_b;
  curt::copy(empty_a, empty_b, curt::stream_ref::legacy_default());
}

TEST_CASE("a subspan of a temporary view is the view's part, bounds-checked") {
  std::vector<int> v = curt_test::random_ints(10, -1000, 1000);
  cuda::std::span<const int> part = curt::span(cuda::std::span<const int>(v.data(), v.size()), 3, 4);
  CHECK(part.data() == v.data() + 3);
  CHECK(part.size() == 4u);
  CHECK(part[0] == v[3]);
  curt_test::require_cuda_error(
      [&] { (void)curt::span(cuda::std::span<int>(v.data(), v.size()), 8, 4); },
      cudaErrorInvalidValue, {"range of 10 elements, offset 8, count 4"});
}

TEST_CASE("subspans are bounds-checked") {
  std::vector<int> v(10);
  CHECK(curt::span(v, 2, 8).size() == 8);
  CHECK(curt::span(v, 2, 8).data() == v.data() + 2);
  CHECK(curt::span(v, 10, 0).empty());
  curt_test::require_cuda_error([&] { (void)curt::span(v, 3, 8); }, cudaErrorInvalidValue,
                                {"range of 10 elements, offset 3, count 8", "by 1 elements"});
  curt_test::require_cuda_error([&] { (void)curt::span(v, 11, 0); }, cudaErrorInvalidValue,
                                {"offset lies past the end"});
  curt_test::require_cuda_error(
      [&] { (void)curt::span(v, 1, std::numeric_limits<std::size_t>::max()); },
      cudaErrorInvalidValue, {"offset 1"});
}

TEST_CASE("a fill no memset can do is refused in a host compiler's translation unit") {
  std::vector<double> values(4);
  curt_test::require_cuda_error(
      [&] { curt::fill(values, 1.5, curt::stream_ref::legacy_default()); }, cudaErrorInvalidValue,
      {"curt::fill(8-byte value)", "nvcc"});
  struct three { unsigned char a, b, c; };
  std::vector<three> odd(4);
  curt_test::require_cuda_error(
      [&] { curt::fill(odd, three{1, 2, 3}, curt::stream_ref::legacy_default()); },
      cudaErrorInvalidValue, {"3-byte value"});
  // A fill of nothing does nothing, whatever the value.
  std::vector<double> none;
  curt::fill(none, 2.5, curt::stream_ref::legacy_default());
}

TEST_CASE("memory locations describe themselves") {
  CHECK(curt::memory_location::host().describe() == "host");
  CHECK(curt::memory_location::host_numa(3).describe() == "host NUMA node 3");
  CHECK(curt::memory_location::host_numa_current().describe() ==
        "host NUMA node nearest the calling thread");
  CHECK(curt::memory_location().describe() == "no location");
  CHECK(curt::memory_location::device(unused_device()).describe() == "device 0");
  cudaMemLocation native{};
  native.type = cudaMemLocationTypeHostNuma;
  native.id = 2;
  CHECK(curt::memory_location::from_native(native) == curt::memory_location::host_numa(2));
  CHECK(curt::memory_location::from_native(native).native().id == 2);
  CHECK(curt::location_list().empty());
}
