// Must not compile: an asynchronous copy into a temporary of a class derived from std::array
// (it owns its elements, as std::array does) would write into it after the statement ends.
// With -DCURT_COMPILE_CONTROL the destination is named, and it compiles.
#include <curt/pitched.hpp>
#include <curt/stream.hpp>

#include <array>

struct tile : std::array<float, 64> {};  // 8 x 8 floats, owned

void download(const curt::pitched_buffer<float>& source, curt::stream_ref stream) {
#ifdef CURT_COMPILE_CONTROL
  tile destination{};
  curt::copy(destination, source, stream);
  stream.synchronize();
#else
  curt::copy(tile{}, source, stream);
#endif
}
