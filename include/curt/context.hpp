#include <curt/core/context.hpp>  // a kept public path
