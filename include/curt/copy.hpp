#include <curt/memory/copy.hpp>  // a kept public path
