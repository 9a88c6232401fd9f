// Must not compile: a copy batch keeps pointers until submit(); a temporary std::vector source
// is freed at the end of the statement that adds it.
// With -DCURT_COMPILE_CONTROL the source is named, and it compiles.
#include <curt/batch_copy.hpp>
#include <curt/memory.hpp>

#include <vector>

void upload(curt::device_buffer<float>& destination, curt::stream_ref stream) {
  curt::copy_batch batch;
#ifdef CURT_COMPILE_CONTROL
  std::vector<float> source(destination.size(), 1.0f);
  batch.add(destination, source);
#else
  batch.add(destination, std::vector<float>(destination.size(), 1.0f));
#endif
  batch.submit(stream);
  stream.synchronize();
}
