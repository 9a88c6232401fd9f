// <curt/curt.hpp> in a CUDA translation unit, built by tests/packaging with nvcc and the same
// warnings as strict_warnings.cpp through -Xcompiler: curt's headers add no warning.
#include "uses.hpp"

__global__ void scale(float* data, float factor, int n) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] *= factor;
}

void strict_warnings_launch(curt::device gpu) {
  curt::stream stream(gpu);
  curt::device_buffer<float> data(gpu, 1000);
  curt::launch(stream, curt::launch_config(curt::ceil_div(1000, 256), 256), scale, data.data(),
               2.0f, 1000);
  float* raw = data.data();
  curt::launch(stream, curt::launch_config(4, 256),
               [=] __device__(int n) {
                 int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
                 if (i < n) raw[i] += 1.0f;
               },
               1000);
  stream.synchronize();
}

int main() {
  if (curt::device_count() == 0) return 0;
  strict_warnings_launch(curt::device(0));
  return static_cast<int>(strict_warnings_uses(curt::device(0)));
}
