// curt/detail/entries.hpp: a minimal growable array for curt's small internal tables (a few
// entries each), so that every translation unit does not pay for compiling <vector>.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace curt::detail {

/// Default-constructible, movable T; push_back, swap-remove, iteration. Not a container for users.
template <class T>
class entries {
 public:
  T* begin() noexcept { return data_.get(); }
  T* end() noexcept { return data_.get() + size_; }
  const T* begin() const noexcept { return data_.get(); }
  const T* end() const noexcept { return data_.get() + size_; }
  std::size_t size() const noexcept { return size_; }
  T& back() noexcept { return data_[size_ - 1]; }

  /// Appends; may allocate (never call it where allocation is not allowed).
  T& push_back(T value) {
    if (size_ == capacity_) {
      std::size_t capacity = capacity_ ? 2 * capacity_ : 4;
      std::unique_ptr<T[]> grown(new T[capacity]);
      for (std::size_t i = 0; i < size_; ++i) grown[i] = std::move(data_[i]);
      data_ = std::move(grown);
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
  std::unique_ptr<T[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace curt::detail
