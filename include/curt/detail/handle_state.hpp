// curt/detail/handle_state.hpp: the states of an owner that holds no handle (empty, moved-from,
// released), kept in the handle itself so that a ref copied from such an owner carries it too.
#pragma once

#include <curt/error.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace curt {

/// Tag for an owner that is made empty on purpose (a class member filled in later, a slot in a
/// container): `curt::stream s(curt::no_handle);`. Using it fails loudly until a real one is
/// assigned.
struct no_handle_t {
  explicit constexpr no_handle_t() = default;
};
inline constexpr no_handle_t no_handle{};

namespace detail {

// Values at the very top of the address space, which no runtime handle takes (and distinct
// from cudaStreamLegacy = 1 and cudaStreamPerThread = 2).
enum class handle_state : std::uintptr_t {
  discarded = ~std::uintptr_t(0) - 4,  // graph owners only: CUDA destroyed the graph (see
                                       // detail/graph_discards.hpp)
  freed = ~std::uintptr_t(0) - 3,      // memory owners only: freed explicitly (free())
  empty = ~std::uintptr_t(0) - 2,
  released = ~std::uintptr_t(0) - 1,
  moved_from = ~std::uintptr_t(0),
};

template <class Handle>
Handle state_handle(handle_state state) noexcept {
  return reinterpret_cast<Handle>(static_cast<std::uintptr_t>(state));
}

inline bool is_state_handle(const void* handle) noexcept {
  return reinterpret_cast<std::uintptr_t>(handle) >=
         static_cast<std::uintptr_t>(handle_state::discarded);
}

/// A stream handle with 0 replaced by the default stream it means in the calling translation unit
/// (PerThreadDefault comes from CURT_DETAIL_PER_THREAD_DEFAULT_STREAM there), so that no inline
/// function of curt ever hands 0 to the runtime, whose meaning of 0 differs between translation
/// units.
template <bool PerThreadDefault>
cudaStream_t explicit_stream(cudaStream_t stream) noexcept {
  if (stream != nullptr) return stream;
  return PerThreadDefault ? cudaStreamPerThread : cudaStreamLegacy;
}

/// Throws the error for using an owner (or a ref made from one) that holds no handle.
[[noreturn]] CURT_COLD inline void throw_no_handle(const void* handle, const char* type,
                                                   const char* operation, const char* file,
                                                   int line) {
  auto state = static_cast<handle_state>(reinterpret_cast<std::uintptr_t>(handle));
  if (state == handle_state::discarded)
    raise(cudaErrorInvalidResourceHandle, std::string(type) + "::" + operation,
          "CUDA destroyed this graph, with every node it held, when a capture into it "
          "(curt::capture_to_graph) was invalidated or left unjoined; assign a new graph first",
          file, line);
  const char* what = state == handle_state::moved_from ? "moved-from"
                     : state == handle_state::released ? "released"
                                                       : "empty";
  raise(cudaErrorInvalidResourceHandle, std::string(type) + "::" + operation,
        std::string("this ") + type + " is " + what + ": it holds no handle (it is never the " +
            "default one); assign a new one first",
        file, line);
}

/// `handle` for a CUDA call by `type`::`operation`; throws (naming both) when an owner that holds
/// none, or a ref made from one, carries a state instead. One compare on the hot path.
template <class Handle>
Handle usable_handle(Handle handle, const char* type, const char* operation) {
  if (CURT_UNLIKELY(is_state_handle(handle)))
    throw_no_handle(handle, type, operation, __FILE__, __LINE__);
  return handle;
}

}  // namespace detail
}  // namespace curt
