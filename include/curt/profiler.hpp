#include <curt/profiling/profiler.hpp>  // a kept public path
