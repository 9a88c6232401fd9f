#pragma once
#include <curt/core/version.hpp>  // CURT_VERSION_*, curt::library_version(), curt::version
