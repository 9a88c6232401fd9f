// Must not compile: an asynchronous copy from a temporary std::vector would read memory freed at
// the end of the statement, before the stream reaches the copy.
// With -DCURT_COMPILE_CONTROL the source is named, and it compiles.
#include <curt/copy.hpp>
#include <curt/memory.hpp>

#include <vector>

void upload(curt::device_buffer<float>& destination, curt::stream_ref stream) {
#ifdef CURT_COMPILE_CONTROL
  std::vector<float> source(destination.size(), 1.0f);
  curt::copy(destination, source, stream);
  stream.synchronize();
#else
  curt::copy(destination, std::vector<float>(destination.size(), 1.0f), stream);
#endif
}
