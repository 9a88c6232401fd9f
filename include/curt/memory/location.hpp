// curt/memory/location.hpp: where memory lives or should go (a device, the host, a host NUMA
// node), as CUDA 13.0's cudaMemLocation, for prefetches, advice, pools and batched copies.
#pragma once

#include <curt/core/device.hpp>

#include <cuda_runtime_api.h>

#include <string>

namespace curt {

/// A cudaMemLocation made through named constructors, so that the meaning of its id (a device
/// ordinal, a NUMA node, nothing) always matches its type:
///   `curt::memory_location::device(d)`, `host()`, `host_numa(node)`, `host_numa_current()`.
/// Default-constructed it is none(): no location (what an unset preferred location reads back).
class memory_location {
 public:
  constexpr memory_location() noexcept = default;

  /// Device memory of `d`.
  static memory_location device(curt::device d) noexcept {
    return memory_location(cudaMemLocationTypeDevice, d.ordinal());
  }
  /// Device memory of device `ordinal`; throws cudaErrorInvalidDevice as curt::device(int) does.
  static memory_location device(int ordinal) { return device(curt::device(ordinal)); }
  /// Host memory (the id is ignored by CUDA and kept 0 here).
  static constexpr memory_location host() noexcept {
    return memory_location(cudaMemLocationTypeHost, 0);
  }
  /// Host memory on NUMA node `node`, or on the one nearest the thread issuing the operation. @{
  static constexpr memory_location host_numa(int node) noexcept {
    return memory_location(cudaMemLocationTypeHostNuma, node);
  }
  static constexpr memory_location host_numa_current() noexcept {
    return memory_location(cudaMemLocationTypeHostNumaCurrent, 0);
  }  ///@}
  /// No location (cudaMemLocationTypeNone).
  static constexpr memory_location none() noexcept { return memory_location(); }

  /// Any location CUDA gave back (a range attribute, a pool's properties), taken as it is.
  static constexpr memory_location from_native(cudaMemLocation location) noexcept {
    return memory_location(location.type, location.id);
  }

  /// The type, and id: the device ordinal or NUMA node (0 for the types whose id CUDA ignores). @{
  constexpr cudaMemLocationType type() const noexcept { return location_.type; }
  constexpr int id() const noexcept { return location_.id; }  ///@}
  constexpr cudaMemLocation native() const noexcept { return location_; }  ///< As CUDA takes it.

  /// True for none() and for device memory (cudaMemLocationTypeNone, cudaMemLocationTypeDevice). @{
  constexpr bool is_none() const noexcept { return location_.type == cudaMemLocationTypeNone; }
  constexpr bool is_device() const noexcept { return location_.type == cudaMemLocationTypeDevice; }
  /// True for host(), host_numa(n) and host_numa_current().
  constexpr bool is_host() const noexcept {
    return location_.type == cudaMemLocationTypeHost ||
           location_.type == cudaMemLocationTypeHostNuma ||
           location_.type == cudaMemLocationTypeHostNumaCurrent;
  }  ///@}

  /// "device 0", "host", "host NUMA node 1", "host NUMA node nearest the calling thread",
  /// "no location": for error messages and test output.
  std::string describe() const {
    switch (location_.type) {
      case cudaMemLocationTypeNone:
        return "no location";
      case cudaMemLocationTypeDevice:
        return detail::fmt("device %d", location_.id);
      case cudaMemLocationTypeHost:
        return "host";
      case cudaMemLocationTypeHostNuma:
        return detail::fmt("host NUMA node %d", location_.id);
      case cudaMemLocationTypeHostNumaCurrent:
        return "host NUMA node nearest the calling thread";
    }
    return detail::fmt("memory location of unknown type %d (id %d)",
                       static_cast<int>(location_.type), location_.id);
  }

  /// Same type and, where the type has one, same id (the ignored ids of host() and
  /// host_numa_current() do not count: CUDA may give them back as anything). @{
  friend constexpr bool operator==(memory_location a, memory_location b) noexcept {
    if (a.location_.type != b.location_.type) return false;
    bool has_id = a.location_.type == cudaMemLocationTypeDevice ||
                  a.location_.type == cudaMemLocationTypeHostNuma;
    return !has_id || a.location_.id == b.location_.id;
  }
  friend constexpr bool operator!=(memory_location a, memory_location b) noexcept {
    return !(a == b);
  }  ///@}

 private:
  constexpr memory_location(cudaMemLocationType type, int id) noexcept : location_{type, id} {}
  cudaMemLocation location_{cudaMemLocationTypeNone, 0};
};

}  // namespace curt
