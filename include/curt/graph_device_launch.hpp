#include <curt/graph/device_launch.hpp>  // a kept public path
