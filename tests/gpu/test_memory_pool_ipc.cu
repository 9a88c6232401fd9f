// IPC pools (curt/memory_pool_ipc.hpp) across two processes. CUDA is not fork-safe, and this
// process has used CUDA before any test case runs (main() asks for the device count), so the
// other process is a separate program, ipc_peer, started with posix_spawn (fork+exec: the child
// runs nothing of this process before exec). The test:
//   1. starts ipc_peer first, with one end of a Unix socket pair;
//   2. makes an exportable device pool, allocates `in` and `out`, writes fresh random data into
//      `in`, poisons `out`, synchronizes;
//   3. sends the pool's descriptor (SCM_RIGHTS) and both pointers' export data;
//   4. the peer imports, reads `in`, writes out = a * in + b, checks that its imported pool
//      refuses to allocate, frees its imported pointers and replies;
//   5. checks the reply, `out` against the CPU reference and the peer's exit status, and only
//      then frees its own allocations (the importer frees first).
// [api-error]: the peer's refused allocation and the refused export of a default pool are
// failures on purpose.
#include <catch.hpp>
#include <expect.hpp>

#include "ipc_channel.hpp"

#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/memory_pool.hpp>
#include <curt/memory_pool_ipc.hpp>
#include <curt/stream.hpp>

#include <cuda_runtime.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef CURT_IPC_PEER_PATH
#  error "CURT_IPC_PEER_PATH (the ipc_peer executable) must be defined by the build"
#endif

extern char** environ;


TEST_CASE("a pool and two allocations shared with another process", "[memory_pool][ipc][api-error]") {
  ipc_test::peer_process peer(CURT_IPC_PEER_PATH);  // first: before this test makes any CUDA call of its own

  curt::device gpu(0);
  const int handle_types = gpu.attribute(cudaDevAttrMemoryPoolSupportedHandleTypes);
  if ((handle_types & cudaMemHandleTypePosixFileDescriptor) == 0) {
    WARN("device 0 cannot export pools as POSIX file descriptors: skipped");
    return;  // the peer gets EOF and exits; the destructor reaps it
  }
  curt::stream s(gpu);
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu).exportable());
  CHECK(pool.properties().is_exportable());

  const int n = curt_test::random_ints(1, 1000, 50000)[0];
  const int a = curt_test::random_ints(1, 2, 9)[0], b = curt_test::random_ints(1, -50, 50)[0];
  std::vector<int> values = curt_test::random_ints(std::size_t(n), -100000, 100000);
  curt::async_buffer<int> in = pool.allocate<int>(std::size_t(n), s);
  curt::async_buffer<int> out = pool.allocate<int>(std::size_t(n), s);
  CURT_CHECK(cudaMemcpyAsync(in.data(), values.data(), in.size_bytes(), cudaMemcpyHostToDevice, s));
  CURT_CHECK(cudaMemsetAsync(out.data(), 0xFF, out.size_bytes(), s));  // poison
  s.synchronize();  // the allocations and the data are there before the peer looks

  ipc_test::request q;
  q.n = n;
  q.a = a;
  q.b = b;
  // CUDA 13.0 exports no pointer of a pool whose handle was not exported yet; curt says so.
  curt_test::require_cuda_error([&] { (void)curt::export_pointer(in); }, cudaErrorInvalidValue,
                                {"cudaMemPoolExportPointer", "export_handle()"});
  {
    curt::posix_fd fd = pool.export_handle();
    REQUIRE(fd.valid());
    q.in = curt::export_pointer(in);
    q.out = curt::export_pointer(out);
    REQUIRE(ipc_test::send_message(peer.socket(), &q, sizeof q, fd.get()));
  }  // our copy of the descriptor is closed; the peer has its own

  ipc_test::reply r;
  const bool replied = ipc_test::receive_message(peer.socket(), &r, sizeof r);
  // Without a reply (the 120 s receive timeout) the peer may hang: waiting for it would hang the
  // test too, so it is left to ~peer_process, which kills and reaps it.
  const int exit_code = replied ? peer.wait() : -1;
  INFO("peer message: " << r.message);
  REQUIRE(replied);
  CHECK(exit_code == 0);
  CHECK(r.ok == 1);
  CHECK(r.access_read_write == 1);   // the pool's own device, in the importing process
  CHECK(r.refused_allocation == 1);  // an imported pool cannot allocate, and curt says so
  long long sum = 0;
  for (int v : values) sum += v;
  CHECK(r.sum_read == sum);          // the peer read what this process wrote

  std::vector<int> back(static_cast<std::size_t>(n), 0);
  CURT_CHECK(cudaMemcpyAsync(back.data(), out.data(), out.size_bytes(), cudaMemcpyDeviceToHost, s));
  s.synchronize();
  std::vector<int> expected(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) expected[i] = a * values[i] + b;
  CHECK(back == expected);
}  // in, out freed here, after the peer freed its imports; then the pool

TEST_CASE("only exportable pools export; posix_fd owners fail loudly", "[memory_pool][ipc][api-error]") {
  curt::device gpu(0);
  curt_test::require_cuda_error([&] { (void)curt::default_memory_pool(gpu).export_handle(); },
                                cudaErrorInvalidValue,
                                {"cudaMemPoolExportToShareableHandle", "exportable()"});

  curt_test::require_cuda_error([&] { (void)curt::posix_fd::adopt(-1); }, cudaErrorInvalidValue,
                                {"posix_fd::adopt(-1)"});
  int ends[2] = {-1, -1};
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) == 0);
  curt::posix_fd first = curt::posix_fd::adopt(ends[0]);
  curt::posix_fd second = curt::posix_fd::adopt(ends[1]);
  curt::posix_fd moved = std::move(first);
  CHECK(moved.get() == ends[0]);
  curt_test::require_cuda_error([&] { (void)first.get(); }, cudaErrorInvalidResourceHandle,
                                {"moved-from"});
  int raw = second.release();
  curt_test::require_cuda_error([&] { (void)second.get(); }, cudaErrorInvalidResourceHandle,
                                {"released"});
  CHECK(close(raw) == 0);
  curt::posix_fd empty(curt::no_handle);
  curt_test::require_cuda_error([&] { (void)empty.get(); }, cudaErrorInvalidResourceHandle,
                                {"empty"});
}
