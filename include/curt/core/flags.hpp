// curt/core/flags.hpp: what curt's flag enums (event_flags, instantiate_flags, ...) share: they
// combine with | and has_flag(set, flag) tests one. An enum opts in with a flag_set
// specialization next to it, so the operators reach no other type.
#pragma once

#include <type_traits>

namespace curt {

/// True for curt's flag enums: those that combine with | and are tested with has_flag.
template <class Flags>
struct flag_set : std::false_type {};

/// Both sets of flags.
template <class Flags, std::enable_if_t<flag_set<Flags>::value, int> = 0>
constexpr Flags operator|(Flags a, Flags b) noexcept {
  using bits = std::underlying_type_t<Flags>;
  return static_cast<Flags>(static_cast<bits>(a) | static_cast<bits>(b));
}
/// Whether `set` holds (a bit of) `flag`.
template <class Flags, std::enable_if_t<flag_set<Flags>::value, int> = 0>
constexpr bool has_flag(Flags set, Flags flag) noexcept {
  using bits = std::underlying_type_t<Flags>;
  return (static_cast<bits>(set) & static_cast<bits>(flag)) != 0;
}

}  // namespace curt
