// curt/memory/growable.hpp: growable_buffer<T>, device memory that grows in place: it reserves
// addresses once (memory/virtual_memory.hpp's address_range) and maps more physical memory at
// their end as it grows, so it never copies and data() never moves.
//
//   curt::growable_buffer<float> v(gpu);  // addresses for as much as the device's memory holds
//   v.resize(n); ... v.resize(8 * n);     // maps more at the end: data() and elements stay
//   v.set_access({gpu, peer}, curt::memory_access::read_write);  // kept for later growth too
#pragma once

#include <curt/core/device.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>
#include <curt/memory/location.hpp>
#include <curt/memory/owner.hpp>
#include <curt/memory/virtual_memory.hpp>

#include <cstddef>
#include <initializer_list>

namespace curt {

namespace detail {
/// What a growable_buffer keeps besides its address and element count.
struct growable_state {
  std::size_t reserved = 0;     // bytes of addresses reserved from data() on
  std::size_t mapped = 0;       // bytes mapped from data() on
  std::size_t granularity = 0;  // the minimum granularity of its device's memory
  entries<std::size_t> chunks;  // the mappings' sizes, back to back from data()
  entries<driver_fn::mem_access_desc> access;  // given to every chunk as it is mapped
  std::size_t find(int ordinal) const {  // the access entry of a device; access.size() if none
    std::size_t i = 0;
    while (i < access.size() && access[i].location.id != ordinal) ++i;
    return i;
  }
};
struct growable_kind {
  static constexpr const char* name = "growable_buffer";
  static constexpr bool host_iterable = false;
  using place = int;  // the device ordinal
  using owner_state = growable_state;
};
template <>
struct memory_traits<growable_kind> {
  template <class Span>
  static void destroy(Span& memory, growable_state& s) {
    const u64 base = address_value(memory.handle_);
    for (std::size_t i = s.chunks.size(), end = s.mapped; i-- > 0;) {  // each as it was mapped
      end -= s.chunks[i];
      report(CURT_DETAIL_DRIVER_FUNCTION(cuMemUnmap, 10020)(base + end, s.chunks[i]),
             "cuMemUnmap(growable_buffer)", __FILE__, __LINE__);
    }
    CURT_DETAIL_DRIVER_CALL(cuMemAddressFree, 10020, base, s.reserved);
  }
};
}  // namespace detail

/// Elements of T in device memory that grow in place: it reserves addresses once and maps more
/// physical memory at their end, so resize() and reserve() never copy, and data() and pointers
/// into it stay valid. Elements are not initialized. shrink_to_fit() releases the mappings
/// wholly past size(). Views, curt::copy and kernel arguments as for the other buffers.
/// Shrinking what queued work still uses is the caller's mistake, as freeing it would be.
template <class T>
class growable_buffer
    : public detail::memory_owner<T, detail::growable_kind> {
  using base = detail::memory_owner<T, detail::growable_kind>;

 public:
  /// Reserves addresses for `max_elements` (0: as many as device d's memory holds), maps none
  /// yet; d is given read-write access to all the buffer maps.
  explicit growable_buffer(curt::device d, std::size_t max_elements = 0)
      : base(detail::handle_state::empty) {
    const std::size_t wanted = detail::checked_bytes<T>(max_elements, "growable_buffer", "max");
    detail::growable_state& s = this->state_;
    s.granularity = curt::granularity(memory_location::device(d));
    s.reserved = detail::round_up("curt::growable_buffer",
                                  wanted ? wanted : d.properties().totalGlobalMem, s.granularity);
    s.access.push_back({memory_location::device(d).native(), int(memory_access::read_write)});
    address_range range(s.reserved, s.granularity);
    this->handle_ = static_cast<T*>(range.data());
    this->place_ = d.ordinal();
    (void)range.release();  // the buffer frees it from here on
  }
  /// Holds none: its members throw, saying so.
  explicit growable_buffer(no_handle_t) noexcept : base(detail::handle_state::empty) {}

  /// size() becomes `count`; maps more memory if needed (new elements are not initialized).
  void resize(std::size_t count) {
    map_to(detail::checked_bytes<T>(count, "growable_buffer", "resize"), "resize()");
    this->count_ = count;
  }
  /// Maps memory for `count` elements; size() stays.
  void reserve(std::size_t count) {
    map_to(detail::checked_bytes<T>(count, "growable_buffer", "reserve"), "reserve()");
  }
  /// Unmaps (and so releases) the mappings wholly past size().
  void shrink_to_fit() {
    const detail::u64 p = detail::address_value(this->native("shrink_to_fit()"));
    detail::growable_state& s = this->state_;
    while (!s.chunks.empty() && s.mapped - s.chunks.back() >= this->count_ * sizeof(T)) {
      const std::size_t last = s.chunks.back();
      CURT_DETAIL_DRIVER_CALL(cuMemUnmap, 10020, p + s.mapped - last, last);
      s.mapped -= last;
      s.chunks.remove(&s.chunks.back());
    }
  }
  /// Elements that fit in the mapped memory.
  std::size_t capacity() const noexcept {
    return this->valid() ? this->state_.mapped / sizeof(T) : 0;
  }
  /// Elements the reserved addresses hold: the most it can grow to.
  std::size_t max_size() const noexcept {
    return this->valid() ? this->state_.reserved / sizeof(T) : 0;
  }
  /// The step it maps in: its device memory's minimum granularity.
  std::size_t granularity() const noexcept { return this->state_.granularity; }
  curt::device device() const {  ///< The device whose memory it maps.
    (void)this->native("device()");
    return curt::device::from_ordinal_unchecked(this->place_);
  }

  /// Gives devices this access to all it maps, now and as it grows.
  void set_access(curt::device d, memory_access access) { set_access({d}, access); }
  /// Gives each of `devices` this access to all it maps, now and as it grows.
  void set_access(std::initializer_list<curt::device> devices, memory_access access) {
    const detail::u64 p = detail::address_value(this->native("set_access()"));
    detail::growable_state& s = this->state_;
    s.access.reserve(s.access.size() + devices.size());  // nothing fails after the driver call
    if (s.mapped != 0) detail::set_access(p, s.mapped, devices, access);
    for (curt::device d : devices) {
      const std::size_t i = s.find(d.ordinal());
      if (i == s.access.size()) s.access.push_back({memory_location::device(d).native(), 0});
      s.access[i].flags = static_cast<int>(access);
    }
  }
  /// The access of device d: the driver's for the latest mapping, else what it will be given.
  memory_access access(curt::device d) const {
    const detail::u64 p = detail::address_value(this->native("access()"));
    const detail::growable_state& s = this->state_;
    if (s.mapped != 0) return detail::get_access(p + s.mapped - s.chunks[s.chunks.size() - 1], d);
    const std::size_t i = s.find(d.ordinal());
    return i < s.access.size() ? memory_access(s.access[i].flags) : memory_access::none;
  }

  /// Not offered: the buffer holds a range and several mappings, not one handle.
  T* release() = delete;

 private:
  // Maps one more chunk so that `bytes` are mapped: created, mapped and given access, or undone.
  void map_to(std::size_t bytes, const char* operation) {
    const detail::u64 p = detail::address_value(this->native(operation));
    detail::growable_state& s = this->state_;
    if (bytes <= s.mapped) return;
    if (bytes > s.reserved)
      detail::refuse("curt::growable_buffer",
                     detail::fmt("%s needs %zu bytes, past the %zu bytes of addresses it reserved "
                                 "(max_size() %zu elements); make it with a larger maximum",
                                 operation, bytes, s.reserved, s.reserved / sizeof(T)));
    const std::size_t grow =
        detail::round_up("curt::growable_buffer", bytes, s.granularity) - s.mapped;
    s.chunks.reserve_one_more();  // host memory first: nothing fails after the access is set
    physical_memory memory(no_handle);
    memory.create(detail::allocation_prop(memory_location::device(this->place_),
                                          shareable_handle::none, compression::none),
                  grow, s.granularity);
    mapping chunk(no_handle);
    chunk.map(p + s.mapped, grow, 0, memory.get());
    detail::set_access(p + s.mapped, grow, s.access.data(), s.access.size());
    (void)chunk.release();  // the buffer unmaps it; the memory goes with the mapping
    s.chunks.push_back(grow);
    s.mapped += grow;
  }
};

}  // namespace curt
