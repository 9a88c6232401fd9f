// curt/graph_device_launch.hpp: the public path of curt/graph/device_launch.hpp.
#include <curt/graph/device_launch.hpp>
