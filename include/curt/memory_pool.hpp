#include <curt/memory/pool.hpp>  // a kept public path
