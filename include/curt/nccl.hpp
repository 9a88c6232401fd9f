// curt/nccl.hpp: kept for its public path; the header is curt/multi_gpu/nccl.hpp.
#pragma once

#include <curt/multi_gpu/nccl.hpp>
