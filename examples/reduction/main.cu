// reduction: sum, min and max of float and int arrays, three ways, each checked against the CPU
// and timed next to cub::DeviceReduce.
//   two-pass     one kernel leaves a partial result per block, a second one-block kernel
//                combines the partials.
//   last-block   one kernel: each block writes its partial, then takes a ticket from an atomic
//                counter after a __threadfence(); the block that takes the last ticket combines
//                the partials. atomicInc wraps the counter back to 0 for the next launch.
//   grid.sync    one cooperative launch (curt::launch_config::cooperative()): every block writes
//                its partial, the grid waits at cooperative_groups' grid.sync(), block 0 combines.
//   CUB          cub::DeviceReduce::Sum / Min / Max on the same data: the yardstick.
// Every kernel reads 16-byte vectors (float4 / int4) in a grid-stride loop, four loads in flight
// per thread, with scalar code for the elements before the first 16-byte boundary and after the
// last whole vector, so any length and any 4-byte-aligned start work. A block combines its
// threads' values with cooperative_groups::reduce over each warp, then __shfl_down_sync over the
// warps' results. The grid holds as many blocks as fill every multiprocessor once
// (curt::grid_to_fill_device), fewer when the input is small.
//
// Results: float sum, min, max are floats; an int sum is a long long (the int values here, up to
// 2^31 in magnitude, and up to 2^30 of them, sum to less than 2^61: no overflow, so the check is
// exact); int min and max are ints. Length 0 gives the identity of the operation: 0 for sums,
// +infinity / INT_MAX for min, -infinity / INT_MIN for max. (cub::DeviceReduce::Min and Max give
// FLT_MAX and -FLT_MAX for an empty float input instead; CUB is not checked at length 0.)
// NaN inputs are out of scope: min and max compare with <.
//
// Checks: every variant and operation on fresh random data of the given length, and on lengths
// 0, 1, 2, 31, 33, 1023, 65537 at an aligned start and at a start 4 bytes past one (so that the
// vector loads need the scalar head). Outputs are poisoned before every checked run (NaN, or
// 0x5A bytes). Integers and float min/max must match exactly; float sums are compared with a
// double CPU sum within an error bound derived from the summation tree (see reference()).
// The table lists time and read bandwidth (n * sizeof(T) bytes) per variant; the edge rows give
// the last-block float sum's time at that length.
//
// Exit code 0 when every result matches, 1 otherwise (or on a CUDA error), 2 for a bad argument,
// 77 without a CUDA device.
// Usage: reduction [N]   (N elements, 0 to 2^30; default 3000017, a prime)
//   performance: reduction 268435456   (2^28 elements: bandwidth against CUB's)
//                reduction 65536       (2^16 elements: time against CUB's)
#include "example.hpp"
#include "reduction_kernels.cuh"

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/device/device_reduce.cuh>
#include <cuda/std/limits>

#include <algorithm>
#include <array>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace reduction_example;  // the kernels and their launches: reduction_kernels.cuh

constexpr std::size_t kEdgeLengths[] = {0, 1, 2, 31, 33, 1023, 65537};
constexpr std::size_t kMaxEdgeOffset = 1;  // the misaligned start, in elements

// One type's data on the host and the device: the main input, and the input the edge lengths
// are cut from.
template <class T>
struct input {
  input(curt::device gpu, curt::stream_ref stream, std::size_t n)
      : host(random_input<T>(n)),
        edge_host(random_input<T>(kEdgeLengths[std::size(kEdgeLengths) - 1] + kMaxEdgeOffset)),
        device(gpu, host.size()),
        edge_device(gpu, edge_host.size()) {
    curt::copy(device, host, stream);
    curt::copy(edge_device, edge_host, stream);
  }
  std::vector<T> host, edge_host;
  curt::device_buffer<T> device, edge_device;
};

// One edge length's results over all types, operations, variants and offsets.
struct edge_tally {
  std::size_t length = 0;
  int checked = 0;
  int failed = 0;
  std::array<double, std::size(kVariants)> float_sum_ms{};  // the float sum's time per variant
};

struct context {
  curt::device gpu;
  curt::stream_ref stream;
  int repetitions;
  bool cooperative;  // whether the device has cooperative launch
  curt_example::table& table;
  std::vector<edge_tally>& edges;
};

// Every variant of one (type, operation): timed and checked on the main input, checked on every
// edge length at both offsets.
template <class T, class Op>
void run_reductions(const context& c, const input<T>& in) {
  using acc = typename Op::acc;
  const std::string what = std::string(type_name<T>()) + " " + Op::name;
  reducer<T, Op> r(c.gpu, c.stream, std::max(in.host.size(), in.edge_host.size()));
  curt::device_buffer<acc> out(c.gpu, 1);
  curt::pinned_buffer<acc> back(c.gpu, 1);
  std::printf("%-9s full grids of %u threads: two-pass %u, last-block %u, grid.sync %u blocks\n",
              (what + ":").c_str(), kBlockThreads, r.fill(variant::two_pass),
              r.fill(variant::last_block), r.fill(variant::grid_sync));

  auto skipped = [&](variant v) { return v == variant::grid_sync && !c.cooperative; };
  // A checked run: outputs poisoned, one reduction, the result copied back and compared.
  auto check = [&](variant v, const T* x, std::size_t n, const expected<acc>& e,
                   std::string& detail) {
    poison(out, c.stream);
    poison(back);
    r.run(v, c.stream, x, n, out.data());
    curt::copy(back, out, c.stream);
    c.stream.synchronize();
    return compare<T, Op>(back[0], e, detail);
  };

  const std::size_t n = in.host.size();
  const expected<acc> e = reference<T, Op>(in.host.data(), n, r.full_grid_threads());
  for (variant v : kVariants) {
    if (skipped(v) || (v == variant::cub && n == 0)) continue;  // (CUB's empty min is FLT_MAX)
    // Timed first: the checked run then also finds the ticket counter reset by earlier launches.
    const double ms = curt_example::median_ms(c.stream, c.repetitions, [&](curt::stream_ref s) {
      r.run(v, s, in.device.data(), n, out.data());
    });
    std::string detail;
    const bool passed = check(v, in.device.data(), n, e, detail);
    c.table.row(what + " " + variant_name(v), std::to_string(n), passed, ms,
                static_cast<double>(n) * sizeof(T), detail);
  }

  for (edge_tally& t : c.edges) {
    for (std::size_t offset = 0; offset <= kMaxEdgeOffset; ++offset) {
      const T* x = in.edge_device.data() + offset;
      const expected<acc> edge =
          reference<T, Op>(in.edge_host.data() + offset, t.length, r.full_grid_threads());
      for (variant v : kVariants) {
        if (v == variant::cub || skipped(v)) continue;  // CUB is the yardstick, not under test
        std::string detail;
        ++t.checked;
        if (!check(v, x, t.length, edge, detail)) {
          ++t.failed;
          std::printf("FAIL: %s %s, length %zu at offset %zu: %s\n", what.c_str(), variant_name(v),
                      t.length, offset, detail.c_str());
        }
      }
    }
    if constexpr (std::is_same_v<T, float> && Op::kind == op_kind::sum) {
      for (std::size_t k = 0; k < std::size(kVariants); ++k)
        if (!skipped(kVariants[k]))
          t.float_sum_ms[k] =
              curt_example::median_ms(c.stream, c.repetitions, [&](curt::stream_ref s) {
                r.run(kVariants[k], s, in.edge_device.data(), t.length, out.data());
              });
    }
  }
}

int run(int argc, char** argv) {
  const std::size_t n =
      curt_example::size_argument(argc, argv, 1, 3000017, 0, std::size_t(1) << 30);
  const int repetitions = 5;
  const curt::device gpu(0);
  curt::set_current_device(gpu);  // CUB works on the runtime's current device
  curt::stream stream(gpu);
  std::printf("reduction on %s (%d multiprocessors): %zu elements, then lengths",
              gpu.name().c_str(), gpu.multiprocessor_count(), n);
  for (std::size_t length : kEdgeLengths) std::printf(" %zu", length);
  std::printf(" at offsets 0 and %zu\n", kMaxEdgeOffset);

  const input<float> floats(gpu, stream, n);
  const input<int> ints(gpu, stream, n);
  const bool cooperative = gpu.supports_cooperative_launch();
  if (!cooperative) std::printf("the device has no cooperative launch: grid.sync left out\n");

  curt_example::table table(
      "reduction",
      curt_example::copy_gb_per_s(gpu, stream, std::max<std::size_t>(n * sizeof(float), 1 << 20)));
  std::vector<edge_tally> edges;
  for (std::size_t length : kEdgeLengths) edges.push_back({length});
  const context c{gpu, stream, repetitions, cooperative, table, edges};

  run_reductions<float, sum_of<float>>(c, floats);
  run_reductions<float, min_of<float>>(c, floats);
  run_reductions<float, max_of<float>>(c, floats);
  run_reductions<int, sum_of<int>>(c, ints);
  run_reductions<int, min_of<int>>(c, ints);
  run_reductions<int, max_of<int>>(c, ints);

  for (const edge_tally& t : edges) {
    char detail[160];
    std::snprintf(detail, sizeof detail,
                  "%d checked; ms: last-block float sum (two-pass %.4f, grid.sync %.4f, CUB %.4f)",
                  t.checked, t.float_sum_ms[0], t.float_sum_ms[2], t.float_sum_ms[3]);
    table.row("edge length: 3 variants, 6 ops", std::to_string(t.length), t.failed == 0,
              t.float_sum_ms[1], static_cast<double>(t.length) * sizeof(float), detail);
  }
  return table.print();
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run("reduction", "reduction [N]   (N elements, 0 to 2^30; default 3000017)",
                           [&] { return run(argc, argv); });
}
