// Must not compile: a view of a const temporary buffer would dangle, as a view of a non-const
// temporary does (tests/compile/memory_view_of_temporary.cu). With -DCURT_COMPILE_CONTROL the
// view is of a buffer that outlives it, and compiles.
#include <curt/memory.hpp>

#include <cuda/std/span>

const curt::device_buffer<float> make_buffer(curt::device d) { return curt::device_buffer<float>(d, 16); }

const float* first_element(curt::device d) {
#ifdef CURT_COMPILE_CONTROL
  const curt::device_buffer<float> buffer(d, 16);
  cuda::std::span<const float> view = buffer;
#else
  cuda::std::span<const float> view = make_buffer(d);  // a const prvalue: binds to operator S() const&
#endif
  return view.data();
}
