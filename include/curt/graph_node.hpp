#include <curt/graph/node.hpp>  // a kept public path
