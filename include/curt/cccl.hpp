// curt/cccl.hpp: kept for its public path; the header lives in curt/execution/cccl.hpp.
#pragma once

#include <curt/execution/cccl.hpp>
