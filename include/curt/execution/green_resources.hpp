// curt/execution/green_resources.hpp: the SM sets green contexts (green_context.hpp) are made of: a
// device's SMs and splits of them, and the checks curt makes itself because CUDA 13.0 does not: it
// rounds group sizes up silently, treats the group count as a capacity, and accepts descriptors
// mixing groups of separate splits, which hand out the same SMs. The checks are pure logic
// (detail::split_request_refusal, exact_split_shortfall, partition_refusal), tested without a GPU.
#pragma once

#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>
#include <curt/core/flags.hpp>
#include <curt/execution/launch.hpp>  // detail::driver_fn::dev_resource

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

struct CUdevResource_st;  // <cuda.h>'s CUdevResource, for sm_resource::native()

namespace curt::detail::driver_fn {
inline constexpr int resource_type_sm = 1;       // CU_DEV_RESOURCE_TYPE_SM
CURT_DETAIL_DRIVER_TYPE(cuDeviceGetDevResource_v12040, CUdevice, dev_resource*, int type);
// groups, count, input, remaining, flags, min_count
CURT_DETAIL_DRIVER_TYPE(cuDevSmResourceSplitByCount_v12040, dev_resource*, unsigned*,
                        const dev_resource*, dev_resource*, unsigned, unsigned);
}  // namespace curt::detail::driver_fn

namespace curt {

/// What a set of SMs is: every SM of a device or a green context (splittable), one group of a
/// split, or what a split left over (the remainder; it may hold no SM).
enum class sm_resource_kind : unsigned char { whole, group, remainder };

/// How a split treats a request the driver cannot meet as asked: take what it delivers (it
/// rounds a group up to its granularity and makes no more groups than fit), or refuse
/// (cudaErrorInvalidResourceConfiguration) anything but the groups and sizes asked.
enum class sm_split_mode : unsigned char { at_least, exact };

/// Flags of a split (CUdevSmResourceSplit_flags); combine with |.
enum class sm_split_flags : unsigned {
  none = 0,
  /// CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING: finer groups (2 SMs on the H200 instead of
  /// 8), each SM taken on its own: large thread block clusters may not fit such a group.
  ignore_coscheduling = 1,
  max_cluster_size = 2,  ///< ..._MAX_POTENTIAL_CLUSTER_SIZE: the largest clusters (9.0+)
};
CURT_DETAIL_FLAGS(sm_split_flags);

class sm_split;
class green_context;
class green_context_ref;
namespace detail {

/// A refusal curt makes itself: the code to throw and why; cudaSuccess when none.
struct green_refusal {
  cudaError_t status = cudaSuccess;
  std::string why;
  explicit operator bool() const noexcept { return status != cudaSuccess; }
};

/// What a green context is made from, as far as overlap is concerned (see sm_resource).
struct resource_tag {
  int device = -1;
  unsigned long long split = 0;
  sm_resource_kind kind = sm_resource_kind::whole;
  unsigned index = 0;
  unsigned sm_count = 0;
};

inline std::string describe_resource(const resource_tag& tag) {
  switch (tag.kind) {
    case sm_resource_kind::whole:
      return fmt("the whole set of %u SMs of device %d", tag.sm_count, tag.device);
    case sm_resource_kind::group:
      return fmt("group %u of split #%llu (%u SMs)", tag.index, tag.split, tag.sm_count);
    default:
      return fmt("the remainder of split #%llu (%u SMs)", tag.split, tag.sm_count);
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
            fmt("groups of at least %u SMs cannot come from a set of %u SMs", min_sms, input_sms)};
  if (exact && min_sms == 0)
    return {cudaErrorInvalidValue,
            "an exact split needs the group size: 0 SMs lets the driver choose it (split with "
            "sm_split_mode::at_least)"};
  return {};
}

/// Why a split did not deliver exactly what was asked; empty when it did.
inline std::string exact_split_shortfall(unsigned requested_groups, unsigned requested_sms,
                                         unsigned delivered_groups, unsigned group_sms,
                                         unsigned remainder_sms, unsigned min_partition,
                                         unsigned alignment, bool ignore_coscheduling) {
  if (delivered_groups == requested_groups && group_sms == requested_sms) return {};
  std::string why =
      fmt("the driver delivered %u group%s of %u SMs (+ %u SMs remaining) for %u of %u SMs",
          delivered_groups, delivered_groups == 1 ? "" : "s", group_sms, remainder_sms,
          requested_groups, requested_sms);
  if (group_sms != requested_sms) {
    why += fmt("; it rounds a group up to its granularity (this set: minimum partition %u SMs, "
               "co-scheduling alignment %u SMs", min_partition, alignment);
    why += ignore_coscheduling ? ", finer with ignore_coscheduling)" : ")";
  }
  if (delivered_groups < requested_groups) why += "; no more groups of that size fit";
  return why + "; ask for what it delivers, or split with sm_split_mode::at_least";
}

/// Why these resources cannot make one green context on device `device`; none when they can.
/// One split's groups and remainder are disjoint; anything else may overlap.
inline green_refusal partition_refusal(const resource_tag* tags, std::size_t count, int device) {
  if (count == 0) return {cudaErrorInvalidValue, "a green context needs at least one set of SMs"};
  for (std::size_t i = 0; i < count; ++i) {
    if (tags[i].device != device)
      return {cudaErrorInvalidDevice,
              fmt("%s is of device %d, not device %d", describe_resource(tags[i]).c_str(),
                  tags[i].device, device)};
    if (tags[i].sm_count == 0)
      return {cudaErrorInvalidResourceConfiguration,
              fmt("%s holds no SM: it cannot be a partition", describe_resource(tags[i]).c_str())};
  }
  if (count == 1) return {};
  for (std::size_t i = 0; i < count; ++i) {
    if (tags[i].kind == sm_resource_kind::whole)
      return {cudaErrorInvalidResourceConfiguration,
              fmt("%s cannot be combined with other resources: it overlaps every one of them",
                  describe_resource(tags[i]).c_str())};
    if (tags[i].split != tags[0].split)
      return {cudaErrorInvalidResourceConfiguration,
              fmt("%s and %s come from different splits: separate splits hand out the same SMs, "
                  "so this partition would overlap another (CUDA 13.0's cuDevResourceGenerateDesc "
                  "does not refuse it); take every group from one split",
                  describe_resource(tags[0]).c_str(), describe_resource(tags[i]).c_str())};
    for (std::size_t j = 0; j < i; ++j)
      if (tags[j].kind == tags[i].kind && tags[j].index == tags[i].index)
        return {cudaErrorInvalidResourceConfiguration,
                fmt("%s is given twice", describe_resource(tags[i]).c_str())};
  }
  return {};
}

// curt's words for the driver's failures of green-context calls, where it can say more.
CURT_COLD inline std::string green_reason(int status, bool event_call = false) {
  switch (status) {
    case cudaErrorInvalidResourceConfiguration:
      return "the driver cannot make this set of SMs (a piece of a split split again, more SMs "
             "than the set holds, or a combination it refuses)";
    case cudaErrorNotSupported:
      return "this device, platform or driver does not support green contexts";
    case cudaErrorInvalidResourceHandle:
      return event_call ? "the event must be an event of the green context's device" : "";
    case cudaErrorStreamCaptureUnsupported:
      return event_call ? "a stream of this green context (or the event) is being captured: the "
                          "driver refuses the whole-context call then and invalidates that "
                          "capture; use the capturing stream's record or wait instead"
                        : "";
    default:
      return "";
  }
}

inline unsigned long long next_split_id() noexcept {
  static atomic<unsigned long long> last{0};
  return last.fetch_add(1) + 1;
}

CURT_COLD inline std::string describe_split_flags(sm_split_flags flags) {
  std::string text;
  if (has_flag(flags, sm_split_flags::ignore_coscheduling)) text += ", ignore_coscheduling";
  if (has_flag(flags, sm_split_flags::max_cluster_size)) text += ", max_cluster_size";
  return text;
}

}  // namespace detail

/// A set of SMs of one device (a CUdevResource of type SM): a device's or a green context's whole
/// set, or a group or the remainder of a split. Plain data, cheap to copy; it owns nothing.
class sm_resource {
 public:
  unsigned sm_count() const noexcept { return native_.sm_count; }  ///< How many SMs the set holds.
  /// The fewest SMs a group split from this set can have (without ignore_coscheduling).
  unsigned min_partition_size() const noexcept { return native_.min_partition_size; }
  /// SMs guaranteed to be co-scheduled on one GPU processing cluster; groups are multiples.
  unsigned coscheduled_alignment() const noexcept { return native_.coscheduled_alignment; }
  /// The device whose SMs these are.
  curt::device device() const noexcept { return curt::device::from_ordinal_unchecked(tag_.device); }
  sm_resource_kind kind() const noexcept { return tag_.kind; }  ///< Whole set, group or remainder.
  /// The split this came from (unique in the process, from 1); 0 for a whole set.
  unsigned long long split_id() const noexcept { return tag_.split; }
  /// Its group's index in its split; for the remainder, the split's number of groups.
  unsigned index() const noexcept { return tag_.index; }
  /// The driver's CUdevResource (complete where <cuda.h> is included), for raw driver calls.
  const CUdevResource_st& native() const noexcept {
    return reinterpret_cast<const CUdevResource_st&>(native_);
  }

  /// How many groups of at least `min_sm_count` SMs a split would make (the driver's dry run).
  unsigned max_groups(unsigned min_sm_count, sm_split_flags flags = sm_split_flags::none) const;

  /// Splits this whole set into up to `groups` groups of at least `min_sm_count` SMs (0: the
  /// driver's smallest) and the remainder, in one driver call (cuDevSmResourceSplitByCount); the
  /// sm_split says what was delivered. Refused: 0 groups, more SMs than the set holds, a piece of
  /// a split, and in sm_split_mode::exact anything but what was asked.
  sm_split split(unsigned groups, unsigned min_sm_count,
                 sm_split_flags flags = sm_split_flags::none,
                 sm_split_mode mode = sm_split_mode::at_least) const;

 private:
  friend class sm_split;
  friend class green_context;
  friend class green_context_ref;
  friend sm_resource device_sm_resource(curt::device d);
  sm_resource(const detail::driver_fn::dev_resource& native_resource, int ordinal,
              sm_resource_kind kind, unsigned long long split, unsigned index) noexcept
      : native_(native_resource), tag_{ordinal, split, kind, index, native_resource.sm_count} {}
  // "curt::sm_resource::split(2 groups of at least 8 SMs, exact) of ..."; `groups` -1: left out.
  CURT_COLD std::string describe(const char* operation, long groups, unsigned min_sm_count,
                                 sm_split_flags flags, bool exact) const {
    std::string text = detail::fmt("curt::sm_resource::%s(", operation);
    if (groups >= 0)
      text += detail::fmt("%ld group%s of at least ", groups, groups == 1 ? "" : "s");
    return detail::fmt("%s%u SMs%s%s) of %s", text.c_str(), min_sm_count,
                       detail::describe_split_flags(flags).c_str(), exact ? ", exact" : "",
                       detail::describe_resource(tag_).c_str());
  }

  detail::driver_fn::dev_resource native_{};
  detail::resource_tag tag_;
};

/// Every group and the remainder of one split, and what was asked for.
class sm_split {
 public:
  std::size_t group_count() const noexcept { return groups_.size(); }  ///< How many groups it made.
  /// The groups made, by index: as many as asked, or fewer where no more fit (see exact()).
  const std::vector<sm_resource>& groups() const noexcept { return groups_; }
  /// Group `i`; throws cudaErrorInvalidValue past the last.
  const sm_resource& group(std::size_t i) const {
    if (i >= groups_.size())
      detail::raise(cudaErrorInvalidValue, detail::fmt("curt::sm_split::group(%zu)", i),
                    detail::fmt("the split made %zu group(s)", groups_.size()), __FILE__, __LINE__);
    return groups_[i];
  }
  /// SMs in each group as delivered (a split's groups are equal); 0 when it made none.
  unsigned group_sm_count() const noexcept { return groups_.empty() ? 0 : groups_[0].sm_count(); }
  /// The SMs no group took; sm_count() 0 when none was left.
  const sm_resource& remainder() const noexcept { return remainder_; }
  /// Groups `first_group` onwards and the remainder when it holds SMs: "everything else" for a
  /// green context next to one made of the first groups.
  std::vector<sm_resource> rest(std::size_t first_group) const {
    const std::size_t n = first_group < groups_.size() ? groups_.size() - first_group : 0;
    std::vector<sm_resource> left(n + (remainder_.sm_count() > 0), remainder_);  // no push_back:
    for (std::size_t i = 0; i < n; ++i) left[i] = groups_[first_group + i];  // cheaper to compile
    return left;
  }
  /// What split() was asked: `groups`, `min_sm_count` (0: the driver's smallest), `flags`. @{
  unsigned requested_groups() const noexcept { return requested_groups_; }
  unsigned requested_sm_count() const noexcept { return requested_sms_; }
  sm_split_flags flags() const noexcept { return flags_; }  ///@}
  /// True when the driver delivered exactly the groups and the size asked for.
  bool exact() const noexcept {
    return groups_.size() == requested_groups_ && group_sm_count() == requested_sms_;
  }
  /// The split's process-unique id (its pieces' split_id()).
  unsigned long long id() const noexcept { return remainder_.split_id(); }

 private:
  friend class sm_resource;
  sm_split(std::vector<sm_resource> groups, sm_resource remainder, unsigned requested_groups,
           unsigned requested_sms, sm_split_flags flags) noexcept
      : groups_(std::move(groups)), remainder_(remainder), requested_groups_(requested_groups),
        requested_sms_(requested_sms), flags_(flags) {}

  std::vector<sm_resource> groups_;
  sm_resource remainder_;
  unsigned requested_groups_;
  unsigned requested_sms_;
  sm_split_flags flags_;
};

/// Every SM of `d` (cuDeviceGetDevResource): SM count, minimum partition, alignment; split from it.
inline sm_resource device_sm_resource(curt::device d) {
  detail::driver_fn::dev_resource native{};
  const int status = CURT_DETAIL_DRIVER_FUNCTION(cuDeviceGetDevResource, 12040)(
      detail::driver_device(d.ordinal()), &native, detail::driver_fn::resource_type_sm);
  if (CURT_UNLIKELY(status != 0))
    detail::throw_error(std::error_code(status, driver_category()),
                        detail::fmt("cuDeviceGetDevResource(device %d, SM)", d.ordinal()), __FILE__,
                        __LINE__, detail::green_reason(status));
  return sm_resource(native, d.ordinal(), sm_resource_kind::whole, 0, 0);
}

inline unsigned sm_resource::max_groups(unsigned min_sm_count, sm_split_flags flags) const {
  if (detail::green_refusal refused =
          detail::split_request_refusal(tag_.kind, sm_count(), 1, min_sm_count, false))
    detail::raise(refused.status, describe("max_groups", -1, min_sm_count, flags, false),
                  refused.why, __FILE__, __LINE__);
  unsigned count = 0;
  const int status = CURT_DETAIL_DRIVER_FUNCTION(cuDevSmResourceSplitByCount, 12040)(
      nullptr, &count, &native_, nullptr, static_cast<unsigned>(flags), min_sm_count);
  if (CURT_UNLIKELY(status != 0))
    detail::throw_error(std::error_code(status, driver_category()),
                        detail::fmt("cuDevSmResourceSplitByCount(dry run) for %s",
                                    describe("max_groups", -1, min_sm_count, flags, false).c_str()),
                        __FILE__, __LINE__, detail::green_reason(status));
  return count;
}

inline sm_split sm_resource::split(unsigned groups, unsigned min_sm_count, sm_split_flags flags,
                                   sm_split_mode mode) const {
  const bool exact = mode == sm_split_mode::exact;
  if (detail::green_refusal refused =
          detail::split_request_refusal(tag_.kind, sm_count(), groups, min_sm_count, exact))
    detail::raise(refused.status, describe("split", groups, min_sm_count, flags, exact),
                  refused.why, __FILE__, __LINE__);
  // The driver makes no more groups than the set has SMs: a larger capacity changes nothing.
  const unsigned capacity = groups < sm_count() ? groups : (sm_count() > 0 ? sm_count() : 1u);
  detail::entries<detail::driver_fn::dev_resource> made(capacity);
  detail::driver_fn::dev_resource remaining{};
  unsigned count = capacity;
  const int status = CURT_DETAIL_DRIVER_FUNCTION(cuDevSmResourceSplitByCount, 12040)(
      made.data(), &count, &native_, &remaining, static_cast<unsigned>(flags), min_sm_count);
  if (CURT_UNLIKELY(status != 0))
    detail::throw_error(std::error_code(status, driver_category()),
                        describe("split", groups, min_sm_count, flags, exact), __FILE__, __LINE__,
                        detail::green_reason(status));
  if (count > capacity) count = capacity;
  const unsigned long long id = detail::next_split_id();
  const sm_resource rest(remaining, tag_.device, sm_resource_kind::remainder, id, count);
  std::vector<sm_resource> pieces(count, rest);  // as rest() makes them
  for (unsigned i = 0; i < count; ++i)
    pieces[i] = sm_resource(made[i], tag_.device, sm_resource_kind::group, id, i);
  sm_split result(std::move(pieces), rest, groups, min_sm_count, flags);
  if (exact) {
    std::string why = detail::exact_split_shortfall(
        groups, min_sm_count, count, result.group_sm_count(), result.remainder().sm_count(),
        min_partition_size(), coscheduled_alignment(),
        has_flag(flags, sm_split_flags::ignore_coscheduling));
    if (!why.empty())
      detail::raise(cudaErrorInvalidResourceConfiguration,
                    describe("split", groups, min_sm_count, flags, exact), std::move(why),
                    __FILE__, __LINE__);
  }
  return result;
}

}  // namespace curt
