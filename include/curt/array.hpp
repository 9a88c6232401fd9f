#include <curt/memory/array.hpp>  // a kept public path
