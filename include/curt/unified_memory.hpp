// curt/unified_memory.hpp: the public path of curt/memory/unified.hpp.
#include <curt/memory/unified.hpp>
