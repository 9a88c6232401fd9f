// Part of test_copy: fills made from a translation unit compiled by the host compiler (g++), where
// curt::fill has no kernel of its own and uses the runtime's and the driver's memsets only.
#include <curt/copy.hpp>
#include <curt/memory.hpp>

#include <cstdint>

namespace curt_test {

void fill_from_host_compiler(curt::device_buffer<std::uint16_t>& b, std::uint16_t value,
                             curt::stream_ref s) {
  curt::fill(b, value, s);
}
void fill_from_host_compiler(curt::device_buffer<float>& b, float value, curt::stream_ref s) {
  curt::fill(b, value, s);
}
void fill_from_host_compiler(curt::device_buffer<double>& b, double value, curt::stream_ref s) {
  curt::fill(b, value, s);
}

}  // namespace curt_test
