// curt/rtc.hpp: CUDA C++ compiled at run time with NVRTC, and linked with nvJitLink (opt-in:
// needs nvrtc.h, nvJitLink.h and their libraries; CMake's target curt::rtc brings them).
//
//   curt::rtc::program saxpy("saxpy.cu", source);
//   saxpy.add_name_expression("saxpy<float>");                 // a template's instantiation
//   curt::rtc::compiled code = saxpy.compile(curt::rtc::options().architecture(device)
//                                                .cpp_standard(17).fast_math());
//   curt::library lib(code.image());                           // <curt/library.hpp>
//   curt::library_kernel k = lib.kernel(code.lowered_name("saxpy<float>"));
//
// A program is plain data (source, headers, name expressions); compile() makes an NVRTC program,
// compiles it and destroys it, also when it fails. A failure throws rtc::error with NVRTC's whole
// log ("name(line): error: ..." lines intact) and the options; a success keeps its log (warnings)
// in compiled::log(). Only architecture(device) needs a GPU and driver, for the compute capability.
#pragma once

#if !__has_include(<nvrtc.h>) || !__has_include(<nvJitLink.h>)
#  error "<curt/rtc.hpp> needs NVRTC's <nvrtc.h> and <nvJitLink.h>: link curt::rtc (CMake)"
#endif

#include <curt/core/device.hpp>
#include <curt/core/error.hpp>
#include <curt/execution/library.hpp>

#include <nvJitLink.h>
#include <nvrtc.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <system_error>
#include <utility>
#include <vector>

namespace curt {
namespace detail {
class rtc_category_impl final : public std::error_category {
 public:
  explicit rtc_category_impl(bool nvrtc) noexcept : nvrtc_(nvrtc) {}
  const char* name() const noexcept override { return nvrtc_ ? "nvrtc" : "nvjitlink"; }
  std::string message(int code) const override {
    if (nvrtc_) return nvrtcGetErrorString(static_cast<nvrtcResult>(code));
    static const char* const names[] = {  // nvJitLink has no text of its own (13.0's codes)
        "NVJITLINK_SUCCESS", "NVJITLINK_ERROR_UNRECOGNIZED_OPTION", "NVJITLINK_ERROR_MISSING_ARCH",
        "NVJITLINK_ERROR_INVALID_INPUT", "NVJITLINK_ERROR_PTX_COMPILE",
        "NVJITLINK_ERROR_NVVM_COMPILE", "NVJITLINK_ERROR_INTERNAL", "NVJITLINK_ERROR_THREADPOOL",
        "NVJITLINK_ERROR_UNRECOGNIZED_INPUT", "NVJITLINK_ERROR_FINALIZE",
        "NVJITLINK_ERROR_NULL_INPUT",
        "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS", "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
        "NVJITLINK_ERROR_ARCH_MISMATCH", "NVJITLINK_ERROR_OUTDATED_LIBRARY",
        "NVJITLINK_ERROR_MISSING_FATBIN", "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
        "NVJITLINK_ERROR_UNSUPPORTED_ARCH", "NVJITLINK_ERROR_LTO_NOT_ENABLED"};
    static_assert(sizeof names / sizeof *names == NVJITLINK_ERROR_LTO_NOT_ENABLED + 1);
    const bool known = code >= 0 && code < static_cast<int>(sizeof names / sizeof *names);
    return known ? names[code] : fmt("nvJitLinkResult %d", code);
  }

 private:
  bool nvrtc_;
};
}  // namespace detail

/// The error categories of nvrtcResult and nvJitLinkResult values (never destroyed).
inline const std::error_category& nvrtc_category() noexcept {
  static const auto* category = new detail::rtc_category_impl(true);
  return *category;
}
inline const std::error_category& nvjitlink_category() noexcept {
  static const auto* category = new detail::rtc_category_impl(false);
  return *category;
}

namespace rtc {

/// A failed compilation or link: what() names the program, the options and the whole log.
class error : public cuda_error {
 public:
  using cuda_error::cuda_error;
  /// `call` failed with `code` (nvrtc_category() or nvjitlink_category()), `log` and `options`.
  error(std::error_code code, std::string call, std::string log, std::string options,
        const char* file, int line)
      : cuda_error(code, std::move(call),
                   detail::fmt("options: %s; log:\n%s",
                               options.empty() ? "(none)" : options.c_str(), log.c_str()),
                   detail::location(file, line)),
        log_(std::move(log)),
        options_(std::move(options)) {}
  /// The whole log alone: NVRTC's (nvrtcGetProgramLog) or nvJitLink's error log; else empty.
  const std::string& log() const noexcept { return log_; }
  /// The compilation's or link's options, space-separated; empty when none, or for other errors.
  const std::string& options() const noexcept { return options_; }

 private:
  std::string log_;
  std::string options_;
};

}  // namespace rtc

namespace detail {
// `list` joined with spaces, for messages.
inline std::string join(const std::vector<std::string>& list) {
  std::string text;
  for (const std::string& item : list) text += (text.empty() ? "" : " ") + item;
  return text;
}
// One output of NVRTC or nvJitLink; empty when there is none of that kind. Text loses the NUL
// counted in its size, and trailing newlines; binaries stay as they are.
template <class Bytes, class Handle, class Result, class Out>
Bytes read_output(Handle h, Result (*size_of)(Handle, std::size_t*), Result (*get)(Handle, Out*)) {
  std::size_t size = 0;
  if (size_of(h, &size) != 0 || size == 0) return Bytes();
  Bytes bytes(size, '\0');
  if (get(h, bytes.data()) != 0) return Bytes();
  if constexpr (std::is_same_v<Bytes, std::string>)
    while (!bytes.empty() && (bytes.back() == '\0' || bytes.back() == '\n')) bytes.pop_back();
  return bytes;
}
/// Throws rtc::error for a failed NVRTC call other than the compilation (which has a log).
inline void check_nvrtc(nvrtcResult result, const char* function, const std::string& program,
                        int line) {
  if (CURT_UNLIKELY(result != NVRTC_SUCCESS))
    throw rtc::error(std::error_code(result, nvrtc_category()),
                     fmt("%s(%s)", function, program.c_str()), "", location(__FILE__, line));
}
}  // namespace detail

namespace rtc {

/// NVRTC options, by name or raw (see NVRTC's documentation for the whole list).
class options {
 public:
  /// Code for `d`: CUBIN for its sm_XY where NVRTC supports it; for a device newer than this
  /// NVRTC, PTX of the newest architecture it knows (the driver compiles that for the device).
  options& architecture(device d) {
    const compute_capability cc = d.compute_capability();
    int count = 0;
    detail::check_nvrtc(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs", "",
                        __LINE__);
    std::vector<int> archs(static_cast<std::size_t>(count));
    detail::check_nvrtc(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs", "",
                        __LINE__);
    if (!archs.empty() && cc.as_int() > archs.back())
      return architecture({archs.back() / 10, archs.back() % 10}, false);
    return architecture(cc);
  }
  /// -arch=sm_XY (real code: CUBIN), or -arch=compute_XY (PTX only) with real_code false.
  options& architecture(compute_capability cc, bool real_code = true) {
    return add(detail::fmt("-arch=%s_%d", real_code ? "sm" : "compute", cc.as_int()));
  }
  /// -std=c++NN for the C++ standard of `year` (17 or 2017: -std=c++17).
  options& cpp_standard(int year) { return add(detail::fmt("-std=c++%02d", year % 100)); }
  /// -Dname=value; -Dname (NVRTC defines it as 1) when `value` is empty.
  options& define(const std::string& name, const std::string& value = {}) {
    return add("-D" + name + (value.empty() ? "" : "=" + value));
  }
  /// -Idirectory: a directory searched for headers after those given to the program.
  options& include_path(const std::string& directory) { return add("-I" + directory); }
  options& fast_math() { return add("--use_fast_math"); }  ///< `--use_fast_math`: ftz, inexact math
  options& line_info() { return add("-lineinfo"); }  ///< -lineinfo: source lines, for profilers.
  options& debug_info() { return add("-G"); }  ///< -G: device debug information, no optimization.
  /// -rdc=true: device functions may be called across programs (linked with rtc::linker).
  options& relocatable_device_code() { return add("-rdc=true"); }
  options& link_time_optimization() { return add("-dlto"); }  ///< -dlto: only LTO-IR, for linker.
  /// Any option as NVRTC spells it ("-maxrregcount=64").
  options& add(std::string option) {
    list_.push_back(std::move(option));
    return *this;
  }
  /// The options in the order added, one string each, as nvrtcCompileProgram takes them.
  const std::vector<std::string>& list() const noexcept { return list_; }
  /// The options joined with spaces, for messages.
  std::string text() const { return detail::join(list_); }

 private:
  std::vector<std::string> list_;
};

/// What a compilation (or a link) made: its code, log and the lowered names of name expressions.
class compiled {
 public:
  /// The program's name; for a link, "linked" and the parts' names ("linked a.cu b.cu").
  const std::string& name() const noexcept { return name_; }
  /// The PTX (nvrtcGetPTX; c_str() ends it with a NUL); empty with -dlto and for a link.
  const std::string& ptx() const noexcept { return ptx_; }
  /// The CUBIN: from nvrtcGetCUBIN for a real sm_XY (none with -dlto), or a link's from nvJitLink.
  const std::vector<char>& cubin() const noexcept { return cubin_; }
  /// The LTO-IR (nvrtcGetLTOIR) for linker::add; empty unless compiled with -dlto.
  const std::vector<char>& lto_ir() const noexcept { return lto_ir_; }
  /// The compiler's messages (warnings); for a link, nvJitLink's info log; empty when none.
  const std::string& log() const noexcept { return log_; }
  /// The options used, space-separated (options::text(), or the linker's); empty when none.
  const std::string& options() const noexcept { return options_; }

  /// What curt::library loads: the CUBIN where there is one, else the PTX (NUL-terminated).
  const void* image() const {
    if (!cubin_.empty()) return cubin_.data();
    if (!ptx_.empty()) return ptx_.c_str();
    detail::raise(cudaErrorInvalidValue,
                  detail::fmt("curt::rtc::compiled::image(%s)", name_.c_str()),
                  "this code has no PTX and no CUBIN (LTO-IR only, -dlto): link it first with "
                  "curt::rtc::linker", __FILE__, __LINE__);
  }

  /// The mangled name of a name expression added before compiling ("saxpy<float>"), for
  /// library::kernel() and global().
  const std::string& lowered_name(const std::string& expression) const {
    for (const auto& entry : lowered_)
      if (entry.first == expression) return entry.second;
    std::string added;
    for (const auto& entry : lowered_)
      added += (added.empty() ? "\"" : ", \"") + entry.first + "\"";
    throw error(std::error_code(NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID, nvrtc_category()),
                detail::fmt("curt::rtc::compiled::lowered_name(\"%s\")", expression.c_str()),
                detail::fmt("\"%s\" was not added to program %s before compiling (%s%s); add it "
                            "with program::add_name_expression", expression.c_str(), name_.c_str(),
                            added.empty() ? "none was" : "added: ", added.c_str()),
                detail::location(__FILE__, __LINE__));
  }

 private:
  friend class program;
  friend class linker;
  std::string name_, ptx_, log_, options_;
  std::vector<char> cubin_, lto_ir_;
  std::vector<std::pair<std::string, std::string>> lowered_;
};

/// A header a program may `#include` by `name` (nvrtcCreateProgram's headers, includeNames).
struct header {
  std::string name;    ///< As the source includes it: "params.cuh" for `#include "params.cuh"`.
  std::string source;  ///< Its CUDA C++ text.
};

/// CUDA C++ source with its name (used in the log's "name(line)"), headers and name expressions.
class program {
 public:
  /// `source` named `name` (what the log's "name(line)" says), with `headers`; no NVRTC call.
  program(std::string name, std::string source, std::vector<header> headers = {})
      : name_(std::move(name)), source_(std::move(source)), headers_(std::move(headers)) {}
  /// Adds a header the source may `#include` by `name`.
  program& add_header(std::string name, std::string source) {
    headers_.push_back({std::move(name), std::move(source)});
    return *this;
  }
  /// A kernel or variable named as C++ names it ("saxpy<float>", "&table"), for its lowered
  /// name in compiled::lowered_name; a template is instantiated this way.
  program& add_name_expression(std::string expression) {
    expressions_.push_back(std::move(expression));
    return *this;
  }
  /// The name and the source given to the constructor. @{
  const std::string& name() const noexcept { return name_; }
  const std::string& source() const noexcept { return source_; }  ///@}

  /// Compiles; throws rtc::error with NVRTC's log and the options when it fails.
  compiled compile(const options& o = options()) const {
    std::vector<const char*> header_sources, header_names, option_texts;
    for (const header& h : headers_) {
      header_sources.push_back(h.source.c_str());
      header_names.push_back(h.name.c_str());
    }
    for (const std::string& option : o.list()) option_texts.push_back(option.c_str());
    const std::string call = detail::fmt("curt::rtc::program::compile(%s)", name_.c_str());
    nvrtcProgram p = nullptr;
    detail::check_nvrtc(nvrtcCreateProgram(&p, source_.c_str(), name_.c_str(),
                                           static_cast<int>(headers_.size()),
                                           header_sources.data(), header_names.data()),
                        "nvrtcCreateProgram", name_, __LINE__);
    struct destroy {  // nvrtcDestroyProgram on every path
      nvrtcProgram& p;
      ~destroy() { (void)nvrtcDestroyProgram(&p); }
    } destroy_program{p};
    for (const std::string& expression : expressions_)
      detail::check_nvrtc(nvrtcAddNameExpression(p, expression.c_str()), "nvrtcAddNameExpression",
                          name_, __LINE__);
    compiled out;
    out.name_ = name_;
    out.options_ = o.text();
    const nvrtcResult result =
        nvrtcCompileProgram(p, static_cast<int>(option_texts.size()), option_texts.data());
    out.log_ = detail::read_output<std::string>(p, nvrtcGetProgramLogSize, nvrtcGetProgramLog);
    if (result != NVRTC_SUCCESS)
      throw error(std::error_code(result, nvrtc_category()), call, out.log_, out.options_,
                  __FILE__, __LINE__);
    out.ptx_ = detail::read_output<std::string>(p, nvrtcGetPTXSize, nvrtcGetPTX);
    out.cubin_ = detail::read_output<std::vector<char>>(p, nvrtcGetCUBINSize, nvrtcGetCUBIN);
    out.lto_ir_ = detail::read_output<std::vector<char>>(p, nvrtcGetLTOIRSize, nvrtcGetLTOIR);
    for (const std::string& expression : expressions_) {
      const char* lowered = nullptr;
      detail::check_nvrtc(nvrtcGetLoweredName(p, expression.c_str(), &lowered),
                          "nvrtcGetLoweredName", name_, __LINE__);
      out.lowered_.emplace_back(expression, lowered);
    }
    return out;
  }

 private:
  std::string name_, source_;
  std::vector<header> headers_;
  std::vector<std::string> expressions_;
};

/// Links the LTO-IR (or PTX, CUBIN) of several compilations into one CUBIN with nvJitLink:
///   curt::rtc::linker({"-arch=sm_90", "-lto"}).add(a).add(b).link()
/// Programs that call each other's device functions are compiled with
/// relocatable_device_code() and, for LTO, link_time_optimization().
class linker {
 public:
  /// nvJitLink's `options` (nvJitLinkCreate's): "-arch=sm_XY" is required, "-lto" for LTO-IR.
  explicit linker(std::vector<std::string> options) : options_(std::move(options)) {}
  /// For `d`: -arch=sm_XY and -lto.
  explicit linker(device d)
      : linker({detail::fmt("-arch=sm_%d", d.compute_capability().as_int()), "-lto"}) {}

  /// Adds what `part` holds: its LTO-IR, else its CUBIN, else its PTX; it must outlive link().
  linker& add(const compiled& part) {
    parts_.push_back(&part);
    return *this;
  }
  linker& add(const compiled&& part) = delete;  ///< A temporary would be gone before link().

  /// The linked CUBIN (in compiled::cubin()), with nvJitLink's info log; throws rtc::error with
  /// its error log when the link fails.
  compiled link() const {
    std::vector<const char*> texts;
    for (const std::string& option : options_) texts.push_back(option.c_str());
    nvJitLinkHandle handle = nullptr;
    nvJitLinkResult result =
        nvJitLinkCreate(&handle, static_cast<std::uint32_t>(texts.size()), texts.data());
    struct destroy {  // nvJitLinkDestroy on every path
      nvJitLinkHandle& h;
      ~destroy() { if (h) (void)nvJitLinkDestroy(&h); }
    } destroy_linker{handle};
    for (std::size_t i = 0; result == NVJITLINK_SUCCESS && i < parts_.size(); ++i) {
      const compiled& part = *parts_[i];
      if (!part.lto_ir().empty())
        result = nvJitLinkAddData(handle, NVJITLINK_INPUT_LTOIR, part.lto_ir().data(),
                                  part.lto_ir().size(), part.name().c_str());
      else if (!part.cubin().empty())
        result = nvJitLinkAddData(handle, NVJITLINK_INPUT_CUBIN, part.cubin().data(),
                                  part.cubin().size(), part.name().c_str());
      else
        result = nvJitLinkAddData(handle, NVJITLINK_INPUT_PTX, part.ptx().c_str(),
                                  part.ptx().size() + 1, part.name().c_str());
    }
    if (result == NVJITLINK_SUCCESS) result = nvJitLinkComplete(handle);
    compiled out;
    out.name_ = "linked";
    for (const compiled* part : parts_) out.name_ += " " + part->name();
    out.options_ = detail::join(options_);
    if (result != NVJITLINK_SUCCESS) {
      std::string log = handle ? detail::read_output<std::string>(
                                     handle, nvJitLinkGetErrorLogSize, nvJitLinkGetErrorLog)
                               : "";
      throw error(std::error_code(result, nvjitlink_category()),
                  detail::fmt("curt::rtc::linker::link(%s)", out.name_.c_str()), log,
                  out.options_, __FILE__, __LINE__);
    }
    out.log_ = detail::read_output<std::string>(handle, nvJitLinkGetInfoLogSize,
                                                nvJitLinkGetInfoLog);
    out.cubin_ = detail::read_output<std::vector<char>>(handle, nvJitLinkGetLinkedCubinSize,
                                                       nvJitLinkGetLinkedCubin);
    return out;
  }

 private:

  std::vector<std::string> options_;
  std::vector<const compiled*> parts_;
};

}  // namespace rtc
}  // namespace curt
