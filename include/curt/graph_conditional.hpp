// curt/graph_conditional.hpp: kept for its public path; the header lives in curt/graph/conditional.hpp.
#pragma once

#include <curt/graph/conditional.hpp>
