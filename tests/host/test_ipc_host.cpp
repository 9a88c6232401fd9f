// Legacy IPC without a GPU (include/curt/memory/ipc.hpp, event.hpp's ipc_event_handle): handles
// through bytes and back, refused bytes, the importer's type and count checked against the
// exporter's before CUDA, owners that hold nothing. None of these paths may reach CUDA.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/event.hpp>
#include <curt/memory_ipc.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

curt::device device0() { return curt::device::from_ordinal_unchecked(0); }

template <class Native>
Native random_native() {
  Native native{};
  std::vector<int> values = curt_test::random_ints(sizeof native, 0, 255);
  auto* bytes = reinterpret_cast<unsigned char*>(&native);
  for (std::size_t i = 0; i < sizeof native; ++i) bytes[i] = static_cast<unsigned char>(values[i]);
  return native;
}

}  // namespace

static_assert(std::is_trivially_copyable_v<curt::ipc_memory_handle>);
static_assert(std::is_trivially_copyable_v<curt::ipc_event_handle>);
static_assert(curt::ipc_memory_handle::serialized_size == 80);
static_assert(curt::ipc_event_handle::serialized_size == 64);
// A raw handle is an event handle (raw CUDA programs exchange the same 64 bytes).
static_assert(std::is_convertible_v<cudaIpcEventHandle_t, curt::ipc_event_handle>);
// ...and back, for code written against event_ref::ipc_handle()'s CUDA type.
static_assert(std::is_convertible_v<curt::ipc_event_handle, cudaIpcEventHandle_t>);
static_assert(std::is_same_v<decltype(std::declval<curt::event_ref&>().ipc_handle()),
                             cudaIpcEventHandle_t>);
static_assert(std::is_nothrow_default_constructible_v<curt::ipc_event_handle>);
static_assert(sizeof(curt::ipc_event_handle) == sizeof(cudaIpcEventHandle_t));
static_assert(!std::is_default_constructible_v<curt::ipc_memory_handle>);
static_assert(!std::is_copy_constructible_v<curt::ipc_buffer<float>>);
static_assert(std::is_nothrow_move_constructible_v<curt::ipc_buffer<float>>);

TEST_CASE("a memory handle goes through bytes and back whole", "[ipc]") {
  const cudaIpcMemHandle_t native = random_native<cudaIpcMemHandle_t>();
  const std::size_t count = std::size_t(curt_test::random_ints(1, 1, 1 << 30)[0]) << 8;
  const curt::ipc_memory_handle handle(native, count, sizeof(double));
  CHECK(handle.count() == count);
  CHECK(handle.element_size() == sizeof(double));

  const curt::ipc_memory_handle::bytes_type bytes = handle.bytes();
  CHECK(std::memcmp(bytes.data(), &native, sizeof native) == 0);  // CUDA's bytes come first
  std::vector<char> received(bytes.begin(), bytes.end());  // as another process gets them
  const curt::ipc_memory_handle back =
      curt::ipc_memory_handle::from_bytes(received.data(), received.size());
  CHECK(std::memcmp(&back.native(), &native, sizeof native) == 0);
  CHECK(back.count() == count);
  CHECK(back.element_size() == sizeof(double));
  CHECK(back.bytes() == bytes);
}

TEST_CASE("bytes that are no memory handle's are refused", "[ipc]") {
  const curt::ipc_memory_handle handle(random_native<cudaIpcMemHandle_t>(), 100, 4);
  curt::ipc_memory_handle::bytes_type bytes = handle.bytes();
  curt_test::require_cuda_error(
      [&] { (void)curt::ipc_memory_handle::from_bytes(bytes.data(), 64); }, cudaErrorInvalidValue,
      {"curt::ipc_memory_handle::from_bytes(64 bytes)", "80 bytes", "ipc_memory_handle(native"});
  curt_test::require_cuda_error(
      [&] { (void)curt::ipc_memory_handle::from_bytes(nullptr, 80); }, cudaErrorInvalidValue,
      {"from_bytes(80 bytes)"});
  bytes[79] ^= 0x40;  // the tag
  curt_test::require_cuda_error(
      [&] { (void)curt::ipc_memory_handle::from_bytes(bytes.data(), bytes.size()); },
      cudaErrorInvalidValue, {"from_bytes(80 bytes)", "tag"});
}

TEST_CASE("an event handle is CUDA's 64 bytes, through bytes and back", "[ipc]") {
  const cudaIpcEventHandle_t native = random_native<cudaIpcEventHandle_t>();
  const curt::ipc_event_handle handle = native;
  const curt::ipc_event_handle::bytes_type bytes = handle.bytes();
  CHECK(std::memcmp(bytes.data(), &native, sizeof native) == 0);
  const curt::ipc_event_handle back = curt::ipc_event_handle::from_bytes(bytes.data(), 64);
  CHECK(std::memcmp(&back.native(), &native, sizeof native) == 0);
  curt_test::require_cuda_error(
      [&] { (void)curt::ipc_event_handle::from_bytes(bytes.data(), 80); }, cudaErrorInvalidValue,
      {"curt::ipc_event_handle::from_bytes(80 bytes)", "64 bytes"});
  curt_test::require_cuda_error([&] { (void)curt::ipc_event_handle::from_bytes(nullptr, 64); },
                                cudaErrorInvalidValue, {"from_bytes(64 bytes)"});
  const cudaIpcEventHandle_t raw = back;  // to CUDA's type, unchanged
  CHECK(std::memcmp(&raw, &native, sizeof native) == 0);
  std::vector<curt::ipc_event_handle> received(3);  // zero-filled until a receive fills them
  for (const curt::ipc_event_handle& h : received) {
    const auto zero = h.bytes();
    CHECK(std::count(zero.begin(), zero.end(), 0) == 64);
  }
}

TEST_CASE("the importer's type and count are checked against the exporter's", "[ipc]") {
  const curt::ipc_memory_handle floats(random_native<cudaIpcMemHandle_t>(), 1000, sizeof(float));
  curt_test::require_cuda_error(
      [&] { (void)curt::open_ipc_memory<double>(floats, 500, device0()); },
      cudaErrorInvalidValue,
      {"curt::open_ipc_memory<double>(handle, 500)", "elements of 4 bytes", "double has 8"});
  curt_test::require_cuda_error(
      [&] { (void)curt::open_ipc_memory<float>(floats, 1001, device0()); }, cudaErrorInvalidValue,
      {"curt::open_ipc_memory<float>(handle, 1001)", "shared 1000 elements", "1001 asked for"});
}

TEST_CASE("exports without memory and ipc_buffers that hold nothing say which", "[ipc]") {
  curt_test::require_cuda_error([&] { (void)curt::export_ipc_memory<int>(nullptr, 4); },
                                cudaErrorInvalidValue,
                                {"curt::export_ipc_memory(null, 4 elements)", "no memory"});
  curt::device_buffer<float> empty(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)curt::export_ipc_memory(empty); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::device_buffer<float>::data()", "empty"});

  curt::ipc_buffer<float> none(curt::no_handle);
  CHECK_FALSE(none.valid());
  CHECK(none.size() == 0);
  curt_test::require_cuda_error([&] { (void)none.data(); }, cudaErrorInvalidResourceHandle,
                                {"curt::ipc_buffer<float>::data()", "empty"});
  curt::ipc_buffer<float> moved = std::move(none);
  curt_test::require_cuda_error([&] { (void)none.device(); }, cudaErrorInvalidResourceHandle,
                                {"curt::ipc_buffer<float>::device()", "moved-from"});
  curt_test::require_cuda_error([&] { (void)moved.release(); }, cudaErrorInvalidResourceHandle,
                                {"empty"});
}
