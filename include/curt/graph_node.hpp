// curt/graph_node.hpp: kept for its public path; the header lives in curt/graph/node.hpp.
#pragma once

#include <curt/graph/node.hpp>
