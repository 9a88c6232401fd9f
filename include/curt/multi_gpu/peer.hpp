// curt/multi_gpu/peer.hpp: peer access between devices (a kernel on one device reading and writing
// another device's memory), its RAII scope, and what the link between two devices supports.
//
//   if (curt::can_access_peer(gpu0, gpu1)) {
//     curt::peer_access_scope access(gpu0, gpu1);   // kernels on gpu0 may address gpu1's memory
//     curt::launch(stream0, config, kernel, buffer_on_gpu1.data());
//   }                                               // disabled again, if a scope enabled it
//
// Peer access belongs to a context: curt enables it in d's context (a current context of d, else
// d's primary: device_guard), leaves the thread's context as it was, and keeps both primary
// contexts for the process so the access outlives the call. Copies between devices need none
// (curt::copy goes via the host without a link); pools ignore it (memory_pool_ref::set_access).
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>

#include <cuda_runtime_api.h>

#include <mutex>
#include <string>

namespace curt {
namespace detail {

inline std::string peer_call(const char* function, int ordinal, int peer) {
  return fmt("%s(device %d, peer %d)", function, ordinal, peer);
}

inline void require_two_devices(const char* function, device d, device peer) {
  if (CURT_LIKELY(d != peer)) return;
  raise(cudaErrorInvalidDevice, peer_call(function, d.ordinal(), d.ordinal()),
        "a device and its peer must be two different devices: a device always addresses its "
        "own memory",
        __FILE__, __LINE__);
}

// Why enabling failed, in curt's words, for the codes where it can say more than CUDA.
CURT_COLD inline std::string explain_peer_failure(cudaError_t status, int ordinal, int peer) {
  if (status == cudaErrorPeerAccessUnsupported || status == cudaErrorInvalidDevice) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, ordinal, peer) == cudaSuccess && can == 0)
      return fmt("device %d cannot address device %d's memory (cudaDeviceCanAccessPeer: 0; no "
                 "NVLink or PCIe peer-to-peer path between them); copies between them still work "
                 "with curt::copy, through the host", ordinal, peer);
    (void)cudaGetLastError();
  }
  if (status == cudaErrorTooManyPeers)
    return fmt("device %d has peer access enabled to as many devices as its hardware allows; "
               "disable one first", ordinal);
  return {};
}

// cudaDevice{Enable,Disable}PeerAccess (per `on`) in d's context: false if so already (no error).
inline bool set_peer_access(device d, device peer, bool on) {
  const cudaError_t status = [&] {
    device_guard guard(d);
    return on ? cudaDeviceEnablePeerAccess(peer.ordinal(), 0)
              : cudaDeviceDisablePeerAccess(peer.ordinal());
  }();
  if (status == cudaSuccess) return true;
  if (status == (on ? cudaErrorPeerAccessAlreadyEnabled : cudaErrorPeerAccessNotEnabled)) {
    (void)cudaGetLastError();  // not sticky: leave no error behind for the next check
    return false;
  }
  throw_error(make_error_code(status),
              peer_call(on ? "cudaDeviceEnablePeerAccess" : "cudaDeviceDisablePeerAccess",
                        d.ordinal(), peer.ordinal()),
              __FILE__, __LINE__,
              [&] { return on ? explain_peer_failure(status, d.ordinal(), peer.ordinal()) : ""; });
}

// The peer_access_scopes alive per (context, peer), and whether one of them enabled the access:
// the room's one process-wide table. Enabling and disabling happen under `mutex`.
class peer_scope_counts {
 public:
  std::mutex mutex;
  // A scope starts; `enabled`: its enable call turned the access on.
  void start(CUcontext context, int peer, bool enabled) {
    entry* e = find(context, peer);
    if (!e) e = &table_.push_back(entry{context, peer, 0, false});
    ++e->scopes;
    e->enabled = e->enabled || enabled;
  }
  // A scope ends: true when it was the last one and a scope enabled the access (disable it now).
  bool end(CUcontext context, int peer) noexcept {
    entry* e = find(context, peer);
    if (e == nullptr || --e->scopes > 0) return false;
    const bool enabled = e->enabled;
    table_.remove(e);
    return enabled;
  }
  std::size_t size() const noexcept { return table_.size(); }

 private:
  struct entry {
    CUcontext context = nullptr;
    int peer = -1;
    int scopes = 0;
    bool enabled = false;
  };
  entry* find(CUcontext context, int peer) noexcept {
    for (entry& e : table_)
      if (e.context == context && e.peer == peer) return &e;
    return nullptr;
  }
  entries<entry> table_;
};

inline peer_scope_counts& peer_scopes() {
  static peer_scope_counts* const counts = new peer_scope_counts;  // scopes may end at exit
  return *counts;
}

}  // namespace detail

/// Whether kernels on device `d` can address memory of device `peer` once peer access is
/// enabled (cudaDeviceCanAccessPeer). False for d == peer, which needs no peer access.
inline bool can_access_peer(device d, device peer) {
  if (d == peer) return false;
  int can = 0;
  detail::check(cudaDeviceCanAccessPeer(&can, d.ordinal(), peer.ordinal()),
                "cudaDeviceCanAccessPeer", {{"device", d.ordinal()}, {"peer", peer.ordinal()}},
                __FILE__, __LINE__);
  return can != 0;
}

/// Enables access from device `d`'s context to all of `peer`'s memory (cudaDeviceEnablePeerAccess
/// in d's context; the thread's current context is left as it was). Returns true when this call
/// enabled it, false when it was enabled already (not an error). Throws cuda_error for d == peer
/// and, saying why, where the two devices have no peer path (cudaErrorPeerAccessUnsupported).
inline bool enable_peer_access(device d, device peer) {
  detail::require_two_devices("curt::enable_peer_access", d, peer);
  (void)detail::primary_context(peer.ordinal());  // kept: the access must outlive this call
  return detail::set_peer_access(d, peer, true);
}

/// Disables access from device `d`'s context to `peer`'s memory (cudaDeviceDisablePeerAccess in d's
/// context), whatever scopes are alive. Returns true when it was enabled, false when it was not
/// (not an error). Where d has no context yet, nothing can have been enabled: false, none is made.
inline bool disable_peer_access(device d, device peer) {
  detail::require_two_devices("curt::disable_peer_access", d, peer);
  const int o = d.ordinal();  // does device_guard(d) find a context that exists, or make one?
  return (detail::device_context_current(o) || detail::primary_context_active(o)) &&
         detail::set_peer_access(d, peer, false);
}

/// Peer access from `d` to `peer` for a scope, in d's context (as enable_peer_access finds it).
/// Scopes of one context and peer share it (any thread, any order): it stays on until the last
/// ends, which disables it only if a scope enabled it (access enabled outside the scopes stays).
/// Work using it must finish before then. A green context shares its primary context's access (on
/// the H200 a scope ended in either turned it off in both): scopes in one count with the primary's.
class peer_access_scope {
 public:
  /// Turns the access on unless it is on already (enable_peer_access, whose errors it throws).
  peer_access_scope(curt::device d, curt::device peer) : device_(d), peer_(peer) {
    detail::require_two_devices("curt::peer_access_scope", d, peer);
    device_guard guard(d);  // the context enable_peer_access enables in
    context_ = detail::current_context();
    detail::context_scope in_primary;  // for a green context: its device's primary context
    if (CURT_UNLIKELY(detail::green_context_current()))
      in_primary.push(context_ = detail::primary_context(d.ordinal()));
    detail::peer_scope_counts& counts = detail::peer_scopes();
    std::lock_guard<std::mutex> lock(counts.mutex);
    enabled_ = enable_peer_access(d, peer);  // where it throws, nothing is counted
    counts.start(context_, peer.ordinal(), enabled_);
  }
  ~peer_access_scope() {
    try {
      detail::peer_scope_counts& counts = detail::peer_scopes();
      std::lock_guard<std::mutex> lock(counts.mutex);
      if (!counts.end(context_, peer_.ordinal())) return;
      detail::context_scope in(context_);
      (void)disable_peer_access(device_, peer_);
    } catch (const std::exception& error) {
      detail::report(error);
    }
  }
  peer_access_scope(const peer_access_scope&) = delete;
  peer_access_scope& operator=(const peer_access_scope&) = delete;

  /// True when creating this scope enabled the access (false: it was on already). The access is
  /// disabled when the last scope over the same context and peer ends, not necessarily this one.
  bool enabled_here() const noexcept { return enabled_; }
  curt::device device() const noexcept { return device_; }  ///< `d`, whose kernels get the access
  curt::device peer() const noexcept { return peer_; }  ///< the device whose memory `d` may address

 private:
  curt::device device_;
  curt::device peer_;
  CUcontext context_ = nullptr;
  bool enabled_ = false;
};

/// One attribute of the link from device `from` to device `to` (cudaDeviceGetP2PAttribute).
inline int peer_attribute(device from, device to, cudaDeviceP2PAttr attribute) {
  detail::require_two_devices("curt::peer_attribute", from, to);
  int value = 0;
  detail::check(cudaDeviceGetP2PAttribute(&value, attribute, from.ordinal(), to.ordinal()),
                "cudaDeviceGetP2PAttribute",
                {{"attribute", attribute}, {"device", from.ordinal()}, {"peer", to.ordinal()}},
                __FILE__, __LINE__);
  return value;
}

/// What the link from `from` to `to` supports (cudaDeviceGetP2PAttribute, each attribute).
struct peer_link {
  int performance_rank = 0;             ///< lower is better; 0 for the best link present
  bool access_supported = false;        ///< peer access is possible (can_access_peer)
  bool native_atomics = false;          ///< every native atomic works over the link
  bool partial_native_atomics = false;  ///< some do (13.0): see peer_atomic_capabilities
  bool array_access = false;            ///< kernels may read CUDA arrays over the link
};

inline peer_link peer_attributes(device from, device to) {
  peer_link link;
  link.performance_rank = peer_attribute(from, to, cudaDevP2PAttrPerformanceRank);
  link.access_supported = peer_attribute(from, to, cudaDevP2PAttrAccessSupported) != 0;
  link.native_atomics = peer_attribute(from, to, cudaDevP2PAttrNativeAtomicSupported) != 0;
  link.array_access = peer_attribute(from, to, cudaDevP2PAttrCudaArrayAccessSupported) != 0;
  link.partial_native_atomics =
      peer_attribute(from, to, cudaDevP2PAttrOnlyPartialNativeAtomicSupported) != 0;
  return link;
}

/// Which forms of atomic `operation` the link from `from` to `to` performs natively: a mask of
/// cudaAtomicOperationCapability bits (cudaAtomicCapabilitySigned, ...Scalar32, ...), 0 for
/// none (cudaDeviceGetP2PAtomicCapabilities, CUDA 13.0). Read it with peer_link: driver 580 on an
/// NVLink H200 pair reports full native atomics there and a mask of 0 for every operation here.
inline unsigned peer_atomic_capabilities(device from, device to, cudaAtomicOperation operation) {
  detail::require_two_devices("curt::peer_atomic_capabilities", from, to);
  unsigned capabilities = 0;
  const int a = from.ordinal(), b = to.ordinal();
  detail::check(cudaDeviceGetP2PAtomicCapabilities(&capabilities, &operation, 1, a, b),
                "cudaDeviceGetP2PAtomicCapabilities",
                {{"operation", operation}, {"device", a}, {"peer", b}}, __FILE__, __LINE__);
  return capabilities;
}

}  // namespace curt
