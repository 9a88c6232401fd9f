#include <curt/driver.hpp>  // a kept public path
