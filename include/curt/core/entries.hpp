// curt/core/entries.hpp: a minimal growable array for curt's small internal tables (a few
// entries each), so that every translation unit does not pay for compiling <vector> (nor
// std::unique_ptr<T[]>, which costs g++ more than this whole class).
#pragma once

#include <cstddef>
#include <utility>

namespace curt::detail {

/// Default-constructible, movable T; push_back, swap-remove, iteration. Not a container for users.
template <class T>
class entries {
 public:
  entries() = default;
  entries(const entries&) = delete;
  entries& operator=(const entries&) = delete;
  ~entries() { delete[] data_; }

  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  std::size_t size() const noexcept { return size_; }
  T& back() noexcept { return data_[size_ - 1]; }

  /// Appends; may allocate (never call it where allocation is not allowed).
  T& push_back(T value) {
    if (size_ == capacity_) {
      std::size_t capacity = capacity_ ? 2 * capacity_ : 4;
      T* grown = new T[capacity];  // if this throws, nothing has changed
      for (std::size_t i = 0; i < size_; ++i) grown[i] = std::move(data_[i]);
      delete[] data_;
      data_ = grown;
      capacity_ = capacity;
    }
    data_[size_] = std::move(value);
    return data_[size_++];
  }
  /// Removes `*item` by moving the last entry into its place; allocates nothing.
  void remove(T* item) noexcept {
    if (item != &back()) *item = std::move(back());
    data_[--size_] = T();
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace curt::detail
