// curt/profiling/nvtx.hpp: NVTX ranges and marks, and names for streams, events and devices on
// Nsight's timeline (opt-in: needs NVTX 3, which the CUDA toolkit ships header-only; CMake's
// target curt::nvtx brings it and libdl, with which NVTX loads a tool).
//
//   static const curt::nvtx::domain app("my-app");  // made once; NVTX keeps it to the end
//   {
//     curt::nvtx::scoped_range r(app, "copy in", curt::nvtx::color::rgb(0, 160, 255), bytes);
//     ...                                            // pushed here, popped at the scope's end
//   }
//   curt::nvtx::mark(app, "checkpoint");
//   curt::nvtx::name(stream, "copies");              // Nsight shows "copies" for the stream
//
// With no tool attached each call is NVTX's own: the first looks for a tool and, finding none,
// sets NVTX's function pointers to null, so every later call loads one, tests it and returns
// (benchmarks/nvtx_bench.cpp measures it against raw NVTX and an empty loop). NVTX reports no
// errors and calls no CUDA function: nothing here throws but the names of owners that hold
// nothing.
//
// NVTX's CUDA header brings <cuda.h>, whose #defines rename driver symbols (cuStreamGetCtx to
// cuStreamGetCtx_v2, and so on): curt's driver macros paste and stringize their `name` without
// expanding it, so they are unaffected; a second macro layer there would break that.
#pragma once

#if !__has_include(<nvtx3/nvToolsExt.h>)
#  error "<curt/nvtx.hpp> needs NVTX 3's <nvtx3/nvToolsExt.h> (CUDA toolkit): link curt::nvtx"
#endif

#include <curt/core/device.hpp>
#include <curt/execution/event.hpp>
#include <curt/execution/stream.hpp>

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace curt::nvtx {
namespace detail {
struct attributes_access;
}

/// A colour for the timeline, as ARGB; the default (0) leaves the colour to the tool.
struct color {
  std::uint32_t argb = 0;  ///< 0xAARRGGBB; 0: the tool picks
  /// An opaque colour from its red, green and blue parts.
  static constexpr color rgb(std::uint8_t red, std::uint8_t green, std::uint8_t blue) noexcept {
    return {0xff000000u | std::uint32_t{red} << 16 | std::uint32_t{green} << 8 | blue};
  }
};

/// A number shown with a range or mark: any integer (as 64 bits, signed or not) or floating-point
/// value (as a double); the default is none.
class payload {
 public:
  payload() noexcept = default;  ///< No payload.
  /// `value` as NVTX's INT64, UNSIGNED_INT64 or DOUBLE payload (bool is refused).
  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, int> = 0>
  payload(T value) noexcept {  // NOLINT: implicit, scoped_range(d, "copy", c, bytes)
    if constexpr (std::is_floating_point_v<T>) {
      type_ = NVTX_PAYLOAD_TYPE_DOUBLE;
      value_.dValue = static_cast<double>(value);
    } else if constexpr (std::is_signed_v<T>) {
      type_ = NVTX_PAYLOAD_TYPE_INT64;
      value_.llValue = static_cast<std::int64_t>(value);
    } else {
      type_ = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
      value_.ullValue = static_cast<std::uint64_t>(value);
    }
  }
  bool empty() const noexcept { return type_ == NVTX_PAYLOAD_UNKNOWN; }  ///< No payload given.

 private:
  friend struct detail::attributes_access;
  std::int32_t type_ = NVTX_PAYLOAD_UNKNOWN;
  decltype(nvtxEventAttributes_t::payload) value_{};
};

/// A text for a range or mark, only referred to: a C string or a std::string that outlives the
/// call (NVTX hands it to the tool during the call and keeps nothing).
class message {
 public:
  /// Refers to `text` (NOLINT: implicit, so a literal or a string is a message). @{
  message(const char* text) noexcept : text_(text) {}                 // NOLINT
  message(const std::string& text) noexcept : text_(text.c_str()) {}  // NOLINT
  ///@}
  const char* c_str() const noexcept { return text_; }  ///< The text referred to.

 private:
  const char* text_;
};

/// An NVTX domain: the ranges and marks of one library or program part, grouped under its name in
/// the tool. `domain::global()` is NVTX's own (unnamed). Make each once, as a static (a function's
/// `static const domain d("name");`): every construction registers a domain with the tool, and
/// none is ever destroyed, as in NVTX's own nvtx3.hpp. nvtxDomainDestroy would end the ranges
/// other threads still have open in it, tools free nothing on it, and a static's destructor
/// would run at exit in no set order with the ranges of other statics. Neither copied nor moved.
class domain {
 public:
  /// Registers domain `name` with the tool (nvtxDomainCreateA); its handle is null without one.
  explicit domain(const char* name) noexcept : handle_(nvtxDomainCreateA(name)) {}
  ~domain() = default;  // never nvtxDomainDestroy (above): the NVTX domain lives to the end
  domain(const domain&) = delete;
  domain& operator=(const domain&) = delete;

  /// NVTX's global domain, that of nvtxRangePushEx and of tools' default views.
  static const domain& global() noexcept {
    static const domain instance;
    return instance;
  }
  /// The handle; null for the global domain, and with no tool attached (NVTX makes none then).
  nvtxDomainHandle_t get() const noexcept { return handle_; }

 private:
  domain() noexcept = default;
  nvtxDomainHandle_t handle_ = nullptr;
};

namespace detail {
struct attributes_access {
  /// The attributes NVTX takes: a message, and the colour and payload where given.
  static nvtxEventAttributes_t make(message text, color c, const payload& p) noexcept {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = c.argb != 0 ? NVTX_COLOR_ARGB : NVTX_COLOR_UNKNOWN;
    a.color = c.argb;
    a.payloadType = p.type_;
    a.payload = p.value_;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text.c_str();
    return a;
  }
};
}  // namespace detail

/// A range on the calling thread's timeline, pushed when made and popped when destroyed (nested
/// ranges nest in the tool). Neither copied nor moved: a range ends where its scope ends.
class scoped_range {
 public:
  /// Pushes `text`, with colour `c` and payload `p` where given, in the global domain or `d`
  /// (nvtxDomainRangePushEx); the destructor pops it. @{
  explicit scoped_range(message text, color c = {}, const payload& p = {}) noexcept
      : scoped_range(domain::global(), text, c, p) {}
  scoped_range(const domain& d, message text, color c = {}, const payload& p = {}) noexcept
      : domain_(d.get()) {
    const nvtxEventAttributes_t a = detail::attributes_access::make(text, c, p);
    nvtxDomainRangePushEx(domain_, &a);
  }  ///@}
  ~scoped_range() { nvtxDomainRangePop(domain_); }
  scoped_range(const scoped_range&) = delete;
  scoped_range& operator=(const scoped_range&) = delete;

 private:
  nvtxDomainHandle_t domain_;
};

/// An instant on the calling thread's timeline.
inline void mark(const domain& d, message text, color c = {}, const payload& p = {}) noexcept {
  const nvtxEventAttributes_t a = detail::attributes_access::make(text, c, p);
  nvtxDomainMarkEx(d.get(), &a);
}
inline void mark(message text, color c = {}, const payload& p = {}) noexcept {
  mark(domain::global(), text, c, p);
}

/// Names a stream, an event or a device in the tool (nvtxNameCudaStreamA, ...Event, ...Device):
/// the tool copies the name. A stream or event owner that holds nothing is refused as every use
/// of it is (a cuda_error naming its state); a device is not checked against the device count.
/// A default stream (legacy, per-thread) is a pseudo-handle no tool maps to a stream: naming it
/// has no effect.
inline void name(stream_ref s, message text) { nvtxNameCudaStreamA(s.get(), text.c_str()); }
inline void name(event_ref e, message text) { nvtxNameCudaEventA(e.get(), text.c_str()); }
inline void name(device d, message text) noexcept {
  nvtxNameCudaDeviceA(d.ordinal(), text.c_str());
}

}  // namespace curt::nvtx
