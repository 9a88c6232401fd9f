// Must not compile: a copy with no stream. curt::stream is non-blocking, so cudaMemcpy on the
// legacy default stream would not wait for a kernel queued on it. With -DCURT_COMPILE_CONTROL the
// copy names its stream and waits for it, and it compiles.
#include <curt/copy.hpp>
#include <curt/memory.hpp>

#include <vector>

void read_back(std::vector<float>& host, const curt::device_buffer<float>& device,
               curt::stream_ref s) {
#ifdef CURT_COMPILE_CONTROL
  curt::copy_and_wait(host, device, s);
#else
  (void)s;
  curt::copy(host, device);
#endif
}
