// Green contexts without a GPU: the bookkeeping curt does itself because CUDA 13.0 does not (what
// a split request may ask, whether a split delivered exactly what was asked, which resources make
// one partition), owners that hold nothing, and the driver types the header declares itself
// (it does not include <cuda.h>; this file does, to compare). Handles here are made up: none of
// these paths may reach CUDA.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/green_context.hpp>
#include <curt/driver.hpp>  // <cuda.h>: CUdevResource and the split flags, to compare

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using curt::sm_resource_kind;
using curt::detail::resource_tag;

curt::device device0() { return curt::device::from_ordinal_unchecked(0); }

resource_tag whole(int device, unsigned sms) {
  return resource_tag{device, 0, sm_resource_kind::whole, 0, sms};
}
resource_tag group(unsigned long long split, unsigned index, unsigned sms, int device = 0) {
  return resource_tag{device, split, sm_resource_kind::group, index, sms};
}
resource_tag remainder(unsigned long long split, unsigned groups, unsigned sms, int device = 0) {
  return resource_tag{device, split, sm_resource_kind::remainder, groups, sms};
}

// The refusal for these tags on device 0, as status and message.
template <std::size_t N>
curt::detail::green_refusal refusal_of(const resource_tag (&tags)[N], int device = 0) {
  return curt::detail::partition_refusal(tags, N, device);
}

}  // namespace

TEST_CASE("a split request is refused before the driver when it cannot be right", "[green]") {
  using curt::detail::split_request_refusal;
  CHECK_FALSE(split_request_refusal(sm_resource_kind::whole, 132, 1, 0, false));
  CHECK_FALSE(split_request_refusal(sm_resource_kind::whole, 132, 1000, 132, false));
  CHECK_FALSE(split_request_refusal(sm_resource_kind::whole, 132, 4, 16, true));

  auto zero_groups = split_request_refusal(sm_resource_kind::whole, 132, 0, 8, false);
  CHECK(zero_groups.status == cudaErrorInvalidValue);
  CHECK_THAT(zero_groups.why, ContainsSubstring("at least one group"));

  auto too_many_sms = split_request_refusal(sm_resource_kind::whole, 132, 1, 133, false);
  CHECK(too_many_sms.status == cudaErrorInvalidResourceConfiguration);
  CHECK_THAT(too_many_sms.why, ContainsSubstring("at least 133 SMs cannot come from a set of 132"));

  for (sm_resource_kind piece : {sm_resource_kind::group, sm_resource_kind::remainder}) {
    auto again = split_request_refusal(piece, 16, 1, 8, false);
    CHECK(again.status == cudaErrorInvalidResourceConfiguration);
    CHECK_THAT(again.why, ContainsSubstring("cannot be split again"));
    CHECK_THAT(again.why, ContainsSubstring("resources()"));
  }

  auto exact_without_size = split_request_refusal(sm_resource_kind::whole, 132, 2, 0, true);
  CHECK(exact_without_size.status == cudaErrorInvalidValue);
  CHECK_THAT(exact_without_size.why, ContainsSubstring("exact split needs the group size"));
}

TEST_CASE("an exact split accepts only what was asked, and says what came instead", "[green]") {
  using curt::detail::exact_split_shortfall;
  CHECK(exact_split_shortfall(4, 16, 4, 16, 68, 8, 8, false).empty());
  CHECK(exact_split_shortfall(1, 132, 1, 132, 0, 8, 8, false).empty());

  // The H200's rounding (9 -> 16), seen in cuda13-facts.md.
  std::string rounded = exact_split_shortfall(4, 9, 4, 16, 68, 8, 8, false);
  CHECK_THAT(rounded, ContainsSubstring("delivered 4 groups of 16 SMs (+ 68 SMs remaining) for 4 of 9"));
  CHECK_THAT(rounded, ContainsSubstring("rounds a group up"));
  CHECK_THAT(rounded, ContainsSubstring("minimum partition 8 SMs, co-scheduling alignment 8 SMs)"));
  CHECK_THAT(rounded, ContainsSubstring("sm_split_mode::at_least"));
  CHECK_THAT(rounded, !ContainsSubstring("no more groups"));

  std::string few = exact_split_shortfall(20, 8, 15, 8, 12, 8, 8, false);
  CHECK_THAT(few, ContainsSubstring("delivered 15 groups of 8 SMs"));
  CHECK_THAT(few, ContainsSubstring("no more groups of that size fit"));
  CHECK_THAT(few, !ContainsSubstring("rounds"));

  std::string both = exact_split_shortfall(3, 9, 1, 10, 2, 8, 8, true);
  CHECK_THAT(both, ContainsSubstring("delivered 1 group of 10 SMs"));
  CHECK_THAT(both, ContainsSubstring("finer with ignore_coscheduling"));
  CHECK_THAT(both, ContainsSubstring("no more groups"));
}

TEST_CASE("one split's groups and remainder make a partition; anything that overlaps does not",
          "[green]") {
  // Allowed: one whole set; any pieces of one split, each once.
  CHECK_FALSE(curt::detail::partition_refusal(nullptr, 0, 0).status == cudaSuccess);
  const resource_tag all[] = {whole(0, 132)};
  CHECK_FALSE(refusal_of(all));
  const resource_tag pieces[] = {group(7, 0, 16), group(7, 3, 16), remainder(7, 8, 4)};
  CHECK_FALSE(refusal_of(pieces));
  const resource_tag lone_remainder[] = {remainder(7, 8, 4)};
  CHECK_FALSE(refusal_of(lone_remainder));

  const resource_tag mixed_splits[] = {group(7, 0, 16), group(9, 1, 16)};
  auto mixed = refusal_of(mixed_splits);
  CHECK(mixed.status == cudaErrorInvalidResourceConfiguration);
  CHECK_THAT(mixed.why, ContainsSubstring("group 0 of split #7 (16 SMs) and group 1 of split #9"));
  CHECK_THAT(mixed.why, ContainsSubstring("different splits"));
  CHECK_THAT(mixed.why, ContainsSubstring("the same SMs"));

  const resource_tag remainder_of_other[] = {group(7, 0, 16), remainder(9, 8, 4)};
  CHECK_THAT(refusal_of(remainder_of_other).why, ContainsSubstring("different splits"));

  const resource_tag twice[] = {group(7, 2, 16), group(7, 2, 16)};
  auto repeated = refusal_of(twice);
  CHECK(repeated.status == cudaErrorInvalidResourceConfiguration);
  CHECK_THAT(repeated.why, ContainsSubstring("group 2 of split #7 (16 SMs) is given twice"));

  const resource_tag whole_and_group[] = {group(7, 0, 16), whole(0, 132)};
  auto with_whole = refusal_of(whole_and_group);
  CHECK(with_whole.status == cudaErrorInvalidResourceConfiguration);
  CHECK_THAT(with_whole.why, ContainsSubstring("the whole set of 132 SMs of device 0"));
  CHECK_THAT(with_whole.why, ContainsSubstring("overlaps every one"));

  const resource_tag empty_remainder[] = {remainder(7, 66, 0)};
  auto empty = refusal_of(empty_remainder);
  CHECK(empty.status == cudaErrorInvalidResourceConfiguration);
  CHECK_THAT(empty.why, ContainsSubstring("the remainder of split #7 (0 SMs) holds no SM"));

  const resource_tag other_device[] = {group(7, 0, 16, 1)};
  auto elsewhere = refusal_of(other_device);
  CHECK(elsewhere.status == cudaErrorInvalidDevice);
  CHECK_THAT(elsewhere.why, ContainsSubstring("is of device 1, not device 0"));
}

TEST_CASE("owners that hold no green context throw, saying which, before any CUDA call",
          "[green]") {
  curt::green_context empty(curt::no_handle);
  CHECK_FALSE(empty.valid());
  curt::event_ref fake_event(reinterpret_cast<cudaEvent_t>(std::uintptr_t(0x4000)));
  CHECK_THROWS_WITH(empty.get(), ContainsSubstring("curt::green_context::get()"));
  CHECK_THROWS_WITH(empty.id(), ContainsSubstring("empty"));
  CHECK_THROWS_WITH(empty.resources(), ContainsSubstring("curt::green_context::resources()"));
  CHECK_THROWS_WITH(empty.context(), ContainsSubstring("empty"));
  CHECK_THROWS_WITH(empty.device(), ContainsSubstring("empty"));
  CHECK_THROWS_WITH(empty.record(fake_event), ContainsSubstring("record(event)"));
  CHECK_THROWS_WITH(empty.wait(fake_event), ContainsSubstring("wait(event)"));
  CHECK_THROWS_WITH(empty.make_stream(), ContainsSubstring("curt::green_context::make_stream()"));
  CHECK_THROWS_WITH(empty.release(), ContainsSubstring("empty"));

  curt::green_context_ref ref_of_empty = empty;
  CHECK_THROWS_WITH(ref_of_empty.id(), ContainsSubstring("empty"));

  curt::green_context moved_to(std::move(empty));
  CHECK_THROWS_WITH(empty.id(), ContainsSubstring("moved-from"));
  CHECK_THROWS_WITH(empty.make_stream(), ContainsSubstring("moved-from"));
  CHECK_THROWS_WITH(moved_to.id(), ContainsSubstring("empty"));  // it took an empty owner
  curt::green_context assigned(curt::no_handle);
  assigned = std::move(moved_to);
  CHECK_THROWS_WITH(moved_to.get(), ContainsSubstring("moved-from"));
  CHECK(ref_of_empty != curt::green_context_ref(empty));  // states compare by value

  curt_test::require_cuda_error(
      [] { (void)curt::green_context::from_native_handle(device0(), nullptr); },
      cudaErrorInvalidResourceHandle, {"from_native_handle", "not null"});
  curt_test::require_cuda_error([] { (void)curt::green_context_ref(nullptr, device0()); },
                                cudaErrorInvalidResourceHandle, {"cannot be null"});
}

TEST_CASE("split flags combine and are the driver's values", "[green]") {
  using curt::sm_split_flags;
  constexpr sm_split_flags both =
      sm_split_flags::ignore_coscheduling | sm_split_flags::max_cluster_size;
  static_assert(curt::has_flag(both, sm_split_flags::ignore_coscheduling));
  static_assert(curt::has_flag(both, sm_split_flags::max_cluster_size));
  static_assert(!curt::has_flag(sm_split_flags::none, sm_split_flags::ignore_coscheduling));
  static_assert(static_cast<unsigned>(sm_split_flags::ignore_coscheduling) ==
                CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING);
  static_assert(static_cast<unsigned>(sm_split_flags::max_cluster_size) ==
                CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE);
  // Owners are move-only; refs copy.
  static_assert(!std::is_copy_constructible_v<curt::green_context>);
  static_assert(std::is_nothrow_move_constructible_v<curt::green_context>);
  static_assert(std::is_nothrow_move_assignable_v<curt::green_context>);
  static_assert(std::is_copy_constructible_v<curt::green_context_ref>);
  static_assert(std::is_copy_constructible_v<curt::sm_resource>);
  SUCCEED();
}

TEST_CASE("the resource type curt declares is <cuda.h>'s CUdevResource of the 12040 ABI",
          "[green]") {
  using declared = curt::detail::driver_fn::dev_resource;
  static_assert(RESOURCE_ABI_VERSION == 1, "curt calls the 12040 ABI of the resource functions");
  static_assert(sizeof(declared) == sizeof(CUdevResource));
  static_assert(alignof(declared) == alignof(CUdevResource));
  static_assert(offsetof(declared, sm_count) == offsetof(CUdevResource, sm.smCount));
  static_assert(offsetof(declared, min_partition_size) ==
                offsetof(CUdevResource, sm.minSmPartitionSize));
  static_assert(offsetof(declared, coscheduled_alignment) ==
                offsetof(CUdevResource, sm.smCoscheduledAlignment));
  static_assert(std::is_same_v<decltype(std::declval<curt::sm_resource>().native()),
                               const CUdevResource&>);
  static_assert(curt::detail::driver_fn::resource_type_sm == CU_DEV_RESOURCE_TYPE_SM);
  SUCCEED();
}
