// curt/span.hpp: the public path of curt/memory/span.hpp.
#include <curt/memory/span.hpp>
