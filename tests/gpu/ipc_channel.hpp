// What test_memory_pool_ipc and its helper process ipc_peer send each other over a Unix socket:
// fixed-size messages, the pool's file descriptor riding along the first one (SCM_RIGHTS).
// No CUDA here: both sides include it.
#pragma once

#include <cuda_runtime_api.h>  // cudaMemPoolPtrExportData

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace ipc_test {

/// Parent -> peer: the shared allocations and what to compute (out[i] = a * in[i] + b).
struct request {
  int n = 0;
  int a = 0;
  int b = 0;
  cudaMemPoolPtrExportData in{};
  cudaMemPoolPtrExportData out{};
};

/// Peer -> parent: what it read and whether every step worked.
struct reply {
  int ok = 0;                    // 1 when every step worked
  long long sum_read = 0;        // sum of the n values the peer read from `in`
  int access_read_write = 0;     // 1 when the imported pool gave the peer's device read-write
  int refused_allocation = 0;    // 1 when allocating from the imported pool was refused
  char message[512] = {};        // what went wrong, or the refusal's text
};

/// Sends all of `data`, with `fd` attached when fd >= 0. False on failure.
inline bool send_message(int socket, const void* data, std::size_t size, int fd = -1) {
  iovec part{const_cast<void*>(data), size};
  msghdr header{};
  header.msg_iov = &part;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&header);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t sent = 0;
  do {
    sent = sendmsg(socket, &header, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return false;
  // The descriptor went with the first byte; send any rest plainly.
  std::size_t done = static_cast<std::size_t>(sent);
  while (done < size) {
    ssize_t more = send(socket, static_cast<const char*>(data) + done, size - done, MSG_NOSIGNAL);
    if (more < 0 && errno == EINTR) continue;
    if (more <= 0) return false;
    done += static_cast<std::size_t>(more);
  }
  return true;
}

/// Receives exactly `size` bytes; a descriptor that came along goes to *fd (else -1). False on
/// failure or when the other side closed first.
inline bool receive_message(int socket, void* data, std::size_t size, int* fd = nullptr) {
  if (fd) *fd = -1;
  std::size_t done = 0;
  while (done < size) {
    iovec part{static_cast<char*>(data) + done, size - done};
    msghdr header{};
    header.msg_iov = &part;
    header.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    header.msg_control = control;
    header.msg_controllen = sizeof control;
    ssize_t got = recvmsg(socket, &header, MSG_CMSG_CLOEXEC);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && fd)
        std::memcpy(fd, CMSG_DATA(c), sizeof(int));
    }
    done += static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace ipc_test
