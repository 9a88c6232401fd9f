// curt/memory.hpp: the public path of curt/memory/buffer.hpp.
#include <curt/memory/buffer.hpp>
