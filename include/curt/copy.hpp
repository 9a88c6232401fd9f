// curt/copy.hpp: the public path of curt/memory/copy.hpp.
#include <curt/memory/copy.hpp>
