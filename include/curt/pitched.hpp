#include <curt/memory/pitched.hpp>  // a kept public path
