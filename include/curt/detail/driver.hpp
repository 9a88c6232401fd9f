// curt/detail/driver.hpp: driver API functions without linking libcuda, any of them:
//   CURT_DRIVER_CALL(cuDeviceGetUuid, 11040, &uuid, dev);   // checked call, throws cuda_error
//   auto fn = CURT_DRIVER_FUNCTION(cuDeviceGetUuid, 11040);  // the typed function pointer
// `version` is the suffix of the function's PFN_ typedef in <cudaTypedefs.h>, which this brings.
#pragma once

#include <curt/detail/driver_lookup.hpp>
#include <curt/detail/driver_result.hpp>

#include <cudaTypedefs.h>
