// curt/graph_node_update.hpp: kept for its public path; the header lives in curt/graph/node_update.hpp.
#pragma once

#include <curt/graph/node_update.hpp>
