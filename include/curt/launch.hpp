// curt/launch.hpp: the public path of curt/execution/launch.hpp.
#include <curt/execution/launch.hpp>
