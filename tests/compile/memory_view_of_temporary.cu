// Must not compile: a view of a temporary buffer would point into memory freed at the end of the
// statement.
// With -DCURT_COMPILE_CONTROL the view is of a buffer that outlives it, and compiles.
#include <curt/memory.hpp>

#include <cuda/std/span>

const float* first_element(curt::device d) {
#ifdef CURT_COMPILE_CONTROL
  curt::device_buffer<float> buffer(d, 16);
  cuda::std::span<const float> view = buffer;
#else
  cuda::std::span<const float> view = curt::device_buffer<float>(d, 16);
#endif
  return view.data();
}
