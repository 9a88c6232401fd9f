// Must not compile: a toolkit older than curt's oldest supported one (here CUDART_VERSION as a
// CUDA 12.8 <cuda_runtime_api.h> defines it) stops at an #error that names the toolkit needed.
// With -DCURT_COMPILE_CONTROL the toolkit's own value stays, and it compiles.
#include <cuda_runtime_api.h>

#ifndef CURT_COMPILE_CONTROL
#  undef CUDART_VERSION
#  define CUDART_VERSION 12080
#endif
#include <curt/device.hpp>

int device_count_probe() { return curt::device_count(); }
