// curt/event.hpp: kept for its public path; the header lives in curt/execution/event.hpp.
#pragma once

#include <curt/execution/event.hpp>
