#include <curt/memory/virtual_memory.hpp>  // a kept public path
