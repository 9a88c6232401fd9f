// Test helpers: expected CUDA errors, fresh random inputs, relative comparison.
#pragma once

#include "catch.hpp"

#include <curt/error.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace curt_test {

/// Runs `action`, requires it to throw `Exception` with `status`, and every fragment in what().
/// Returns the exception for further checks.
template <class Exception = curt::cuda_error, class Action>
Exception require_cuda_error(Action&& action, cudaError_t status,
                             std::initializer_list<const char*> fragments) {
  try {
    action();
  } catch (const Exception& error) {
    INFO("what(): " << error.what());
    CHECK(error.status() == status);
    for (const char* fragment : fragments) CHECK_THAT(error.what(), ContainsSubstring(fragment));
    return error;
  }
  FAIL("expected a CUDA error with status " << cudaGetErrorName(status));
  throw;  // unreachable: FAIL aborts the test case
}

/// Runs `action` and requires a curt::cuda_error whose what() has every fragment, whatever its
/// status: for refusals whose code CUDA does not document. Returns the exception.
template <class Action>
curt::cuda_error require_any_cuda_error(Action&& action,
                                        std::initializer_list<const char*> fragments) {
  try {
    action();
  } catch (const curt::cuda_error& error) {
    INFO("what(): " << error.what());
    CHECK(error.status() != cudaSuccess);
    for (const char* fragment : fragments) CHECK_THAT(error.what(), ContainsSubstring(fragment));
    return error;
  }
  FAIL("expected a curt::cuda_error");
  throw;  // unreachable: FAIL aborts the test case
}

/// A generator seeded afresh each run (or from CURT_TEST_SEED); the seed is printed to reproduce.
inline std::mt19937_64& rng() {
  static std::mt19937_64 engine = [] {
    std::uint64_t seed = std::random_device{}();
    if (const char* fixed = std::getenv("CURT_TEST_SEED")) seed = std::strtoull(fixed, nullptr, 10);
    std::printf("random seed: %llu (set CURT_TEST_SEED to repeat)\n",
                static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return engine;
}

inline std::vector<float> random_floats(std::size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng());
  return v;
}

inline std::vector<int> random_ints(std::size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int> v(n);
  for (auto& x : v) x = dist(rng());
  return v;
}

/// n elements of T whose bytes are all 0xFF (NaN for floats): what an output holds before the
/// code under test writes it.
template <class T>
std::vector<T> poisoned(std::size_t n) {
  std::vector<T> v(n);
  std::memset(static_cast<void*>(v.data()), 0xFF, n * sizeof(T));
  return v;
}

/// |a - b| <= tolerance * max(|a|, |b|, tiny): relative error for floats.
inline bool close(double a, double b, double tolerance = 1e-5) {
  double scale = std::fmax(std::fmax(std::fabs(a), std::fabs(b)), 1e-30);
  return std::fabs(a - b) <= tolerance * scale;
}

/// Every element of `got` close to `want`'s (relative error), reporting how many differ and the
/// first one.
template <class Got, class Want>
void require_close_all(const Got& got, const Want& want, double tolerance = 1e-6) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!close(got[i], want[i], tolerance)) {
      if (bad++ == 0) first = i;
    }
  INFO(bad << " of " << want.size() << " differ; first at " << first
            << (bad ? ": got " + std::to_string(got[first]) + ", want " + std::to_string(want[first])
                    : std::string()));
  CHECK(bad == 0);
}

/// Every element of `got` has the bytes of `want`'s, reporting how many differ and the first one.
template <class Got, class Want>
void require_same_bytes(const Got& got, const Want& want) {
  REQUIRE(got.size() == want.size());
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(want.data())>>;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      if (bad++ == 0) first = i;
    }
  INFO(bad << " of " << want.size() << " differ; first at " << first);
  CHECK(bad == 0);
}

/// The CPU reference of the affine kernels the tests use: y[i] = a * x[i] + b.
inline std::vector<int> affine_ref(const std::vector<int>& x, int a, int b) {
  std::vector<int> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = a * x[i] + b;
  return y;
}

}  // namespace curt_test
