// What strict_warnings.cpp and strict_warnings.cu both compile: <curt/curt.hpp> and a use of its
// common templates (a header template warns only where it is instantiated). Compiled, never run.
#include <curt/curt.hpp>

#include <cstddef>
#include <vector>

inline float strict_warnings_uses(curt::device gpu) {
  curt::stream stream(gpu);
  curt::event done(gpu);
  curt::device_buffer<float> buffer(gpu, 1024);
  curt::pinned_buffer<float> pinned(gpu, 1024);
  std::vector<float> host(1024, 1.0f);
  curt::copy(buffer, host, stream);
  curt::copy(pinned, buffer, stream);
  curt::copy_and_wait(host, buffer, stream);
  curt::fill(buffer, 2.0f, stream);
  auto image = curt::cuda_array<float>::two_d(gpu, 32, 32, curt::array_flags::surface_load_store);
  curt::copy(image, buffer, stream);
  curt::copy(buffer, image, stream);
  curt::texture_object texture(image, curt::texture_description()
                                          .filter(curt::filter_mode::linear)
                                          .normalized_coordinates());
  curt::surface_object surface(image);
  done.record(stream);
  stream.synchronize();
  std::size_t total = 0;
  for (float value : host) total += static_cast<std::size_t>(value);
  return static_cast<float>(total) + static_cast<float>(curt::ceil_div(std::size_t{1000}, 256));
}
