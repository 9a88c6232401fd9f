// Must not compile: <curt/error.hpp> does not include <cuda.h>, so CURT_CHECK of a CUresult needs
// <curt/driver.hpp>, and says so instead of treating an unknown enum as a driver result.
// With -DCURT_COMPILE_CONTROL that header is included, and it compiles.
#include <cuda.h>

#ifdef CURT_COMPILE_CONTROL
#include <curt/driver.hpp>
#endif
#include <curt/error.hpp>

void check_success() { CURT_CHECK(CUDA_SUCCESS); }
