// texture: a bilinear image resize through a texture, checked against a CPU bilinear reference:
//   1. texture, linear filter   a cuda_array<float> read through a texture_object (normalized
//                               coordinates, linear filtering, clamp): one tex2D per output pixel,
//                               the texture unit does the interpolation
//   2. kernel, global loads     the same resize in software: four loads from a device_buffer with
//                               clamped indices and the interpolation in floats (the yardstick)
// Each runs upscaling (W x H to 4/3 of it) and downscaling (to 2/3), and at the edge shapes 1x1 ->
// 7x5, 3x2 -> 1x1 and 2x2 -> 64x64, from fresh random pixels in [1, 2], into an output poisoned
// with NaN first. Output pixel (i, j) samples the input at ((i + 0.5) / OW, (j + 0.5) / OH): the
// texel coordinate x = u * W - 0.5 (and y), its four neighbours clamped to the image, weighted by
// the fractions a = x - floor(x) and b (the CPU reference, in double).
// Tolerance: the texture unit keeps each weight in 9-bit fixed point with 8 fractional bits, so a
// and b are off by less than 2^-8; the result's derivative in a or b is at most the spread (max -
// min) of the four texels, so the error is below 2 * 2^-8 * spread. Turning u into a texel
// coordinate in floats adds up to about u's ulp times W (2^-12 of a texel for images up to 4096
// wide), so the bound is spread * (2^-7 + 2^-11) + 1e-6 (float rounding of values in [1, 2]); the
// detail column shows the worst error as a fraction of it.
// Bandwidth counts W * H * 4 bytes read and OW * OH * 4 written. Prints the result table last; its
// last line is "texture: PASSED" (exit 0) or "texture: FAILED" (exit 1); 2 for bad arguments, 77
// when there is no CUDA device.
// Usage: texture [W [H]]   (default 1999 x 1111; H defaults to W when W is given)
#include "example.hpp"

#include <curt/array.hpp>
#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/texture.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

__global__ void resize_texture(cudaTextureObject_t image, float* out, int out_w, int out_h) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < out_w && j < out_h)
    out[j * out_w + i] = tex2D<float>(image, (i + 0.5f) / out_w, (j + 0.5f) / out_h);
}

__global__ void resize_global(const float* image, int w, int h, float* out, int out_w, int out_h) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y;
  if (i >= out_w || j >= out_h) return;
  const float x = (i + 0.5f) / out_w * w - 0.5f, y = (j + 0.5f) / out_h * h - 0.5f;
  const float x0 = floorf(x), y0 = floorf(y), a = x - x0, b = y - y0;
  const auto at = [&](float u, float v) {
    const int c = min(max(int(u), 0), w - 1), r = min(max(int(v), 0), h - 1);
    return image[r * w + c];
  };
  out[j * out_w + i] = (1 - a) * (1 - b) * at(x0, y0) + a * (1 - b) * at(x0 + 1, y0) +
                       (1 - a) * b * at(x0, y0 + 1) + a * b * at(x0 + 1, y0 + 1);
}

struct resize {
  int w, h, out_w, out_h;
  std::string shape() const {
    return std::to_string(w) + "x" + std::to_string(h) + " -> " + std::to_string(out_w) + "x" +
           std::to_string(out_h);
  }
  std::size_t in_size() const { return std::size_t(w) * h; }
  std::size_t out_size() const { return std::size_t(out_w) * out_h; }
  curt::launch_config config() const {
    return curt::launch_config(
        dim3(unsigned(curt::ceil_div(out_w, 32)), unsigned(curt::ceil_div(out_h, 8))), dim3(32, 8));
  }
};

// The worst |got - reference| / bound over the output (see the file comment); NaN for a NaN.
double worst_error(const resize& r, const std::vector<float>& in, const float* got) {
  double worst = 0;
  for (int j = 0; j < r.out_h; ++j)
    for (int i = 0; i < r.out_w; ++i) {
      const double u = (i + 0.5f) / r.out_w, v = (j + 0.5f) / r.out_h;  // as the kernels' floats
      const double x = u * r.w - 0.5, y = v * r.h - 0.5;
      const double x0 = std::floor(x), y0 = std::floor(y), a = x - x0, b = y - y0;
      const auto at = [&](double c, double row) {
        const int cc = std::min(std::max(int(c), 0), r.w - 1);
        const int rr = std::min(std::max(int(row), 0), r.h - 1);
        return double(in[std::size_t(rr) * r.w + cc]);
      };
      const double t00 = at(x0, y0), t10 = at(x0 + 1, y0), t01 = at(x0, y0 + 1),
                   t11 = at(x0 + 1, y0 + 1);
      const double want =
          (1 - a) * (1 - b) * t00 + a * (1 - b) * t10 + (1 - a) * b * t01 + a * b * t11;
      const double spread = std::max({t00, t10, t01, t11}) - std::min({t00, t10, t01, t11});
      const double bound = spread * (1.0 / 128 + 1.0 / 2048) + 1e-6;
      const double error = std::fabs(double(got[std::size_t(j) * r.out_w + i]) - want) / bound;
      if (std::isnan(error) || error > worst) worst = error;  // a NaN stays
    }
  return worst;
}

// One checked run of a variant (0: texture, 1: global loads) on fresh pixels; returns the worst
// error / bound, and the median time of `repetitions` runs in `ms` (0 repetitions: not timed).
double run(int variant, const resize& r, curt::device device, curt::stream_ref stream,
           int repetitions, double& ms) {
  const std::vector<float> in = curt_example::random_values(r.in_size(), 1.0f, 2.0f);
  curt::cuda_array<float> image = curt::cuda_array<float>::two_d(device, r.w, r.h);
  curt::device_buffer<float> pixels(device, r.in_size()), out(device, r.out_size());
  curt::pinned_buffer<float> result(device, r.out_size());
  curt::copy(image, in, stream);
  curt::copy(pixels, in, stream);
  curt::texture_object texture(image, curt::texture_description()
                                          .address(curt::address_mode::clamp)
                                          .filter(curt::filter_mode::linear)
                                          .normalized_coordinates());
  const auto once = [&](curt::stream_ref s) {
    if (variant == 0)
      curt::launch(s, r.config(), resize_texture, texture.get(), out.data(), r.out_w, r.out_h);
    else
      curt::launch(s, r.config(), resize_global, pixels.data(), r.w, r.h, out.data(), r.out_w,
                   r.out_h);
  };
  curt::fill(out, std::numeric_limits<float>::quiet_NaN(), stream);
  once(stream);
  curt::copy_and_wait(result, out, stream);
  ms = repetitions > 0 ? curt_example::median_ms(stream, repetitions, once) : 0;
  return worst_error(r, in, result.data());
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "texture", "texture [W [H]]   (1 <= W, H <= 8192; default 1999 x 1111; H defaults to W)",
      [&] {
        const int w = int(curt_example::size_argument(argc, argv, 1, 1999, 1, 8192));
        const int h = int(curt_example::size_argument(argc, argv, 2, argc > 1 ? w : 1111, 1, 8192));
        const curt::device device(0);
        curt::stream stream(device);
        const resize main_shapes[] = {{w, h, std::max(1, w * 4 / 3), std::max(1, h * 4 / 3)},
                                      {w, h, std::max(1, w * 2 / 3), std::max(1, h * 2 / 3)}};
        const resize edges[] = {{1, 1, 7, 5}, {3, 2, 1, 1}, {2, 2, 64, 64}};
        const char* names[] = {"texture, linear filter", "kernel, global loads"};
        std::printf("texture: bilinear resize of %d x %d floats, median of 10 timed runs\n", w, h);
        std::printf("edge shapes, both variants: 1x1 -> 7x5, 3x2 -> 1x1, 2x2 -> 64x64\n");
        curt_example::table table(
            "texture", curt_example::copy_gb_per_s(device, stream, std::size_t(w) * h * 4));
        for (const resize& r : main_shapes)
          for (int variant = 0; variant < 2; ++variant) {
            double ms = 0, edge_worst = 0, unused = 0;
            const double worst = run(variant, r, device, stream, 10, ms);
            for (const resize& e : edges) {
              const double error = run(variant, e, device, stream, 0, unused);
              if (std::isnan(error) || error > edge_worst) edge_worst = error;
            }
            const bool passed = worst <= 1 && edge_worst <= 1;  // false for a NaN
            char detail[120];
            std::snprintf(detail, sizeof detail, "worst error %.3f of the bound (edge shapes %.3f)",
                          worst, edge_worst);
            table.row(names[variant], r.shape(), passed, ms,
                      4.0 * double(r.in_size() + r.out_size()), detail);
          }
        return table.print();
      });
}
