// vmm_peer: the importing process of test_virtual_memory's IPC test. Started with posix_spawn
// (fork+exec: nothing of the parent's CUDA state is used here) with the socket's descriptor number
// as its argument. It receives a physical allocation's descriptor and size, imports it
// (physical_memory::import), maps it into a range of its own, gives its device read-write access,
// reads n ints at the start, writes out[i] = a * in[i] + b at out_offset in a kernel, and replies.
// It also says whether import, reserve, map and set_access left device 0's primary context
// inactive (the VMM calls need no context). Exit code 0 when the reply was sent.
#include "ipc_channel.hpp"

#include <curt/detail/driver.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>
#include <curt/virtual_memory.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

__global__ void affine(const int* in, int* out, int n, int a, int b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a * in[i] + b;
}

bool primary_active(int ordinal) {
  CUdevice device = 0;
  CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  unsigned flags = 0;
  int active = 0;
  CURT_DRIVER_CALL(cuDevicePrimaryCtxGetState, 7000, device, &flags, &active);
  return active != 0;
}

void serve(int socket, ipc_test::vmm_reply& r) {
  ipc_test::vmm_request q;
  int received = -1;
  if (!ipc_test::receive_message(socket, &q, sizeof q, &received) || received < 0)
    throw std::runtime_error("no request with a descriptor came");
  curt::posix_fd fd = curt::posix_fd::adopt(received);
  curt::device gpu(0);
  const bool active_before = primary_active(0);

  curt::physical_memory memory = curt::physical_memory::import(fd, std::size_t(q.bytes));
  curt::address_range range(memory.size(), memory.granularity());
  curt::mapping map(range, 0, memory);
  map.set_access(gpu, curt::memory_access::read_write);
  r.access_read_write = map.access(gpu) == curt::memory_access::read_write;
  r.no_context_woken = !active_before && !primary_active(0);

  const int* in = map.data<int>();
  int* out = reinterpret_cast<int*>(map.data<char>() + q.out_offset);
  curt::stream s(gpu);
  std::vector<int> values(static_cast<std::size_t>(q.n));
  CURT_CHECK(
      cudaMemcpyAsync(values.data(), in, values.size() * sizeof(int), cudaMemcpyDeviceToHost, s));
  curt::launch(s, curt::launch_config(dim3(static_cast<unsigned>((q.n + 255) / 256)), dim3(256)),
               affine, in, out, q.n, q.a, q.b);
  s.synchronize();
  for (int v : values) r.sum_read += v;
  r.ok = 1;
}  // unmapped, released, range freed: before the reply, so the parent may release its own

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: vmm_peer SOCKET_FD (started by test_virtual_memory)\n");
    return 2;
  }
  const int socket = std::atoi(argv[1]);
  ipc_test::vmm_reply r;
  try {
    serve(socket, r);
  } catch (const std::exception& error) {
    r.ok = 0;
    std::snprintf(r.message, sizeof r.message, "%s", error.what());
  }
  if (!ipc_test::send_message(socket, &r, sizeof r)) {
    std::fprintf(stderr, "vmm_peer: could not send the reply\n");
    return 1;
  }
  return 0;
}
