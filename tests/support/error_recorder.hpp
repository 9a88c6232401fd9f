// Records what curt hands to its error handler (from any thread) while a recorder lives: the
// count, the messages, and the original exceptions of host functions.
#pragma once

#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

namespace curt_test {

// Records what curt hands to the error handler (on any thread).
struct handled_errors {
  std::atomic<int> count{0};
  std::atomic<int> host_function_errors{0};
  std::mutex mutex;
  std::vector<std::string> messages;
  std::vector<std::exception_ptr> originals;
};
inline handled_errors* current_errors = nullptr;
inline void record_error(const std::exception& error) noexcept {
  handled_errors* errors = current_errors;
  if (!errors) return;
  try {
    std::lock_guard<std::mutex> lock(errors->mutex);
    errors->messages.emplace_back(error.what());
    if (auto* h = dynamic_cast<const curt::host_function_error*>(&error)) {
      errors->originals.push_back(h->original());
      errors->host_function_errors.fetch_add(1);
    }
  } catch (...) {
  }
  errors->count.fetch_add(1);
}
class error_recorder : public handled_errors {
 public:
  error_recorder() {
    current_errors = this;
    previous_ = curt::set_error_handler(&record_error);
  }
  ~error_recorder() {
    curt::set_error_handler(previous_);
    current_errors = nullptr;
  }
  error_recorder(const error_recorder&) = delete;
  error_recorder& operator=(const error_recorder&) = delete;
  std::string message(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    return i < messages.size() ? messages[i] : std::string();
  }
  std::exception_ptr original(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    return i < originals.size() ? originals[i] : nullptr;
  }

 private:
  curt::error_handler previous_ = nullptr;
};

}  // namespace curt_test
