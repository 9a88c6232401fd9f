// curt/memory_resource.hpp: curt pools as CCCL memory resources (cuda::mr, CCCL 3.0.1 and the
// member names of 3.1+). Opt-in: it includes CCCL's <cuda/memory_resource>, which curt.hpp does
// not.
//
// curt::memory_pool_ref and curt::memory_pool are cuda::mr::resource and
// cuda::mr::async_resource (their members allocate / deallocate / allocate_async /
// deallocate_async need no CCCL type and live in memory_pool.hpp). They carry no accessibility
// property: whether a pool's memory is device- or host-accessible is run-time knowledge (the
// pool's kind, and set_access()), and no property holds for every pool (a device pool is not
// host-accessible; a host pool is not device-accessible until set_access()).
//
// curt::pool_resource<Properties...> is a pool that has been checked, when the resource was made,
// to have those properties; it is what cuda::mr::resource_ref / async_resource_ref take:
//   cuda::mr::device_accessible  the pool is a device pool, or some device was given read-write
//                                access to it (set_access) before the resource was made
//   cuda::mr::host_accessible    the pool holds pinned host, host NUMA or managed memory
//
//   curt::pool_resource<cuda::mr::device_accessible> resource(pool);   // throws if not so
//   cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref{resource};
//   void* p = ref.allocate_async(bytes, stream.cccl());
//
// The claim holds as long as the access given is not taken back (cudaMemPoolSetAccess with
// none, which curt never does by itself). device_accessible means what it means for CCCL's own
// resources: accessible from the device(s) that were given access, not from every device.
#pragma once

// <cuda/memory_resource> is empty unless CCCL's own switch for its experimental memory resources,
// LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE, is defined before any CCCL header (Thrust and
// CUB included) is first read. curt does not define another library's macro behind your back:
// define it for the whole target, e.g.
//   target_compile_definitions(app PRIVATE LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE)
#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#  error "<curt/memory_resource.hpp> needs CCCL's memory resources: define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE for the whole target (before any CCCL, Thrust or CUB header)"
#endif
#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <curt/cccl.hpp>
#include <curt/device.hpp>
#include <curt/memory_pool.hpp>

#include <string>
#include <type_traits>


namespace curt {

namespace detail {

template <class Property, class... Properties>
inline constexpr bool has_pool_property = (std::is_same_v<Property, Properties> || ...);

// Whether any visible device has read-write access to the pool.
inline bool some_device_accesses(const memory_pool_ref& pool) {
  for (curt::device d : devices())
    if (pool.access(d) == pool_access::read_write) return true;
  return false;
}

}  // namespace detail

/// A pool checked to have `Properties` (cuda::mr::device_accessible, cuda::mr::host_accessible)
/// when made: a cuda::mr::resource_with / async_resource_with those properties, for
/// cuda::mr::resource_ref and async_resource_ref. Copyable, as the memory_pool_ref it is; the
/// pool must outlive it.
template <class... Properties>
class pool_resource : public memory_pool_ref {
  static_assert(sizeof...(Properties) > 0,
                "curt::pool_resource: name at least one of cuda::mr::device_accessible and "
                "cuda::mr::host_accessible (CCCL's resource refs need one)");
  static_assert(((std::is_same_v<Properties, ::cuda::mr::device_accessible> ||
                  std::is_same_v<Properties, ::cuda::mr::host_accessible>) && ...),
                "curt::pool_resource checks only cuda::mr::device_accessible and "
                "cuda::mr::host_accessible");

 public:
  /// Throws a cuda_error (cudaErrorInvalidValue) naming the pool and the property it lacks.
  explicit pool_resource(memory_pool_ref pool) : memory_pool_ref(pool) {
    (void)get();  // an empty, moved-from or released pool says so first
    if constexpr (detail::has_pool_property<::cuda::mr::host_accessible, Properties...>) {
      if (!is_host_pool() && !is_managed_pool()) refuse("host_accessible", host_reason());
    }
    if constexpr (detail::has_pool_property<::cuda::mr::device_accessible, Properties...>) {
      if (!is_device_pool()) {
        if (!kind_known()) refuse("device_accessible", unknown_reason());
        if (!detail::some_device_accesses(*this))
          refuse("device_accessible",
                 "host and managed pools give devices no access until set_access(device, "
                 "curt::pool_access::read_write); no visible device has read-write access to it");
      }
    }
  }

  /// The properties, for CCCL (has_property, resource_with).
  template <class Property,
            std::enable_if_t<detail::has_pool_property<Property, Properties...>, int> = 0>
  friend void get_property(const pool_resource&, Property) noexcept {}

 private:
  std::string host_reason() const {
    if (!kind_known()) return unknown_reason();
    return "it holds " + location().describe() + " memory, which the host cannot address";
  }
  static const char* unknown_reason() {
    return "the ref does not know the pool's kind (it was made from a bare cudaMemPool_t): make "
           "it as memory_pool_ref(handle, properties) or from a curt::memory_pool";
  }
  [[noreturn]] CURT_COLD void refuse(const char* property, const std::string& why) const {
    detail::raise(cudaErrorInvalidValue,
                  std::string("curt::pool_resource<") + property + ">(" + describe() + ")",
                  std::string("the pool is not ") + property + ": " + why, __FILE__, __LINE__);
  }
};

// The static checks of the claims above, against the installed CCCL.
static_assert(::cuda::mr::resource<memory_pool_ref> && ::cuda::mr::async_resource<memory_pool_ref>);
static_assert(::cuda::mr::resource<memory_pool> && ::cuda::mr::async_resource<memory_pool>);
static_assert(::cuda::mr::async_resource_with<pool_resource<::cuda::mr::device_accessible>,
                                              ::cuda::mr::device_accessible>);
static_assert(!::cuda::has_property<pool_resource<::cuda::mr::device_accessible>,
                                    ::cuda::mr::host_accessible>);
static_assert(!::cuda::has_property<memory_pool_ref, ::cuda::mr::device_accessible>);

}  // namespace curt
