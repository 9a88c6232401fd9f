// curt/device.hpp: the public path of curt/core/device.hpp.
#include <curt/core/device.hpp>
