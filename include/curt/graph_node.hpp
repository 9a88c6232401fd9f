// curt/graph_node.hpp: the public path of curt/graph/node.hpp.
#include <curt/graph/node.hpp>
