#include <curt/core/device.hpp>  // a kept public path
