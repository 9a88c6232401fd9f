// virtual_memory: a buffer that grows while kernels keep writing into it (curt::growable_buffer).
//   The buffer reserves addresses once; each of STEPS steps enqueues a kernel that updates every
//   element so far (x = x * 3 + step), then grows the buffer on the host while that kernel may
//   still run (resize() maps more memory at the end: no copy, data() stays), and enqueues a kernel
//   that writes the new elements. The host checks after every step that data() did not move, and
//   at the end compares every element with the CPU's (32-bit unsigned arithmetic, exactly).
//   Then shrink_to_fit() after a resize to a quarter gives memory back, and the kept elements are
//   checked again. Also printed: how many bytes were mapped, in how many growth steps.
// Fresh random sizes and seeds every run (CURT_EXAMPLE_SEED repeats a run). Exit code 0 when
// every check passed, 1 on a mismatch or CUDA failure, 2 on bad arguments, 77 without a device.
//
// Usage: virtual_memory [STEPS [MAX_MIB]]   (default 24 steps, at most 1024 MiB reserved)
#include "example.hpp"

#include <curt/curt.hpp>
#include <curt/virtual_memory.hpp>

#include <cuda/std/span>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr unsigned kThreads = 256;

__global__ void update(cuda::std::span<std::uint32_t> x, std::uint32_t step) {
  const std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < x.size()) x[i] = x[i] * 3u + step;
}
__global__ void fill_new(cuda::std::span<std::uint32_t> x, std::size_t from, std::uint32_t seed) {
  const std::size_t i = from + blockIdx.x * std::size_t(blockDim.x) + threadIdx.x;
  if (i < x.size()) x[i] = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
}

curt::launch_config blocks_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return curt::launch_config(dim3(static_cast<unsigned>(blocks ? blocks : 1)), dim3(kThreads));
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run("virtual_memory", "virtual_memory [STEPS [MAX_MIB]]", [&] {
    const std::size_t steps = curt_example::size_argument(argc, argv, 1, 24, 1, 1000);
    const std::size_t max_mib = curt_example::size_argument(argc, argv, 2, 1024, 64, 1 << 20);
    curt::device gpu(0);
    curt::stream stream(gpu);
    const std::size_t max_elements = max_mib * (std::size_t(1) << 20) / sizeof(std::uint32_t);
    curt::growable_buffer<std::uint32_t> x(gpu, max_elements);
    std::uint32_t* const start = x.data();
    std::printf("reserved %zu MiB of addresses at %p, granularity %zu KiB\n", max_mib,
                static_cast<void*>(start), x.granularity() >> 10);

    std::mt19937_64& rng = curt_example::rng();
    std::vector<std::uint32_t> cpu;  // the reference
    bool moved = false;
    std::size_t growths = 0;
    for (std::size_t step = 1; step <= steps; ++step) {
      const std::size_t old_size = x.size();
      // Work on what exists, queued before the growth and maybe still running during it.
      curt::launch(stream, blocks_for(old_size), update, x, static_cast<std::uint32_t>(step));
      for (auto& v : cpu) v = v * 3u + static_cast<std::uint32_t>(step);
      const std::size_t room = max_elements / steps;
      const std::size_t grow = std::uniform_int_distribution<std::size_t>(1, room)(rng);
      const std::size_t mapped_before = x.capacity();
      x.resize(old_size + grow);  // maps more at the end if needed; never copies
      growths += x.capacity() != mapped_before;
      moved = moved || x.data() != start;
      const auto seed = static_cast<std::uint32_t>(rng());
      curt::launch(stream, blocks_for(grow), fill_new, x, old_size, seed);
      for (std::size_t i = old_size; i < x.size(); ++i)
        cpu.push_back(static_cast<std::uint32_t>(i) * 2654435761u ^ seed);
    }
    std::vector<std::uint32_t> back(x.size());
    curt::copy_and_wait(back, x, stream);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < back.size(); ++i) bad += back[i] != cpu[i];
    std::printf("%zu elements (%zu MiB mapped in %zu growth steps of %zu): %zu differ, data() %s\n",
                x.size(), x.capacity() * sizeof(std::uint32_t) >> 20, growths, steps, bad,
                moved ? "MOVED" : "never moved");

    // Shrink: a quarter stays; the mappings past it go back to the device.
    const std::size_t mapped = x.capacity();
    x.resize(x.size() / 4);
    x.shrink_to_fit();
    std::vector<std::uint32_t> kept(x.size());
    curt::copy_and_wait(kept, x, stream);
    std::size_t bad_kept = 0;
    for (std::size_t i = 0; i < kept.size(); ++i) bad_kept += kept[i] != cpu[i];
    std::printf("shrink_to_fit: %zu -> %zu MiB mapped, %zu of %zu kept elements differ\n",
                mapped * sizeof(std::uint32_t) >> 20, x.capacity() * sizeof(std::uint32_t) >> 20,
                bad_kept, kept.size());
    const bool ok = bad == 0 && bad_kept == 0 && !moved && x.capacity() <= mapped;
    std::printf("virtual_memory: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
  });
}
