// What the NCCL tests (test_nccl, test_nccl_gpu2) check the same way.
#pragma once

#include <catch.hpp>
#include <expect.hpp>

#include <curt/copy.hpp>
#include <curt/memory.hpp>
#include <curt/nccl.hpp>
#include <curt/stream.hpp>

#include <vector>

namespace curt_test {

/// The buffer's elements, copied back on `stream` (after the work queued there).
template <class T>
std::vector<T> download(const curt::device_buffer<T>& buffer, curt::stream_ref stream) {
  std::vector<T> host(buffer.size());
  curt::copy(host, buffer, stream);
  stream.synchronize();
  return host;
}

/// Ends a group one of whose collectives was refused: the end must raise NCCL's refusal.
inline void require_group_end_refused(curt::nccl_group& group) {
  try {
    group.end();
    FAIL("a group with a refused collective ended without an error");
  } catch (const curt::nccl_error& error) {
    INFO("what(): " << error.what());
    CHECK(error.result() == ncclInvalidArgument);
    CHECK_THAT(error.what(), ContainsSubstring("ncclGroupEnd"));
  }
}

}  // namespace curt_test
