// curt/span.hpp: kept for its public path; the header lives in curt/memory/span.hpp.
#pragma once

#include <curt/memory/span.hpp>
