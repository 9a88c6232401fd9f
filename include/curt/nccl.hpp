// curt/nccl.hpp: the public path of curt/multi_gpu/nccl.hpp.
#include <curt/multi_gpu/nccl.hpp>
