#include <curt/memory/location.hpp>  // a kept public path
