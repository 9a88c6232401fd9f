// Must not compile: capture_to_graph into a const curt::graph owner. CUDA destroys the target of
// a failed capture, and curt must then empty its owner, which a const one forbids. With
// -DCURT_COMPILE_CONTROL the owner is not const, and it compiles.
#include <curt/graph_capture.hpp>

#ifdef CURT_COMPILE_CONTROL
using target_type = curt::graph&;
#else
using target_type = const curt::graph&;
#endif

void record_into(curt::stream_ref s, target_type target) {
  curt::capture_to_graph_scope scope(s, target);
  scope.end();
}
