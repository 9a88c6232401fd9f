// curt/graph_conditional.hpp: the public path of curt/graph/conditional.hpp.
#include <curt/graph/conditional.hpp>
