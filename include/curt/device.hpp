// curt/device.hpp: kept for its public path; the header lives in curt/core/device.hpp.
#pragma once

#include <curt/core/device.hpp>
