// Test helpers on the host side: counting destructor errors, holding a stream at a host function.
#pragma once

#include <curt/error.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace curt_test {

/// Polls `done` for up to 20 s, calling `drain` (a curt drain point) between polls.
template <class Done, class Drain>
bool eventually(Done done, Drain drain) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    drain();
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  drain();
  return done();
}

// Counts errors that destructors report instead of throwing (a double destroy would be one).
inline std::atomic<int> destructor_errors{0};
inline void count_destructor_error(const std::exception&) noexcept { destructor_errors.fetch_add(1); }
class destructor_error_counter {
 public:
  destructor_error_counter() : previous_(curt::set_error_handler(&count_destructor_error)) {
    destructor_errors = 0;
  }
  ~destructor_error_counter() { curt::set_error_handler(previous_); }
  destructor_error_counter(const destructor_error_counter&) = delete;
  destructor_error_counter& operator=(const destructor_error_counter&) = delete;
  int count() const { return destructor_errors.load(); }

 private:
  curt::error_handler previous_;
};

// Holds a stream at a host function until open() (or a 30 s safety timeout), so the stream is
// certainly busy however fast or slow the device is. Declare it after the buffers and streams a
// test uses: its destructor opens it first.
class host_gate {
 public:
  host_gate() : open_(std::make_shared<std::atomic<bool>>(false)) {}
  ~host_gate() { open(); }
  host_gate(const host_gate&) = delete;
  host_gate& operator=(const host_gate&) = delete;
  void block(curt::stream_ref s) const {
    using namespace std::chrono_literals;
    std::shared_ptr<std::atomic<bool>> flag = open_;
    s.host_call([flag] {
      auto deadline = std::chrono::steady_clock::now() + 30s;
      while (!flag->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(50us);
    });
  }
  void open() const { open_->store(true); }

 private:
  std::shared_ptr<std::atomic<bool>> open_;
};

}  // namespace curt_test
