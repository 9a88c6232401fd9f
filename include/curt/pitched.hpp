// curt/pitched.hpp: kept for its public path; the header lives in curt/memory/pitched.hpp.
#pragma once

#include <curt/memory/pitched.hpp>
