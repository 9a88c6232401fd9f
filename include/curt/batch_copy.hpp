#include <curt/memory/batch_copy.hpp>  // a kept public path
