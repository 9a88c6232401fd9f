// curt/memory_pool.hpp: the public path of curt/memory/pool.hpp.
#include <curt/memory/pool.hpp>
