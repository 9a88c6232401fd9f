#include <curt/execution/library.hpp>  // a kept public path
