#include <curt/graph/graph.hpp>  // a kept public path
