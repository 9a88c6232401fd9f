// curt/memory_pool.hpp: kept for its public path; the header lives in curt/memory/pool.hpp.
#pragma once

#include <curt/memory/pool.hpp>
