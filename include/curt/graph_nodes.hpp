// curt/graph_nodes.hpp: kept for its public path; the header lives in curt/graph/nodes.hpp.
#pragma once

#include <curt/graph/nodes.hpp>
