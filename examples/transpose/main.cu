// transpose: out = in^T for a ROWS x COLS matrix of floats (row-major; out is COLS x ROWS), four
// ways, measured against a copy of the same matrix:
//   1. copy kernel       out = in, tile by tile, with the threads and tiles of variant 5: the
//                        yardstick, a kernel that reads and writes every element once
//   2. naive             reads rows (coalesced), writes columns: a warp's 32 stores land in 32
//                        different rows of out, 32 memory segments for 128 useful bytes
//   3. tiled, shared     a 32x32 tile read row by row into shared memory, written back row by row
//                        of out (both coalesced); reading the tile's columns hits one shared
//                        memory bank 32 times (a 32-way bank conflict)
//   4. tiled, padded     the same with one float of padding per tile row: no bank conflicts
//   5. tiled 64x64       the fast one: padded 64x64 tiles, 32x8 threads each moving 16 floats
//                        (2 columns x 8 rows): more loads in flight per thread, fewer blocks
// Every variant runs at ROWS x COLS and at the edge shapes 1x1, 1x1000, 1000x1, 33x31, 64x64 and
// 65x129, each into an output poisoned with NaN first, and must match the CPU's transpose bit for
// bit (a transpose moves floats and computes nothing). Bandwidth counts 2 * ROWS * COLS * 4 bytes
// (every element read once and written once); the table's "of copy" column divides it by the
// device-to-device cudaMemcpy's, the detail column by the copy kernel's.
// Prints the result table last; its last line is "transpose: PASSED" (exit 0) or
// "transpose: FAILED" (exit 1); 2 for bad arguments, 77 when there is no CUDA device.
// Usage: transpose [ROWS [COLS]]   (default 1999 x 1531, no side a multiple of 32; COLS defaults
//   to ROWS when ROWS is given). The default matrices (12 MB each) stay in the H200's 60 MB L2;
//   measure memory bandwidth with `transpose 8192 8192` (goal: variant 5 at 0.9x the copy
//   kernel or better; the H200's figures are in docs/performance.md).
#include "example.hpp"
#include "transpose_kernels.cuh"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace transpose_example;  // the kernels and their launches: transpose_kernels.cuh

// ---- Checking. -------------------------------------------------------------------------------

// A random ROWS x COLS matrix on the host and the device, its transpose computed on the host,
// the device output and a pinned staging buffer it comes back through. Each buffer holds exactly
// ROWS * COLS floats, so that the sanitizer sees any access past the end.
struct problem {
  problem(curt::device device, curt::stream_ref stream, int rows_, int cols_)
      : rows(rows_),
        cols(cols_),
        in(curt_example::random_values(size(), -1.0f, 1.0f)),
        transposed(size()),
        device_in(device, size()),
        device_out(device, size()),
        result(device, size()) {
    // In 32 x 32 blocks, so that the rows of `in` and of `transposed` both stay in cache.
    for (int r0 = 0; r0 < rows; r0 += 32)
      for (int c0 = 0; c0 < cols; c0 += 32)
        for (int r = r0; r < std::min(r0 + 32, rows); ++r)
          for (int c = c0; c < std::min(c0 + 32, cols); ++c)
            transposed[std::size_t(c) * rows + r] = in[std::size_t(r) * cols + c];
    curt::copy(device_in, in, stream);
  }
  std::size_t size() const { return std::size_t(rows) * std::size_t(cols); }
  std::string shape() const { return std::to_string(rows) + " x " + std::to_string(cols); }
  void run(const variant& v, curt::stream_ref stream) {
    curt::launch(stream, v.config(rows, cols), v.kernel, device_in.data(), device_out.data(), rows,
                 cols);
  }

  int rows, cols;
  std::vector<float> in, transposed;
  curt::device_buffer<float> device_in, device_out;
  curt::pinned_buffer<float> result;
};

// One checked run: the output poisoned with NaN (an element the variant leaves alone stays NaN,
// which matches no input value), one launch, the output back on the host and compared with the
// CPU's bit for bit. Returns the first mismatch, described; empty when every element matches.
std::string check(const variant& v, curt::stream_ref stream, problem& p) {
  curt::fill(p.device_out, std::numeric_limits<float>::quiet_NaN(), stream);
  p.run(v, stream);
  curt::copy(p.result, p.device_out, stream);
  stream.synchronize();
  const std::vector<float>& want = v.transposes ? p.transposed : p.in;
  if (std::memcmp(p.result.data(), want.data(), p.size() * sizeof(float)) == 0) return {};
  const int out_cols = v.transposes ? p.rows : p.cols;  // out is COLS x ROWS, or a copy of in
  for (std::size_t i = 0; i < p.size(); ++i)
    if (std::memcmp(&p.result[i], &want[i], sizeof(float)) != 0) {
      char text[200];
      std::snprintf(text, sizeof text, "%s: out[%zu][%zu] = %.9g, expected %.9g", p.shape().c_str(),
                    i / out_cols, i % out_cols, static_cast<double>(p.result[i]),
                    static_cast<double>(want[i]));
      return text;
    }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "transpose",
      "transpose [ROWS [COLS]]   (1 <= ROWS <= 2000000, 1 <= COLS, ROWS * COLS <= 2^30; "
      "default 1999 x 1531; COLS defaults to ROWS)",
      [&] {
        // ROWS / 32 row tiles must fit the grid's y dimension (65535).
        const int rows =
            static_cast<int>(curt_example::size_argument(argc, argv, 1, 1999, 1, 2000000));
        const int cols = static_cast<int>(curt_example::size_argument(
            argc, argv, 2, argc > 1 ? std::size_t(rows) : 1531, 1, std::size_t(1) << 30));
        if (std::size_t(rows) * std::size_t(cols) > (std::size_t(1) << 30))
          throw curt_example::usage_error("ROWS * COLS must be at most 2^30");

        const curt::device device(0);
        curt::stream stream(device);

        const variant variants[] = {
            {"copy kernel (64x64 tiles)", false, copy_tiles<64>, tile_config<64>},
            {"naive (strided writes)", true, transpose_naive<32>, tile_config<32>},
            {"tiled 32x32 (bank conflicts)", true, transpose_tiled<32, 0>, tile_config<32>},
            {"tiled 32x32, padded", true, transpose_tiled<32, 1>, tile_config<32>},
            {"tiled 64x64, padded, 16/thread", true, transpose_tiled<64, 1>, tile_config<64>},
        };
        const int edge_shapes[][2] = {{1, 1}, {1, 1000}, {1000, 1}, {33, 31}, {64, 64}, {65, 129}};

        problem main_problem(device, stream, rows, cols);
        const double bytes = 2.0 * static_cast<double>(main_problem.size()) * sizeof(float);
        // Big matrices: more samples (they cost little); small ones: few, for the sanitizers.
        const int repetitions = main_problem.size() >= (std::size_t(1) << 24) ? 20 : 3;
        std::printf("transpose: %s floats (%.1f MB each way), median of %d timed runs\n",
                    main_problem.shape().c_str(), static_cast<double>(main_problem.size()) * 4e-6,
                    repetitions);
        std::printf("edge shapes, every variant:");
        for (const auto& shape : edge_shapes) std::printf(" %d x %d", shape[0], shape[1]);
        std::printf("\n");
        curt_example::table table(
            "transpose",
            curt_example::copy_gb_per_s(device, stream, main_problem.size() * sizeof(float)));

        double copy_kernel_gb_per_s = 0;
        for (const variant& v : variants) {
          std::string mismatch = check(v, stream, main_problem);
          for (const auto& shape : edge_shapes) {
            if (!mismatch.empty()) break;
            problem edge(device, stream, shape[0], shape[1]);
            mismatch = check(v, stream, edge);
          }

          // Several launches per timed sample, so that the host's time to launch the next one
          // overlaps a kernel instead of counting as GPU time (it matters at small sizes).
          constexpr int launches = 4;
          const auto run_several = [&](curt::stream_ref s) {
            for (int i = 0; i < launches; ++i) main_problem.run(v, s);
          };
          const double ms = curt_example::median_ms(stream, repetitions, run_several) / launches;
          const double gb_per_s = curt_example::gb_per_s(bytes, ms);
          if (!v.transposes) copy_kernel_gb_per_s = gb_per_s;  // the first row

          char detail[160];
          std::snprintf(detail, sizeof detail, "bit-exact, also 6 edge shapes; %.2fx copy kernel",
                        copy_kernel_gb_per_s > 0 ? gb_per_s / copy_kernel_gb_per_s : 0.0);
          table.row(v.name, main_problem.shape(), mismatch.empty(), ms, bytes,
                    mismatch.empty() ? detail : mismatch);
        }
        return table.print();
      });
}
