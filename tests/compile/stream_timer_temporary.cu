// Must not compile: a stream_timer of a temporary stream would use the stream after its owner
// destroyed it at the end of the statement.
// With -DCURT_COMPILE_CONTROL the timer takes a stream that outlives it, and compiles.
#include <curt/stream.hpp>

void time_it(curt::device d) {
#ifdef CURT_COMPILE_CONTROL
  curt::stream s(d);
  curt::stream_timer timer(s);
#else
  curt::stream_timer timer{curt::stream(d)};
#endif
  (void)timer.stop();
}
