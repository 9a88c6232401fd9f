// curt/error.hpp: the public path of curt/core/error.hpp.
#include <curt/core/error.hpp>
