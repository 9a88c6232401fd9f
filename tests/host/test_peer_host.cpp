// Peer access without a GPU: the count through which overlapping peer_access_scopes share the
// access (include/curt/multi_gpu/peer.hpp, detail::peer_scope_counts), and the refusals curt makes
// before calling CUDA. Context handles here are made up: none of these paths may reach CUDA.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/peer.hpp>

#include <cstdint>

namespace {

curt::device device0() { return curt::device::from_ordinal_unchecked(0); }
// A made-up context handle: the counts key on the handle.
CUcontext context(std::uintptr_t value) { return reinterpret_cast<CUcontext>(value); }

}  // namespace

TEST_CASE("the last scope disables, and only what a scope enabled", "[peer]") {
  curt::detail::peer_scope_counts counts;
  // Overlapping, ended in creation order: the first enabled, the second found it on.
  counts.start(context(7), 1, true);
  counts.start(context(7), 1, false);
  CHECK_FALSE(counts.end(context(7), 1));  // the second is alive: the access stays
  CHECK(counts.end(context(7), 1));        // the last: disable what the first enabled
  CHECK(counts.size() == 0);

  // Enabled outside the scopes: the last one to end leaves it on.
  counts.start(context(7), 1, false);
  counts.start(context(7), 1, false);
  CHECK_FALSE(counts.end(context(7), 1));
  CHECK_FALSE(counts.end(context(7), 1));
  CHECK(counts.size() == 0);

  // Turned off behind the scopes' back and enabled again by a later one: curt owns it now.
  counts.start(context(7), 1, false);
  counts.start(context(7), 1, true);
  CHECK_FALSE(counts.end(context(7), 1));
  CHECK(counts.end(context(7), 1));
}

TEST_CASE("scopes of other contexts or peers are counted apart", "[peer]") {
  curt::detail::peer_scope_counts counts;
  counts.start(context(7), 1, true);   // context 7 -> peer 1
  counts.start(context(7), 2, false);  // context 7 -> peer 2, enabled outside
  counts.start(context(9), 1, true);   // context 9 (another context of device 0) -> peer 1
  CHECK(counts.size() == 3);
  CHECK(counts.end(context(7), 1));        // context 7's last scope: its own access only
  CHECK_FALSE(counts.end(context(7), 2));
  counts.start(context(9), 1, false);
  CHECK_FALSE(counts.end(context(9), 1));  // context 9 keeps its count
  CHECK(counts.end(context(9), 1));
  CHECK(counts.size() == 0);
  CHECK_FALSE(counts.end(context(9), 1));  // nothing counted: nothing to disable
}

TEST_CASE("a scope, enable and disable refuse a device as its own peer before CUDA", "[peer]") {
  curt_test::require_cuda_error([] { curt::peer_access_scope scope(device0(), device0()); },
                                cudaErrorInvalidDevice,
                                {"curt::peer_access_scope(device 0, peer 0)",
                                 "must be two different devices"});
  curt_test::require_cuda_error([] { (void)curt::enable_peer_access(device0(), device0()); },
                                cudaErrorInvalidDevice, {"curt::enable_peer_access(device 0"});
  curt_test::require_cuda_error([] { (void)curt::disable_peer_access(device0(), device0()); },
                                cudaErrorInvalidDevice, {"curt::disable_peer_access(device 0"});
  CHECK(curt::detail::peer_scopes().size() == 0);
}
