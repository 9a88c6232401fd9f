// curt/memory/range.hpp: how curt's memory owners hand out views, and which views and
// ranges its copies accept, without including <cuda/std/span> (it alone costs about twice a
// translation unit of the CUDA runtime headers; see docs/performance.md).
//
// - An owner converts implicitly to any span-like view type S of its elements: S has an
//   element_type, T* converts to element_type* as arrays do (T -> const T, never the reverse), and
//   S is constructible from (T*, std::size_t). cuda::std::span, std::span (C++20) and a user's own
//   view all qualify, so a kernel can take a cuda::std::span<float> by value and be given a buffer.
// - Copies take contiguous ranges (data(), size()): curt's owners, spans, std::vector, std::array.
#pragma once

#include <curt/core/config.hpp>
#include <curt/core/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace curt::detail {

template <class S, class T, class = void>
struct is_span_like_of : std::false_type {};
template <class S, class T>
struct is_span_like_of<S, T, std::void_t<typename S::element_type>>
    : std::bool_constant<std::is_convertible_v<T (*)[], typename S::element_type (*)[]> &&
                         std::is_constructible_v<S, T*, std::size_t>> {};

/// For a conversion operator template: `template <class S, detail::span_like_of<S, T> = 0>`.
template <class S, class T>
using span_like_of = std::enable_if_t<is_span_like_of<S, T>::value, int>;

/// What a kernel launched from a functor or device lambda receives for a curt buffer
/// (curt::launch, kernel nodes): its elements, handed to the functor as the span-like view it
/// takes (cuda::std::span, std::span, ...). Only a view: no data() (which would make it a range
/// to span's own constructors too), but indexing and size() for a generic lambda.
template <class T>
class element_view {
 public:
  using element_type = T;
  template <class U>
  using rebind = element_view<U>;
  constexpr element_view(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <class S, std::enable_if_t<is_span_like_of<S, T>::value, int> = 0>
  CURT_HOST_DEVICE operator S() const {  // NOLINT: implicit by design
    return S(data_, size_);
  }
  CURT_HOST_DEVICE T& operator[](std::size_t i) const noexcept { return data_[i]; }
  CURT_HOST_DEVICE std::size_t size() const noexcept { return size_; }

 private:
  T* data_;
  std::size_t size_;
};

/// A range of `size` elements at `data` (copy_n, fill_n, memset_n): a view, trivially copyable.
template <class T>
struct pointer_range {
  T* pointer;
  std::size_t count;
  T* data() const noexcept { return pointer; }
  std::size_t size() const noexcept { return count; }
};

template <class R, class = void>
struct has_data_and_size : std::false_type {};
template <class R>
struct has_data_and_size<R, std::void_t<decltype(std::declval<R&>().data()),
                                        decltype(std::declval<R&>().size())>>
    : std::is_pointer<decltype(std::declval<R&>().data())> {};

/// The element type of a contiguous range (const where the range gives const access).
template <class R>
using range_element_t = std::remove_pointer_t<decltype(std::declval<R&>().data())>;

/// The same, for a forwarding reference's type.
template <class R>
using element_of_t = range_element_t<std::remove_reference_t<R>>;

/// The element type of a contiguous range, without const.
template <class R>
using range_value_t = std::remove_cv_t<element_of_t<R>>;

/// Whether R (possibly a reference type) is a range with data() and size().
template <class R>
inline constexpr bool is_range_v = has_data_and_size<std::remove_reference_t<R>>::value;

// A std::array, or a class derived from one (which owns its elements just the same).
template <class T, std::size_t N>
std::true_type derives_from_std_array(const std::array<T, N>*);
std::false_type derives_from_std_array(const void*);
template <class R>
struct is_std_array : decltype(derives_from_std_array(static_cast<const R*>(nullptr))) {};

/// Whether a range passed as `R&&` may outlive the call: an lvalue, or a temporary of a type that
/// can be a view (trivially copyable, not a std::array or derived from one). A temporary
/// std::vector, std::array or curt buffer owns its elements and frees them at the end of the full
/// expression, before asynchronous work uses them. Trivially copyable owners (cuda::std::array, a
/// struct holding an array) look like views by type: check_kept_range refuses them at run time.
template <class R>
inline constexpr bool outlives_call_v =
    std::is_lvalue_reference_v<R> ||
    (std::is_trivially_copyable_v<std::remove_cv_t<std::remove_reference_t<R>>> &&
     !is_std_array<std::remove_cv_t<std::remove_reference_t<R>>>::value);

/// Whether a range's elements lie inside the range object itself (an array of any kind, a struct
/// holding one): such a temporary takes its elements with it at the end of the statement.
template <class R>
bool holds_elements_inline(const R& range) noexcept {
  const auto first = reinterpret_cast<std::uintptr_t>(range.data());
  const auto self = reinterpret_cast<std::uintptr_t>(std::addressof(range));
  return first >= self && first < self + sizeof(R);
}

/// Refuses a range that asynchronous work keeps past the call (an asynchronous copy, a batch)
/// when it is a temporary that owns its elements: at compile time when its type cannot be a view,
/// at run time (cudaErrorInvalidValue, naming `what`) when a trivially copyable temporary holds
/// its elements inside itself. R is the forwarding type of the call's parameter.
template <class R>
void check_kept_range(const std::remove_reference_t<R>& range, const char* what) {
  static_assert(outlives_call_v<R&&>,
                "curt: an asynchronous copy or batch keeps this range past the call, but it is a "
                "temporary that owns its elements (a std::vector, a std::array, a curt buffer), "
                "freed at the end of the statement; give it a name so that it lives until the "
                "work is done");
  if constexpr (!std::is_lvalue_reference_v<R>) {
    if (CURT_UNLIKELY(holds_elements_inline(range)))
      raise(cudaErrorInvalidValue, what,
            "this temporary holds its elements inside itself (an array type, or a struct "
            "holding one), so they are gone at the end of the statement, before the stream "
            "reaches the work that reads or writes them; give it a name so that it lives until "
            "the work is done",
            __FILE__, __LINE__);
  }
}

}  // namespace curt::detail

namespace curt {
namespace detail {
// Takes any argument by conversion, so the real curt::span overloads (exact matches) always win.
struct span_without_header {
  template <class Range>
  span_without_header(Range&&) noexcept {}  // NOLINT: implicit by design
};
template <class...>
inline constexpr bool dependent_false = false;
}  // namespace detail

/// Without <curt/span.hpp>, curt::span(range[, offset, count]) lands here and names that header.
template <class Never = void>
auto span(detail::span_without_header, ...) {  // deduced: its body, and the assertion, compile
  static_assert(detail::dependent_false<Never>,
                "curt::span(range[, offset, count]) needs #include <curt/span.hpp> (which "
                "includes <cuda/std/span>)");
}
}  // namespace curt
