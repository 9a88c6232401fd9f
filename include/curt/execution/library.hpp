// curt/execution/library.hpp: code loaded at run time (PTX, CUBIN, fatbin) as a library, and its
// kernels launched like any other.
//
//   curt::library lib(compiled.image());          // or curt::library::from_file("k.cubin")
//   curt::library_kernel saxpy = lib.kernel("saxpy");
//   curt::launch(stream, curt::launch_config(grid, block), saxpy, 2.0f, x, y, n);
//   auto typed = saxpy.as<void(float, const float*, float*, int)>();  // checked like a
//   curt::launch(stream, config, typed, 2.0f, x, y, n);               // compiled kernel
//   auto table = lib.global<float[256]>(device, "table");  // size checked; a range for copies
//
// Libraries are the driver's context-independent modules (CUDA 12.0+, through entry points: no
// new link). Loading needs and makes no context: the driver loads the code into a context when a
// kernel is first needed there, and under lazy loading (CUDA_MODULE_LOADING, LAZY by default since
// 12.2) only then compiles PTX, so an error in PTX may appear there (at the first launch at the
// latest) instead of at the load. Launches take curt::launch's path (cuLaunchKernelEx in the
// stream's context, explained refusals). Argument types are unknown at compile time: an untyped
// launch checks the count and size of each argument against the driver's layout
// (cuKernelGetParamInfo, 12.4+), read at the first launch in the stream's context and kept; a
// typed view (as<Signature>()) is checked once, then converts them at compile time.
// Kernels, views and library_refs are valid while their library is loaded.
#pragma once

#include <curt/core/atomic.hpp>
#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/driver.hpp>
#include <curt/core/entries.hpp>
#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>
#include <curt/execution/launch.hpp>
#include <curt/execution/occupancy.hpp>
#include <curt/execution/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

typedef struct CUmod_st* CUmodule;

namespace curt::detail::driver_fn {
// jit_options: CUjit_option values; library_options: CUlibraryOption values; pointer: CUdeviceptr.
CURT_DETAIL_DRIVER_TYPE(cuLibraryLoadData_v12000, cudaLibrary_t* library, const void* image,
                        int* jit_options, void** jit_values, unsigned jit_count,
                        int* library_options, void** library_values, unsigned library_count);
CURT_DETAIL_DRIVER_TYPE(cuLibraryLoadFromFile_v12000, cudaLibrary_t* library, const char* path,
                        int* jit_options, void** jit_values, unsigned jit_count,
                        int* library_options, void** library_values, unsigned library_count);
CURT_DETAIL_DRIVER_TYPE(cuLibraryUnload_v12000, cudaLibrary_t library);
CURT_DETAIL_DRIVER_TYPE(cuLibraryGetKernel_v12000, cudaKernel_t* kernel, cudaLibrary_t library,
                        const char* name);
CURT_DETAIL_DRIVER_TYPE(cuLibraryGetModule_v12000, CUmodule* module, cudaLibrary_t library);
CURT_DETAIL_DRIVER_TYPE(cuLibraryGetGlobal_v12000, unsigned long long* pointer,
                        std::size_t* bytes, cudaLibrary_t library, const char* name);
CURT_DETAIL_DRIVER_TYPE(cuLibraryGetManaged_v12000, unsigned long long* pointer,
                        std::size_t* bytes, cudaLibrary_t library, const char* name);
CURT_DETAIL_DRIVER_TYPE(cuLibraryGetKernelCount_v12040, unsigned* count, cudaLibrary_t library);
CURT_DETAIL_DRIVER_TYPE(cuLibraryEnumerateKernels_v12040, cudaKernel_t* kernels, unsigned count,
                        cudaLibrary_t library);
CURT_DETAIL_DRIVER_TYPE(cuKernelGetName_v12030, const char** name, cudaKernel_t kernel);
CURT_DETAIL_DRIVER_TYPE(cuKernelGetParamInfo_v12040, cudaKernel_t kernel, std::size_t index,
                        std::size_t* offset, std::size_t* size);
}  // namespace curt::detail::driver_fn

namespace curt {

/// JIT options for loading PTX (the driver compiles it for the device); the JIT's error log is
/// captured and put in the exception of a load that fails (an error found later, under lazy
/// loading, comes as the driver's code: curt has no log there).
class library_options {
 public:
  /// CU_JIT_OPTIMIZATION_LEVEL, 0 to 4 (the default); CU_JIT_MAX_REGISTERS, a per-thread cap. @{
  library_options& optimization_level(unsigned level) { return option(7, level); }  // 0..4
  library_options& max_registers(unsigned count) { return option(0, count); }  ///@}
  /// CU_JIT_GENERATE_LINE_INFO (-lineinfo), CU_JIT_GENERATE_DEBUG_INFO (-g); off by default. @{
  library_options& line_info(bool on = true) { return option(13, on ? 1u : 0u); }
  library_options& debug_info(bool on = true) { return option(11, on ? 1u : 0u); }  ///@}
  /// Any CUjit_option whose value is a number (cuda.h says what each takes).
  /// (3 to 6, the JIT's log buffers, are curt's: it captures the error log itself.)
  library_options& option(int jit_option, unsigned value) {
    if (jit_option >= 3 && jit_option <= 6)
      detail::raise(cudaErrorInvalidValue,
                    detail::fmt("curt::library_options::option(%d)", jit_option),
                    "the JIT's log buffers (CU_JIT_INFO_LOG_BUFFER to ERROR_LOG_BUFFER_SIZE_BYTES) "
                    "are curt's: it captures the error log for a failed load's exception",
                    __FILE__, __LINE__);
    keys_.push_back(jit_option);
    values_.push_back(reinterpret_cast<void*>(static_cast<std::uintptr_t>(value)));
    return *this;
  }

 private:
  friend class library;
  detail::entries<int> keys_;       // CUjit_option keys, in order
  detail::entries<void*> values_;  // their values, numbers cast to void*
};

/// Where a kernel parameter lies in the kernel's parameter buffer (cuKernelGetParamInfo).
struct kernel_parameter {
  std::size_t offset = 0;  ///< Bytes from the start of the parameter buffer.
  std::size_t size = 0;    ///< Bytes the parameter takes: its type's sizeof.
};

/// A global (`__device__`, `__constant__`) or managed variable of a library, of type T as the
/// source declares it (float, float[256], a struct; T[] takes any whole number of Ts): a range
/// of its elements (data(), size()) for curt::copy, or a pointer for a kernel argument.
template <class T>
class library_variable {
 public:
  using element_type = std::remove_all_extents_t<T>;  ///< T less its extents: float for float[256].
  /// `bytes` bytes at device address `data`, as library_ref::global() and managed() find them.
  library_variable(element_type* data, std::size_t bytes) noexcept : data_(data), bytes_(bytes) {}
  /// Its device address in the context it was looked up in; valid while the library is loaded.
  element_type* data() const noexcept { return data_; }
  /// Its length in elements: size_bytes() / sizeof(element_type) (1 for a scalar T).
  std::size_t size() const noexcept { return bytes_ / sizeof(element_type); }
  std::size_t size_bytes() const noexcept { return bytes_; }  ///< Its size in bytes (the driver's).

 private:
  element_type* data_;
  std::size_t bytes_;
};

namespace detail {
// "3 parameters: 4 B at offset 0, 8 B at 8, 8 B at 16", for refusals.
CURT_COLD inline std::string describe_layout(const std::vector<kernel_parameter>& layout) {
  std::string text = fmt("%zu parameter%s", layout.size(), layout.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < layout.size(); ++i)
    text += fmt(i ? ", %zu B at %zu" : ": %zu B at offset %zu", layout[i].size, layout[i].offset);
  return text;
}
// "3 arguments of 4 B, 8 B, 8 B" (noun: "arguments", "parameters").
CURT_COLD inline std::string describe_sizes(const char* noun, const std::size_t* sizes,
                                            std::size_t count) {
  std::string text = fmt("%zu %s", count, noun);
  for (std::size_t i = 0; i < count; ++i) text += fmt(i ? ", %zu B" : " of %zu B", sizes[i]);
  return text;
}
// Runs `query`, a driver call about a kernel, as it is; where the driver wants a context and the
// thread has none, again in an active primary context, else the runtime device's (any_context).
template <class Query>
int kernel_query(Query query) {
  const int result = query();
  if (result != 201 /* CUDA_ERROR_INVALID_CONTEXT */ || current_context() != nullptr)
    return result;
  context_scope in(any_context);
  return query();
}
// A library kernel's name as the source spells it (demangled), from the driver.
inline std::string library_kernel_name(cudaKernel_t kernel) {
  const char* name = nullptr;
  check_runtime(kernel_query([&] {
                  return CURT_DETAIL_DRIVER_FUNCTION(cuKernelGetName, 12030)(&name, kernel);
                }),
                "cuKernelGetName(kernel)", __FILE__, __LINE__);
  return demangle(name);
}
// A library kernel's parameter layout, read once, the first time it is needed, and shared by the
// kernel's copies: `ready` is set (release) after the rest, under `mutex`, and never cleared.
struct kernel_layout {
  atomic<bool> ready{false};
  std::mutex mutex;
  bool known = false;  // false with a driver older than 12.4, which cannot tell
  std::vector<kernel_parameter> parameters;

  bool fits(const std::size_t* sizes, std::size_t count) const noexcept {
    bool ok = !known || count == parameters.size();
    for (std::size_t i = 0; known && ok && i < count; ++i) ok = sizes[i] == parameters[i].size;
    return ok;
  }
};
}  // namespace detail

template <class Signature>
class typed_library_kernel;
/// A library kernel whose parameter types the user asserts: curt::launch converts arguments to
/// them at compile time, as for a __global__ function. Made by library_kernel::as<Signature>().
template <class... Params>
class typed_library_kernel<void(Params...)> {
 public:
  using kernel_handle_tag = void;  ///< curt::launch takes it as a kernel, not as a functor
  static_assert((std::is_trivially_copyable_v<std::decay_t<Params>> && ...),
                "curt::library_kernel::as: kernel parameters are copied byte for byte; each "
                "type must be trivially copyable");
  cudaKernel_t get() const noexcept { return handle_; }  ///< The CUkernel, for cuKernel* calls.

 private:
  friend class library_kernel;
  static constexpr std::size_t sizes[] = {sizeof(std::decay_t<Params>)..., 0};  // as received
  explicit typed_library_kernel(cudaKernel_t handle) noexcept : handle_(handle) {}
  cudaKernel_t handle_;
};

/// A kernel of a loaded library (a context-independent CUkernel) with its parameter layout, read
/// from the driver the first time it is needed and shared by copies (safe from several threads).
/// Copyable; valid while its library is loaded.
class library_kernel {
 public:
  using kernel_handle_tag = void;  ///< curt::launch takes it as a kernel, not as a functor

  /// The kernel `handle` (from cuLibraryGetKernel or cudaGetKernel). No driver call: the layout
  /// is read later, in a context at hand then (cuKernelGetParamInfo needs one).
  explicit library_kernel(cudaKernel_t handle)
      : handle_(handle), layout_(std::make_shared<detail::kernel_layout>()) {}
  /// Copies share the layout; a move copies too, so no kernel is left without one. @{
  library_kernel(const library_kernel&) = default;
  library_kernel& operator=(const library_kernel&) = default;  ///@}

  cudaKernel_t get() const noexcept { return handle_; }  ///< The CUkernel, for cuKernel* calls.
  /// The kernel's name as the source spells it (demangled), from the driver. Asked with no
  /// context if the driver allows; else in the current context, else an active primary context,
  /// else the runtime device's (which this may wake).
  std::string name() const { return detail::library_kernel_name(handle_); }
  /// Each parameter's offset and size, and whether the driver could tell (false, with none, for a
  /// driver older than 12.4: launches then go unchecked). Read at the first checked launch in the
  /// stream's context; before one, here, in the context name() uses (a failure throws). @{
  const std::vector<kernel_parameter>& parameters() const { return layout().parameters; }
  bool parameters_known() const { return layout().known; }  ///@}

  /// A view that launches with the parameter types of `Signature` (void(float, int*)), checked
  /// here against the driver's layout (read as for parameters()): the count, each type's size.
  template <class Signature>
  typed_library_kernel<Signature> as() const {
    using typed = typed_library_kernel<Signature>;
    constexpr std::size_t count = std::size(typed::sizes) - 1;
    if (!layout().fits(typed::sizes, count))
      refuse(detail::fmt("curt::library_kernel::as(%s)", name().c_str()), "parameters",
             typed::sizes, count);
    return typed(handle_);
  }

  /// Whether arguments of these sizes fit the layout (true where it is unknown). The first call
  /// reads the layout in `stream`'s context (the current one, if any); later ones read no driver.
  bool matches(stream_ref stream, const std::size_t* sizes, std::size_t count) const {
    if (CURT_UNLIKELY(!layout_->ready.load(detail::order::acquire))) read_layout(&stream);
    return layout_->fits(sizes, count);
  }
  /// Throws for arguments that do not fit, naming their sizes and the kernel's layout (read).
  [[noreturn]] CURT_COLD void refuse(const std::string& call, const char* noun,
                                     const std::size_t* sizes, std::size_t count) const {
    detail::raise(cudaErrorInvalidValue, call,
                  detail::describe_sizes(noun, sizes, count) + " do not match the kernel's " +
                      detail::describe_layout(layout_->parameters),
                  __FILE__, __LINE__);
  }

 private:
  const detail::kernel_layout& layout() const {
    if (CURT_UNLIKELY(!layout_->ready.load(detail::order::acquire))) read_layout(nullptr);
    return *layout_;
  }
  // Fills the layout once: in `stream`'s context where given, else as name() asks. A failure
  // throws and leaves it unread, for the next call to try again.
  CURT_COLD void read_layout(const stream_ref* stream) const {
    static const auto info = reinterpret_cast<detail::driver_fn::cuKernelGetParamInfo_v12040::type>(
        detail::driver_function_or_null("cuKernelGetParamInfo", 12040));
    detail::kernel_layout& l = *layout_;
    std::lock_guard<std::mutex> lock(l.mutex);
    if (l.ready.load(detail::order::relaxed)) return;  // another thread read it meanwhile
    if (info != nullptr) {  // otherwise launches are not checked
      detail::context_scope in;
      if (stream != nullptr) in.enter(detail::for_stream, stream->get());
      detail::entries<kernel_parameter> parameters;
      detail::check_runtime(detail::kernel_query([&] {
                              parameters.clear();
                              for (std::size_t i = 0;; ++i) {
                                kernel_parameter p;
                                const int result = info(handle_, i, &p.offset, &p.size);
                                if (result == 1) return 0;  // INVALID_VALUE: past the last one
                                if (result != 0) return result;
                                parameters.push_back(p);
                              }
                            }),
                            "cuKernelGetParamInfo(kernel)", __FILE__, __LINE__);
      l.parameters = std::vector<kernel_parameter>(parameters.begin(), parameters.end());
      l.known = true;
    }
    l.ready.store(true, detail::order::release);
  }

  cudaKernel_t handle_;
  std::shared_ptr<detail::kernel_layout> layout_;
};

/// Launches a library kernel; each argument is passed byte for byte, so its size must be its
/// parameter's (checked against the driver's layout: pass 2.0f, not 2.0, for a float). Types of
/// one size are not told apart (an int for a float passes): as<Signature>() checks the types.
template <class... Args>
void launch(stream_ref stream, const launch_config& config, const library_kernel& kernel,
            Args&&... args) {
  static_assert((std::is_trivially_copyable_v<std::decay_t<Args>> && ...),
                "curt::launch: a library kernel's arguments are copied byte for byte; each must "
                "be trivially copyable (pass a buffer's data(), not the buffer)");
  static constexpr std::size_t sizes[] = {sizeof(std::decay_t<Args>)..., 0};
  if (CURT_UNLIKELY(!kernel.matches(stream, sizes, sizeof...(Args)))) {
    detail::context_scope in(detail::for_stream, stream.get());  // the name, there too
    kernel.refuse(detail::describe_launch(config.native(stream.get()), kernel.name()),
                  "arguments", sizes, sizeof...(Args));
  }
  // Copies of the decayed values: an array argument is passed as its address, as it decays.
  std::tuple<std::decay_t<Args>...> values(std::forward<Args>(args)...);
  std::apply([&](auto&... v) {
    void* pointers[] = {static_cast<void*>(&v)..., nullptr};
    detail::launch_or_throw(config.native(stream.get()), kernel.get(), pointers);
  }, values);
}

/// Launches a typed view of a library kernel: arguments convert to its parameters at compile
/// time, as for a __global__ function.
template <class... Params, class... Args>
void launch(stream_ref stream, const launch_config& config,
            const typed_library_kernel<void(Params...)>& kernel, Args&&... args) {
  detail::launch_converted<Params...>(config.native(stream.get()), kernel.get(),
                                      std::forward<Args>(args)...);
}

/// A non-owning library handle.
class library_ref {
 public:
  /// Refers to `handle` (a CUlibrary), owning nothing; no check, no driver call.
  library_ref(cudaLibrary_t handle) noexcept : handle_(handle) {}  // NOLINT: implicit by design
  /// The native handle; get() throws and valid() is false for a ref of an owner holding none. @{
  cudaLibrary_t get() const { return native("get()"); }
  bool valid() const noexcept { return !detail::is_state_handle(handle_); }  ///@}

  /// The kernel `name` (extern "C" or a lowered name: rtc::compiled::lowered_name); a name the
  /// library lacks throws, naming the kernels it has.
  library_kernel kernel(const std::string& name) const {
    cudaKernel_t kernel = nullptr;
    const cudaLibrary_t library = native("kernel()");  // refuses an empty owner before the driver
    const int result =
        CURT_DETAIL_DRIVER_FUNCTION(cuLibraryGetKernel, 12000)(&kernel, library, name.c_str());
    if (CURT_UNLIKELY(result != 0))
      detail::throw_error(std::error_code(result, driver_category()),
                          detail::fmt("cuLibraryGetKernel(\"%s\")", name.c_str()), __FILE__,
                          __LINE__, [&] { return missing(name, "kernel"); });
    return library_kernel(kernel);
  }

  /// The names of the library's kernels, demangled (CUDA 12.4+).
  std::vector<std::string> kernel_names() const {
    const cudaLibrary_t library = native("kernel_names()");
    unsigned count = 0;
    detail::check_runtime(
        CURT_DETAIL_DRIVER_FUNCTION(cuLibraryGetKernelCount, 12040)(&count, library),
        "cuLibraryGetKernelCount(library)", __FILE__, __LINE__);
    if (count == 0) return {};  // (no array to hand cuLibraryEnumerateKernels)
    detail::entries<cudaKernel_t> kernels(count);
    detail::check_runtime(CURT_DETAIL_DRIVER_FUNCTION(cuLibraryEnumerateKernels, 12040)(
                              kernels.data(), count, library),
                          "cuLibraryEnumerateKernels(library)", __FILE__, __LINE__);
    std::vector<std::string> names(count);
    for (unsigned i = 0; i < count; ++i) names[i] = detail::library_kernel_name(kernels[i]);
    return names;
  }

  /// The global (__device__ or __constant__) variable `name` of type T in d's context (its current
  /// one, else its primary); throws unless its size is sizeof(T) (for T = E[], n * sizeof(E)).
  template <class T>
  library_variable<T> global(device d, const std::string& name) const {
    (void)native("global()");  // an owner holding none says so before any context is made
    device_guard guard(d);
    return variable<T>(CURT_DETAIL_DRIVER_FUNCTION(cuLibraryGetGlobal, 12000), name,
                       "cuLibraryGetGlobal", "global variable");
  }
  /// The managed (__managed__) variable `name` of type T, size checked as for global(). The
  /// driver registers it when the library is loaded into a context: d's is loaded first.
  template <class T>
  library_variable<T> managed(device d, const std::string& name) const {
    device_guard guard(d);
    CUmodule module = nullptr;
    detail::check_runtime(
        CURT_DETAIL_DRIVER_FUNCTION(cuLibraryGetModule, 12000)(&module, native("managed()")),
        detail::fmt("cuLibraryGetModule(library, device %d)", d.ordinal()).c_str(), __FILE__,
        __LINE__);
    return variable<T>(CURT_DETAIL_DRIVER_FUNCTION(cuLibraryGetManaged, 12000), name,
                       "cuLibraryGetManaged", "managed variable");
  }

 protected:
  /// The handle for a driver call; throws, naming `operation`, when there is none.
  cudaLibrary_t native(const char* operation) const {
    return detail::usable_handle(handle_, "curt::library", operation);
  }
  cudaLibrary_t handle_;  ///< The library; a state (see handle.hpp) for an owner that holds none.

 private:
  template <class T, class Get>
  library_variable<T> variable(Get lookup, const std::string& name, const char* call,
                               const char* what) const {
    using element = std::remove_all_extents_t<T>;
    unsigned long long pointer = 0;
    std::size_t bytes = 0;
    const int result = lookup(&pointer, &bytes, native(call), name.c_str());
    if (CURT_UNLIKELY(result != 0))
      detail::throw_error(std::error_code(result, driver_category()),
                          detail::fmt("%s(\"%s\")", call, name.c_str()), __FILE__, __LINE__,
                          [&] { return result == 500 ? missing(name, what) : std::string(); });
    constexpr bool unbounded = std::is_array_v<T> && std::extent_v<T> == 0;
    constexpr std::size_t unit = sizeof(std::conditional_t<unbounded, element, T>);
    if (unbounded ? bytes % unit != 0 : bytes != unit)
      detail::raise(cudaErrorInvalidValue, detail::fmt("%s(\"%s\")", call, name.c_str()),
                    detail::fmt(unbounded ? "the %s has %zu B, not a whole number of %zu-byte "
                                            "elements"
                                          : "the %s has %zu B, but the requested type has %zu B",
                                what, bytes, unit),
                    __FILE__, __LINE__);
    return library_variable<T>(reinterpret_cast<element*>(static_cast<std::uintptr_t>(pointer)),
                               bytes);
  }
  // Why a name was not found: the kernels the library has (mangled names are C++ functions).
  CURT_COLD std::string missing(const std::string& name, const char* what) const {
    std::string text = detail::fmt("the library has no %s \"%s\"", what, name.c_str());
    try {
      std::string names;
      for (const std::string& k : kernel_names()) names += (names.empty() ? "" : ", ") + k;
      text += detail::fmt("; its kernels: %s", names.empty() ? "none" : names.c_str());
    } catch (const cuda_error&) {  // a driver older than 12.4: no list
    }
    return text + " (a C++ name is mangled: declare it extern \"C\", or look it up by the "
                  "lowered name of a name expression, curt::rtc::compiled::lowered_name)";
  }
};

namespace detail {
struct library_traits {
  static void destroy(library_ref& l, no_state&) {
    report(CURT_DETAIL_DRIVER_FUNCTION(cuLibraryUnload, 12000)(l.get()), "cuLibraryUnload",
           __FILE__, __LINE__);
  }
};
}  // namespace detail

/// A loaded library, unloaded (cuLibraryUnload) on destruction. Move-only.
class library : public detail::unique_handle<library_ref, detail::library_traits> {
  using base = detail::unique_handle<library_ref, detail::library_traits>;

 public:
  /// Loads a CUBIN, fatbin or NUL-terminated PTX image (the driver copies it). A failure throws
  /// with the JIT's error log; under lazy loading PTX may be compiled only at a kernel's first use
  /// in a context, and fail there (see the top of this header).
  explicit library(const void* image, const library_options& options = {})
      : base(load(image, nullptr, options)) {}
  /// Loads a CUBIN, fatbin or PTX file.
  static library from_file(const std::string& path, const library_options& options = {}) {
    return library(load(nullptr, path.c_str(), options));
  }
  explicit library(no_handle_t) noexcept : base(no_handle) {}  ///< An empty owner: uses throw.
  /// Takes ownership of a loaded library (not null).
  static library from_native_handle(cudaLibrary_t handle) {
    if (handle == nullptr || detail::is_state_handle(handle))
      detail::raise(cudaErrorInvalidResourceHandle, "curt::library::from_native_handle",
                    "only a loaded library can be owned, not null", __FILE__, __LINE__);
    return library(handle);
  }

 private:
  explicit library(cudaLibrary_t handle) noexcept : base(handle) {}

  static cudaLibrary_t load(const void* image, const char* path, const library_options& o) {
    std::string errors(16384, '\0');  // the JIT's error log (CU_JIT_ERROR_LOG_BUFFER, 5 and 6)
    detail::entries<int> keys = o.keys_;
    detail::entries<void*> values = o.values_;
    keys.push_back(5);
    keys.push_back(6);
    values.push_back(errors.data());
    values.push_back(reinterpret_cast<void*>(errors.size() - 1));
    cudaLibrary_t library = nullptr;
    const auto count = static_cast<unsigned>(keys.size());
    const int result =
        path ? CURT_DETAIL_DRIVER_FUNCTION(cuLibraryLoadFromFile, 12000)(
                   &library, path, keys.data(), values.data(), count, nullptr, nullptr, 0)
             : CURT_DETAIL_DRIVER_FUNCTION(cuLibraryLoadData, 12000)(
                   &library, image, keys.data(), values.data(), count, nullptr, nullptr, 0);
    if (CURT_UNLIKELY(result != 0)) {
      errors.resize(errors.find('\0'));
      detail::throw_error(
          std::error_code(result, driver_category()),
          path ? detail::fmt("cuLibraryLoadFromFile(\"%s\")", path)
               : detail::fmt("cuLibraryLoadData(%s image)", image_kind(image)),
          __FILE__, __LINE__, errors.empty() ? "" : "JIT error log:\n" + errors);
    }
    return library;
  }
  // What an image holds, by its first bytes, for messages.
  static const char* image_kind(const void* image) {
    if (image == nullptr) return "null";
    const auto* bytes = static_cast<const unsigned char*>(image);
    if (bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F') return "CUBIN";
    if (bytes[0] == 0x50 && bytes[1] == 0xed && bytes[2] == 0x55 && bytes[3] == 0xba)
      return "fatbin";
    return "PTX";
  }
};

}  // namespace curt
