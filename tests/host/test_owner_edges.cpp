// Found by review, reproduced without a GPU: an empty event given to a launch attribute must be a
// catchable error (the setter was noexcept and terminated), and the destructor of an owner that
// holds no stream must not run other threads' finished host functions.
#include <catch.hpp>

#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <type_traits>
#include <utility>
#include <thread>

TEST_CASE("an empty or moved-from event given to a launch attribute is a catchable error") {
  curt::event empty(curt::no_handle);
  curt::launch_config config;
  CHECK_THROWS_WITH(config.programmatic_event(empty), ContainsSubstring("empty"));
  CHECK_THROWS_WITH(config.launch_completion_event(empty), ContainsSubstring("empty"));
  curt::event moved(std::move(empty));
  CHECK_THROWS_WITH(config.programmatic_event(empty), ContainsSubstring("moved-from"));
  CHECK(config.attribute_count() == 0);  // nothing half-set
}

namespace {
std::atomic<int> destroyed{0};
struct probe_task : curt::detail::deferred_task {
  probe_task() { destroy = [](curt::detail::deferred_task* self) noexcept {
      destroyed.fetch_add(1);
      delete static_cast<probe_task*>(self);
    }; }
};
}  // namespace

TEST_CASE("destroying an owner that holds no stream leaves finished host functions alone") {
  destroyed = 0;
  // A host function finished on another thread and waits to be destroyed at a drain point.
  std::thread([] { curt::detail::deferred().push(new probe_task); }).join();
  {
    curt::stream empty(curt::no_handle);
    curt::stream moved_to(std::move(empty));
    curt::stream reassigned(curt::no_handle);
    reassigned = std::move(moved_to);
  }  // three destructors and a move-assignment of owners without a stream
  CHECK(destroyed.load() == 0);
  // A real drain point destroys it (here the list itself, as synchronize() would).
  curt::detail::deferred().drain();
  CHECK(destroyed.load() == 1);
}

TEST_CASE("wait() on an owner that holds no stream throws, through either overload") {
  const curt::stream_ref self = curt::stream_ref::legacy_default();
  curt::stream empty(curt::no_handle);
  CHECK_THROWS_WITH(self.wait(empty), ContainsSubstring("empty"));  // wait(const stream&)
  CHECK_THROWS_WITH(self.wait(curt::stream_ref(empty)), ContainsSubstring("empty"));
  curt::stream moved_to(std::move(empty));
  CHECK_THROWS_WITH(self.wait(empty), ContainsSubstring("moved-from"));
  CHECK_THROWS_WITH(self.wait(std::move(empty)), ContainsSubstring("moved-from"));
  // Every spelling resolves without ambiguity (unevaluated: no device needed).
  static_assert(std::is_void_v<decltype(self.wait(std::declval<curt::stream&>()))>);
  static_assert(std::is_void_v<decltype(self.wait(std::declval<const curt::stream&>()))>);
  static_assert(std::is_void_v<decltype(self.wait(std::declval<curt::stream&&>()))>);
  static_assert(std::is_void_v<decltype(self.wait(std::declval<curt::stream_ref>()))>);
  static_assert(std::is_void_v<decltype(self.wait(std::declval<cudaStream_t>()))>);
  static_assert(std::is_void_v<decltype(self.wait(std::declval<curt::event&>()))>);
  static_assert(std::is_void_v<decltype(self.wait(std::declval<curt::event_ref>()))>);
}
