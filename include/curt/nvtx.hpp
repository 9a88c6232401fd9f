#include <curt/profiling/nvtx.hpp>  // a kept public path
