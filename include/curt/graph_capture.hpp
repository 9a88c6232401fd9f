#include <curt/graph/capture.hpp>  // a kept public path
