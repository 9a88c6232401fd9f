// ipc_peer: the importing process of test_memory_pool_ipc. Started by the test (posix_spawn:
// fork+exec, so nothing of the parent's CUDA state is used here) with the socket's descriptor
// number as its argument. It receives the pool's descriptor and the export data of two
// allocations, imports the pool and both pointers, reads `in` (on the host and in a kernel),
// writes out[i] = a * in[i] + b, checks that the imported pool refuses to allocate, frees its
// imported pointers, and replies. Exit code 0 when the reply was sent.
#include "ipc_channel.hpp"

#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/launch.hpp>
#include <curt/memory_pool.hpp>
#include <curt/memory_pool_ipc.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

__global__ void affine(const int* in, int* out, int n, int a, int b) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = a * in[i] + b;
}

void set_message(ipc_test::reply& r, const std::string& text) {
  std::snprintf(r.message, sizeof r.message, "%s", text.c_str());
}

void serve(int socket, ipc_test::reply& r) {
  ipc_test::request q;
  int received = -1;
  if (!ipc_test::receive_message(socket, &q, sizeof q, &received) || received < 0)
    throw std::runtime_error("no request with a descriptor came");
  curt::posix_fd fd = curt::posix_fd::adopt(received);

  curt::device gpu(0);
  curt::stream s(gpu);
  curt::memory_pool pool =
      curt::memory_pool::import(fd, curt::memory_pool_properties::device(gpu).exportable());
  r.access_read_write = pool.access(gpu) == curt::pool_access::read_write;

  try {
    (void)pool.allocate<int>(1, s);
  } catch (const curt::cuda_error& error) {
    r.refused_allocation = error.status() == cudaErrorInvalidValue &&
                           std::strstr(error.what(), "cannot allocate") != nullptr;
    if (!r.refused_allocation) set_message(r, std::string("refusal: ") + error.what());
  }

  {
    curt::async_buffer<int> in = curt::import_pointer<int>(pool, q.in, std::size_t(q.n), s);
    curt::async_buffer<int> out = curt::import_pointer<int>(pool, q.out, std::size_t(q.n), s);
    std::vector<int> values(static_cast<std::size_t>(q.n));
    CURT_CHECK(cudaMemcpyAsync(values.data(), in.data(), in.size_bytes(), cudaMemcpyDeviceToHost, s));
    curt::launch(s, curt::launch_config(dim3(static_cast<unsigned>((q.n + 255) / 256)), dim3(256)),
                 affine, static_cast<const int*>(in.data()), out.data(), q.n, q.a, q.b);
    s.synchronize();
    for (int v : values) r.sum_read += v;
  }  // both imported pointers freed on s (cudaFreeAsync)...
  s.synchronize();  // ...and done before the reply: the parent frees after it
  r.ok = 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ipc_peer SOCKET_FD (started by test_memory_pool_ipc)\n");
    return 2;
  }
  const int socket = std::atoi(argv[1]);
  ipc_test::reply r;
  try {
    serve(socket, r);
  } catch (const std::exception& error) {
    r.ok = 0;
    set_message(r, error.what());
  }
  if (!ipc_test::send_message(socket, &r, sizeof r)) {
    std::fprintf(stderr, "ipc_peer: could not send the reply\n");
    return 1;
  }
  return 0;
}
