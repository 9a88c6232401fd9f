// Must not compile: a memcpy node reads its source at every launch of the graph, but the source
// here is a temporary std::vector, gone at the end of the statement. With -DCURT_COMPILE_CONTROL
// the source has a name and the node compiles.
#include <curt/graph_nodes.hpp>

#include <vector>

curt::graph_node add_it(curt::graph_ref g, std::vector<int>& destination) {
#ifdef CURT_COMPILE_CONTROL
  std::vector<int> source(destination.size(), 7);
  return curt::add_memcpy_node(g, {}, destination, source);
#else
  return curt::add_memcpy_node(g, {}, destination, std::vector<int>(destination.size(), 7));
#endif
}
