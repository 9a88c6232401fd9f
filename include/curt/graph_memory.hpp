#include <curt/graph/memory.hpp>  // a kept public path
