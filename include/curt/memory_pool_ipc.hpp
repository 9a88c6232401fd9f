// curt/memory_pool_ipc.hpp: kept for its public path; the header lives in curt/memory/pool_ipc.hpp.
#pragma once

#include <curt/memory/pool_ipc.hpp>
