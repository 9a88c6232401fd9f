// curt/graph_capture.hpp: the public path of curt/graph/capture.hpp.
#include <curt/graph/capture.hpp>
