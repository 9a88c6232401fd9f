// Must not compile: a typed view of a library kernel checks arguments at compile time, as a
// __global__ function does. With -DCURT_COMPILE_CONTROL the same launch passes the right type.
#include <curt/library.hpp>

void launch_it(curt::stream_ref stream, const curt::library_kernel& kernel) {
  const auto scale = kernel.as<void(float*, float, int)>();
#ifdef CURT_COMPILE_CONTROL
  float* data = nullptr;
#else
  int* data = nullptr;  // int* does not convert to float*
#endif
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), scale, data, 2.0f, 32);
}
