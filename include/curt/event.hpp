// curt/event.hpp: the public path of curt/execution/event.hpp.
#include <curt/execution/event.hpp>
