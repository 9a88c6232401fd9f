// curt/memory.hpp: kept for its public path; the header lives in curt/memory/buffer.hpp.
#pragma once

#include <curt/memory/buffer.hpp>
