#include <curt/multi_gpu/nccl.hpp>  // a kept public path
