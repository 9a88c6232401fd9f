// curt/core/atomic.hpp: the atomics curt's internals need. With GCC and Clang (nvcc's host
// compilers on Linux) they are __atomic builtins on a plain value, as <atomic> alone costs each
// includer about 6 % of a translation unit of the CUDA runtime and std headers (callgrind, g++ 12):
// more than most of curt's own code. Elsewhere it is std::atomic. Users: use std::atomic.
#pragma once

#if defined(__GNUC__) || defined(__clang__)

namespace curt::detail {

enum class order : int {
  relaxed = __ATOMIC_RELAXED,
  acquire = __ATOMIC_ACQUIRE,
  release = __ATOMIC_RELEASE,
  seq_cst = __ATOMIC_SEQ_CST,
};

/// An integer, bool or pointer read and written atomically.
template <class T>
class atomic {
 public:
  constexpr atomic() noexcept : value_() {}
  constexpr atomic(T value) noexcept : value_(value) {}  // NOLINT: like std::atomic
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(order o = order::seq_cst) const noexcept { return __atomic_load_n(&value_, int(o)); }
  void store(T value, order o = order::seq_cst) noexcept {
    __atomic_store_n(&value_, value, int(o));
  }
  T exchange(T value, order o = order::seq_cst) noexcept {
    return __atomic_exchange_n(&value_, value, int(o));
  }
  bool compare_exchange_weak(T& expected, T desired, order success, order failure) noexcept {
    return __atomic_compare_exchange_n(&value_, &expected, desired, true, int(success),
                                       int(failure));
  }
  T fetch_add(T delta, order o = order::seq_cst) noexcept {
    return __atomic_fetch_add(&value_, delta, int(o));
  }
  T fetch_sub(T delta, order o = order::seq_cst) noexcept {
    return __atomic_fetch_sub(&value_, delta, int(o));
  }

 private:
  T value_;
};

}  // namespace curt::detail

#else

#  include <atomic>

namespace curt::detail {

struct order {
  static constexpr std::memory_order relaxed = std::memory_order_relaxed;
  static constexpr std::memory_order acquire = std::memory_order_acquire;
  static constexpr std::memory_order release = std::memory_order_release;
  static constexpr std::memory_order seq_cst = std::memory_order_seq_cst;
};
template <class T>
using atomic = std::atomic<T>;

}  // namespace curt::detail

#endif
