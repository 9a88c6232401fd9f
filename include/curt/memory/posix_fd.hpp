// curt/memory/posix_fd.hpp: curt::posix_fd, an owned POSIX file descriptor: what a pool
// (memory/pool_ipc.hpp) or a physical allocation (memory/virtual_memory.hpp) exports for another
// process, and what that process imports.
#pragma once

#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>

#include <unistd.h>  // close

#include <cstdint>

namespace curt {
namespace detail {
// A descriptor kept as a pointer-sized handle (fd 0 is null), so that unique_handle owns it.
class fd_handle {
 public:
  explicit fd_handle(void* handle) noexcept : handle_(handle) {}
  void* get() const { return native("get()"); }
  static int fd(void* handle) noexcept { return int(reinterpret_cast<std::uintptr_t>(handle)); }

 protected:
  void* native(const char* operation) const {
    return usable_handle(handle_, "curt::posix_fd", operation);
  }
  void* handle_;
};
struct fd_traits {
  static void destroy(fd_handle& h, no_state&) { (void)::close(fd_handle::fd(h.get())); }
};
}  // namespace detail

/// An owned POSIX file descriptor, closed when destroyed. Move-only; an empty (curt::no_handle),
/// moved-from or released one holds none, and get() on it throws saying which.
class posix_fd : public detail::unique_handle<detail::fd_handle, detail::fd_traits> {
  using base = detail::unique_handle<detail::fd_handle, detail::fd_traits>;

 public:
  explicit posix_fd(no_handle_t) noexcept : base(no_handle) {}  ///< Holds none: get() throws.
  /// Takes ownership of an open descriptor (one received over a socket, for instance).
  static posix_fd adopt(int fd) {
    if (fd < 0)
      detail::raise(cudaErrorInvalidValue, detail::fmt("curt::posix_fd::adopt(%d)", fd),
                    "not an open file descriptor", __FILE__, __LINE__);
    return posix_fd(reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)));
  }
  int get() const { return fd(native("get()")); }  ///< The descriptor; throws when none is held.
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///< Holds an fd.
  int release() { return fd(base::release()); }  ///< Gives up ownership: the caller closes it.

 private:
  explicit posix_fd(void* handle) noexcept : base(detail::fd_handle(handle)) {}
};
}  // namespace curt
