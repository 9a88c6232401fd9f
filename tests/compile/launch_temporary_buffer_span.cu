// Must not compile: a temporary buffer handed to a kernel that takes a span would be freed at the
// end of the statement, before the kernel runs; curt says so rather than "does not convert".
// With -DCURT_COMPILE_CONTROL the buffer has a name.
#include <curt/launch.hpp>
#include <curt/memory.hpp>

#include <cuda/std/span>

__global__ void zero_first(cuda::std::span<float> x) { x[0] = 0.0f; }

void launch_it(curt::device d, curt::stream_ref s) {
#ifdef CURT_COMPILE_CONTROL
  curt::device_buffer<float> named(d, 4);
  curt::launch(s, curt::launch_config(1, 1), zero_first, named);
#else
  curt::launch(s, curt::launch_config(1, 1), zero_first, curt::device_buffer<float>(d, 4));
#endif
}
