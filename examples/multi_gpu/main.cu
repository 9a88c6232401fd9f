// multi_gpu: one reduction split across every device. A matrix of ROWS x COLS floats is cut into
// bands of rows, one band per device; each device sums the columns of its band (a partial vector
// of COLS sums). The partials are then combined two ways, each checked against a double CPU sum:
//   peer copies   every partial is copied to device 0 (curt::copy between devices: over NVLink
//                 or PCIe where peer access is enabled, through the host otherwise), and a kernel
//                 on device 0 adds them.
//   NCCL          curt::all_reduce of the partials (one communicator per device, ncclCommInitAll,
//                 in one curt::nccl_group): every device ends up with the total. Built where NCCL
//                 is found (CMake's curt::nccl).
// With one device the band is the whole matrix, the gather is a copy on device 0, and NCCL's
// all-reduce has one rank: the example runs and checks the same way.
// Peer access is enabled (curt::peer_access_scope) between device 0 and every device that can
// reach it, for the example's lifetime; the table says which could.
//
// Exit code 0 when every result matches, 1 otherwise (or on a CUDA or NCCL error), 2 for a bad
// argument, 77 without a CUDA device.
// Usage: multi_gpu [ROWS [COLS]]   (default 64 x 1048576)
#include "example.hpp"

#include <curt/peer.hpp>
#if defined(CURT_EXAMPLE_HAS_NCCL)
#  include <curt/nccl.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

// out[c] = the sum of column c over `rows` rows of `cols` columns (row-major): one thread per
// column, so every step of the loop reads one contiguous row.
__global__ void column_sums(const float* m, int rows, std::size_t cols, float* out) {
  const std::size_t c = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int r = 0; r < rows; ++r) s += m[std::size_t(r) * cols + c];
  out[c] = s;
}

// A view of part of a device buffer: what curt::copy takes (data() and size()).
struct view {
  float* pointer;
  std::size_t count;
  float* data() const { return pointer; }
  std::size_t size() const { return count; }
};

constexpr int block = 256;
curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>((n + block - 1) / block)), dim3(block));
}

// What one device holds: its band of rows, its partial sums, a stream.
struct part {
  curt::device device;
  int first_row;
  int rows;
  curt::device_buffer<float> band;
  curt::device_buffer<float> partial;
  curt::stream stream;
};

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// The median of `repetitions` runs of `work()` (after one warm-up), timed on the host: the work
// spans devices, so no one stream's events can time it.
template <class Work>
double median_host_ms(int repetitions, Work&& work) {
  work();
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    auto start = std::chrono::steady_clock::now();
    work();
    times.push_back(elapsed_ms(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Compares sums with the double CPU reference within float rounding of `rows` additions.
bool matches(const std::vector<float>& got, const std::vector<double>& want,
             const std::vector<double>& magnitude, int rows, std::string& detail) {
  std::size_t bad = 0, first = 0;
  for (std::size_t c = 0; c < want.size(); ++c) {
    const double bound = 4.0 * rows * 6e-8 * magnitude[c] + 1e-6;
    if (!(std::fabs(double(got[c]) - want[c]) <= bound)) {
      if (bad++ == 0) first = c;
    }
  }
  if (bad != 0)
    detail = std::to_string(bad) + " wrong, first at column " + std::to_string(first) + ": " +
             std::to_string(got[first]) + " vs " + std::to_string(want[first]);
  return bad == 0;
}

int run(int argc, char** argv) {
  const int rows = static_cast<int>(curt_example::size_argument(argc, argv, 1, 64, 1, 1 << 16));
  const std::size_t cols = curt_example::size_argument(argc, argv, 2, std::size_t(1) << 20, 1,
                                                       std::size_t(1) << 28);
  std::vector<curt::device> devices;
  for (curt::device d : curt::devices()) devices.push_back(d);
  const int count = static_cast<int>(devices.size());
  const int used = std::min(count, rows);  // each device gets at least one row
  const curt::device d0 = devices[0];
  std::printf("multi_gpu: %d x %zu floats over %d device(s)\n", rows, cols, used);

  // Peer access between device 0 and every other device that can reach it, both ways.
  std::vector<std::unique_ptr<curt::peer_access_scope>> access;
  std::string peer_note;
  for (int i = 1; i < used; ++i) {
    const bool both = curt::can_access_peer(d0, devices[i]) && curt::can_access_peer(devices[i], d0);
    peer_note += " 0<->" + std::to_string(i) + (both ? ": peer" : ": via host");
    if (!both) continue;
    access.push_back(std::make_unique<curt::peer_access_scope>(d0, devices[i]));
    access.push_back(std::make_unique<curt::peer_access_scope>(devices[i], d0));
    const curt::peer_link link = curt::peer_attributes(devices[i], d0);
    std::printf("link %d -> 0: performance rank %d, native atomics %s\n", i, link.performance_rank,
                link.native_atomics ? "yes" : "no");
  }

  const std::vector<float> m = curt_example::random_values<float>(std::size_t(rows) * cols, -1.0f, 1.0f);
  std::vector<double> want(cols, 0.0), magnitude(cols, 0.0);
  for (int r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = m[std::size_t(r) * cols + c];
      want[c] += v;
      magnitude[c] += std::fabs(v);
    }

  std::vector<part> parts;
  parts.reserve(std::size_t(used));
  for (int i = 0; i < used; ++i) {
    const int first = static_cast<int>(static_cast<long long>(rows) * i / used);
    const int last = static_cast<int>(static_cast<long long>(rows) * (i + 1) / used);
    curt::device d = devices[std::size_t(i)];
    parts.push_back(part{d, first, last - first,
                         curt::device_buffer<float>(d, std::size_t(last - first) * cols),
                         curt::device_buffer<float>(d, cols), curt::stream(d)});
    part& p = parts.back();
    curt::copy(p.band, view{const_cast<float*>(m.data()) + std::size_t(first) * cols, p.band.size()},
               p.stream);
  }
  for (part& p : parts) p.stream.synchronize();

  curt_example::table results("multi_gpu", curt_example::copy_gb_per_s(d0, parts[0].stream, cols * sizeof(float) * 16));
  const std::string size = std::to_string(rows) + " x " + std::to_string(cols);
  const double matrix_bytes = double(rows) * double(cols) * sizeof(float);

  // 1. The split: every device sums the columns of its band, all at once.
  auto split = [&] {
    for (part& p : parts) {
      curt::memset(p.partial, 0xFF, p.stream);  // poisoned: NaN until the kernel writes it
      curt::launch(p.stream, config_for(cols), column_sums, static_cast<const float*>(p.band.data()),
                   p.rows, cols, p.partial.data());
    }
    for (part& p : parts) p.stream.synchronize();
  };
  const double split_ms = median_host_ms(5, split);
  {
    std::vector<double> band_want(cols);
    bool ok = true;
    std::string detail = "each device's band";
    for (part& p : parts) {
      std::fill(band_want.begin(), band_want.end(), 0.0);
      std::vector<double> band_magnitude(cols, 0.0);
      for (int r = p.first_row; r < p.first_row + p.rows; ++r)
        for (std::size_t c = 0; c < cols; ++c) {
          band_want[c] += m[std::size_t(r) * cols + c];
          band_magnitude[c] += std::fabs(m[std::size_t(r) * cols + c]);
        }
      std::vector<float> got(cols);
      curt::copy(got, p.partial, p.stream);
      p.stream.synchronize();
      ok = matches(got, band_want, band_magnitude, p.rows, detail) && ok;
    }
    results.row("split: column sums per band", size, ok, split_ms, matrix_bytes, detail);
  }

  // 2. Gather with peer copies to device 0, add there (a column-sum kernel over the partials).
  curt::device_buffer<float> gathered(d0, cols * std::size_t(used)), total(d0, cols);
  auto gather = [&] {
    curt::stream& s0 = parts[0].stream;
    curt::memset(total, 0xFF, s0);
    for (int i = 0; i < used; ++i) {
      part& p = parts[std::size_t(i)];
      // Device i's stream copies its partial out, then device 0's stream waits for that copy.
      curt::copy(view{gathered.data() + std::size_t(i) * cols, cols}, p.partial, p.stream);
      if (i != 0) s0.wait(p.stream);
    }
    curt::launch(s0, config_for(cols), column_sums, static_cast<const float*>(gathered.data()),
                 used, cols, total.data());
    s0.synchronize();
  };
  const double gather_ms = median_host_ms(5, gather);
  {
    std::vector<float> got(cols);
    curt::copy(got, total, parts[0].stream);
    parts[0].stream.synchronize();
    std::string detail = "on device 0;" + (peer_note.empty() ? std::string(" one device") : peer_note);
    const bool ok = matches(got, want, magnitude, rows, detail);
    results.row("gather: peer copies + add", size, ok, gather_ms,
                double(used) * double(cols) * sizeof(float), detail);
  }

#if defined(CURT_EXAMPLE_HAS_NCCL)
  // 3. The same combination with NCCL: every device gets the total.
  {
    std::vector<curt::device> ranks(devices.begin(), devices.begin() + used);
    std::vector<curt::nccl_communicator> comms = curt::nccl_communicator::create_all(ranks);
    std::vector<curt::device_buffer<float>> totals;
    for (part& p : parts) totals.emplace_back(p.device, cols);
    auto all_reduce = [&] {
      for (std::size_t i = 0; i < parts.size(); ++i) curt::memset(totals[i], 0xFF, parts[i].stream);
      {
        curt::nccl_group group;
        for (std::size_t i = 0; i < parts.size(); ++i)
          curt::all_reduce(parts[i].partial, totals[i], curt::nccl_op::sum, comms[i],
                           parts[i].stream);
      }
      for (part& p : parts) p.stream.synchronize();
    };
    const double nccl_ms = median_host_ms(5, all_reduce);
    bool ok = true;
    std::string detail = "every device; NCCL " + std::to_string(curt::nccl_version());
    for (std::size_t i = 0; i < parts.size(); ++i) {
      std::vector<float> got(cols);
      curt::copy(got, totals[i], parts[i].stream);
      parts[i].stream.synchronize();
      ok = matches(got, want, magnitude, rows, detail) && ok;
    }
    // Bus bandwidth as nccl-tests counts it: 2 (n - 1) / n of the data per rank.
    const double bus = used > 1 ? 2.0 * (used - 1) / used * double(cols) * sizeof(float) : 0.0;
    results.row("NCCL all-reduce of the partials", size, ok, nccl_ms, bus, detail);
  }
#else
  std::printf("NCCL not found when this example was built: the all-reduce is not run\n");
#endif
  return results.print();
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run("multi_gpu", "multi_gpu [ROWS [COLS]]", [&] { return run(argc, argv); });
}
