#include <curt/memory/buffer.hpp>  // a kept public path
