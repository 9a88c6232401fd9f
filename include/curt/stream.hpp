// curt/stream.hpp: the public path of curt/execution/stream.hpp.
#include <curt/execution/stream.hpp>
