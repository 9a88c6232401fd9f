#include <curt/memory/resource.hpp>  // a kept public path
