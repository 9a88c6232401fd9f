#include <curt/core/error.hpp>  // a kept public path
