#include <curt/graph/nodes.hpp>  // a kept public path
