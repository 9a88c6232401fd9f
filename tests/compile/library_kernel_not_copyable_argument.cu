// Must not compile: an untyped launch of a library kernel copies arguments byte for byte, so a
// buffer (not trivially copyable) is refused. With -DCURT_COMPILE_CONTROL its data() is passed.
#include <curt/library.hpp>
#include <curt/memory.hpp>

void launch_it(curt::stream_ref stream, const curt::library_kernel& kernel,
               curt::device_buffer<float>& buffer) {
#ifdef CURT_COMPILE_CONTROL
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), kernel, buffer.data(), 32);
#else
  curt::launch(stream, curt::launch_config(dim3(1), dim3(32)), kernel, buffer, 32);
#endif
}
