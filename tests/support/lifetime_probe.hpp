// A move-only value that counts its destruction and remembers the thread it died on: for tests
// of who destroys what curt keeps (host functions, values retained by graphs) and where.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace curt_test {

struct lifetime {
  std::atomic<int> destroyed{0};
  std::mutex mutex;
  std::thread::id destroyed_on;
};

class probe {
 public:
  explicit probe(std::shared_ptr<lifetime> l) : l_(std::move(l)) {}
  probe(probe&& other) noexcept : l_(std::move(other.l_)) {}
  probe& operator=(probe&&) = delete;
  probe(const probe&) = delete;
  probe& operator=(const probe&) = delete;
  ~probe() {
    if (!l_) return;  // moved from
    {
      std::lock_guard<std::mutex> lock(l_->mutex);
      l_->destroyed_on = std::this_thread::get_id();
    }
    l_->destroyed.fetch_add(1);
  }

 private:
  std::shared_ptr<lifetime> l_;
};

/// The thread the probe of `l` was destroyed on (a default id while it lives).
inline std::thread::id destroyed_on(lifetime& l) {
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.destroyed_on;
}

}  // namespace curt_test
