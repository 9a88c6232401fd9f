// curt/graph/memory.hpp: the memory a device keeps for graphs' allocation nodes (and allocations
// captured from stream-ordered allocation): what it uses and reserves, its high watermarks, and
// giving back what no graph uses.
//
//   curt::graph_memory_info before = curt::graph_memory(gpu);  // used, reserved, both highs
//   exec.launch(stream);                                       // allocates from it
//   curt::reset_graph_memory_high(gpu);                        // watermarks from here on
//   curt::trim_graph_memory(gpu);                              // unused blocks back to the OS
//
// The calls go to the driver's cuDevice*GraphMem* functions, which take the device and need no
// context: none is made current, and no primary context is woken (the runtime's versions would
// make the device's primary context, where the program may use only its own contexts).
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/error.hpp>

#include <cstdint>

namespace curt {

/// What cuDeviceGetGraphMemAttribute reports, in bytes. The high watermarks count since the
/// process began or since they were last reset (reset_graph_memory_high).
enum class graph_memory_attribute : int {
  /// Held for graph allocations. A free node does not lower it: the block stays counted until a
  /// trim gives it back (13.0, driver 580, measured).
  used_current = cudaGraphMemAttrUsedMemCurrent,
  used_high = cudaGraphMemAttrUsedMemHigh,
  reserved_current = cudaGraphMemAttrReservedMemCurrent,  ///< taken from the device for graphs
  reserved_high = cudaGraphMemAttrReservedMemHigh,
};

/// The four attributes at once.
struct graph_memory_info {
  std::uint64_t used = 0;           ///< graph_memory_attribute::used_current, in bytes
  std::uint64_t used_high = 0;      ///< its high watermark
  std::uint64_t reserved = 0;       ///< graph_memory_attribute::reserved_current, in bytes
  std::uint64_t reserved_high = 0;  ///< its high watermark
};

namespace detail {
constexpr const char* graph_memory_attribute_name(graph_memory_attribute a) noexcept {
  switch (a) {
    case graph_memory_attribute::used_current: return "graph_memory_attribute::used_current";
    case graph_memory_attribute::used_high: return "graph_memory_attribute::used_high";
    case graph_memory_attribute::reserved_current:
      return "graph_memory_attribute::reserved_current";
    case graph_memory_attribute::reserved_high: return "graph_memory_attribute::reserved_high";
  }
  return "graph_memory_attribute(unknown)";
}
// d as the driver's CUdevice; an ordinal out of range is refused naming `call`.
inline CUdevice graph_memory_device(device d, const char* call) {
  (void)device_table(d.ordinal(), call);
  return driver_device(d.ordinal());
}
// Failures are thrown in the runtime's category, as the runtime's versions would report them
// (the driver's codes have the same numbers).
inline std::uint64_t graph_memory_of(CUdevice cu, device d, graph_memory_attribute a) {
  std::uint64_t value = 0;  // cuuint64_t for all four (cuda.h)
  const auto get = CURT_DETAIL_DRIVER_FUNCTION(cuDeviceGetGraphMemAttribute, 11040);
  check(static_cast<cudaError_t>(get(cu, static_cast<int>(a), &value)),
        "cuDeviceGetGraphMemAttribute",
        {{"attribute", static_cast<int>(a)}, {"device", d.ordinal()}}, __FILE__, __LINE__);
  return value;
}
}  // namespace detail

/// One attribute of device d's graph memory, in bytes.
inline std::uint64_t graph_memory(device d, graph_memory_attribute a) {
  return detail::graph_memory_of(
      detail::graph_memory_device(d, "cuDeviceGetGraphMemAttribute"), d, a);
}

/// All four attributes of device d's graph memory.
inline graph_memory_info graph_memory(device d) {
  const CUdevice cu = detail::graph_memory_device(d, "cuDeviceGetGraphMemAttribute");
  graph_memory_info info;
  info.used = detail::graph_memory_of(cu, d, graph_memory_attribute::used_current);
  info.used_high = detail::graph_memory_of(cu, d, graph_memory_attribute::used_high);
  info.reserved = detail::graph_memory_of(cu, d, graph_memory_attribute::reserved_current);
  info.reserved_high = detail::graph_memory_of(cu, d, graph_memory_attribute::reserved_high);
  return info;
}

/// Sets a high watermark (cuDeviceSetGraphMemAttribute). CUDA allows only the two high
/// watermarks, and only 0 (a reset); anything else is refused before CUDA is called, naming the
/// attribute and the value.
inline void set_graph_memory(device d, graph_memory_attribute a, std::uint64_t value) {
  const bool high = a == graph_memory_attribute::used_high ||
                    a == graph_memory_attribute::reserved_high;
  if (CURT_UNLIKELY(!high || value != 0))
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::set_graph_memory(device %d, %s, %llu)", d.ordinal(),
                              detail::graph_memory_attribute_name(a),
                              static_cast<unsigned long long>(value)),
                  high ? "a high watermark can only be reset, to 0 (nothing was called)"
                       : "only the high watermarks (used_high, reserved_high) can be set, and "
                         "only to 0; the current amounts are CUDA's to keep (nothing was called)",
                  __FILE__, __LINE__);
  const CUdevice cu = detail::graph_memory_device(d, "cuDeviceSetGraphMemAttribute");
  const auto set = CURT_DETAIL_DRIVER_FUNCTION(cuDeviceSetGraphMemAttribute, 11040);
  detail::check(static_cast<cudaError_t>(set(cu, static_cast<int>(a), &value)),
                "cuDeviceSetGraphMemAttribute",
                {{"attribute", static_cast<int>(a)}, {"device", d.ordinal()}}, __FILE__, __LINE__);
}

/// Resets both high watermarks of device d's graph memory: CUDA sets them to the current amounts.
inline void reset_graph_memory_high(device d) {
  set_graph_memory(d, graph_memory_attribute::used_high, 0);
  set_graph_memory(d, graph_memory_attribute::reserved_high, 0);
}

/// Gives device d's graph memory that no graph uses back to the OS (cuDeviceGraphMemTrim), also
/// freed blocks of executable graphs that still exist; memory of a graph that is running or
/// queued to run, or allocated and not yet freed, stays.
inline void trim_graph_memory(device d) {
  const CUdevice cu = detail::graph_memory_device(d, "cuDeviceGraphMemTrim");
  const auto trim = CURT_DETAIL_DRIVER_FUNCTION(cuDeviceGraphMemTrim, 11040);
  detail::check(static_cast<cudaError_t>(trim(cu)), "cuDeviceGraphMemTrim",
                {{"device", d.ordinal()}}, __FILE__, __LINE__);
}

}  // namespace curt
