// stream_ref::cccl() without <curt/cccl.hpp> names the header it needs.
#include <curt/stream.hpp>
#if defined(CURT_COMPILE_CONTROL)
#  include <curt/cccl.hpp>
#endif

cudaStream_t as_cccl(curt::stream_ref stream) { return stream.cccl().get(); }
