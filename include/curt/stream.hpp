#include <curt/execution/stream.hpp>  // a kept public path
