// curt/memory/pool_ipc.hpp: sharing a memory pool and its allocations with another process.
//
//   exporter: memory_pool pool(memory_pool_properties::device(gpu).exportable());
//             posix_fd fd = pool.export_handle();        // send it over a Unix socket (SCM_RIGHTS)
//             auto x = pool.allocate<float>(n, stream);  stream.synchronize();
//             cudaMemPoolPtrExportData data = export_pointer(x);  // send these 64 bytes
//   importer: memory_pool pool = memory_pool::import(posix_fd::adopt(received));
//             auto y = import_pointer<float>(pool, data, n, stream);  // use, destroy, synchronize
//   exporter: frees x only after the importer says it freed y.
//
// CUDA's rules: only exportable() pools export, their handle before any pointer; an imported pool
// cannot allocate, and gives devices other than its own no access until set_access(). CUDA is not
// fork-safe: start the other process with fork+exec (posix_spawn), never a bare fork.
#pragma once

#include <curt/memory/pool.hpp>
#include <curt/memory/posix_fd.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace curt {

/// The pool as a POSIX file descriptor another process can import (memory_pool::import); also
/// `pool.export_handle()`. Only pools made with memory_pool_properties::exportable() export.
inline posix_fd export_memory_pool(memory_pool_ref pool) {
  cudaMemPool_t handle = pool.get();
  int fd = -1;
  cudaError_t status = detail::in_pool_context(pool.location(), [&] {
    return cudaMemPoolExportToShareableHandle(&fd, handle, cudaMemHandleTypePosixFileDescriptor, 0);
  });
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_error(make_error_code(status),
                        detail::fmt("cudaMemPoolExportToShareableHandle(%s, POSIX fd)",
                                    pool.describe().c_str()),
                        __FILE__, __LINE__,
                        status != cudaErrorInvalidValue
                            ? ""
                            : "only a pool made with memory_pool_properties::exportable() (handle "
                              "type POSIX file descriptor) exports; a default pool cannot");
  return posix_fd::adopt(fd);
}

/// The handle behind memory_pool::import(fd, properties); `fd` stays open (CUDA does not close it).
inline cudaMemPool_t import_memory_pool_handle(const posix_fd& fd, memory_location where) {
  const int descriptor = fd.get();
  void* shared = reinterpret_cast<void*>(static_cast<std::uintptr_t>(descriptor));
  cudaMemPool_t pool = nullptr;
  const auto import = [&] {
    return cudaMemPoolImportFromShareableHandle(&pool, shared, cudaMemHandleTypePosixFileDescriptor,
                                                0);
  };
  detail::check(detail::in_pool_context(where, import), "cudaMemPoolImportFromShareableHandle",
                {{"fd", descriptor}, "POSIX file descriptor"}, __FILE__, __LINE__);
  return pool;
}

/// The 64 opaque bytes another process imports this allocation with (send them any way); its pool
/// must be exportable() and its handle exported already (export_handle()).
inline cudaMemPoolPtrExportData export_pointer(const void* allocation) {
  cudaMemPoolPtrExportData data{};
  const cudaError_t status = [&] {
    detail::context_scope in(detail::for_memory, allocation);  // its pool's device
    return cudaMemPoolExportPointer(&data, const_cast<void*>(allocation));
  }();
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::throw_error(make_error_code(status), "cudaMemPoolExportPointer(pointer)", __FILE__,
                        __LINE__,
                        status != cudaErrorInvalidValue
                            ? ""
                            : "the pointer must be the start of an allocation from a pool made "
                              "exportable(), and the pool's handle must have been exported "
                              "(export_handle()) before any of its pointers");
  return data;
}
template <class T>
cudaMemPoolPtrExportData export_pointer(const async_buffer<T>& buffer) {
  return export_pointer(static_cast<const void*>(buffer.data()));
}

/// Imports `count` elements of T another process exported from the pool `imported_pool` came
/// from, as an async_buffer freed on `stream`. Use it once the exporter's allocation is done (it
/// synchronized, or an IPC event says so); free it (and synchronize) before the exporter frees.
template <class T>
async_buffer<T> import_pointer(memory_pool_ref imported_pool, const cudaMemPoolPtrExportData& data,
                               std::size_t count, stream_ref stream) {
  cudaMemPool_t pool = imported_pool.get();
  (void)detail::checked_bytes<T>(count, "async_buffer", "curt::import_pointer<T>");
  const cudaStream_t s = stream.get();
  void* p = nullptr;
  cudaMemPoolPtrExportData copy = data;  // CUDA takes it by non-const pointer
  {
    detail::context_scope in(detail::for_stream, s);
    detail::check(cudaMemPoolImportPointer(&p, pool, &copy), "cudaMemPoolImportPointer",
                  {"imported pool", {"elements", static_cast<long long>(count)}}, __FILE__,
                  __LINE__);
  }
  async_buffer<T> buffer = async_buffer<T>::adopt(static_cast<T*>(p), count, stream);
  buffer.state_.host_accessible = imported_pool.host_addressable();  // a host NUMA pool's
  return buffer;
}
/// The same on a curt::stream owner, which then lives until the buffer is freed.
template <class T>
async_buffer<T> import_pointer(memory_pool_ref imported_pool, const cudaMemPoolPtrExportData& data,
                               std::size_t count, const curt::stream& stream) {
  return detail::async_memory_kind::watching(
      import_pointer<T>(imported_pool, data, count, stream_ref(stream)), stream);
}
}  // namespace curt
