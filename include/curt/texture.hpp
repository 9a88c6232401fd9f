#include <curt/memory/texture.hpp>  // a kept public path
