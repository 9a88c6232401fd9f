// vec_add: c = a + b on the GPU, several ways, each checked against the CPU and timed:
//   1. __global__ kernel   one thread per element, launched through curt::launch
//   2. device lambda       the same as a __device__ lambda (nvcc --extended-lambda)
//   3. main path           add_fast(): one tile of 1024 floats per block, each input's tile moved
//                          into shared memory by one bulk copy (sm_90's cp.async.bulk, as
//                          thrust::transform does there), then one float4 per thread added and
//                          stored; a partial last tile is added one float per thread
//      float4 grid-stride  16-byte loads and stores, several per thread, a grid that fills the
//                          device once, and a scalar tail for lengths that are not multiples of 4
//                          (the main path before issue 27)
//      float4 tiles        grid-stride over contiguous per-block tiles, streaming loads and stores
//      float4 per block    the main path's tiles with plain float4 loads instead of bulk copies
//      bulk 16 KiB tiles   bulk copies of 4096 floats per input per block, streaming stores
//   4. thrust::transform   the yardstick the main path is measured against
// Every variant runs at N and at the edge lengths 1, 3, 4, 5, 1023, 1029 and 16387 (fresh random
// inputs for each; 1029 and 16387 are a whole tile of the main path and of the 16 KiB tiles plus
// a partial one), into an output poisoned with NaN first, and must match the CPU's a[i] + b[i]
// exactly. Bandwidth counts 3 * N * 4 bytes (two floats read, one written, per element); each row
// also says its bandwidth as a fraction of Thrust's; the main path's goal at N = 2^28 (and 2^20)
// is at least 0.97 times Thrust's.
// Prints the result table last; its last line is "vec_add: PASSED" (exit 0) or "vec_add: FAILED"
// (exit 1); 2 for bad arguments, 77 when there is no CUDA device.
// Usage: vec_add [N]   (default 4194301, not a multiple of 4; 268435456 = 2^28 for bandwidth)
#include "example.hpp"
#include "vec_add_kernels.cuh"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/occupancy.hpp>

#include <cuda/std/functional>
#include <thrust/execution_policy.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace vec_add_example;  // the kernels and their launches: vec_add_kernels.cuh

// ---- Checking. -------------------------------------------------------------------------------

using add_function =
    std::function<void(curt::stream_ref, const float*, const float*, float*, std::size_t)>;

// Random inputs of n floats on the host and the device, the CPU's sum, and the output buffer.
// Each buffer holds exactly n floats, so that the sanitizer sees any access past the end.
struct problem {
  problem(curt::device device, curt::stream_ref stream, std::size_t n)
      : a(curt_example::random_values(n, -1000.0f, 1000.0f)),
        b(curt_example::random_values(n, -1000.0f, 1000.0f)),
        sum(n),
        device_a(device, n),
        device_b(device, n),
        device_c(device, n) {
    for (std::size_t i = 0; i < n; ++i) sum[i] = a[i] + b[i];
    curt::copy(device_a, a, stream);
    curt::copy(device_b, b, stream);
  }
  std::size_t size() const { return sum.size(); }
  void add(const add_function& f, curt::stream_ref stream) {
    f(stream, device_a.data(), device_b.data(), device_c.data(), size());
  }

  std::vector<float> a, b, sum;
  curt::device_buffer<float> device_a, device_b, device_c;
};

// One checked run: c poisoned with NaN (an element the variant leaves alone stays NaN, which
// equals nothing), one launch, c back on the host and compared with the CPU's sum. The
// comparison is exact: a + b is one IEEE-754 single-precision addition, correctly rounded to
// nearest-even on the GPU and on the host alike (x86-64 adds floats in SSE registers, not in
// x87's wider ones), so both give the same float. (No sum of these inputs is subnormal, so even
// a GPU build with -ftz=true or --use_fast_math would agree.)
// Returns the first mismatch, described; empty when every element matches.
std::string check(const add_function& f, curt::stream_ref stream, problem& p) {
  curt::fill(p.device_c, std::numeric_limits<float>::quiet_NaN(), stream);
  p.add(f, stream);
  std::vector<float> c(p.size());
  curt::copy(c, p.device_c, stream);
  stream.synchronize();
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!(c[i] == p.sum[i])) {
      char text[160];
      std::snprintf(text, sizeof text, "n = %zu: c[%zu] = %.9g, expected %.9g", p.size(), i,
                    static_cast<double>(c[i]), static_cast<double>(p.sum[i]));
      return text;
    }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run("vec_add", "vec_add [N]   (1 <= N <= 2^30, default 4194301)", [&] {
    const std::size_t n =
        curt_example::size_argument(argc, argv, 1, 4194301, 1, std::size_t(1) << 30);
    const curt::device device(0);
    curt::set_current_device(device);  // Thrust works on the current device
    curt::stream stream(device);

    // The grid-stride kernels' grid: as many blocks as can be resident at once, on every SM.
    const unsigned fill_blocks = curt::grid_to_fill_device(device, vec_add_float4, kBlockThreads);
    const unsigned tile_blocks =
        curt::grid_to_fill_device(device, vec_add_float4_tiles, kBlockThreads);
    std::printf(
        "vec_add: n = %zu floats; main path %zu blocks of %u threads (one tile of %zu "
        "floats each); float4 grid-stride %u blocks (%u per SM on %d SMs)\n",
        n, curt::ceil_div(n, tile_floats<1>), kTileThreads, tile_floats<1>, fill_blocks,
        fill_blocks / device.multiprocessor_count(), device.multiprocessor_count());

    struct variant {
      const char* name;
      add_function add;
    };
    const variant variants[] = {
        {"__global__ kernel", add_with_kernel},
        {"device lambda", add_with_lambda},
        {"main path: bulk-copied tiles", add_fast},
        {"float4 grid-stride", [fill_blocks](curt::stream_ref s, const float* a, const float* b,
                                             float* c, std::size_t count) {
           add_with_float4_grid(s, fill_blocks, a, b, c, count);
         }},
        {"float4 tiles, streaming", [tile_blocks](curt::stream_ref s, const float* a,
                                                  const float* b, float* c, std::size_t count) {
           add_with_float4_tiles(s, tile_blocks, a, b, c, count);
         }},
        {"float4 per block, plain loads", add_with_float4_block},
        {"bulk 16 KiB tiles, streaming", add_with_bulk},
        {"thrust::transform (yardstick)", add_with_thrust},
    };
    constexpr std::size_t variant_count = sizeof variants / sizeof variants[0];
    // Edge lengths: no whole float4 (1, 3), one and no tail (4), one and a tail of 1 (5), 255
    // and a tail of 3 (1023), a whole main-path tile and 5 more (1029), a whole 16 KiB tile and
    // 3 more (16387).
    const std::size_t edge_sizes[] = {1, 3, 4, 5, 1023, 1029, 16387};
    std::string checked = "exact; also n =";
    for (std::size_t size : edge_sizes) checked += " " + std::to_string(size);

    // The yardstick copy moves as many bytes as one vec_add (n floats read twice, written once).
    curt_example::table table(
        "vec_add", curt_example::copy_gb_per_s(device, stream, 3 * n * sizeof(float) / 2));
    problem main_problem(device, stream, n);
    const double bytes = 3.0 * static_cast<double>(n) * sizeof(float);

    // Every variant checked and timed first, then the rows: each says its bandwidth as a
    // fraction of Thrust's (the last variant).
    std::string mismatches[variant_count];
    double times_ms[variant_count] = {};
    for (std::size_t k = 0; k < variant_count; ++k) {
      const variant& v = variants[k];
      std::string mismatch = check(v.add, stream, main_problem);
      for (std::size_t size : edge_sizes) {
        if (!mismatch.empty()) break;
        problem edge(device, stream, size);
        mismatch = check(v.add, stream, edge);
      }
      mismatches[k] = mismatch;

      // Several launches per timed sample, so that the host's time to launch the next one (a
      // few microseconds, more for Thrust's dispatch) overlaps a kernel instead of counting
      // as GPU time.
      constexpr int launches = 4;
      const auto run_launches = [&](curt::stream_ref s) {
        for (int i = 0; i < launches; ++i) main_problem.add(v.add, s);
      };
      times_ms[k] = curt_example::median_ms(stream, 5, run_launches) / launches;
    }
    const double thrust_ms = times_ms[variant_count - 1];
    for (std::size_t k = 0; k < variant_count; ++k) {
      char of_thrust[32];
      std::snprintf(of_thrust, sizeof of_thrust, "%.3fx Thrust; ",
                    times_ms[k] > 0 ? thrust_ms / times_ms[k] : 0.0);
      table.row(variants[k].name, std::to_string(n), mismatches[k].empty(), times_ms[k], bytes,
                mismatches[k].empty() ? of_thrust + checked : mismatches[k]);
    }
    return table.print();
  });
}
