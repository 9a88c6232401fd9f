// curt/memory/span.hpp: cuda::std::span views of buffers and ranges, bounds-checked. Opt-in (not in
// <curt/curt.hpp>): <cuda/std/span> costs about as much to compile as the CUDA runtime headers.
//
//   cuda::std::span<float> all = curt::span(buffer);
//   cuda::std::span<const float> part = curt::span(std::as_const(buffer), 100, 50);
//   curt::copy(curt::span(dst, 0, n), curt::span(src, offset, n), stream);
//
// Any contiguous range with data() and size() works (curt's buffers, std::vector, std::array,
// spans); a const range gives const elements. A temporary view (a span) gives its span; a
// temporary that owns its elements gives none: it would dangle.
#pragma once

#include <curt/core/config.hpp>
#include <curt/core/error.hpp>
#include <curt/memory/range.hpp>

#include <cuda/std/span>

#include <cstddef>
#include <string>
#include <type_traits>

namespace curt {
namespace detail {

template <class Range>
using span_of_t = cuda::std::span<range_element_t<Range>>;

[[noreturn]] CURT_COLD inline void throw_subspan(std::size_t size, std::size_t offset,
                                                 std::size_t count) {
  raise(cudaErrorInvalidValue,
        fmt("curt::span(range of %zu elements, offset %zu, count %zu)", size, offset, count),
        offset > size ? "the offset lies past the end of the range"
                      : fmt("offset + count passes the end of the range by %zu elements",
                            count - (size - offset)),
        __FILE__, __LINE__);
}

}  // namespace detail

/// All elements of `range`: an lvalue, or a temporary view (a span).
template <class Range, std::enable_if_t<detail::outlives_call_v<Range&&>, int> = 0>
detail::span_of_t<std::remove_reference_t<Range>> span(Range&& range) {
  static_assert(detail::has_data_and_size<std::remove_reference_t<Range>>::value,
                "curt::span: the range must be contiguous, with data() and size()");
  detail::check_kept_range<Range>(range, "curt::span(range)");
  return {range.data(), static_cast<std::size_t>(range.size())};
}

/// `count` elements of `range` from `offset`; out of range, throws a cuda_error naming the numbers.
template <class Range, std::enable_if_t<detail::outlives_call_v<Range&&>, int> = 0>
detail::span_of_t<std::remove_reference_t<Range>> span(Range&& range, std::size_t offset,
                                                       std::size_t count) {
  static_assert(detail::has_data_and_size<std::remove_reference_t<Range>>::value,
                "curt::span: the range must be contiguous, with data() and size()");
  detail::check_kept_range<Range>(range, "curt::span(range, offset, count)");
  auto* data = range.data();
  std::size_t size = static_cast<std::size_t>(range.size());
  if (CURT_UNLIKELY(offset > size || count > size - offset))
    detail::throw_subspan(size, offset, count);
  return {data + offset, count};
}

/// A span of a temporary that owns its elements (a std::vector, a curt buffer) would dangle.
template <class Range, std::enable_if_t<!detail::outlives_call_v<Range&&>, int> = 0>
void span(Range&& range) = delete;
template <class Range, std::enable_if_t<!detail::outlives_call_v<Range&&>, int> = 0>
void span(Range&& range, std::size_t offset, std::size_t count) = delete;

}  // namespace curt
