// curt/batch_copy.hpp: the public path of curt/memory/batch_copy.hpp.
#include <curt/memory/batch_copy.hpp>
