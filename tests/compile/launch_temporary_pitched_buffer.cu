// Must not compile: a temporary pitched buffer handed to a device lambda would be freed at the end
// of the statement, before the kernel runs. With -DCURT_COMPILE_CONTROL the buffer has a name.
#include <curt/launch.hpp>
#include <curt/pitched.hpp>

void zero_corner(curt::device d, curt::stream_ref s) {
  auto zero = [] __device__(curt::pitched_view<float, 2> v) { v(0, 0) = 0.0f; };
#ifdef CURT_COMPILE_CONTROL
  curt::pitched_buffer<float> named(d, 16, 4);
  curt::launch(s, curt::launch_config(1, 1), zero, named);
#else
  curt::launch(s, curt::launch_config(1, 1), zero, curt::pitched_buffer<float>(d, 16, 4));
#endif
}
