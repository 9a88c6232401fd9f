#include <curt/memory/growable.hpp>  // a kept public path (with memory/virtual_memory.hpp)
