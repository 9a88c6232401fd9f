// curt/memory_location.hpp: kept for its public path; the header lives in curt/memory/location.hpp.
#pragma once

#include <curt/memory/location.hpp>
