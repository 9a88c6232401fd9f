// curt/graph_capture.hpp: kept for its public path; the header lives in curt/graph/capture.hpp.
#pragma once

#include <curt/graph/capture.hpp>
