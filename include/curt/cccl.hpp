// curt/cccl.hpp: the public path of curt/execution/cccl.hpp.
#include <curt/execution/cccl.hpp>
