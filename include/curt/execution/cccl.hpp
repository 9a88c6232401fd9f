// curt/execution/cccl.hpp: curt streams as CCCL's cuda::stream_ref. Separate from stream.hpp so
// that only translation units that use CCCL pay for its headers.
//   cuda::stream_ref r = stream.cccl();     curt::stream_ref s = r;   // (implicit, any header)
#pragma once

#include <curt/execution/stream.hpp>

#include <cuda/stream_ref>

namespace curt {

/// The same stream as CCCL's cuda::stream_ref (also stream_ref::cccl()).
inline ::cuda::stream_ref to_cccl(stream_ref s) { return ::cuda::stream_ref(s.get()); }

}  // namespace curt
