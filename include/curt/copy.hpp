// curt/copy.hpp: kept for its public path; the header lives in curt/memory/copy.hpp.
#pragma once

#include <curt/memory/copy.hpp>
