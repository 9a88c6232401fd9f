// Must not compile: a temporary buffer handed to a device lambda would be freed at the end of the
// statement, before the kernel runs. With -DCURT_COMPILE_CONTROL the buffer has a name.
#include <curt/launch.hpp>
#include <curt/memory.hpp>

#include <cuda/std/span>

void zero_first(curt::device d, curt::stream_ref s) {
  auto zero = [] __device__(cuda::std::span<float> x) { x[0] = 0.0f; };
#ifdef CURT_COMPILE_CONTROL
  curt::device_buffer<float> named(d, 4);
  curt::launch(s, curt::launch_config(1, 1), zero, named);
#else
  curt::launch(s, curt::launch_config(1, 1), zero, curt::device_buffer<float>(d, 4));
#endif
}
