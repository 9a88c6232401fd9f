// curt/graph_node_update.hpp: the public path of curt/graph/node_update.hpp.
#include <curt/graph/node_update.hpp>
