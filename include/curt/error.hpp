// curt/error.hpp: kept for its public path; the header lives in curt/core/error.hpp.
#pragma once

#include <curt/core/error.hpp>
