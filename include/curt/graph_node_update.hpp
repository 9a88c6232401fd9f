#include <curt/graph/node_update.hpp>  // a kept public path
