#include <curt/memory/pool_ipc.hpp>  // a kept public path
