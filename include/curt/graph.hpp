// curt/graph.hpp: kept for its public path; the header lives in curt/graph/graph.hpp.
#pragma once

#include <curt/graph/graph.hpp>
