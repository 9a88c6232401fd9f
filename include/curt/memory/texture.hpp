// curt/memory/texture.hpp: texture and surface objects (cudaCreateTextureObject,
// cudaCreateSurfaceObject) over curt's memory.
//
//   curt::texture_object tex(image, curt::texture_description()  // image: a cuda_array<float>
//                                       .filter(curt::filter_mode::linear)
//                                       .normalized_coordinates());
//   curt::launch(stream, config, kernel, tex.get());  // tex2D<float>(texture, u, v) in it
//
// A texture reads a cuda_array (tex1D, tex2D, tex3D, tex1DLayered, tex2DLayered), a device_buffer
// (tex1Dfetch: integer indices, no filtering) or a pitched_buffer (tex2D). A surface reads and
// writes an array made with array_flags::surface_load_store (surf2Dwrite, ...: x in bytes).
// Neither owns the memory, which must outlive it (a temporary is refused). Each is made in a
// context of the memory's device (device_guard), destroyed in that context, and used by kernels
// there. What CUDA would ignore or silently change is refused before CUDA is called. CUDA 13.0
// has no texture or surface references, only these objects.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/error.hpp>
#include <curt/core/handle.hpp>
#include <curt/memory/array.hpp>
#include <curt/memory/buffer.hpp>
#include <curt/memory/pitched.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace curt {

/// Where a fetch outside [0, extent) lands, per dimension (cudaTextureAddressMode).
enum class address_mode {
  wrap = cudaAddressModeWrap,      ///< repeats the texture (normalized coordinates only)
  clamp = cudaAddressModeClamp,    ///< the nearest edge element
  mirror = cudaAddressModeMirror,  ///< repeats it mirrored (normalized coordinates only)
  border = cudaAddressModeBorder,  ///< the border colour
};
/// Which elements a fetch reads (cudaTextureFilterMode).
enum class filter_mode {
  point = cudaFilterModePoint,    ///< the nearest one
  linear = cudaFilterModeLinear,  ///< the 2, 4 or 8 around it, interpolated (float results only)
};
/// What a fetch returns (cudaTextureReadMode).
enum class read_mode {
  element_type = cudaReadModeElementType,          ///< T itself
  normalized_float = cudaReadModeNormalizedFloat,  ///< 8-, 16-bit integers as floats in [0, 1]
};

/// How a texture samples (cudaTextureDesc): by default clamp, point filtering, T itself,
/// coordinates in elements. Setters chain: `texture_description().filter(filter_mode::linear)`.
class texture_description {
 public:
  texture_description() noexcept { address(address_mode::clamp); }  ///< The defaults.
  /// The address mode of every dimension, or of x, y and z. @{
  texture_description& address(address_mode all) noexcept { return address(all, all, all); }
  texture_description& address(address_mode x, address_mode y, address_mode z) noexcept {
    desc_.addressMode[0] = cudaTextureAddressMode(x);
    desc_.addressMode[1] = cudaTextureAddressMode(y);
    desc_.addressMode[2] = cudaTextureAddressMode(z);
    return *this;
  }  ///@}
  /// Point or linear filtering; T itself or normalized floats; coordinates in [0, 1) across each
  /// extent; what address_mode::border returns (as floats, one per channel; a texture that
  /// returns integers reads each float's bits, as CUDA's header says: pass the integer's bits). @{
  texture_description& filter(filter_mode m) noexcept { return set(desc_.filterMode, m); }
  texture_description& read(read_mode m) noexcept { return set(desc_.readMode, m); }
  texture_description& normalized_coordinates(bool on = true) noexcept {
    return set(desc_.normalizedCoords, on);
  }
  texture_description& border_color(float r, float g = 0, float b = 0, float a = 0) noexcept {
    desc_.borderColor[0] = r, desc_.borderColor[1] = g, desc_.borderColor[2] = b;
    return set(desc_.borderColor[3], a);
  }                                                                 ///@}
  const cudaTextureDesc& native() const noexcept { return desc_; }  ///< What CUDA receives.

 private:
  template <class Field, class Value>
  texture_description& set(Field& field, Value value) noexcept {
    field = static_cast<Field>(value);
    return *this;
  }
  cudaTextureDesc desc_{};
};

namespace detail {

// The object kinds: name, destroy function.
#define CURT_DETAIL_OBJECT_KIND(kind, destroy_function)                              \
  struct kind##_kind {                                                               \
    static constexpr const char* name = "curt::" #kind;                              \
    static constexpr const char* destroy_call = #destroy_function;                   \
    static cudaError_t destroy(unsigned long long h) { return destroy_function(h); } \
  };
CURT_DETAIL_OBJECT_KIND(texture_object, cudaDestroyTextureObject)
CURT_DETAIL_OBJECT_KIND(surface_object, cudaDestroySurfaceObject)
#undef CURT_DETAIL_OBJECT_KIND

template <class Kind>  // the non-owning half: the object (as a pointer; never a state's value)
class object_ref {     // and where it was made
 public:
  explicit object_ref(void* handle, allocation where = {}) noexcept
      : handle_(handle), where_(where) {}
  void* get() const { return native("get()"); }
  bool valid() const noexcept { return !is_state_handle(handle_); }
  curt::device device() const {
    (void)native("device()");
    return curt::device::from_ordinal_unchecked(where_.ordinal);
  }

 protected:
  void* native(const char* operation) const {
    return usable_handle(handle_, Kind::name, operation);
  }
  template <class>
  friend struct object_traits;
  void* handle_;
  allocation where_;
};

template <class Kind>
struct object_traits {
  static void destroy(object_ref<Kind>& object, no_state&) {
    context_scope in(object.where_.context);
    check(Kind::destroy(std::uintptr_t(object.handle_)), Kind::destroy_call, __FILE__, __LINE__);
  }
};

struct object_request {  // what CUDA is asked for, where, and the call in messages
  curt::device device;
  cudaResourceDesc resource;
  cudaChannelFormatDesc channel;
  std::string call;
  bool elements;  // false for memory of no element
};

// Why CUDA refused linear or pitched memory for a texture, after it did (a good creation pays
// nothing): the device's limits of elements, extents, pitch and alignment.
CURT_COLD inline std::string memory_limits(cudaError_t status, const object_request& r) try {
  if (status != cudaErrorInvalidValue) return {};
  const cudaDeviceProp& p = r.device.properties();
  const cudaChannelFormatDesc& c = r.channel;
  const std::size_t element = std::size_t(c.x + c.y + c.z + c.w) / 8;
  const void* at = nullptr;  // checked against textureAlignment last
  if (r.resource.resType == cudaResourceTypeLinear) {
    at = r.resource.res.linear.devPtr;
    std::size_t most = 0;
    const std::size_t n = r.resource.res.linear.sizeInBytes / (element ? element : 1);
    if (cudaDeviceGetTexture1DLinearMaxWidth(&most, &c, r.device.ordinal()) != cudaSuccess)
      (void)cudaGetLastError();  // the user's next cudaGetLastError() must not see this one
    else if (n > most)
      return fmt("%zu elements; the device's linear textures of this format hold at most %zu",
                 n, most);
  } else if (r.resource.resType == cudaResourceTypePitch2D) {
    const auto& m = r.resource.res.pitch2D;
    at = m.devPtr;
    const int* most = p.maxTexture2DLinear;
    if (m.width > std::size_t(most[0]) || m.height > std::size_t(most[1]) ||
        m.pitchInBytes > std::size_t(most[2]))
      return fmt("%zu x %zu elements, pitch %zu B; the device's pitched textures are at most "
                 "%d x %d, pitch %d B", m.width, m.height, m.pitchInBytes, most[0], most[1],
                 most[2]);
    if (m.pitchInBytes % p.texturePitchAlignment != 0)
      return fmt("the pitch %zu B is not a multiple of the device's texturePitchAlignment %zu B",
                 m.pitchInBytes, p.texturePitchAlignment);
  } else {
    return {};
  }
  if (reinterpret_cast<std::uintptr_t>(at) % p.textureAlignment != 0)
    return fmt("the memory's address is not a multiple of the device's textureAlignment %zu B",
               p.textureAlignment);
  return {};
} catch (...) {  // no explanation rather than another error
  return {};
}

template <class Kind>  // what texture_object and surface_object share
class basic_object : public unique_handle<object_ref<Kind>, object_traits<Kind>> {
  using base = unique_handle<object_ref<Kind>, object_traits<Kind>>;

 public:
  unsigned long long get() const { return std::uintptr_t(this->native("get()")); }
  unsigned long long release() { return std::uintptr_t(base::release()); }

 protected:
  explicit basic_object(no_handle_t) noexcept : base(no_handle) {}
  // Runs `create(&object, r)`, a runtime call named `function`, in the device's device_guard.
  template <class Create>
  basic_object(const object_request& r, const char* function, Create&& create)
      : base(object_ref<Kind>(state_handle<void*>(handle_state::empty))) {
    unsigned long long made = 0;
    this->where_ = allocate_on(r.device, [&] {
      const cudaError_t status = create(&made, r);
      if (CURT_UNLIKELY(status != cudaSuccess))
        throw_error(make_error_code(status),
                    fmt("%s(device %d) for %s", function, r.device.ordinal(), r.call.c_str()),
                    __FILE__, __LINE__, [&] { return memory_limits(status, r); });
    });
    this->handle_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(made));
  }
};

// Refuses what CUDA would change or ignore: wrap or mirror with coordinates in elements (CUDA
// clamps), filtering, normalized coordinates or address modes over linear memory (ignored), linear
// filtering of integer results, normalized reads of anything but 8- and 16-bit integers (read as
// they are); then memory of no element.
inline const object_request& check_texture(const cudaTextureDesc& t, const object_request& r) {
  const bool linear = r.resource.resType == cudaResourceTypeLinear;
  const bool floats = r.channel.f == cudaChannelFormatKindFloat;
  const bool small_integer = !floats && r.channel.x <= 16;
  const bool normalized = t.readMode == cudaReadModeNormalizedFloat;
  const char* why = nullptr;
  bool addressed = false;  // an address mode other than clamp
  for (cudaTextureAddressMode m : t.addressMode) {
    addressed = addressed || m != cudaAddressModeClamp;
    if (!linear && !t.normalizedCoords && (m == cudaAddressModeWrap || m == cudaAddressModeMirror))
      why =
          "address_mode::wrap and ::mirror need normalized coordinates (CUDA clamps instead): "
          "add normalized_coordinates(), or use clamp or border";
  }
  if (linear && (t.filterMode == cudaFilterModeLinear || t.normalizedCoords || addressed))
    why =
        "a texture over linear memory reads elements by index (tex1Dfetch), without filtering, "
        "normalized coordinates or address modes (out of range reads 0): for those, use a "
        "cuda_array or a pitched_buffer";
  else if (t.filterMode == cudaFilterModeLinear && !floats && !(small_integer && normalized))
    why =
        "linear filtering returns floats, and this texture returns integers: read 8- or 16-bit "
        "integers with read_mode::normalized_float, or filter with filter_mode::point";
  else if (normalized && !small_integer)
    why =
        "read_mode::normalized_float converts only 8- and 16-bit integers (CUDA reads other "
        "elements as they are): read with read_mode::element_type";
  if (why == nullptr && !r.elements) why = "it holds no elements; a texture needs at least one";
  if (why != nullptr) raise(cudaErrorInvalidValue, r.call, why, __FILE__, __LINE__);
  return r;
}

// An object over memory of T (`kind`, of device d); refused without channel format.
template <class T>
object_request request(const char* object, curt::device d, const char* kind, bool elements,
                       const cudaResourceDesc& resource) {
  object_request r{d, resource, {}, fmt("%s(%s)", object, owner_name<T>(kind).c_str()), elements};
  r.channel = channel_of<T>(r.call);
  return r;
}

// The resources: an array (any shape), linear memory, pitched 2D memory.
template <class T>
cudaResourceDesc resource_of(const cuda_array<T>& array) {
  cudaResourceDesc r{};
  r.resType = cudaResourceTypeArray;
  r.res.array.array = array.get();
  return r;
}
template <class T>
cudaResourceDesc resource_of(const device_buffer<T>& buffer) {
  cudaResourceDesc r{};
  r.resType = cudaResourceTypeLinear;
  r.res.linear = {const_cast<T*>(buffer.data()), cudaCreateChannelDesc<T>(), buffer.size_bytes()};
  return r;
}
template <class T>
cudaResourceDesc resource_of(const pitched_buffer<T>& image) {
  cudaResourceDesc r{};
  r.resType = cudaResourceTypePitch2D;
  r.res.pitch2D = {const_cast<T*>(image.data()), cudaCreateChannelDesc<T>(), image.width(),
                   image.height(), image.pitch()};
  return r;
}

}  // namespace detail

/// A texture object (cudaCreateTextureObject) over a cuda_array, a device_buffer or a
/// pitched_buffer of T, which must outlive it; destroyed with its owner. Move-only.
class texture_object : public detail::basic_object<detail::texture_object_kind> {
  using base = detail::basic_object<detail::texture_object_kind>;

 public:
  /// A texture over an array (any shape), linear memory (tex1Dfetch) or pitched memory (tex2D),
  /// sampled as `description` says. Throws before CUDA for memory that holds none or no element,
  /// a T without channel format, or a description CUDA would not honour. no_handle: empty. @{
  template <class T>
  explicit texture_object(const cuda_array<T>& array, const texture_description& description = {})
      : texture_object(array, description, "cuda_array", true) {}
  template <class T>
  explicit texture_object(const device_buffer<T>& buffer,
                          const texture_description& description = {})
      : texture_object(buffer, description, "device_buffer", !buffer.empty()) {}
  template <class T>
  explicit texture_object(const pitched_buffer<T>& image,
                          const texture_description& description = {})
      : texture_object(image, description, "pitched_buffer", image.element_count() != 0) {}
  explicit texture_object(no_handle_t) noexcept : base(no_handle) {}  ///@}
  /// Refused: a temporary would be gone before the texture is used. @{
  template <class T>
  texture_object(const cuda_array<T>&&, const texture_description& = {}) = delete;
  template <class T>
  texture_object(const device_buffer<T>&&, const texture_description& = {}) = delete;
  template <class T>
  texture_object(const pitched_buffer<T>&&, const texture_description& = {}) = delete;  ///@}

  using base::device;   ///< The device it was made on; throws when the owner holds none.
  using base::get;      ///< The cudaTextureObject_t for kernels; throws when the owner holds none.
  using base::release;  ///< Gives up ownership (the caller destroys it); the owner is "released".
  using base::valid;    ///< Holds a texture: false when empty, moved-from or released.

 private:
  template <class Memory>
  texture_object(const Memory& m, const texture_description& description, const char* kind,
                 bool elements)
      : base(detail::check_texture(
                 description.native(),
                 detail::request<typename Memory::value_type>(
                     "curt::texture_object", m.device(), kind, elements, detail::resource_of(m))),
             "cudaCreateTextureObject",
             [&](unsigned long long* made, const detail::object_request& r) {
               return cudaCreateTextureObject(made, &r.resource, &description.native(), nullptr);
             }) {}
};

/// A surface object (cudaCreateSurfaceObject) over a cuda_array made with
/// array_flags::surface_load_store, which must outlive it; destroyed with its owner. Kernels read
/// and write the array through it (surf2Dread, surf2Dwrite, ...: x in bytes). Move-only.
class surface_object : public detail::basic_object<detail::surface_object_kind> {
  using base = detail::basic_object<detail::surface_object_kind>;

 public:
  /// A surface over `array`; throws before CUDA when it holds none or was made without
  /// array_flags::surface_load_store. no_handle: an empty owner. @{
  template <class T>
  explicit surface_object(cuda_array<T>& array)
      : base(request(array), "cudaCreateSurfaceObject",
             [](unsigned long long* made, const detail::object_request& r) {
               return cudaCreateSurfaceObject(made, &r.resource);
             }) {}
  explicit surface_object(no_handle_t) noexcept : base(no_handle) {}  ///@}

  using base::device;   ///< The device it was made on; throws when the owner holds none.
  using base::get;      ///< The cudaSurfaceObject_t for kernels; throws when the owner holds none.
  using base::release;  ///< Gives up ownership (the caller destroys it); the owner is "released".
  using base::valid;    ///< Holds a surface: false when empty, moved-from or released.

 private:
  template <class T>
  static detail::object_request request(const cuda_array<T>& array) {
    detail::object_request r = detail::request<T>("curt::surface_object", array.device(),
                                                  "cuda_array", true, detail::resource_of(array));
    if (!has_flag(array.flags(), array_flags::surface_load_store))
      detail::raise(cudaErrorInvalidValue, r.call,
                    "the array was made without curt::array_flags::surface_load_store, which a "
                    "surface needs: make it with that flag",
                    __FILE__, __LINE__);
    return r;
  }
};

}  // namespace curt
