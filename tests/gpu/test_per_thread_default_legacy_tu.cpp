// Part of test_per_thread_default: a translation unit built by the host compiler without
// --default-stream per-thread, linked with the per-thread one. curt's inline code must not differ
// between the two (the linker keeps one copy of an inline function): a driver function looked up
// here must still be this unit's flavour, where a stream handle of 0 is the legacy stream.
#include <curt/detail/driver.hpp>

namespace curt_test {

static_assert(!CURT_DETAIL_PER_THREAD_DEFAULT_STREAM, "this unit is built without per-thread");

unsigned long long default_stream_id_through_driver_in_legacy_unit() {
  unsigned long long id = 0;
  CURT_DRIVER_CALL(cuStreamGetId, 12000, nullptr, &id);
  return id;
}

}  // namespace curt_test
