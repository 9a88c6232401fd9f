// curt/detail/driver.hpp: kept for its path; the header is curt/driver.hpp.
#pragma once

#include <curt/driver.hpp>
