// curt/batch_copy.hpp: kept for its public path; the header lives in curt/memory/batch_copy.hpp.
#pragma once

#include <curt/memory/batch_copy.hpp>
