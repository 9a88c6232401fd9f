// NVTX without a tool (include/curt/profiling/nvtx.hpp): the attributes curt hands NVTX (message,
// colour, payload of each type, the version fields), ranges, marks and names that run and return
// (NVTX makes every call an empty one when no tool is attached), and names of owners that hold
// nothing, refused as every use of them is. Needs no device.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/nvtx.hpp>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>

namespace {

namespace nvtx = curt::nvtx;

nvtxEventAttributes_t attributes_of(nvtx::message text, nvtx::color c, const nvtx::payload& p) {
  return nvtx::detail::attributes_access::make(text, c, p);
}

bool tool_attached() { return std::getenv("NVTX_INJECTION64_PATH") != nullptr; }

}  // namespace

static_assert(nvtx::color::rgb(0x12, 0x34, 0x56).argb == 0xff123456u);
static_assert(nvtx::color::rgb(0, 0, 0).argb == 0xff000000u);  // black is a colour, not "none"
static_assert(nvtx::color{}.argb == 0);
static_assert(!std::is_copy_constructible_v<nvtx::scoped_range> &&
              !std::is_move_constructible_v<nvtx::scoped_range>);
static_assert(!std::is_copy_constructible_v<nvtx::domain> &&
              !std::is_move_constructible_v<nvtx::domain>);
// A domain is never destroyed (nvtxDomainDestroy would end other threads' open ranges).
static_assert(std::is_trivially_destructible_v<nvtx::domain>);
static_assert(!std::is_convertible_v<bool, nvtx::payload>);  // a flag is not a number to show

TEST_CASE("attributes carry the message, and the colour and payload only where given", "[nvtx]") {
  const std::string text = "phase " + std::to_string(curt_test::rng()());
  nvtxEventAttributes_t a = attributes_of(text, {}, {});
  CHECK(a.version == NVTX_VERSION);
  CHECK(a.size == NVTX_EVENT_ATTRIB_STRUCT_SIZE);
  CHECK(a.messageType == NVTX_MESSAGE_TYPE_ASCII);
  CHECK(a.message.ascii == text.c_str());  // referred to, not copied
  CHECK(a.colorType == NVTX_COLOR_UNKNOWN);
  CHECK(a.payloadType == NVTX_PAYLOAD_UNKNOWN);
  CHECK(nvtx::payload().empty());

  std::uniform_int_distribution<int> part(0, 255);
  const auto r = static_cast<std::uint8_t>(part(curt_test::rng()));
  const auto g = static_cast<std::uint8_t>(part(curt_test::rng()));
  const auto b = static_cast<std::uint8_t>(part(curt_test::rng()));
  a = attributes_of("coloured", nvtx::color::rgb(r, g, b), {});
  CHECK(a.colorType == NVTX_COLOR_ARGB);
  CHECK(a.color == (0xff000000u | std::uint32_t{r} << 16 | std::uint32_t{g} << 8 | b));
  CHECK(std::string(a.message.ascii) == "coloured");
}

TEST_CASE("payloads keep their value: integers as 64 bits, signed or not, reals as doubles",
          "[nvtx]") {
  const auto u = curt_test::rng()();
  const auto s = static_cast<std::int64_t>(curt_test::rng()());
  const double d = std::uniform_real_distribution<double>(-1e9, 1e9)(curt_test::rng());

  nvtxEventAttributes_t a = attributes_of("u64", {}, u);
  CHECK(a.payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64);
  CHECK(a.payload.ullValue == u);
  a = attributes_of("i64", {}, s);
  CHECK(a.payloadType == NVTX_PAYLOAD_TYPE_INT64);
  CHECK(a.payload.llValue == s);
  a = attributes_of("int", {}, -7);
  CHECK(a.payloadType == NVTX_PAYLOAD_TYPE_INT64);
  CHECK(a.payload.llValue == -7);
  a = attributes_of("u32", {}, std::numeric_limits<std::uint32_t>::max());
  CHECK(a.payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64);
  CHECK(a.payload.ullValue == std::numeric_limits<std::uint32_t>::max());
  a = attributes_of("size", {}, std::size_t{1} << 40);
  CHECK(a.payload.ullValue == std::uint64_t{1} << 40);
  a = attributes_of("double", {}, d);
  CHECK(a.payloadType == NVTX_PAYLOAD_TYPE_DOUBLE);
  CHECK(a.payload.dValue == d);
  a = attributes_of("float", {}, 0.25f);
  CHECK(a.payloadType == NVTX_PAYLOAD_TYPE_DOUBLE);
  CHECK(a.payload.dValue == 0.25);
}

TEST_CASE("without a tool, domains are null and ranges, marks and names return", "[nvtx]") {
  static const nvtx::domain domain("curt host test");
  CHECK(nvtx::domain::global().get() == nullptr);
  if (!tool_attached()) CHECK(domain.get() == nullptr);  // NVTX makes none without a tool
  const std::string message = "dynamic " + std::to_string(curt_test::rng()() % 1000);
  {
    nvtx::scoped_range outer("outer");
    nvtx::scoped_range inner(domain, message, nvtx::color::rgb(200, 0, 0), 3.5);
    nvtx::scoped_range innermost(domain, "payload only", {}, 17u);
    nvtx::mark("global mark");
    nvtx::mark(domain, message, nvtx::color::rgb(0, 200, 0), -1);
  }
  // Ranges push and pop in pairs: with no tool NVTX answers each push with a level it does not
  // count (a negative one), never one that says a range is open.
  const nvtxEventAttributes_t a = attributes_of("raw", {}, {});
  if (!tool_attached()) {
    CHECK(nvtxDomainRangePushEx(domain.get(), &a) < 0);
    CHECK(nvtxDomainRangePop(domain.get()) < 0);
  }
  nvtx::name(curt::device::from_ordinal_unchecked(0), "gpu 0");  // NVTX checks nothing
}

TEST_CASE("naming a stream or an event that holds nothing is refused as any use is", "[nvtx]") {
  curt::stream empty_stream(curt::no_handle);
  curt_test::require_cuda_error([&] { nvtx::name(empty_stream, "empty"); },
                                cudaErrorInvalidResourceHandle, {"curt::stream", "empty", "get()"});
  curt::event empty_event(curt::no_handle);
  curt::event moved(std::move(empty_event));
  curt_test::require_cuda_error([&] { nvtx::name(empty_event, "moved"); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::event", "moved-from", "get()"});
}
