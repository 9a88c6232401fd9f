// curt/peer.hpp: peer access between devices (a kernel on one device reading and writing another
// device's memory), its RAII scope, and what the link between two devices supports.
//
//   if (curt::can_access_peer(gpu0, gpu1)) {
//     curt::peer_access_scope access(gpu0, gpu1);   // kernels on gpu0 may address gpu1's memory
//     curt::launch(stream0, config, kernel, buffer_on_gpu1.data());
//   }                                               // disabled again, if a scope enabled it
//
// - Peer access is a property of a context: enable_peer_access(d, peer) enables it in d's context
//   (a context of d that is current already, else d's primary context, through device_guard) and
//   leaves the calling thread's current context exactly as it was. Both primary contexts are
//   initialized through the runtime first, so that they (and the access) outlive the call.
// - Enabling twice is not an error: enable_peer_access returns false when access was enabled
//   already; disable_peer_access returns false when it was not enabled.
// - Scopes over the same context and peer share the access, however their lifetimes overlap
//   (nested, on other threads, ended in creation order): a process-wide count keeps it on until
//   the last ends, which disables it only where a scope enabled it (access enabled outside the
//   scopes stays). disable_peer_access turns it off whatever scopes are alive.
// - Copies between devices need no peer access: curt::copy uses cudaMemcpyDefault (unified
//   addressing), which copies over the link where there is one and through the host otherwise.
// - Memory pools ignore peer access: give another device access to a pool's memory with
//   memory_pool_ref::set_access(device, pool_access::read_write) (<curt/memory_pool.hpp>).
#pragma once

#include <curt/detail/entries.hpp>
#include <curt/detail/green_lifetime.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <mutex>
#include <optional>
#include <string>

namespace curt {

namespace detail {

// Whether device_guard(device `ordinal`) would find a context that exists already (a current
// context of the device, or its active primary context) rather than create one.
inline bool context_of_device_exists(int ordinal) {
  CUdevice device = 0;
  CURT_DETAIL_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  if (current_context() != nullptr) {
    CUdevice current = -1;
    if (CURT_DETAIL_DRIVER_FUNCTION(cuCtxGetDevice, 2000)(&current) == 0 && current == device)
      return true;
  }
  return primary_context_active(device);
}

inline std::string peer_call(const char* function, int ordinal, int peer) {
  return std::string(function) + "(device " + std::to_string(ordinal) + ", peer " +
         std::to_string(peer) + ")";
}

[[noreturn]] CURT_COLD inline void throw_same_device_peer(const char* function, int ordinal) {
  raise(cudaErrorInvalidDevice, peer_call(function, ordinal, ordinal),
        "a device and its peer must be two different devices: a device always addresses its "
        "own memory",
        __FILE__, __LINE__);
}

// Why enabling failed, in curt's words, for the codes where it can say more than CUDA.
CURT_COLD inline std::string explain_peer_failure(cudaError_t status, int ordinal, int peer) {
  if (status == cudaErrorPeerAccessUnsupported || status == cudaErrorInvalidDevice) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, ordinal, peer) == cudaSuccess && can == 0)
      return "device " + std::to_string(ordinal) + " cannot address device " +
             std::to_string(peer) +
             "'s memory (cudaDeviceCanAccessPeer: 0; no NVLink or PCIe peer-to-peer path "
             "between them); copies between them still work with curt::copy, through the host";
    (void)cudaGetLastError();
  }
  if (status == cudaErrorTooManyPeers)
    return "device " + std::to_string(ordinal) +
           " has peer access enabled to as many devices as its hardware allows; disable one first";
  return {};
}

// The peer_access_scopes alive per (context, peer), keyed by the context's process-unique id
// (cuCtxGetId: a reset context's count never carries over to its successor), and whether one of
// them enabled the access. Enabling and disabling happen under `mutex`.
class peer_scope_counts {
 public:
  std::mutex mutex;
  // A scope starts; `enabled`: its enable call turned the access on.
  void start(unsigned long long context_id, int peer, bool enabled) {
    if (entry* e = find(context_id, peer)) {
      ++e->scopes;
      e->enabled = e->enabled || enabled;
    } else {
      table_.push_back(entry{context_id, peer, 1, enabled});
    }
  }
  // A scope ends: true when it was the last one and a scope enabled the access (disable it now).
  bool end(unsigned long long context_id, int peer) noexcept {
    entry* e = find(context_id, peer);
    if (e == nullptr || --e->scopes > 0) return false;
    const bool enabled = e->enabled;
    table_.remove(e);
    return enabled;
  }
  std::size_t size() const noexcept { return table_.size(); }

 private:
  struct entry {
    unsigned long long context_id = 0;
    int peer = -1;
    int scopes = 0;
    bool enabled = false;
  };
  entry* find(unsigned long long context_id, int peer) noexcept {
    for (entry& e : table_)
      if (e.context_id == context_id && e.peer == peer) return &e;
    return nullptr;
  }
  entries<entry> table_;
};

inline peer_scope_counts& peer_scopes() {
  static peer_scope_counts* const counts = new peer_scope_counts;  // never destroyed: scopes
  return *counts;                                                  // may end during exit
}

}  // namespace detail

/// Whether kernels on device `d` can address memory of device `peer` once peer access is
/// enabled (cudaDeviceCanAccessPeer). False for d == peer, which needs no peer access.
inline bool can_access_peer(device d, device peer) {
  if (d == peer) return false;
  int can = 0;
  detail::check_call(cudaDeviceCanAccessPeer(&can, d.ordinal(), peer.ordinal()),
                     "cudaDeviceCanAccessPeer", {{"device", d.ordinal()}, {"peer", peer.ordinal()}},
                     __FILE__, __LINE__);
  return can != 0;
}

/// Enables access from device `d`'s context to all of `peer`'s memory (cudaDeviceEnablePeerAccess
/// in d's context; the thread's current context is left as it was). Returns true when this call
/// enabled it, false when it was enabled already (not an error). Throws cuda_error for d == peer
/// and, saying why, where the two devices have no peer path (cudaErrorPeerAccessUnsupported).
inline bool enable_peer_access(device d, device peer) {
  if (CURT_UNLIKELY(d == peer))
    detail::throw_same_device_peer("curt::enable_peer_access", d.ordinal());
  (void)detail::keep_primary_context(d.ordinal());  // the access must outlive curt's reference
  (void)detail::keep_primary_context(peer.ordinal());
  cudaError_t status = cudaSuccess;
  {
    device_guard guard(d);
    status = cudaDeviceEnablePeerAccess(peer.ordinal(), 0);
  }
  if (status == cudaSuccess) return true;
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // not sticky: leave no error behind for the next check
    return false;
  }
  std::string explanation = detail::explain_peer_failure(status, d.ordinal(), peer.ordinal());
  detail::throw_error(make_error_code(status),
                      detail::peer_call("cudaDeviceEnablePeerAccess", d.ordinal(), peer.ordinal()),
                      detail::location(__FILE__, __LINE__), std::move(explanation));
}

/// Disables access from device `d`'s context to `peer`'s memory (cudaDeviceDisablePeerAccess in
/// d's context). Returns true when it was enabled, false when it was not (not an error). Where d
/// has no context yet, nothing can have been enabled: false, and no context is made.
inline bool disable_peer_access(device d, device peer) {
  if (CURT_UNLIKELY(d == peer))
    detail::throw_same_device_peer("curt::disable_peer_access", d.ordinal());
  if (!detail::context_of_device_exists(d.ordinal())) return false;  // nothing was enabled
  cudaError_t status = cudaSuccess;
  {
    device_guard guard(d);
    status = cudaDeviceDisablePeerAccess(peer.ordinal());
  }
  if (status == cudaSuccess) return true;
  if (status == cudaErrorPeerAccessNotEnabled) {
    (void)cudaGetLastError();
    return false;
  }
  detail::throw_error(make_error_code(status),
                      detail::peer_call("cudaDeviceDisablePeerAccess", d.ordinal(), peer.ordinal()),
                      detail::location(__FILE__, __LINE__));
}

/// Peer access from `d` to `peer` for a scope, in d's context (as enable_peer_access finds it):
/// enabled at the start where it is not on. Scopes over the same context and peer share it: it
/// stays on until the last of them ends, on any thread and in any order, which disables it only
/// if one of them enabled it (access enabled outside the scopes stays). Work that uses the access
/// must be finished (synchronized) before the last scope ends. A scope made while one of curt's
/// green contexts of d is current counts with d's primary context, whose access the green
/// context shares. After a reset of d's context
/// (cudaDeviceReset) a new scope enables the access anew, and scopes of the old context disable
/// nothing.
class peer_access_scope {
 public:
  peer_access_scope(curt::device d, curt::device peer) : device_(d), peer_(peer) {
    if (CURT_UNLIKELY(d == peer))
      detail::throw_same_device_peer("curt::peer_access_scope", d.ordinal());
    const CUdevice device = detail::keep_primary_context(d.ordinal());  // before the guard
    device_guard guard(d);  // the context enable_peer_access enables in
    context_ = detail::current_context();
    // A green context shares its device's primary context's peer access (on the H200, a scope
    // ended in either turned it off in both): such scopes count, and enable, in the primary one.
    detail::retained_primary_context primary;
    std::optional<detail::context_scope> in_primary;
    if (CURT_UNLIKELY(detail::is_curts_green_context(context_))) {
      context_ = primary.retain(device);
      in_primary.emplace(context_);
    }
    CURT_DETAIL_DRIVER_CALL(cuCtxGetId, 12000, context_, &context_id_);
    detail::peer_scope_counts& counts = detail::peer_scopes();
    std::lock_guard<std::mutex> lock(counts.mutex);
    enabled_ = enable_peer_access(d, peer);  // where it throws, nothing is counted
    counts.start(context_id_, peer.ordinal(), enabled_);
  }
  ~peer_access_scope() {
    try {
      detail::peer_scope_counts& counts = detail::peer_scopes();
      std::lock_guard<std::mutex> lock(counts.mutex);
      if (!counts.end(context_id_, peer_.ordinal())) return;
      if (!detail::context_has_id(context_, context_id_))
        return;  // a reset context took the access with it
      detail::context_scope in(context_);
      (void)disable_peer_access(device_, peer_);
    } catch (const std::exception& error) {
      detail::report_caught(error);
    }
  }
  peer_access_scope(const peer_access_scope&) = delete;
  peer_access_scope& operator=(const peer_access_scope&) = delete;

  /// True when creating this scope enabled the access (false: it was on already). The access is
  /// disabled when the last scope over the same context and peer ends, not necessarily this one.
  bool enabled_here() const noexcept { return enabled_; }
  curt::device device() const noexcept { return device_; }
  curt::device peer() const noexcept { return peer_; }

 private:
  curt::device device_;
  curt::device peer_;
  CUcontext context_ = nullptr;
  unsigned long long context_id_ = 0;
  bool enabled_ = false;
};

/// One attribute of the link from device `from` to device `to` (cudaDeviceGetP2PAttribute).
inline int peer_attribute(device from, device to, cudaDeviceP2PAttr attribute) {
  if (CURT_UNLIKELY(from == to))
    detail::throw_same_device_peer("curt::peer_attribute", from.ordinal());
  int value = 0;
  detail::check_call(cudaDeviceGetP2PAttribute(&value, attribute, from.ordinal(), to.ordinal()),
                     "cudaDeviceGetP2PAttribute",
                     {{"attribute", attribute}, {"device", from.ordinal()}, {"peer", to.ordinal()}},
                     __FILE__, __LINE__);
  return value;
}

/// What the link from `from` to `to` supports (cudaDeviceGetP2PAttribute, each attribute).
struct peer_link {
  /// Relative performance of the link (lower is better; 0 for the best kind of link present).
  int performance_rank = 0;
  /// Peer access is possible (what can_access_peer says).
  bool access_supported = false;
  /// Every native atomic operation works over the link.
  bool native_atomics = false;
  /// Some, not all, atomics are native (13.0): see peer_atomic_capabilities for which.
  bool partial_native_atomics = false;
  /// Kernels may read CUDA arrays over the link.
  bool array_access = false;
};

inline peer_link peer_attributes(device from, device to) {
  peer_link link;
  link.performance_rank = peer_attribute(from, to, cudaDevP2PAttrPerformanceRank);
  link.access_supported = peer_attribute(from, to, cudaDevP2PAttrAccessSupported) != 0;
  link.native_atomics = peer_attribute(from, to, cudaDevP2PAttrNativeAtomicSupported) != 0;
  link.array_access = peer_attribute(from, to, cudaDevP2PAttrCudaArrayAccessSupported) != 0;
#if CUDART_VERSION >= 13000
  link.partial_native_atomics =
      peer_attribute(from, to, cudaDevP2PAttrOnlyPartialNativeAtomicSupported) != 0;
#endif
  return link;
}

#if CUDART_VERSION >= 13000
/// Which forms of atomic `operation` the link from `from` to `to` performs natively: a mask of
/// cudaAtomicOperationCapability bits (cudaAtomicCapabilitySigned, ...Scalar32, ...), 0 for
/// none (cudaDeviceGetP2PAtomicCapabilities, CUDA 13.0). Read it with peer_link: driver 580 on an
/// NVLink H200 pair reports full native atomics there and a mask of 0 for every operation here.
inline unsigned peer_atomic_capabilities(device from, device to, cudaAtomicOperation operation) {
  if (CURT_UNLIKELY(from == to))
    detail::throw_same_device_peer("curt::peer_atomic_capabilities", from.ordinal());
  unsigned capabilities = 0;
  detail::check_call(
      cudaDeviceGetP2PAtomicCapabilities(&capabilities, &operation, 1, from.ordinal(), to.ordinal()),
      "cudaDeviceGetP2PAtomicCapabilities",
      {{"operation", operation}, {"device", from.ordinal()}, {"peer", to.ordinal()}}, __FILE__,
      __LINE__);
  return capabilities;
}
#endif

}  // namespace curt
