// curt/unified_memory.hpp: kept for its public path; the header lives in curt/memory/unified.hpp.
#pragma once

#include <curt/memory/unified.hpp>
