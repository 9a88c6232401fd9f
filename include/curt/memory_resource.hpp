// curt/memory_resource.hpp: the public path of curt/memory/resource.hpp.
#include <curt/memory/resource.hpp>
