// curt/context.hpp: the public path of curt/core/context.hpp.
#include <curt/core/context.hpp>
