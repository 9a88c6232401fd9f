// Must not compile: a view of a temporary pitched buffer would point into memory freed at the end
// of the statement. With -DCURT_COMPILE_CONTROL the view is of a buffer that outlives it.
#include <curt/pitched.hpp>

std::size_t pitch_of(curt::device d) {
#ifdef CURT_COMPILE_CONTROL
  curt::pitched_buffer<float> image(d, 16, 4);
  curt::pitched_view<const float, 2> view = image.view();
#else
  curt::pitched_view<const float, 2> view = curt::pitched_buffer<float>(d, 16, 4).view();
#endif
  return view.pitch();
}
