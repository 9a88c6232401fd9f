// Test helper: host memory on pages of its own, for cudaHostRegister. Registrations are tracked
// by page, so two std::vectors that share a heap page could not both be registered (the second
// would fail with cudaErrorHostMemoryAlreadyRegistered): a page_array never shares a page.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace curt_test {

template <class T>
class page_array {
 public:
  explicit page_array(std::size_t n) : n_(n) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    std::size_t bytes = n * sizeof(T);
    bytes = (bytes + page - 1) / page * page;
    data_ = static_cast<T*>(std::aligned_alloc(page, bytes == 0 ? page : bytes));
    if (data_ == nullptr) throw std::bad_alloc();
  }
  /// A copy of `values`.
  explicit page_array(const std::vector<T>& values) : page_array(values.size()) {
    std::memcpy(static_cast<void*>(data_), values.data(), n_ * sizeof(T));
  }
  ~page_array() { std::free(data_); }
  page_array(const page_array&) = delete;
  page_array& operator=(const page_array&) = delete;

  /// Every byte 0xFF (NaN as float).
  void poison() { std::memset(static_cast<void*>(data_), 0xFF, n_ * sizeof(T)); }

  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return n_; }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + n_; }

 private:
  std::size_t n_;
  T* data_ = nullptr;
};

}  // namespace curt_test
