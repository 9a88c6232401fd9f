// curt/graph_nodes.hpp: the public path of curt/graph/nodes.hpp.
#include <curt/graph/nodes.hpp>
