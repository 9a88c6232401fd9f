// curt/memory_pool_ipc.hpp: sharing a memory pool and its allocations with another process.
//
//   Exporting process                                   Importing process
//   curt::memory_pool pool(curt::memory_pool_properties::device(gpu).exportable());
//   curt::posix_fd fd = pool.export_handle();    --fd-->  (a Unix socket, SCM_RIGHTS)
//                                                         curt::posix_fd fd = curt::posix_fd::adopt(received);
//                                                         curt::memory_pool pool = curt::memory_pool::import(fd);
//   auto x = pool.allocate<float>(n, stream);
//   stream.synchronize();   // or an IPC event: the allocation must be done before the importer uses it
//   cudaMemPoolPtrExportData data = curt::export_pointer(x);   --64 bytes-->
//                                                         auto y = curt::import_pointer<float>(pool, data, n, stream);
//                                                         ... use y; destroy it; stream.synchronize() ...
//   free x only after the importer has freed y      <--"done"--
//
// Rules (CUDA's): only pools made with memory_pool_properties::exportable() can be exported (a
// default pool cannot); a pool's handle is exported before any of its pointers (CUDA 13.0 refuses
// export_pointer with cudaErrorInvalidValue until then); an imported pool cannot allocate; an
// importer's devices other than the pool's own have no access until it calls set_access() on its
// imported pool; the importer must free an imported allocation before the exporter frees it. CUDA is not fork-safe: start the
// other process with fork+exec (or posix_spawn), never a bare fork, once CUDA is in use.
#pragma once

#include <curt/detail/config.hpp>
#include <curt/error.hpp>
#include <curt/memory.hpp>
#include <curt/memory_location.hpp>
#include <curt/memory_pool.hpp>

#include <cuda_runtime_api.h>

#include <unistd.h>  // close

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace curt {

/// An owned POSIX file descriptor, closed when destroyed. Move-only; an empty (curt::no_handle),
/// moved-from or released one holds none, and get() on it throws saying which.
class posix_fd {
 public:
  explicit posix_fd(no_handle_t) noexcept {}
  /// Takes ownership of an open descriptor (one received over a socket, for instance).
  static posix_fd adopt(int fd) {
    if (fd < 0)
      detail::raise(cudaErrorInvalidValue, "curt::posix_fd::adopt(" + std::to_string(fd) + ")",
                    "not an open file descriptor", __FILE__, __LINE__);
    return posix_fd(fd);
  }
  posix_fd(posix_fd&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), state_(std::exchange(other.state_, state::moved_from)) {}
  posix_fd& operator=(posix_fd&& other) noexcept {
    if (this != &other) {
      close_fd();
      fd_ = std::exchange(other.fd_, -1);
      state_ = std::exchange(other.state_, state::moved_from);
    }
    return *this;
  }
  posix_fd(const posix_fd&) = delete;
  posix_fd& operator=(const posix_fd&) = delete;
  ~posix_fd() { close_fd(); }

  /// The descriptor; throws when none is held.
  int get() const {
    if (CURT_UNLIKELY(state_ != state::owning)) throw_unusable("get()");
    return fd_;
  }
  bool valid() const noexcept { return state_ == state::owning; }
  /// Gives up ownership: the caller closes the returned descriptor.
  int release() {
    int fd = get();
    fd_ = -1;
    state_ = state::released;
    return fd;
  }

 private:
  enum class state : unsigned char { owning, empty, moved_from, released };
  explicit posix_fd(int fd) noexcept : fd_(fd), state_(state::owning) {}
  void close_fd() noexcept {
    if (state_ == state::owning) (void)::close(fd_);
    fd_ = -1;
    state_ = state::empty;
  }
  [[noreturn]] CURT_COLD void throw_unusable(const char* operation) const {
    const char* what = state_ == state::moved_from ? "moved-from"
                       : state_ == state::released ? "released"
                                                   : "empty";
    detail::raise(cudaErrorInvalidResourceHandle, std::string("curt::posix_fd::") + operation,
                  std::string("this posix_fd is ") + what + ": it holds no descriptor", __FILE__,
                  __LINE__);
  }

  int fd_ = -1;
  state state_ = state::empty;
};

/// The pool as a POSIX file descriptor another process can import (memory_pool::import); also
/// `pool.export_handle()`. Only pools made with memory_pool_properties::exportable() can be
/// exported.
inline posix_fd export_memory_pool(memory_pool_ref pool) {
  cudaMemPool_t handle = pool.get();
  int fd = -1;
  cudaError_t status = cudaSuccess;
  {
    detail::pool_context_scope in(pool.location());
    status = cudaMemPoolExportToShareableHandle(&fd, handle, cudaMemHandleTypePosixFileDescriptor, 0);
  }
  if (CURT_UNLIKELY(status != cudaSuccess)) {
    std::string log = detail::take_driver_log();
    detail::throw_error_with_log(
        make_error_code(status),
        detail::describe_pool_call("cudaMemPoolExportToShareableHandle", pool.describe(),
                                   {"POSIX file descriptor"}),
        detail::location(__FILE__, __LINE__),
        status == cudaErrorInvalidValue
            ? "only a pool created with memory_pool_properties::exportable() (handle type POSIX "
              "file descriptor) can be exported; a default pool cannot"
            : "",
        std::move(log));
  }
  return posix_fd::adopt(fd);
}

/// The handle behind memory_pool::import(fd, properties). The descriptor stays open (and owned
/// by `fd`): CUDA takes it by value and does not close it.
inline cudaMemPool_t import_memory_pool_handle(const posix_fd& fd, memory_location where) {
  int descriptor = fd.get();
  cudaMemPool_t pool = nullptr;
  cudaError_t status = cudaSuccess;
  {
    detail::pool_context_scope in(where);
    status = cudaMemPoolImportFromShareableHandle(
        &pool, reinterpret_cast<void*>(static_cast<std::uintptr_t>(descriptor)),
        cudaMemHandleTypePosixFileDescriptor, 0);
  }
  detail::check_call(status, "cudaMemPoolImportFromShareableHandle",
                     {{"fd", descriptor}, "POSIX file descriptor"}, __FILE__, __LINE__);
  return pool;
}

/// The data another process needs to import this allocation from its imported pool (64 opaque
/// bytes, not a handle: send them any way). The allocation must come from an exportable pool
/// whose handle was exported already (memory_pool::export_handle()).
inline cudaMemPoolPtrExportData export_pointer(const void* allocation) {
  cudaMemPoolPtrExportData data{};
  cudaError_t status = cudaSuccess;
  {
    detail::current_device_scope in(detail::any_context, allocation);  // its pool's device
    status = cudaMemPoolExportPointer(&data, const_cast<void*>(allocation));
  }
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_error(make_error_code(status), "cudaMemPoolExportPointer(pointer)",
                        detail::location(__FILE__, __LINE__),
                        status == cudaErrorInvalidValue
                            ? "the pointer must be the start of an allocation from a pool made "
                              "exportable(), and the pool's handle must have been exported "
                              "(export_handle()) before any of its pointers"
                            : "");
  return data;
}
/// In the buffer's stream's context: a thread with no current context wakes no other device.
template <class T>
cudaMemPoolPtrExportData export_pointer(const async_buffer<T>& buffer) {
  const void* allocation = buffer.data();
  detail::stream_context_scope in_context(buffer.stream().get());
  return export_pointer(allocation);
}

/// Imports `count` elements of T that another process exported (export_pointer) from the pool
/// `imported_pool` was imported from, as an async_buffer freed on `stream` (cudaFreeAsync, after
/// the work on `stream` before it; with cudaFree instead, compute-sanitizer reports imported
/// pointers leaked). Use it only once the exporter's allocation is done (it
/// synchronized, or an IPC event says so), and free it (then synchronize `stream`) before the
/// exporter frees its allocation.
template <class T>
async_buffer<T> import_pointer(memory_pool_ref imported_pool,
                               const cudaMemPoolPtrExportData& data, std::size_t count,
                               stream_ref stream) {
  cudaMemPool_t pool = imported_pool.get();
  cudaStream_t s = stream.get();
  (void)detail::pool_bytes(count, sizeof(T), "curt::import_pointer<T>");
  void* p = nullptr;
  cudaMemPoolPtrExportData copy = data;  // CUDA takes it by non-const pointer
  cudaError_t status = cudaSuccess;
  {
    detail::stream_context_scope in(s);
    status = cudaMemPoolImportPointer(&p, pool, &copy);
  }
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_pool_call(status, "cudaMemPoolImportPointer", imported_pool.describe(),
                            {{"elements", static_cast<long long>(count)}}, __FILE__, __LINE__);
  return async_buffer<T>::adopt(static_cast<T*>(p), count, stream);
}

}  // namespace curt
