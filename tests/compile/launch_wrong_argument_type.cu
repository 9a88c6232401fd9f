// Must not compile: a pointer of another element type does not convert to the kernel's parameter.
// With -DCURT_COMPILE_CONTROL the same launch passes the right type and compiles.
#include <curt/launch.hpp>

__global__ void scale(float* data, int n, float factor) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] *= factor;
}

void launch_it(curt::stream_ref stream) {
#ifdef CURT_COMPILE_CONTROL
  float* data = nullptr;
#else
  int* data = nullptr;  // int* does not convert to float*
#endif
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), scale, data, 32, 2.0f);
}
