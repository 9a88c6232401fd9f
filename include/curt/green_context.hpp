// curt/green_context.hpp: kept for its public path; the header is curt/execution/green_context.hpp.
#pragma once

#include <curt/execution/green_context.hpp>
