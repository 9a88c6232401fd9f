// curt/stream.hpp: kept for its public path; the header lives in curt/execution/stream.hpp.
#pragma once

#include <curt/execution/stream.hpp>
