#include <curt/execution/cccl.hpp>  // a kept public path
