// Test helper: an array in device memory over raw cudaMalloc/cudaFree, for the GPU tests.
#pragma once

#include "catch.hpp"

#include <curt/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace curt_test {

/// `size()` elements of T in device memory, poisoned (all bytes 0xFF: NaN as float) when made.
///
/// poison() and upload() wait for the whole device before and after: cudaMemset and a cudaMemcpy
/// from pageable memory may return before the device has finished them, and work on non-blocking
/// streams is not ordered after them, so every fill and upload is explicitly ordered against the
/// work on every stream.
///
/// download() waits for nothing: call it only once the work that writes the array is known to be
/// done (after the stream's or event's synchronize()). A check that some synchronize() really
/// waited then fails if it did not, instead of being rescued by a wait in the helper.
///
/// Move-only. Errors throw through CURT_CHECK; the destructor reports a failed cudaFree through
/// curt's destructor error handler instead of throwing.
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t n) : n_(n) {
    CURT_CHECK(cudaMalloc(&data_, bytes()));
    try {
      poison();
    } catch (...) {
      free();
      throw;
    }
  }
  explicit device_array(const std::vector<T>& values) : device_array(values.size()) {
    upload(values);
  }
  ~device_array() { free(); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  device_array(device_array&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), n_(std::exchange(other.n_, 0)) {}
  device_array& operator=(device_array&& other) noexcept {
    if (this != &other) {
      free();
      data_ = std::exchange(other.data_, nullptr);
      n_ = std::exchange(other.n_, 0);
    }
    return *this;
  }

  T* get() const noexcept { return data_; }
  std::size_t size() const noexcept { return n_; }
  std::size_t bytes() const noexcept { return n_ * sizeof(T); }

  /// Sets every byte to 0xFF, after all work on the device and before any later work.
  void poison() const {
    CURT_CHECK(cudaDeviceSynchronize());
    CURT_CHECK(cudaMemset(data_, 0xFF, bytes()));
    CURT_CHECK(cudaDeviceSynchronize());
  }
  /// Copies `values` (exactly size() of them) in, after all work on the device and before any later
  /// work.
  void upload(const std::vector<T>& values) const {
    REQUIRE(values.size() == n_);
    CURT_CHECK(cudaDeviceSynchronize());
    CURT_CHECK(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice));
    CURT_CHECK(cudaDeviceSynchronize());
  }
  /// The contents. Only once the work that writes the array is known to be done: see above.
  std::vector<T> download() const {
    std::vector<T> values(n_);
    CURT_CHECK(cudaMemcpy(values.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return values;
  }

 private:
  void free() noexcept {
    if (data_)
      curt::detail::report(cudaFree(data_), "cudaFree(test array)", __FILE__, __LINE__);
    data_ = nullptr;
  }

  T* data_ = nullptr;
  std::size_t n_;
};

/// A device_array as a range (data(), size()) for curt's copies, fills and graph nodes.
template <class T>
struct array_range {
  T* pointer;
  std::size_t count;
  T* data() const noexcept { return pointer; }
  std::size_t size() const noexcept { return count; }
};
template <class T>
array_range<T> all_of(const device_array<T>& a) {
  return array_range<T>{a.get(), a.size()};
}

}  // namespace curt_test
