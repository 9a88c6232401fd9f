// Must not compile: a capture scope of a temporary stream would end its capture on a stream its
// owner destroyed at the end of the statement.
// With -DCURT_COMPILE_CONTROL the scope takes a stream that outlives it, and compiles.
#include <curt/graph_capture.hpp>

curt::graph capture_nothing(curt::device d) {
#ifdef CURT_COMPILE_CONTROL
  curt::stream s(d);
  curt::capture_scope scope(s);
#else
  curt::capture_scope scope{curt::stream(d)};
#endif
  return scope.end();
}
