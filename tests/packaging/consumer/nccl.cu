// A consumer of curt::nccl: <curt/nccl.hpp> found through the target's include directories, NCCL
// linked, a collective instantiated. Runs without a GPU (NCCL's version needs none).
#include <curt/memory.hpp>
#include <curt/nccl.hpp>

#include <cstdio>

// Compiled (the templates instantiated), not called: there may be no GPU.
void sum_in_place(curt::device_buffer<float>& data, curt::nccl_communicator_ref comm,
                  curt::stream_ref stream) {
  curt::nccl_group group;
  curt::all_reduce(data, curt::nccl_op::sum, comm, stream);
}

int main() {
  const int version = curt::nccl_version();
  std::printf("curt nccl consumer: NCCL %d (headers %d)\n", version, NCCL_VERSION_CODE);
  return version > 0 ? 0 : 1;
}
