// runtime_compilation: CUDA C++ compiled while the program runs (NVRTC, <curt/rtc.hpp>), for the
// device it runs on, loaded as a library (<curt/library.hpp>) and launched through curt::launch:
//   1. a templated saxpy, instantiated through a name expression ("saxpy<float>"), launched
//      through a typed view (arguments converted and checked at compile time)
//   2. a sum reduction whose block size is a template argument chosen at run time
//      ("block_sum<256>"), launched untyped (argument sizes checked against the driver's layout)
//   3. one compile error, printed as a user sees it (NVRTC's log with its line numbers, the
//      options)
// Compile and load times are printed; each kernel is checked against the CPU on fresh random
// inputs, into outputs poisoned first. A plain C++ file: no nvcc needed for the kernels.
// Prints the result table last; its last line is "runtime_compilation: PASSED" (exit 0) or
// "...: FAILED" (exit 1); 2 for bad arguments, 77 when there is no CUDA device.
// Usage: runtime_compilation [N]   (default 1000003)
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/library.hpp>
#include <curt/memory.hpp>
#include <curt/rtc.hpp>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace {

const char* const kernels = R"(
template <class T>
__global__ void saxpy(T a, const T* x, const T* y, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

// Each block sums a grid-stride share of `in` in double, then adds it to *total.
template <int Block>
__global__ void block_sum(const float* in, double* total, int n) {
  __shared__ double partial[Block];
  double sum = 0;
  for (int i = blockIdx.x * Block + threadIdx.x; i < n; i += gridDim.x * Block) sum += in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = Block / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(total, partial[0]);
}
)";

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "runtime_compilation", "runtime_compilation [N]   (1 <= N <= 2^28, default 1000003)", [&] {
        const std::size_t n = curt_example::size_argument(argc, argv, 1, 1000003, 1,
                                                          std::size_t(1) << 28);
        const int count = static_cast<int>(n);
        const curt::device device(0);
        curt::stream stream(device);
        constexpr int block = 256;

        // Compile for this device: CUBIN for its sm_XY (PTX where NVRTC is older than it).
        curt::rtc::program program("kernels.cu", kernels);
        program.add_name_expression("saxpy<float>");
        program.add_name_expression("block_sum<" + std::to_string(block) + ">");
        const auto compile_start = std::chrono::steady_clock::now();
        const curt::rtc::compiled code =
            program.compile(curt::rtc::options().architecture(device).cpp_standard(17));
        const double compile_ms = ms_since(compile_start);
        const auto load_start = std::chrono::steady_clock::now();
        const curt::library library(code.image());
        const auto saxpy = library.kernel(code.lowered_name("saxpy<float>"))
                               .as<void(float, const float*, const float*, float*, int)>();
        const curt::library_kernel sum =
            library.kernel(code.lowered_name("block_sum<" + std::to_string(block) + ">"));
        const double load_ms = ms_since(load_start);
        std::printf("runtime_compilation: n = %zu; compiled for %s (%s) in %.1f ms, %zu B of %s; "
                    "loaded in %.2f ms\n",
                    n, device.name().c_str(), code.options().c_str(), compile_ms,
                    code.cubin().empty() ? code.ptx().size() : code.cubin().size(),
                    code.cubin().empty() ? "PTX" : "CUBIN", load_ms);

        curt_example::table table("runtime_compilation",
                                  curt_example::copy_gb_per_s(device, stream, 3 * n * 4 / 2));
        const curt::launch_config config(curt::ceil_div(count, block), block);

        // 1. saxpy: out = a * x + y, out poisoned with NaN first.
        {
          const float a = curt_example::random_values<float>(1, -4.0f, 4.0f)[0];
          const std::vector<float> x = curt_example::random_values<float>(n, -100.0f, 100.0f);
          const std::vector<float> y = curt_example::random_values<float>(n, -100.0f, 100.0f);
          curt::device_buffer<float> dx(device, n), dy(device, n), out(device, n);
          curt::copy(dx, x, stream);
          curt::copy(dy, y, stream);
          curt::fill(out, std::numeric_limits<float>::quiet_NaN(), stream);
          auto run = [&](curt::stream_ref s) {
            curt::launch(s, config, saxpy, a, dx.data(), dy.data(), out.data(), count);
          };
          run(stream);
          std::vector<float> got(n);
          curt::copy_and_wait(got, out, stream);
          std::string mismatch;
          for (std::size_t i = 0; i < n && mismatch.empty(); ++i) {
            const double want = static_cast<double>(a) * x[i] + y[i];  // the GPU may fuse
            if (!(std::fabs(got[i] - want) <= 1e-6 * std::fmax(std::fabs(want), 1.0)))
              mismatch = "out[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                         ", expected " + std::to_string(want);
          }
          const double ms = curt_example::median_ms(stream, 10, run);
          table.row("saxpy<float> (typed view)", std::to_string(n), mismatch.empty(), ms,
                    3.0 * static_cast<double>(n) * 4,
                    mismatch.empty() ? "relative error <= 1e-6" : mismatch);
        }

        // 2. The reduction, launched untyped: sizes checked against the driver's layout.
        {
          const std::vector<float> in = curt_example::random_values<float>(n, -1.0f, 1.0f);
          double want = 0;
          for (float v : in) want += v;
          curt::device_buffer<float> din(device, n);
          curt::device_buffer<double> total(device, 1);
          curt::copy(din, in, stream);
          const unsigned grid = curt::grid_to_fill_device(device, sum, block);
          auto run = [&](curt::stream_ref s) {
            curt::memset(total, 0, s);  // 0.0
            curt::launch(s, curt::launch_config(grid, block), sum,
                         static_cast<const float*>(din.data()), total.data(), count);
          };
          curt::memset(total, 0xff, stream);  // NaN, which the run must overwrite
          run(stream);
          std::vector<double> got(1);
          curt::copy_and_wait(got, total, stream);
          // Double sums of floats in another order: equal to about 1e-12 of the magnitudes.
          const bool ok = std::fabs(got[0] - want) <= 1e-9 * static_cast<double>(n);
          const double ms = curt_example::median_ms(stream, 10, run);
          table.row("block_sum<256> (untyped)", std::to_string(n), ok, ms,
                    static_cast<double>(n) * 4,
                    ok ? "|sum - CPU's| <= 1e-9 n"
                       : "got " + std::to_string(got[0]) + ", expected " + std::to_string(want));
        }

        // 3. A compile error, as the user sees it.
        try {
          curt::rtc::program("typo.cu",
                             "__global__ void k(float* x, int n) {\n"
                             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "  if (i < n) x[i] = sqrtf(x[i]) * scale;\n"
                             "}\n")
              .compile(curt::rtc::options().architecture(device).cpp_standard(17));
          table.row("compile error shown", "-", false, 0, 0, "the typo compiled");
        } catch (const curt::rtc::error& e) {
          std::printf("\na compile error, as curt::rtc::error::what() says it:\n%s\n", e.what());
          const bool ok = e.log().find("typo.cu(3): error") != std::string::npos;
          table.row("compile error shown", "-", ok, 0, 0, "the log names typo.cu(3)");
        }
        return table.print();
      });
}
