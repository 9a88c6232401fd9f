// Must not compile: an async_buffer has no begin()/end()/operator[] (most pools hold device
// memory); the host reaches a host or managed pool's elements through host_view(), checked once.
// With -DCURT_COMPILE_CONTROL the loop goes through host_view().
#include <curt/memory_pool.hpp>

int sum(curt::async_buffer<int>& buffer) {
  int total = 0;
#ifdef CURT_COMPILE_CONTROL
  for (int v : buffer.host_view()) total += v;
#else
  for (int v : buffer) total += v;
#endif
  return total;
}
