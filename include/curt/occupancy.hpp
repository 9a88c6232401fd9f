// curt/occupancy.hpp: kept for its public path; the header lives in curt/execution/occupancy.hpp.
#pragma once

#include <curt/execution/occupancy.hpp>
