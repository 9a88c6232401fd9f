// curt/graph/memory.hpp: the memory a device keeps for graphs' allocation nodes (and allocations
// captured from stream-ordered allocation): what it uses and reserves, its high watermarks, and
// giving back what no graph uses.
//
//   curt::graph_memory_info before = curt::graph_memory(gpu);  // used, reserved, both highs
//   exec.launch(stream);                                       // allocates from it
//   curt::reset_graph_memory_high(gpu);                        // watermarks from here on
//   curt::trim_graph_memory(gpu);                              // unused blocks back to the OS
//
// The calls run in the device's context (device_guard): a context of it that is current stays,
// else its primary context is pushed for the call; no other device's context is made or touched.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/error.hpp>

#include <cstdint>

namespace curt {

/// What cudaDeviceGetGraphMemAttribute reports, in bytes. The high watermarks count since the
/// process began or since they were last reset (reset_graph_memory_high).
enum class graph_memory_attribute : int {
  used_current = cudaGraphMemAttrUsedMemCurrent,  ///< held by graph allocations now
  used_high = cudaGraphMemAttrUsedMemHigh,
  reserved_current = cudaGraphMemAttrReservedMemCurrent,  ///< taken from the device for graphs
  reserved_high = cudaGraphMemAttrReservedMemHigh,
};

/// The four attributes at once.
struct graph_memory_info {
  std::uint64_t used = 0;
  std::uint64_t used_high = 0;
  std::uint64_t reserved = 0;
  std::uint64_t reserved_high = 0;
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
// Asks without a guard: the caller holds d's context.
inline std::uint64_t graph_memory_in_context(device d, graph_memory_attribute a) {
  std::uint64_t value = 0;  // cuuint64_t for all four (the runtime's documentation)
  check(cudaDeviceGetGraphMemAttribute(d.ordinal(), static_cast<cudaGraphMemAttributeType>(a),
                                       &value),
        "cudaDeviceGetGraphMemAttribute",
        {{"attribute", static_cast<int>(a)}, {"device", d.ordinal()}}, __FILE__, __LINE__);
  return value;
}
}  // namespace detail

/// One attribute of device d's graph memory, in bytes.
inline std::uint64_t graph_memory(device d, graph_memory_attribute a) {
  device_guard guard(d);
  return detail::graph_memory_in_context(d, a);
}

/// All four attributes of device d's graph memory, in one pass through its context.
inline graph_memory_info graph_memory(device d) {
  device_guard guard(d);
  graph_memory_info info;
  info.used = detail::graph_memory_in_context(d, graph_memory_attribute::used_current);
  info.used_high = detail::graph_memory_in_context(d, graph_memory_attribute::used_high);
  info.reserved = detail::graph_memory_in_context(d, graph_memory_attribute::reserved_current);
  info.reserved_high = detail::graph_memory_in_context(d, graph_memory_attribute::reserved_high);
  return info;
}

/// Sets a high watermark (cudaDeviceSetGraphMemAttribute). CUDA allows only the two high
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
  device_guard guard(d);
  detail::check(cudaDeviceSetGraphMemAttribute(d.ordinal(),
                                               static_cast<cudaGraphMemAttributeType>(a), &value),
                "cudaDeviceSetGraphMemAttribute",
                {{"attribute", static_cast<int>(a)}, {"device", d.ordinal()}}, __FILE__, __LINE__);
}

/// Resets both high watermarks of device d's graph memory to 0.
inline void reset_graph_memory_high(device d) {
  set_graph_memory(d, graph_memory_attribute::used_high, 0);
  set_graph_memory(d, graph_memory_attribute::reserved_high, 0);
}

/// Gives device d's graph memory that no graph uses back to the OS (cudaDeviceGraphMemTrim):
/// memory of a graph that is running or queued to run stays.
inline void trim_graph_memory(device d) {
  device_guard guard(d);
  detail::check(cudaDeviceGraphMemTrim(d.ordinal()), "cudaDeviceGraphMemTrim",
                {{"device", d.ordinal()}}, __FILE__, __LINE__);
}

}  // namespace curt
