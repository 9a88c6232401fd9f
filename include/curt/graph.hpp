// curt/graph.hpp: the public path of curt/graph/graph.hpp.
#include <curt/graph/graph.hpp>
