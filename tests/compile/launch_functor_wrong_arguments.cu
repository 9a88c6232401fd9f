// Must not compile: the functor cannot be called with the arguments given to curt::launch
// (a pointer of another element type where it takes float*).
// With -DCURT_COMPILE_CONTROL the same launch passes the right type and compiles.
#include <curt/launch.hpp>

struct scale {
  float factor;
  __device__ void operator()(float* data, int n) const {
    int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) data[i] *= factor;
  }
};

void launch_it(curt::stream_ref stream) {
#ifdef CURT_COMPILE_CONTROL
  float* data = nullptr;
#else
  int* data = nullptr;  // int* does not convert to float*
#endif
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), scale{2.0f}, data, 32);
}
