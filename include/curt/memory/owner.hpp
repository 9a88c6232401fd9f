// curt/memory/owner.hpp: what every owner of memory shares (device, pinned, managed and
// stream-ordered buffers): the pointer, the element count, where the memory is freed, views of
// the elements, and the empty / moved-from / released / freed states (core/handle.hpp).
//
// Views: an owner converts implicitly to any span-like view of its elements (memory/range.hpp), so
// a kernel taking cuda::std::span<float> by value takes a device_buffer<float> through curt::launch
// or <<<>>>. A const owner gives views of const elements; a temporary gives none (it would dangle).
#pragma once

#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>
#include <curt/memory/range.hpp>

#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>

namespace curt::detail {

template <class T>  // T's name in messages: "float" for fundamental types, else the compiler's
CURT_COLD std::string type_name() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return "float";
  else if constexpr (std::is_same_v<U, double>) return "double";
  else if constexpr (std::is_same_v<U, int>) return "int";
  else if constexpr (std::is_same_v<U, unsigned>) return "unsigned int";
  else if constexpr (std::is_same_v<U, char>) return "char";
  else if constexpr (std::is_same_v<U, unsigned char>) return "unsigned char";
  else if constexpr (std::is_same_v<U, long long>) return "long long";
  else if constexpr (std::is_same_v<U, unsigned long long>) return "unsigned long long";
#if defined(__GNUC__) || defined(__clang__)
  std::string text = __PRETTY_FUNCTION__;  // "... type_name() [with T = foo; ...]" or "[T = foo]"
  std::size_t start = text.find("T = ");
  if (start != std::string::npos) {
    start += 4;
    std::size_t end = text.find_first_of(";]", start);
    if (end != std::string::npos) return text.substr(start, end - start);
  }
#endif
  return fmt("%zu-byte type", sizeof(T));
}

template <class T>  // "curt::device_buffer<float>"
CURT_COLD std::string owner_name(const char* kind) {
  return fmt("curt::%s<%s>", kind, type_name<T>().c_str());
}

/// count * sizeof(T) in bytes; throws (naming the owner and the numbers) when it overflows.
template <class T>
std::size_t checked_bytes(std::size_t count, const char* kind, const char* what) {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max() / sizeof(T);
  if (CURT_UNLIKELY(count > most))
    raise(cudaErrorInvalidValue, fmt("%s(%s)", owner_name<T>(kind).c_str(), what),
          fmt("%zu elements of %zu bytes overflow std::size_t (at most %zu)", count, sizeof(T),
              most), __FILE__, __LINE__);
  return count * sizeof(T);
}

// Is S constructible from an lvalue contiguous range of Element (S has a range constructor,
// as cuda::std::span and std::span do)? Then S takes an owner with begin()/end() by that
// constructor, and the owner's own conversion must stand aside or the two are ambiguous.
template <class Element>
struct probe_range {
  Element* begin() const noexcept;
  Element* end() const noexcept;
  Element* data() const noexcept;
  std::size_t size() const noexcept;
};
template <class S, class Element, bool Iterable>
using owner_view_of = std::enable_if_t<
    is_span_like_of<S, Element>::value &&
        !(Iterable && std::is_constructible_v<S, probe_range<Element>&>),
    int>;

template <class Kind>
struct memory_traits;

// What only an owner of Kind keeps besides its place (Kind::owner_state; none by default): it
// takes the owner's State byte, which the layout pads anyway.
template <class Kind, class = void>
struct owner_state_of {
  using type = no_state;
};
template <class Kind>
struct owner_state_of<Kind, std::void_t<typename Kind::owner_state>> {
  using type = typename Kind::owner_state;
};

/// The non-owning half of a memory owner: the pointer (or a state), the count, and
/// Kind::place, where the memory is freed. Kind supplies name (for messages), host_iterable
/// (begin/end and operator[]), place and free(pointer, place), which may throw.
template <class T, class Kind>
class memory_span {
  static_assert(std::is_trivially_copyable_v<T> && !std::is_const_v<T> && !std::is_volatile_v<T>,
                "curt buffers hold trivially copyable, non-const element types: CUDA copies "
                "them as bytes and constructs nothing");

 public:
  using element_type = T;
  using value_type = T;
  using size_type = std::size_t;
  using pointer = T*;
  using const_pointer = const T*;
  using place_type = typename Kind::place;
  using kernel_view = element_view<T>;  ///< What a functor launched with this owner receives.

  /// The elements; throws when the owner holds no memory. Null for a buffer of 0 elements.
  T* data() { return native("data()"); }
  const T* data() const { return native("data()"); }
  T* get() { return native("get()"); }
  const T* get() const { return native("get()"); }
  /// 0 for an owner that holds no memory.
  std::size_t size() const noexcept { return is_state_handle(handle_) ? 0 : count_; }
  std::size_t size_bytes() const noexcept { return size() * sizeof(T); }
  /// size() == 0: true for a buffer of 0 elements and for an owner that holds nothing.
  bool empty() const noexcept { return size() == 0; }
  /// Holds memory (a buffer of 0 elements too); false when empty, moved-from, released or freed.
  bool valid() const noexcept { return !is_state_handle(handle_); }

  memory_span(T* memory, std::size_t count, place_type place) noexcept
      : handle_(memory), count_(count), place_(place) {}

 protected:
  T* native(const char* operation) const {
    if (CURT_UNLIKELY(is_state_handle(handle_)))
      throw_no_handle(handle_, owner_name<T>(Kind::name), operation, "memory");
    return handle_;
  }
  friend Kind;
  friend struct memory_traits<Kind>;

  T* handle_;
  std::size_t count_;
  place_type place_;
};

template <class Kind>
struct memory_traits {
  template <class Span, class State>
  static void destroy(Span& memory, State&) {
    if (memory.handle_ != nullptr) Kind::free(memory.handle_, memory.place_);
  }
  template <class State>
  static void release(State&) noexcept {}
};

/// An owner of memory: move-only, frees with Kind::free at the end, views of its elements.
template <class T, class Kind>
class memory_owner : public unique_handle<memory_span<T, Kind>, memory_traits<Kind>,
                                           typename owner_state_of<Kind>::type> {
  using base = unique_handle<memory_span<T, Kind>, memory_traits<Kind>,
                             typename owner_state_of<Kind>::type>;

 public:
  /// Views (see the file comment). For owners with begin()/end(), views with a range
  /// constructor (cuda::std::span, std::span) are made by that constructor instead.
  template <class S, owner_view_of<S, T, Kind::host_iterable> = 0>
  operator S() & {  // NOLINT: implicit by design
    return S(this->data(), this->count_);
  }
  template <class S, owner_view_of<S, const T, Kind::host_iterable> = 0>
  operator S() const& {  // NOLINT: implicit by design
    return S(this->data(), this->count_);
  }
  /// A view of a temporary (const or not) would dangle at the end of the statement.
  template <class S, std::enable_if_t<is_span_like_of<S, const T>::value, int> = 0>
  operator S() && = delete;
  template <class S, std::enable_if_t<is_span_like_of<S, const T>::value, int> = 0>
  operator S() const&& = delete;

  /// Host access to the elements of a host-addressable owner (pinned, managed): unchecked
  /// index, as std::vector's; throws only when the owner holds no memory.
  template <bool H = Kind::host_iterable, std::enable_if_t<H, int> = 0>
  T& operator[](std::size_t i) { return this->native("operator[]")[i]; }
  template <bool H = Kind::host_iterable, std::enable_if_t<H, int> = 0>
  const T& operator[](std::size_t i) const { return this->native("operator[]")[i]; }
  template <bool H = Kind::host_iterable, std::enable_if_t<H, int> = 0>
  T* begin() { return this->native("begin()"); }
  template <bool H = Kind::host_iterable, std::enable_if_t<H, int> = 0>
  T* end() { return this->native("end()") + this->count_; }
  template <bool H = Kind::host_iterable, std::enable_if_t<H, int> = 0>
  const T* begin() const { return this->native("begin()"); }
  template <bool H = Kind::host_iterable, std::enable_if_t<H, int> = 0>
  const T* end() const { return this->native("end()") + this->count_; }

 protected:
  using place_type = typename Kind::place;
  using owner_state = typename owner_state_of<Kind>::type;
  memory_owner(T* memory, std::size_t count, place_type place,
               owner_state state = owner_state()) noexcept
      : base(memory_span<T, Kind>(memory, count, place), std::move(state)) {}
  explicit memory_owner(handle_state state) noexcept
      : base(memory_span<T, Kind>(state_handle<T*>(state), 0, place_type())) {}
  /// For an explicit free: the pointer (throws if none); the owner, now "freed", frees no more.
  T* take_for_free(const char* operation) {
    T* p = this->native(operation);
    this->handle_ = state_handle<T*>(handle_state::freed);
    return p;
  }
};

}  // namespace curt::detail
