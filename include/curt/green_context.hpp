#include <curt/execution/green_context.hpp>  // a kept public path
