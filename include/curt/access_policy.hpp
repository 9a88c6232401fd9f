// curt/access_policy.hpp: kept for its public path; the header lives in curt/execution/access_policy.hpp.
#pragma once

#include <curt/execution/access_policy.hpp>
