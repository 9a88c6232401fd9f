// What curt's arrays, textures and surfaces (curt/array.hpp, curt/texture.hpp) refuse or decide
// before calling CUDA, checked without a GPU: extents of 0 and overflowing sizes, element types
// without a channel format, copies whose extents differ (dense, pitched, array), a surface over
// an array made without array_flags::surface_load_store, texture descriptions CUDA would not
// honour, textures over memory without elements, and owners that hold nothing naming their state.
// An array of our own description is adopted (a fake handle, released before its owner ends) so
// that the refusals that need an array can be reached without a device.
#include <catch.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>

#include <curt/array.hpp>
#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/texture.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// Move-only owners; textures of temporaries do not compile.
static_assert(!std::is_copy_constructible_v<curt::cuda_array<float>>);
static_assert(std::is_nothrow_move_constructible_v<curt::cuda_array<float>>);
static_assert(std::is_nothrow_move_assignable_v<curt::texture_object>);
static_assert(!std::is_copy_constructible_v<curt::surface_object>);
static_assert(std::is_constructible_v<curt::texture_object, const curt::cuda_array<float>&>);
static_assert(!std::is_constructible_v<curt::texture_object, curt::cuda_array<float>&&>);
static_assert(!std::is_constructible_v<curt::texture_object, curt::device_buffer<int>&&>);
static_assert(!std::is_constructible_v<curt::texture_object, curt::pitched_buffer<float>&&>);
static_assert(!std::is_constructible_v<curt::surface_object, curt::cuda_array<float>&&>);
static_assert(!std::is_constructible_v<curt::surface_object, const curt::cuda_array<float>&>);
static_assert(
    std::is_same_v<decltype(std::declval<curt::texture_object&>().get()), cudaTextureObject_t>);
static_assert(
    std::is_same_v<decltype(std::declval<curt::surface_object&>().get()), cudaSurfaceObject_t>);
static_assert(curt::has_flag(curt::array_flags::surface_load_store |
                                 curt::array_flags::texture_gather,
                             curt::array_flags::texture_gather));
static_assert(!curt::has_flag(curt::array_flags::none, curt::array_flags::surface_load_store));

curt::device unused_device() { return curt::device::from_ordinal_unchecked(0); }

// An array CUDA never made: never used for CUDA, released before its owner ends.
cudaArray_t fake_array() { return reinterpret_cast<cudaArray_t>(std::uintptr_t(0x1000)); }

template <class T>
curt::cuda_array<T> adopted(cudaExtent extent, unsigned flags = cudaArrayDefault) {
  return curt::cuda_array<T>::adopt(unused_device(), fake_array(), extent, flags);
}

}  // namespace

TEST_CASE("arrays with an extent of 0, an overflowing size or no channel format are refused") {
  curt_test::destructor_error_counter destructor_errors;  // a refused array frees nothing
  const curt::device d = unused_device();
  using floats = curt::cuda_array<float>;
  curt_test::require_cuda_error([&] { (void)floats::two_d(d, 640, 0); }, cudaErrorInvalidValue,
                                {"curt::cuda_array<float>::two_d(640, 0)", "at least 1"});
  curt_test::require_cuda_error([&] { (void)floats::one_d(d, 0); }, cudaErrorInvalidValue,
                                {"one_d(0)", "at least 1"});
  curt_test::require_cuda_error([&] { (void)floats::three_d(d, 4, 4, 0); }, cudaErrorInvalidValue,
                                {"three_d(4, 4, 0)", "at least 1"});
  curt_test::require_cuda_error([&] { (void)floats::layered_1d(d, 16, 0); }, cudaErrorInvalidValue,
                                {"layered_1d(16, 0)", "at least 1"});
  curt_test::require_cuda_error([&] { (void)floats::layered_2d(d, 16, 8, 0); },
                                cudaErrorInvalidValue, {"layered_2d(16, 8, 0)", "at least 1"});
  const std::size_t huge = std::size_t(1) << 31;
  curt_test::require_cuda_error([&] { (void)floats::three_d(d, huge, huge, huge); },
                                cudaErrorInvalidValue, {"three_d", "overflows std::size_t"});
  // double has no channel format (cudaCreateChannelDesc<double>() names none).
  curt_test::require_cuda_error(
      [&] { (void)curt::cuda_array<double>::two_d(d, 4, 4); }, cudaErrorInvalidValue,
      {"cuda_array<double>::two_d(4, 4)", "double has no channel format"});
  curt_test::require_cuda_error(
      [&] {
        (void)curt::cuda_array<float>::adopt(d, nullptr, {4, 0, 0}, 0);
      },
      cudaErrorInvalidResourceHandle, {"adopt", "not null"});
  CHECK(destructor_errors.count() == 0);
}

TEST_CASE("an array's extents: 1D, 2D, 3D and layered, as cudaMalloc3DArray takes them") {
  curt::cuda_array<float> line = adopted<float>({7, 0, 0});
  CHECK(line.width() == 7);
  CHECK(line.height() == 1);
  CHECK(line.depth() == 1);
  CHECK(line.layers() == 0);
  CHECK_FALSE(line.layered());
  CHECK(line.element_count() == 7);
  CHECK(line.device() == unused_device());
  CHECK(line.release() == fake_array());

  curt::cuda_array<float> volume = adopted<float>({4, 3, 2}, cudaArraySurfaceLoadStore);
  CHECK(volume.element_count() == 24);
  CHECK(volume.depth() == 2);
  CHECK(volume.flags() == curt::array_flags::surface_load_store);
  CHECK(volume.release() == fake_array());

  curt::cuda_array<int> layers = adopted<int>({5, 0, 6}, cudaArrayLayered);
  CHECK(layers.layered());
  CHECK(layers.height() == 1);
  CHECK(layers.depth() == 1);
  CHECK(layers.layers() == 6);
  CHECK(layers.element_count() == 30);
  CHECK(layers.flags() == curt::array_flags::none);
  CHECK(layers.release() == fake_array());
  CHECK(layers.width() == 0);
  CHECK(layers.element_count() == 0);
  curt_test::require_cuda_error([&] { (void)layers.get(); }, cudaErrorInvalidResourceHandle,
                                {"curt::cuda_array<int>::get()", "released"});
}

TEST_CASE("copies with an array whose extents differ are refused before CUDA, in numbers") {
  const curt::stream_ref s = curt::stream_ref::legacy_default();
  curt::cuda_array<float> image = adopted<float>({4, 3, 0});
  std::vector<float> eleven(11), twelve(12);
  curt_test::require_cuda_error([&] { curt::copy(image, eleven, s); }, cudaErrorInvalidValue,
                                {"curt::copy(array, dense range, stream)", "4 x 3 x 1",
                                 "holds 11 elements", "extents differ"});
  curt_test::require_cuda_error([&] { curt::copy(eleven, image, s); }, cudaErrorInvalidValue,
                                {"curt::copy(dense range, array, stream)", "holds 11 elements"});
  curt::pitched_buffer<float> flat(unused_device(), 0, 3);
  curt_test::require_cuda_error(
      [&] { curt::copy(image, flat, s); }, cudaErrorInvalidValue,
      {"curt::copy(array, pitched buffer, stream)", "0 x 3 x 1", "4 x 3 x 1"});
  curt_test::require_cuda_error([&] { curt::copy(flat, image, s); }, cudaErrorInvalidValue,
                                {"curt::copy(pitched buffer, array, stream)"});
  curt::cuda_array<float> layered = adopted<float>({4, 3, 2}, cudaArrayLayered);
  curt_test::require_cuda_error([&] { curt::copy(layered, image, s); }, cudaErrorInvalidValue,
                                {"curt::copy(array, array, stream)", "4 x 3 x 2", "4 x 3 x 1"});
  CHECK(layered.release() == fake_array());

  // An owner that holds none is named before its extents are compared.
  curt::cuda_array<float> moved = std::move(image);
  CHECK_FALSE(image.valid());
  CHECK(image.width() == 0);
  curt_test::require_cuda_error([&] { curt::copy(image, twelve, s); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::cuda_array<float>::get()", "moved-from"});
  curt_test::require_cuda_error([&] { curt::copy(twelve, image, s); },
                                cudaErrorInvalidResourceHandle, {"moved-from"});
  CHECK(moved.release() == fake_array());
}

TEST_CASE("a surface needs an array made with array_flags::surface_load_store") {
  curt::cuda_array<float> plain = adopted<float>({8, 8, 0});
  curt_test::require_cuda_error([&] { curt::surface_object surface(plain); }, cudaErrorInvalidValue,
                                {"curt::surface_object(curt::cuda_array<float>)",
                                 "without curt::array_flags::surface_load_store"});
  CHECK(plain.release() == fake_array());
  curt::cuda_array<float> empty(curt::no_handle);
  curt_test::require_cuda_error([&] { curt::surface_object surface(empty); },
                                cudaErrorInvalidResourceHandle, {"cuda_array<float>", "empty"});
  curt_test::require_cuda_error([&] { curt::texture_object texture(empty); },
                                cudaErrorInvalidResourceHandle, {"cuda_array<float>", "empty"});
}

TEST_CASE("texture descriptions CUDA would ignore or change are refused before CUDA") {
  using curt::address_mode;
  using curt::filter_mode;
  using curt::read_mode;
  const curt::texture_description defaults;
  for (cudaTextureAddressMode m : defaults.native().addressMode) CHECK(m == cudaAddressModeClamp);
  CHECK(defaults.native().filterMode == cudaFilterModePoint);
  CHECK(defaults.native().readMode == cudaReadModeElementType);
  CHECK(defaults.native().normalizedCoords == 0);
  const curt::texture_description set =
      curt::texture_description()
          .address(address_mode::wrap, address_mode::border, address_mode::mirror)
          .filter(filter_mode::linear)
          .read(read_mode::normalized_float)
          .normalized_coordinates()
          .border_color(0.25f, 0.5f, 0.75f, 1.0f);
  CHECK(set.native().addressMode[0] == cudaAddressModeWrap);
  CHECK(set.native().addressMode[1] == cudaAddressModeBorder);
  CHECK(set.native().addressMode[2] == cudaAddressModeMirror);
  CHECK(set.native().filterMode == cudaFilterModeLinear);
  CHECK(set.native().readMode == cudaReadModeNormalizedFloat);
  CHECK(set.native().normalizedCoords == 1);
  CHECK(set.native().borderColor[0] == 0.25f);
  CHECK(set.native().borderColor[3] == 1.0f);

  curt::cuda_array<float> floats = adopted<float>({8, 8, 0});
  curt::cuda_array<int> ints = adopted<int>({8, 0, 0});
  curt::cuda_array<uchar4> bytes = adopted<uchar4>({8, 8, 0});
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(floats, curt::texture_description().address(address_mode::wrap));
      },
      cudaErrorInvalidValue,
      {"curt::texture_object(curt::cuda_array<float>)", "need normalized coordinates"});
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(floats, curt::texture_description().address(address_mode::mirror));
      },
      cudaErrorInvalidValue, {"need normalized coordinates"});
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(ints, curt::texture_description().filter(filter_mode::linear));
      },
      cudaErrorInvalidValue, {"cuda_array<int>", "linear filtering returns floats"});
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(ints, curt::texture_description().read(read_mode::normalized_float));
      },
      cudaErrorInvalidValue, {"converts only 8- and 16-bit integers"});
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(floats,
                               curt::texture_description().read(read_mode::normalized_float));
      },
      cudaErrorInvalidValue, {"converts only 8- and 16-bit integers"});
  CHECK(floats.release() == fake_array());
  CHECK(ints.release() == fake_array());
  CHECK(bytes.release() == fake_array());
}

TEST_CASE("textures over linear and pitched memory: no elements, no filtering, states named") {
  const curt::device d = unused_device();
  curt::device_buffer<float> none(d, 0);
  curt_test::require_cuda_error(
      [&] { curt::texture_object t(none); }, cudaErrorInvalidValue,
      {"curt::texture_object(curt::device_buffer<float>)", "holds no elements"});
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(none, curt::texture_description().filter(curt::filter_mode::linear));
      },
      cudaErrorInvalidValue, {"reads elements by index (tex1Dfetch)"});
  curt_test::require_cuda_error(
      [&] { curt::texture_object t(none, curt::texture_description().normalized_coordinates()); },
      cudaErrorInvalidValue, {"reads elements by index"});
  // CUDA ignores address modes over linear memory (out of range reads 0): border is refused too.
  curt_test::require_cuda_error(
      [&] {
        curt::texture_object t(none, curt::texture_description()
                                         .address(curt::address_mode::border)
                                         .border_color(5.0f));
      },
      cudaErrorInvalidValue, {"address modes (out of range reads 0)"});
  curt::pitched_buffer<float> flat(d, 16, 0);
  curt_test::require_cuda_error(
      [&] { curt::texture_object t(flat); }, cudaErrorInvalidValue,
      {"curt::texture_object(curt::pitched_buffer<float>)", "holds no elements"});
  curt::device_buffer<double> doubles(d, 0);
  curt_test::require_cuda_error([&] { curt::texture_object t(doubles); }, cudaErrorInvalidValue,
                                {"double has no channel format"});
  curt::device_buffer<float> moved = std::move(none);
  curt_test::require_cuda_error([&] { curt::texture_object t(none); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::device_buffer<float>", "moved-from"});
}

TEST_CASE("texture and surface owners that hold nothing say which state") {
  curt::texture_object texture(curt::no_handle);
  CHECK_FALSE(texture.valid());
  curt_test::require_cuda_error([&] { (void)texture.get(); }, cudaErrorInvalidResourceHandle,
                                {"curt::texture_object::get()", "empty"});
  curt_test::require_cuda_error([&] { (void)texture.device(); }, cudaErrorInvalidResourceHandle,
                                {"curt::texture_object::device()", "empty"});
  curt::texture_object moved = std::move(texture);
  curt_test::require_cuda_error([&] { (void)texture.get(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from"});
  curt_test::require_cuda_error([&] { (void)moved.release(); }, cudaErrorInvalidResourceHandle,
                                {"curt::texture_object::release()", "empty"});
  curt::surface_object surface(curt::no_handle);
  CHECK_FALSE(surface.valid());
  curt_test::require_cuda_error([&] { (void)surface.get(); }, cudaErrorInvalidResourceHandle,
                                {"curt::surface_object::get()", "empty"});
  curt::surface_object other(curt::no_handle);
  other = std::move(surface);
  curt_test::require_cuda_error([&] { (void)surface.device(); }, cudaErrorInvalidResourceHandle,
                                {"curt::surface_object::device()", "moved-from"});
}
