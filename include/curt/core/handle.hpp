// curt/core/handle.hpp: what every owner shares. An owner is a non-owning ref (which holds the
// native handle) plus ownership: move-only, destroyed once, released on request. An owner that
// holds nothing (empty, moved-from, released, freed) keeps that state in the handle itself, a
// value no runtime handle takes, so a ref copied from it carries the state too and every use
// throws an error that names it; such an owner is never the default stream or device 0.
#pragma once

#include <curt/core/error.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace curt {

/// Tag for an owner made empty on purpose (a class member filled in later, a slot in a container):
/// `curt::stream s(curt::no_handle);`. Using it fails loudly until a real one is assigned.
struct no_handle_t {
  explicit constexpr no_handle_t() = default;
};
inline constexpr no_handle_t no_handle{};

namespace detail {

// Top-of-address-space values: never a runtime handle, cudaStreamLegacy (1) or PerThread (2).
enum class handle_state : std::uintptr_t {
  freed = ~std::uintptr_t(0) - 3,  // memory owners only: freed explicitly (free())
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
         static_cast<std::uintptr_t>(handle_state::freed);
}

/// Throws the error for using `owner` ("curt::stream", "curt::device_buffer<float>") that holds
/// no `what` ("handle", "memory"), naming `operation` and the owner's state.
[[noreturn]] CURT_COLD inline void throw_no_handle(const void* handle, const std::string& owner,
                                                   const char* operation,
                                                   const char* what = "handle") {
  auto state = static_cast<handle_state>(reinterpret_cast<std::uintptr_t>(handle));
  const char* word = state == handle_state::moved_from ? "moved-from"
                     : state == handle_state::released ? "released"
                     : state == handle_state::freed    ? "freed"
                                                       : "empty";
  raise(cudaErrorInvalidResourceHandle, fmt("%s::%s", owner.c_str(), operation),
        fmt("this %s is %s: it holds no %s; assign a new one first", owner.c_str(), word, what),
        __FILE__, __LINE__);
}

/// `handle` for a CUDA call by `owner`::`operation`; throws (naming both) when an owner that
/// holds none, or a ref made from one, carries a state instead. One compare on the hot path.
template <class Handle>
Handle usable_handle(Handle handle, const char* owner, const char* operation) {
  if (CURT_UNLIKELY(is_state_handle(handle))) throw_no_handle(handle, owner, operation);
  return handle;
}

struct no_state {};

/// State one owner shares with others that must keep it alive (a green context's, held by the
/// streams it made): reference counted, destroyed by the last release.
class shared_state {
 public:
  void retain() noexcept { references_.fetch_add(1); }
  void release() noexcept {
    if (references_.fetch_sub(1) == 1) destroy_(this);
  }

 protected:
  explicit shared_state(void (*destroy)(shared_state*) noexcept) noexcept : destroy_(destroy) {}
  ~shared_state() = default;

 private:
  atomic<int> references_{1};
  void (*destroy_)(shared_state*) noexcept;
};

/// The owner half of every curt owner. `Ref` holds the native handle in a protected `handle_`
/// and checks it with a protected `native(operation)`; Traits::destroy(Ref&, State&) frees a
/// handle the owner holds (what it throws, a driver lookup failing at exit, is reported). `State`
/// is what only the owner keeps (moved along, reset to State() in the source); an owner with state
/// also has Traits::release(State&), called when the handle is handed over to the caller.
template <class Ref, class Traits, class State = no_state>
class unique_handle : public Ref {
  using handle_type = decltype(std::declval<Ref&>().get());

 public:
  unique_handle(const unique_handle&) = delete;
  unique_handle& operator=(const unique_handle&) = delete;
  unique_handle(unique_handle&& other) noexcept
      : Ref(std::move(other)), state_(std::exchange(other.state_, State())) {
    other.handle_ = state_handle<handle_type>(handle_state::moved_from);
  }
  unique_handle& operator=(unique_handle&& other) noexcept {
    if (this != &other) {
      reset();
      Ref::operator=(std::move(other));
      state_ = std::exchange(other.state_, State());
      other.handle_ = state_handle<handle_type>(handle_state::moved_from);
    }
    return *this;
  }
  ~unique_handle() { reset(); }

  /// Gives up ownership: the caller destroys the returned handle. The owner is then "released".
  handle_type release() {
    handle_type handle = this->native("release()");
    if constexpr (!std::is_empty_v<State>) Traits::release(state_);
    state_ = State();
    this->handle_ = state_handle<handle_type>(handle_state::released);
    return handle;
  }

 protected:
  explicit unique_handle(Ref ref, State state = State()) noexcept
      : Ref(ref), state_(std::move(state)) {}
  explicit unique_handle(no_handle_t) noexcept  // an empty owner: every use throws
      : Ref(state_handle<handle_type>(handle_state::empty)) {}
  /// Frees what the owner holds (nothing for an owner without a handle); it is empty after.
  void reset() noexcept {
    if (!is_state_handle(this->handle_)) {
      try {
        Traits::destroy(static_cast<Ref&>(*this), state_);
      } catch (const std::exception& error) {
        report(error);
      }
    }
    state_ = State();
    this->handle_ = state_handle<handle_type>(handle_state::empty);
  }
  State state_;
};

}  // namespace detail
}  // namespace curt
