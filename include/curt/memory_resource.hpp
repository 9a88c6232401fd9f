// curt/memory_resource.hpp: kept for its public path; the header lives in curt/memory/resource.hpp.
#pragma once

#include <curt/memory/resource.hpp>
