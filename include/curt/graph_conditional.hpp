#include <curt/graph/conditional.hpp>  // a kept public path
