// curt/context.hpp: kept for its public path; the header lives in curt/core/context.hpp.
#pragma once

#include <curt/core/context.hpp>
