// curt/core/flags.hpp: what curt's flag enums (event_flags, instantiate_flags, ...) share: they
// combine with | and has_flag(set, flag) tests one. CURT_DETAIL_FLAGS(E); after such an enum in
// namespace curt declares both for it as plain functions, which (unlike a template) win over a
// user's generic operator| template for every enum, as hand-written ones would.
#pragma once

#include <type_traits>

#define CURT_DETAIL_FLAGS(E)                                              \
  constexpr E operator|(E a, E b) noexcept {                              \
    using bits = std::underlying_type_t<E>;                               \
    return static_cast<E>(static_cast<bits>(a) | static_cast<bits>(b));   \
  }                                                                       \
  constexpr bool has_flag(E set, E flag) noexcept {                       \
    using bits = std::underlying_type_t<E>;                               \
    return (static_cast<bits>(set) & static_cast<bits>(flag)) != 0;       \
  }                                                                       \
  static_assert(std::is_enum_v<E>, #E " is a flag enum")
