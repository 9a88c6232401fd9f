// Must not compile: one argument fewer than the kernel's parameters.
// With -DCURT_COMPILE_CONTROL the launch passes all of them and compiles.
#include <curt/launch.hpp>

__global__ void scale(float* data, int n, float factor) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] *= factor;
}

void launch_it(curt::stream_ref stream, float* data) {
#ifdef CURT_COMPILE_CONTROL
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), scale, data, 32, 2.0f);
#else
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), scale, data, 32);
#endif
}
