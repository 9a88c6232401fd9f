// curt/green_context.hpp: the public path of curt/execution/green_context.hpp.
#include <curt/execution/green_context.hpp>
