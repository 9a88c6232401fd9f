// curt/pitched.hpp: the public path of curt/memory/pitched.hpp.
#include <curt/memory/pitched.hpp>
