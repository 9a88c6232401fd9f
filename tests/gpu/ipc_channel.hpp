// What the IPC tests and their helper processes send each other over a Unix socket: fixed-size
// messages (test_memory_pool_ipc and ipc_peer: the pool's file descriptor riding along the first
// one, SCM_RIGHTS; test_ipc and ipc_legacy_peer: legacy handles as bytes), and the helper process
// itself, started with posix_spawn (fork+exec). No CUDA calls here: both sides include it.
#pragma once

#include <cuda_runtime_api.h>  // cudaMemPoolPtrExportData

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

extern char** environ;

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

/// test_ipc -> ipc_legacy_peer: n ints shared through a legacy memory handle, the interprocess
/// event recorded after the kernel that writes them, and the handle of an allocation freed before
/// this was sent (each as its bytes()); the n expected values follow as a second message.
struct legacy_request {
  int n = 0;
  unsigned char memory[80] = {};  // curt::ipc_memory_handle::bytes()
  unsigned char event[64] = {};   // curt::ipc_event_handle::bytes()
  unsigned char freed[80] = {};
};

/// ipc_legacy_peer -> test_ipc, once its copy is queued behind the event (sent on failure too).
struct legacy_queued {
  int queued = 0;      // 1 when the wait and the copy are queued
  int done_early = 0;  // 1 when the copy had finished before the exporter's stream was let go
};

/// ipc_legacy_peer -> test_ipc, at the end.
struct legacy_reply {
  int ok = 0;                  // 1 when every step worked
  int mismatches = -1;         // values read that differ from the expected ones
  int first_bad = -1;          // the first such index, with what was read and expected
  int got = 0;
  int want = 0;
  int same_pointer_twice = 0;  // 1 when opening the handle again gave the same pointer
  int freed_refused = 0;       // 1 when opening the freed allocation's handle threw
  int freed_status = 0;        // the status it threw with
  char message[512] = {};      // what went wrong
  char freed_message[512] = {};
};

/// test_virtual_memory -> vmm_peer: one physical allocation of `bytes` (its descriptor rides
/// along) holding n ints at its start; the peer writes out[i] = a * in[i] + b at `out_offset`.
struct vmm_request {
  unsigned long long bytes = 0;
  unsigned long long out_offset = 0;
  int n = 0;
  int a = 0;
  int b = 0;
};

/// vmm_peer -> test_virtual_memory.
struct vmm_reply {
  int ok = 0;                 // 1 when every step worked
  long long sum_read = 0;     // sum of the n values the peer read
  int access_read_write = 0;  // 1 when the peer's mapping gave its device read-write access
  int no_context_woken = 0;   // 1 when import, map and set_access left device 0's primary inactive
  char message[512] = {};     // what went wrong
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

/// The helper process: started at construction (its end of a socket pair as its argument),
/// waited for (and killed if still running) at the end. Its members throw instead of using Catch2
/// assertions: an assertion in a member function makes cudafe++ 13.0 hang in g++ 13 mode with
/// Catch2 v3.
class peer_process {
 public:
  explicit peer_process(std::string path) {
    int ends[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0)
      throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
    socket_ = ends[0];
    // The child's end must survive exec; the parent's end must not leak into the child.
    if (fcntl(ends[1], F_SETFD, 0) != 0) {
      close(ends[1]);
      throw std::runtime_error(std::string("fcntl(F_SETFD): ") + std::strerror(errno));
    }
    timeval timeout{120, 0};  // a hung peer fails the test instead of hanging it
    (void)setsockopt(socket_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    std::string fd_text = std::to_string(ends[1]);
    char* argv[] = {path.data(), fd_text.data(), nullptr};
    int status = posix_spawn(&pid_, path.c_str(), nullptr, nullptr, argv, environ);
    close(ends[1]);
    if (status != 0)
      throw std::runtime_error("posix_spawn(" + path + "): " + std::strerror(status));
  }
  ~peer_process() {
    if (socket_ >= 0) close(socket_);
    stop();
  }
  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;

  int socket() const { return socket_; }
  /// Ends the peer now (SIGKILL) unless it was waited for; CUDA releases what it mapped.
  void stop() noexcept {
    if (pid_ <= 0 || waited_) return;
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    waited_ = true;
  }
  /// The peer's exit code (128 + signal when killed).
  int wait() {
    int status = 0;
    pid_t got = 0;
    do {
      got = waitpid(pid_, &status, 0);
    } while (got < 0 && errno == EINTR);
    waited_ = true;
    if (got != pid_) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  int socket_ = -1;
  pid_t pid_ = -1;
  bool waited_ = false;
};

/// Declared after what a peer maps: stops the peer before those are freed (a failed REQUIRE).
class peer_stopper {
 public:
  explicit peer_stopper(peer_process& peer) noexcept : peer_(peer) {}
  ~peer_stopper() { peer_.stop(); }
  peer_stopper(const peer_stopper&) = delete;
  peer_stopper& operator=(const peer_stopper&) = delete;

 private:
  peer_process& peer_;
};

}  // namespace ipc_test
