#include <curt/memory/span.hpp>  // a kept public path
