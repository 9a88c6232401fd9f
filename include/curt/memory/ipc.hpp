// curt/memory/ipc.hpp: cudaMalloc memory shared with another process through CUDA's legacy IPC
// (cudaIpcGetMemHandle, cudaIpcOpenMemHandle), as bytes the program sends its own way.
//
//   exporter: curt::device_buffer<float> x(gpu, n);
//             curt::ipc_memory_handle h = curt::export_ipc_memory(x);
//             send(h.bytes());                       // 80 bytes: CUDA's 64, the count, a tag
//   importer: auto h = curt::ipc_memory_handle::from_bytes(received);
//             curt::ipc_buffer<float> y = curt::open_ipc_memory<float>(h, n, gpu);
//   exporter: frees x only after every importer destroyed its ipc_buffer.
//
// The handle carries the exporter's element count and size, so the importer's type and count are
// checked before CUDA is called. Order the two processes' work with an interprocess event
// (event_flags::interprocess, event_ref::ipc_handle()). CUDA's rules: only the start of a
// cudaMalloc allocation is shared (curt refuses a pointer into one, or a count past its end; pool
// memory through <curt/memory_pool_ipc.hpp>; managed memory never); the exporting process cannot
// open its own handle; a process opens a handle in one context per device, and opening it twice
// gives the same pointer twice (CUDA counts the openings, each ipc_buffer closes its own).
// cudaMalloc may carve small allocations out of a larger block that IPC then shares whole: share
// allocations of a multiple of 2 MiB. CUDA is not fork-safe: start the other process with
// fork+exec (posix_spawn), never a bare fork.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/memory/buffer.hpp>
#include <curt/memory/owner.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace curt::detail::driver_fn {
// base, pointer: CUdeviceptr.
CURT_DETAIL_DRIVER_TYPE(cuMemGetAddressRange_v3020, unsigned long long* base, std::size_t* size,
                        unsigned long long pointer);
}  // namespace curt::detail::driver_fn

namespace curt {

/// What another process opens an allocation with: CUDA's cudaIpcMemHandle_t plus the element
/// count and size the exporter shared. bytes() and from_bytes() carry it across any channel.
class ipc_memory_handle {
 public:
  /// The size of bytes(): CUDA's handle, the count (8 bytes), the element size and a tag (4 each).
  static constexpr std::size_t serialized_size = sizeof(cudaIpcMemHandle_t) + 16;
  using bytes_type = std::array<unsigned char, serialized_size>;  ///< What bytes() gives.

  /// A raw handle (from a program of its own) of `count` elements of `element_size` bytes.
  ipc_memory_handle(const cudaIpcMemHandle_t& native, std::size_t count,
                    std::size_t element_size) noexcept
      : native_(native), count_(count), element_size_(static_cast<std::uint32_t>(element_size)) {}

  const cudaIpcMemHandle_t& native() const noexcept { return native_; }  ///< CUDA's handle.
  /// Elements the exporter shared, and their size in bytes. @{
  std::size_t count() const noexcept { return static_cast<std::size_t>(count_); }
  std::size_t element_size() const noexcept { return element_size_; }  ///@}

  /// The handle as bytes for another process (in this machine's byte order).
  bytes_type bytes() const noexcept {
    bytes_type out{};
    unsigned char* at = out.data();
    detail::copy_bytes(at, &native_, sizeof native_);
    detail::copy_bytes(at + sizeof native_, &count_, 8);
    detail::copy_bytes(at + sizeof native_ + 8, &element_size_, 4);
    detail::copy_bytes(at + sizeof native_ + 12, &tag, 4);
    return out;
  }
  /// The handle bytes() gave in the exporting process; refuses any other size or a missing tag.
  static ipc_memory_handle from_bytes(const void* data, std::size_t size) {
    const auto* at = static_cast<const unsigned char*>(data);
    std::uint32_t found = 0;
    if (data != nullptr && size == serialized_size)
      detail::copy_bytes(&found, at + sizeof(cudaIpcMemHandle_t) + 12, 4);
    if (CURT_UNLIKELY(found != tag)) refuse_bytes(size);
    ipc_memory_handle handle(cudaIpcMemHandle_t{}, 0, 0);
    detail::copy_bytes(&handle.native_, at, sizeof handle.native_);
    detail::copy_bytes(&handle.count_, at + sizeof handle.native_, 8);
    detail::copy_bytes(&handle.element_size_, at + sizeof handle.native_ + 8, 4);
    return handle;
  }

 private:
  static constexpr std::uint32_t tag = 0x31706963;  // "cip1": curt's IPC memory handle, version 1
  [[noreturn]] CURT_COLD static void refuse_bytes(std::size_t size) {
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::ipc_memory_handle::from_bytes(%zu bytes)", size),
                  detail::fmt("these are not the %zu bytes of an ipc_memory_handle's bytes() (the "
                              "last 4 are its tag); a raw cudaIpcMemHandle_t becomes a handle "
                              "with ipc_memory_handle(native, count, element size)",
                              serialized_size),
                  __FILE__, __LINE__);
  }

  cudaIpcMemHandle_t native_;
  std::uint64_t count_;
  std::uint32_t element_size_;
};

namespace detail {
struct ipc_memory_kind {
  using place = allocation;
  static constexpr const char* name = "ipc_buffer";
  static constexpr bool host_iterable = false;
  static void free(void* p, const allocation& where) {
    free_in(where, &cudaIpcCloseMemHandle, p, "cudaIpcCloseMemHandle(ipc_buffer)");
  }
};

[[noreturn]] CURT_COLD inline void refuse_ipc_export(cudaError_t status, const void* memory,
                                                     std::size_t count, const std::string& type) {
  throw_error(make_error_code(status),
              fmt("cudaIpcGetMemHandle(%p, %zu elements of %s)", memory, count, type.c_str()),
              __FILE__, __LINE__,
              "only the start of a live cudaMalloc allocation (a curt::device_buffer) is shared "
              "this way; pool memory is shared through <curt/memory_pool_ipc.hpp>, managed memory "
              "not at all, and the device must support IPC (cudaDevAttrIpcEventSupport)");
}

// CUDA shares a whole allocation from its start, whatever pointer into it is given: the importer
// would map other memory than asked (an interior pointer) or less than the count.
[[noreturn]] CURT_COLD inline void refuse_ipc_range(const void* memory, std::size_t count,
                                                    std::size_t element_size,
                                                    const std::string& type,
                                                    unsigned long long base, std::size_t size) {
  const auto at = reinterpret_cast<std::uintptr_t>(memory);
  raise(cudaErrorInvalidValue,
        fmt("curt::export_ipc_memory(%p, %zu elements of %s)", memory, count, type.c_str()),
        at != base ? fmt("%p is %llu bytes into its allocation (%zu bytes at 0x%llx), and CUDA "
                         "shares an allocation from its start: export the start and send the "
                         "offset",
                         memory, static_cast<unsigned long long>(at - base), size, base)
                   : fmt("%zu elements of %zu bytes reach past the allocation's %zu bytes",
                         count, element_size, size),
        __FILE__, __LINE__);
}

[[noreturn]] CURT_COLD inline void refuse_ipc_open(cudaError_t status,
                                                   const ipc_memory_handle& handle, int ordinal) {
  throw_error(make_error_code(status),
              fmt("cudaIpcOpenMemHandle(handle of %zu elements of %zu bytes, "
                  "cudaIpcMemLazyEnablePeerAccess, device %d)",
                  handle.count(), handle.element_size(), ordinal),
              __FILE__, __LINE__,
              "a handle opens only in a process other than its exporter, while the exporter's "
              "allocation lives (it must free it only after every importer destroyed its "
              "ipc_buffer), and in one context per device of a process");
}

// The importer's type and count against what the exporter shared, before CUDA is called.
template <class T>
void check_ipc_request(const ipc_memory_handle& handle, std::size_t count) {
  if (CURT_LIKELY(handle.element_size() == sizeof(T) && count <= handle.count())) return;
  raise(cudaErrorInvalidValue,
        fmt("curt::open_ipc_memory<%s>(handle, %zu)", type_name<T>().c_str(), count),
        handle.element_size() != sizeof(T)
            ? fmt("the exporter shared elements of %zu bytes, and %s has %zu",
                  handle.element_size(), type_name<T>().c_str(), sizeof(T))
            : fmt("the exporter shared %zu elements, fewer than the %zu asked for",
                  handle.count(), count),
        __FILE__, __LINE__);
}
}  // namespace detail

/// `size()` elements of T another process shared (open_ipc_memory), mapped into this one until
/// the owner is destroyed (cudaIpcCloseMemHandle, in the context it was opened in). Device memory:
/// no host access. Move-only; an empty, moved-from or released one holds nothing and says which.
template <class T>
class ipc_buffer : public detail::buffer<T, detail::ipc_memory_kind> {
  using base = detail::buffer<T, detail::ipc_memory_kind>;

 public:
  /// An empty owner: every use throws until a buffer is assigned.
  explicit ipc_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

 private:
  using base::base;
  template <class U>
  friend ipc_buffer<U> open_ipc_memory(const ipc_memory_handle&, std::size_t, curt::device);
};

/// The handle of `count` elements of T at `memory`, the start of a cudaMalloc allocation (asked
/// in the memory's own context). A pointer into an allocation, or a count past its end, is
/// refused (cuMemGetAddressRange). The allocation must live until every importer closed it.
template <class T>
ipc_memory_handle export_ipc_memory(const T* memory, std::size_t count) {
  if (memory == nullptr)
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::export_ipc_memory(null, %zu elements)", count),
                  "there is no memory to share (a buffer of 0 elements allocates none)", __FILE__,
                  __LINE__);
  cudaIpcMemHandle_t native{};
  unsigned long long base = 0;
  std::size_t size = 0;
  const cudaError_t status = [&] {
    detail::context_scope in(detail::for_memory, memory);
    // Memory the driver does not know has no range: cudaIpcGetMemHandle then refuses it.
    const auto at = reinterpret_cast<std::uintptr_t>(memory);
    if (CURT_DETAIL_DRIVER_FUNCTION(cuMemGetAddressRange, 3020)(&base, &size, at) == 0 &&
        (base != at || count > size / sizeof(T)))
      detail::refuse_ipc_range(memory, count, sizeof(T), detail::type_name<T>(), base, size);
    return cudaIpcGetMemHandle(&native, const_cast<T*>(memory));
  }();
  if (CURT_UNLIKELY(status != cudaSuccess))
    detail::refuse_ipc_export(status, memory, count, detail::type_name<T>());
  return ipc_memory_handle(native, count, sizeof(T));
}
/// The handle of a device_buffer's elements; another process opens them with open_ipc_memory<T>.
template <class T>
ipc_memory_handle export_ipc_memory(const device_buffer<T>& buffer) {
  return export_ipc_memory(buffer.data(), buffer.size());
}

/// Maps the memory behind `handle`, exported by another process, into device d's context (one of
/// d current already, else d's primary one): `count` elements of T, no more than the exporter
/// shared, of the exporter's element size (checked before CUDA is called). Ordered after the
/// exporter's writes only by the caller (an interprocess event, a synchronize and a message).
template <class T>
ipc_buffer<T> open_ipc_memory(const ipc_memory_handle& handle, std::size_t count, curt::device d) {
  detail::check_ipc_request<T>(handle, count);
  void* p = nullptr;
  const detail::allocation where = detail::allocate_on(d, [&] {
    const cudaError_t status =
        cudaIpcOpenMemHandle(&p, handle.native(), cudaIpcMemLazyEnablePeerAccess);
    if (CURT_UNLIKELY(status != cudaSuccess)) detail::refuse_ipc_open(status, handle, d.ordinal());
  });
  return ipc_buffer<T>(static_cast<T*>(p), count, where);
}

}  // namespace curt
