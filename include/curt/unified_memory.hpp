#include <curt/memory/unified.hpp>  // a kept public path
