// Catch2 v3 (the GPU machine) and v2.13 (Debian 12, CI) through one include.
#pragma once

#if __has_include(<catch2/catch_test_macros.hpp>)
#  include <catch2/catch_approx.hpp>
#  include <catch2/catch_test_macros.hpp>
#  include <catch2/matchers/catch_matchers_exception.hpp>
#  include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Matchers::ContainsSubstring;
#else
#  include <catch2/catch.hpp>
#  include <string>
inline auto ContainsSubstring(const std::string& text) { return Catch::Matchers::Contains(text); }
#endif
