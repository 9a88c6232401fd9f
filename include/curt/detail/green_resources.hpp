// curt/detail/green_resources.hpp: the bookkeeping behind <curt/green_context.hpp>, as pure logic
// (no CUDA call, no <cuda.h>), so that it is tested without a GPU: what a split request may ask,
// whether a split delivered exactly what was asked, and which sets of SM resources make one
// partition. The driver does not check the last two itself: CUDA 13.0 rounds sizes up silently,
// treats the group count as a capacity, and accepts descriptors that mix groups of separate
// splits, which hand out the same SMs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace curt {

/// What a set of SMs is: every SM of a device or of a green context, or a piece of a split.
enum class sm_resource_kind : unsigned char {
  whole,      ///< every SM of a device or a green context (splittable)
  group,      ///< one group of a split
  remainder,  ///< what a split left over (may hold no SM)
};

/// How a split treats a request the driver cannot meet as asked.
enum class sm_split_mode : unsigned char {
  /// Take what the driver delivers: it rounds a group up to its granularity and makes no more
  /// groups than fit (the sm_split says what came).
  at_least,
  /// Refuse (cudaErrorInvalidResourceConfiguration) unless there are exactly as many groups as
  /// asked, each of exactly the SMs asked.
  exact,
};

namespace detail {

/// A refusal curt makes itself: the code to throw and why; status cudaSuccess when none.
struct green_refusal {
  cudaError_t status = cudaSuccess;
  std::string why;
  explicit operator bool() const noexcept { return status != cudaSuccess; }
};

/// What a green context is made from, as far as overlap is concerned.
struct resource_tag {
  int device = -1;
  unsigned long long split = 0;  ///< the split it came from (process-unique, from 1); 0: whole
  sm_resource_kind kind = sm_resource_kind::whole;
  unsigned index = 0;            ///< its group's index; for a remainder, the number of groups
  unsigned sm_count = 0;
};

inline std::string describe_resource(const resource_tag& tag) {
  switch (tag.kind) {
    case sm_resource_kind::whole:
      return "the whole set of " + std::to_string(tag.sm_count) + " SMs of device " +
             std::to_string(tag.device);
    case sm_resource_kind::group:
      return "group " + std::to_string(tag.index) + " of split #" + std::to_string(tag.split) +
             " (" + std::to_string(tag.sm_count) + " SMs)";
    default:
      return "the remainder of split #" + std::to_string(tag.split) + " (" +
             std::to_string(tag.sm_count) + " SMs)";
  }
}

/// What a split request may not ask, before the driver is asked.
inline green_refusal split_request_refusal(sm_resource_kind input, unsigned input_sms,
                                           unsigned groups, unsigned min_sms, bool exact) {
  if (input != sm_resource_kind::whole)
    return {cudaErrorInvalidResourceConfiguration,
            "a group or the remainder of a split cannot be split again (the driver refuses it): "
            "make a green context of it and split that context's resources()"};
  if (groups == 0)
    return {cudaErrorInvalidValue,
            "a split needs at least one group (max_groups() tells how many groups of a size fit)"};
  if (min_sms > input_sms)
    return {cudaErrorInvalidResourceConfiguration,
            "groups of at least " + std::to_string(min_sms) + " SMs cannot come from a set of " +
                std::to_string(input_sms) + " SMs"};
  if (exact && min_sms == 0)
    return {cudaErrorInvalidValue,
            "an exact split needs the group size: 0 SMs lets the driver choose it (split with "
            "sm_split_mode::at_least)"};
  return {};
}

/// Why a split did not deliver exactly what was asked; empty when it did. `granularity` names
/// the input's minimum partition size and co-scheduling alignment, for the message.
inline std::string exact_split_shortfall(unsigned requested_groups, unsigned requested_sms,
                                         unsigned delivered_groups, unsigned group_sms,
                                         unsigned remainder_sms, unsigned min_partition,
                                         unsigned alignment, bool ignore_coscheduling) {
  if (delivered_groups == requested_groups && group_sms == requested_sms) return {};
  std::string why = "the driver delivered " + std::to_string(delivered_groups) + " group" +
                    (delivered_groups == 1 ? "" : "s") + " of " + std::to_string(group_sms) +
                    " SMs (+ " + std::to_string(remainder_sms) + " SMs remaining) for " +
                    std::to_string(requested_groups) + " of " + std::to_string(requested_sms) +
                    " SMs";
  if (group_sms != requested_sms) {
    why += "; it rounds a group up to its granularity (this set: minimum partition " +
           std::to_string(min_partition) + " SMs, co-scheduling alignment " +
           std::to_string(alignment) + " SMs";
    why += ignore_coscheduling ? ", finer with ignore_coscheduling)" : ")";
  }
  if (delivered_groups < requested_groups)
    why += "; no more groups of that size fit";
  return why + "; ask for what it delivers, or split with sm_split_mode::at_least";
}

/// Why these resources cannot make one green context on device `device`; none when they can.
/// One split's groups and remainder are disjoint; anything else may overlap.
inline green_refusal partition_refusal(const resource_tag* tags, std::size_t count, int device) {
  if (count == 0)
    return {cudaErrorInvalidValue, "a green context needs at least one set of SMs"};
  for (std::size_t i = 0; i < count; ++i) {
    if (tags[i].device != device)
      return {cudaErrorInvalidDevice, describe_resource(tags[i]) + " is of device " +
                                          std::to_string(tags[i].device) + ", not device " +
                                          std::to_string(device)};
    if (tags[i].sm_count == 0)
      return {cudaErrorInvalidResourceConfiguration,
              describe_resource(tags[i]) + " holds no SM: it cannot be a partition"};
  }
  if (count == 1) return {};
  for (std::size_t i = 0; i < count; ++i) {
    if (tags[i].kind == sm_resource_kind::whole)
      return {cudaErrorInvalidResourceConfiguration,
              describe_resource(tags[i]) +
                  " cannot be combined with other resources: it overlaps every one of them"};
    if (tags[i].split != tags[0].split)
      return {cudaErrorInvalidResourceConfiguration,
              describe_resource(tags[0]) + " and " + describe_resource(tags[i]) +
                  " come from different splits: separate splits hand out the same SMs, so this "
                  "partition would overlap another (CUDA 13.0's cuDevResourceGenerateDesc does "
                  "not refuse it); take every group from one split"};
    for (std::size_t j = 0; j < i; ++j)
      if (tags[j].kind == tags[i].kind && tags[j].index == tags[i].index)
        return {cudaErrorInvalidResourceConfiguration,
                describe_resource(tags[i]) + " is given twice"};
  }
  return {};
}

}  // namespace detail
}  // namespace curt
