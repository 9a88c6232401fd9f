#include <curt/execution/occupancy.hpp>  // a kept public path
