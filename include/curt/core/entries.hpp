// curt/core/entries.hpp: the one growable array of curt's internals (tables, batches, lists): no
// translation unit pays for <vector> (nor std::unique_ptr<T[]>, costlier for g++ than this class).
#pragma once

#include <cstddef>
#include <utility>

namespace curt::detail {

/// Default-constructible, copyable T: push_back, swap-remove, index, iteration. Not for users.
template <class T>
class entries {
 public:
  entries() = default;
  explicit entries(std::size_t count) { resize(count); }  ///< as resize(count)
  entries(const entries& other) { *this = other; }
  entries(entries&& other) noexcept { swap(other); }
  entries& operator=(const entries& other) {
    if (this == &other) return *this;
    clear();
    reserve(other.size_);
    for (const T& value : other) data_[size_++] = value;
    return *this;
  }
  entries& operator=(entries&& other) noexcept {
    swap(other);
    return *this;
  }
  ~entries() { delete[] data_; }

  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T& back() noexcept { return data_[size_ - 1]; }

  /// Room for `count` entries; if this throws (no memory), nothing has changed.
  void reserve(std::size_t count) {
    if (count <= capacity_) return;
    T* grown = new T[count];
    for (std::size_t i = 0; i < size_; ++i) grown[i] = std::move(data_[i]);
    delete[] data_;
    data_ = grown;
    capacity_ = count;
  }
  /// Room for one more (doubling): a push_back after it allocates nothing.
  void reserve_one_more() {
    if (size_ == capacity_) reserve(capacity_ ? 2 * capacity_ : 4);
  }
  /// Appends; may allocate (never call it where allocation is not allowed).
  T& push_back(T value) {
    reserve_one_more();
    data_[size_] = std::move(value);
    return data_[size_++];
  }
  /// Removes `*item` by moving the last entry into its place; allocates nothing.
  void remove(T* item) noexcept {
    if (item != &back()) *item = std::move(back());
    data_[--size_] = T();
  }
  void clear() noexcept { size_ = 0; }
  /// `count` entries, the new ones default-initialized (for a C API to fill).
  void resize(std::size_t count) {
    reserve(count);
    size_ = count;
  }
  void swap(entries& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace curt::detail
