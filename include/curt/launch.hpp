// curt/launch.hpp: kept for its public path; the header lives in curt/execution/launch.hpp.
#pragma once

#include <curt/execution/launch.hpp>
