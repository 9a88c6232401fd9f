// curt/memory/resource.hpp: curt pools as CCCL memory resources (cuda::mr of CCCL 3.0.1, and the
// 3.1+ member names). Opt-in: it includes CCCL, which curt.hpp does not.
//
// memory_pool_ref and memory_pool are cuda::mr::resource and async_resource by their members
// (memory/pool.hpp) but claim no accessibility property: whether a pool's memory is device- or
// host-accessible is run-time knowledge (its kind, set_access()). pool_resource<Properties...> is a
// pool checked to have them when made, for cuda::mr::resource_ref and async_resource_ref:
//   device_accessible  a device pool, or one a device was given read-write access to
//                      (set_access) before; accessible from those devices, as for CCCL's own
//   host_accessible    a pool of pinned host, host NUMA or managed memory
//
//   curt::pool_resource<cuda::mr::device_accessible> resource(pool);   // throws if not so
//   cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref{resource};
#pragma once

// CCCL's memory resources are empty unless its switch is defined before any CCCL header (Thrust
// and CUB included); curt does not define another library's macro behind your back.
#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#  error "<curt/memory_resource.hpp> needs CCCL's memory resources: define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE for the whole target (before any CCCL, Thrust or CUB header)"
#endif
#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <curt/core/device.hpp>
#include <curt/execution/cccl.hpp>
#include <curt/memory/pool.hpp>

#include <string>
#include <type_traits>

namespace curt {
/// A pool checked, when made, to have `Properties`: a cuda::mr::(async_)resource_with them.
/// Copyable, as the memory_pool_ref it is; the pool must outlive it.
template <class First, class... More>
class pool_resource<First, More...> : public memory_pool_ref {
  template <class P>
  static constexpr bool has = (std::is_same_v<P, More> || ... || std::is_same_v<P, First>);
  template <class P>
  static constexpr bool known = std::is_same_v<P, ::cuda::mr::device_accessible> ||
                                std::is_same_v<P, ::cuda::mr::host_accessible>;
  static_assert((known<More> && ... && known<First>),
                "curt::pool_resource checks cuda::mr::device_accessible and host_accessible");

 public:
  /// Throws a cuda_error (cudaErrorInvalidValue) naming the pool and the property it lacks.
  explicit pool_resource(memory_pool_ref pool) : memory_pool_ref(pool) {
    (void)get();  // an empty, moved-from or released pool says so first
    if (has<::cuda::mr::host_accessible> && !is_host_pool() && !is_managed_pool())
      refuse("host_accessible", kind_known() ? detail::fmt("it holds %s memory, which the host "
                                                           "cannot address",
                                                           location().describe().c_str())
                                             : unknown());
    if (has<::cuda::mr::device_accessible> && !is_device_pool()) {
      if (!kind_known()) refuse("device_accessible", unknown());
      for (curt::device d : devices())
        if (access(d) == pool_access::read_write) return;
      refuse("device_accessible",
             "host and managed pools give devices no access until set_access(device, "
             "curt::pool_access::read_write); no visible device has read-write access to it");
    }
  }

  /// The properties, for CCCL (has_property, resource_with).
  template <class Property, std::enable_if_t<has<Property>, int> = 0>
  friend void get_property(const pool_resource&, Property) noexcept {}

 private:
  static std::string unknown() {
    return "the ref does not know the pool's kind (it was made from a bare cudaMemPool_t): make "
           "it as memory_pool_ref(handle, properties) or from a curt::memory_pool";
  }
  [[noreturn]] CURT_COLD void refuse(const char* property, const std::string& why) const {
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::pool_resource<%s>(%s)", property, describe().c_str()),
                  detail::fmt("the pool is not %s: %s", property, why.c_str()), __FILE__, __LINE__);
  }
};
}  // namespace curt
