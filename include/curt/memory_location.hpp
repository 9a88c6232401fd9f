// curt/memory_location.hpp: the public path of curt/memory/location.hpp.
#include <curt/memory/location.hpp>
