// Must not compile: a copy from an array into const elements (a const vector or a const
// buffer's view). With -DCURT_COMPILE_CONTROL the destination is writable, and it compiles.
#include <curt/array.hpp>

#include <vector>

void read_back(const curt::cuda_array<float>& array, curt::stream_ref s) {
#ifdef CURT_COMPILE_CONTROL
  std::vector<float> host(16);
#else
  const std::vector<float> host(16);
#endif
  curt::copy(host, array, s);
}
