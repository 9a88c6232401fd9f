// curt::span without <curt/span.hpp> names the header it needs (curt.hpp leaves it out: it
// includes <cuda/std/span>).
#include <curt/curt.hpp>
#if defined(CURT_COMPILE_CONTROL)
#  include <curt/span.hpp>
#endif

#include <vector>

std::size_t part(std::vector<float>& values) { return curt::span(values, 1, 2).size(); }
