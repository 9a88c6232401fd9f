// curt/occupancy.hpp: the public path of curt/execution/occupancy.hpp.
#include <curt/execution/occupancy.hpp>
