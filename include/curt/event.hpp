#include <curt/execution/event.hpp>  // a kept public path
