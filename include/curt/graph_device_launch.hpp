// curt/graph_device_launch.hpp: kept for its public path; the header lives in curt/graph/device_launch.hpp.
#pragma once

#include <curt/graph/device_launch.hpp>
