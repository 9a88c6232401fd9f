// vec_add: c = a + b on the GPU, launched through curt::launch on a curt::stream twice, once as a
// __global__ kernel and once as a device lambda, each timed with curt events and checked against
// the CPU. Prints
//   vec_add: N elements, max relative error E, kernel time T ms: PASSED
// and exits with 0; 1 when a result is wrong (or CUDA failed), 77 when there is no device.
// Usage: vec_add [N]   (default 4194304 elements)
#include <curt/curt.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <random>
#include <vector>

namespace {

// Device memory for `count` elements of T, freed when it goes out of scope. (curt has no memory
// header yet, so the example keeps its own.)
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t count) : count_(count) {
    CURT_CHECK(cudaMalloc(&data_, bytes()));
  }
  ~device_array() {
    if (!data_) return;
    cudaError_t status = cudaFree(data_);
    if (status != cudaSuccess && status != cudaErrorCudartUnloading)
      std::fprintf(stderr, "vec_add: cudaFree failed: %s\n", cudaGetErrorString(status));
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;

  T* get() const noexcept { return data_; }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

constexpr unsigned kBlockThreads = 256;

__global__ void vec_add_kernel(const float* a, const float* b, float* c, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

}  // namespace

// How a variant puts c = a + b on the stream.
using launch_function = void (*)(curt::stream_ref, const curt::launch_config&, const float*,
                                 const float*, float*, std::size_t);

void launch_kernel(curt::stream_ref stream, const curt::launch_config& config, const float* a,
                   const float* b, float* c, std::size_t n) {
  curt::launch(stream, config, vec_add_kernel, a, b, c, n);
}

// The same computation as a device lambda (nvcc --extended-lambda, which curt::curt turns on). An
// extended lambda must live in a named function, so it is defined here rather than in main.
void launch_lambda(curt::stream_ref stream, const curt::launch_config& config, const float* a,
                   const float* b, float* c, std::size_t n) {
  curt::launch(
      stream, config,
      [n] __device__(const float* x, const float* y, float* z) {
        const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
        if (i < n) z[i] = x[i] + y[i];
      },
      a, b, c);
}

struct outcome {
  double max_relative_error = 0.0;  // NaN when some element was not computed
  float milliseconds = 0.0f;
};

// Runs one variant: a warm-up launch (the first launch of a kernel loads it), then, with the
// output poisoned, one timed launch; copies the result back and compares it with `reference`.
outcome run_variant(launch_function launch_add, curt::stream_ref stream, curt::device device,
                    const device_array<float>& a, const device_array<float>& b,
                    const device_array<float>& c, const std::vector<float>& reference) {
  const std::size_t n = c.size();
  const curt::launch_config config{dim3(curt::ceil_div(n, kBlockThreads)), dim3(kBlockThreads)};
  launch_add(stream, config, a.get(), b.get(), c.get(), n);

  // 0xFF bytes make NaN floats: any element the timed launch leaves alone fails the comparison.
  CURT_CHECK(cudaMemsetAsync(c.get(), 0xFF, c.bytes(), stream));
  const curt::event start(device, curt::event_flags::timing);
  const curt::event stop(device, curt::event_flags::timing);
  start.record(stream);
  launch_add(stream, config, a.get(), b.get(), c.get(), n);
  stop.record(stream);

  std::vector<float> result(n, std::numeric_limits<float>::quiet_NaN());
  CURT_CHECK(cudaMemcpyAsync(result.data(), c.get(), c.bytes(), cudaMemcpyDeviceToHost, stream));
  stream.synchronize();

  outcome out;
  out.milliseconds = curt::elapsed(start, stop).count();
  for (std::size_t i = 0; i < n; ++i) {
    const double expected = reference[i];
    const double error = std::fabs(static_cast<double>(result[i]) - expected) /
                         std::max(std::fabs(expected), static_cast<double>(FLT_MIN));
    if (std::isnan(error) || error > out.max_relative_error) out.max_relative_error = error;
    if (std::isnan(out.max_relative_error)) break;
  }
  return out;
}

int main(int argc, char** argv) {
  if (curt::device_count() == 0) {
    std::printf("no CUDA device: skipped (%s)\n", curt::no_device_reason().c_str());
    return 77;  // the skip code CTest expects
  }
  std::size_t n = std::size_t(1) << 22;
  if (argc > 1) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(argv[1], &end, 10);
    if (!end || *end != '\0' || value == 0 || value > (std::size_t(1) << 30)) {
      std::fprintf(stderr, "usage: vec_add [N], 1 <= N <= 2^30\n");
      return 2;
    }
    n = static_cast<std::size_t>(value);
  }
  const double tolerance = 1e-6;  // a float add on the GPU and on the CPU agree exactly

  try {
    const curt::device device(0);
    curt::set_current_device(device);
    curt::stream stream(device);

    std::vector<float> a(n), b(n), reference(n);
    std::mt19937 generator(20240611u);
    std::uniform_real_distribution<float> distribution(-1000.0f, 1000.0f);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = distribution(generator);
      b[i] = distribution(generator);
      reference[i] = a[i] + b[i];
    }

    device_array<float> d_a(n), d_b(n), d_c(n);
    CURT_CHECK(cudaMemcpyAsync(d_a.get(), a.data(), d_a.bytes(), cudaMemcpyHostToDevice, stream));
    CURT_CHECK(cudaMemcpyAsync(d_b.get(), b.data(), d_b.bytes(), cudaMemcpyHostToDevice, stream));

    const outcome kernel = run_variant(launch_kernel, stream, device, d_a, d_b, d_c, reference);
    const outcome lambda = run_variant(launch_lambda, stream, device, d_a, d_b, d_c, reference);
    const bool kernel_ok = kernel.max_relative_error <= tolerance;  // false for NaN
    const bool lambda_ok = lambda.max_relative_error <= tolerance;
    std::printf("  __global__ kernel: max relative error %g, %.4f ms: %s\n",
                kernel.max_relative_error, kernel.milliseconds, kernel_ok ? "ok" : "WRONG");
    std::printf("  device lambda:     max relative error %g, %.4f ms: %s\n",
                lambda.max_relative_error, lambda.milliseconds, lambda_ok ? "ok" : "WRONG");

    const bool passed = kernel_ok && lambda_ok;
    const double max_error =
        std::isnan(kernel.max_relative_error) || std::isnan(lambda.max_relative_error)
            ? std::numeric_limits<double>::quiet_NaN()
            : std::max(kernel.max_relative_error, lambda.max_relative_error);
    std::printf("vec_add: %zu elements, max relative error %g, kernel time %.4f ms: %s\n", n,
                max_error, kernel.milliseconds, passed ? "PASSED" : "FAILED");
    return passed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vec_add: %s\n", e.what());
    std::printf("vec_add: FAILED\n");
    return 1;
  }
}
