// curt/memory_pool_ipc.hpp: the public path of curt/memory/pool_ipc.hpp.
#include <curt/memory/pool_ipc.hpp>
