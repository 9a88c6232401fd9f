// curt's flag enums (include/curt/core/flags.hpp) combine with | and are tested with has_flag,
// at compile time too, also beside a user's generic operator| template for every enum (a common
// "bitmask" helper): curt's plain functions win over it instead of being ambiguous with it.
#include <catch.hpp>

#include <curt/curt.hpp>

#include <type_traits>

template <class E, std::enable_if_t<std::is_enum_v<E>, int> = 0>
constexpr E operator|(E a, E b) noexcept {  // the user's, for every enum
  using bits = std::underlying_type_t<E>;
  return static_cast<E>(static_cast<bits>(a) | static_cast<bits>(b) | bits(0x80));  // marked
}

namespace {
constexpr auto both = curt::event_flags::blocking_sync | curt::event_flags::interprocess;
static_assert(std::is_same_v<decltype(both), const curt::event_flags>);
static_assert(curt::has_flag(both, curt::event_flags::interprocess));
static_assert(!curt::has_flag(curt::event_flags::blocking_sync, curt::event_flags::interprocess));
enum class mine : unsigned { a = 1, b = 2 };
static_assert(static_cast<unsigned>(mine::a | mine::b) == 0x83u);  // the user's own is untouched
}  // namespace

TEST_CASE("flag enums combine with curt's operator| beside a generic one", "[flags]") {
  CHECK(static_cast<unsigned>(both) == (static_cast<unsigned>(curt::event_flags::blocking_sync) |
                                        static_cast<unsigned>(curt::event_flags::interprocess)));
  const auto flags =
      curt::instantiate_flags::device_launch | curt::instantiate_flags::use_node_priority;
  CHECK(curt::has_flag(flags, curt::instantiate_flags::use_node_priority));
  CHECK_FALSE(curt::has_flag(flags, curt::instantiate_flags::auto_free_on_launch));
  CHECK(curt::has_flag(curt::pinned_flags::mapped | curt::pinned_flags::portable,
                       curt::pinned_flags::portable));
}
