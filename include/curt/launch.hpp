#include <curt/execution/launch.hpp>  // a kept public path
