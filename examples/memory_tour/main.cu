// memory_tour: curt's memory layer in one program, each step checked against the CPU.
//   1. pinned host input -> device_buffer (curt::copy on a stream); a kernel takes the buffers as
//      cuda::std::span; the result comes back into pinned memory.
//   2. a scratch buffer from a memory pool (stream-ordered, freed on its stream when it goes out
//      of scope), used by a second kernel.
//   3. a copy batch: K chunks of the result gathered, in reverse order, in one call.
//   4. managed memory prefetched to the device, updated by a kernel, prefetched back, read on the
//      host.
// Prints "memory_tour: N elements, K chunks: PASSED" and exits 0; 1 when a result is wrong (or
// CUDA failed), 77 when there is no device. Usage: memory_tour [N]   (default 1048576)
#include <curt/batch_copy.hpp>
#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/span.hpp>
#include <curt/unified_memory.hpp>

#include <cuda/std/span>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr unsigned kBlockThreads = 256;

// y = a * x + b
__global__ void affine(cuda::std::span<const float> x, cuda::std::span<float> y, float a, float b) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < x.size()) y[i] = a * x[i] + b;
}

// out = in * in
__global__ void square(cuda::std::span<const float> in, cuda::std::span<float> out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < in.size()) out[i] = in[i] * in[i];
}

__global__ void add_one(cuda::std::span<int> values) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < values.size()) values[i] += 1;
}

curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, std::size_t(kBlockThreads)))),
                             dim3(kBlockThreads));
}

bool close_to(float got, float want) {
  return std::fabs(got - want) <= 1e-5f * std::fmax(1.0f, std::fabs(want));
}

// The first mismatch, described; empty when everything matches.
template <class Got, class Want>
std::string first_mismatch(const char* what, const Got& got, const Want& want) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!close_to(static_cast<float>(got[i]), static_cast<float>(want[i])))
      return std::string(what) + ": element " + std::to_string(i) + " is " +
             std::to_string(static_cast<float>(got[i])) + ", expected " +
             std::to_string(static_cast<float>(want[i]));
  return {};
}

int run(std::size_t n) {
  const curt::device gpu(0);
  curt::stream stream(gpu);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  const float a = dist(rng), b = dist(rng);

  // 1. Pinned input, device buffers, typed copies, a kernel on spans.
  curt::pinned_buffer<float> host(gpu, n);
  for (float& v : host) v = dist(rng);
  curt::device_buffer<float> x(gpu, n), y(gpu, n);
  curt::copy(x, host, stream);
  curt::launch(stream, config_for(n), affine, x, y, a, b);
  curt::pinned_buffer<float> result(gpu, n);
  for (float& v : result) v = std::nanf("");  // poisoned: a copy that does not happen shows
  curt::copy(result, y, stream);
  stream.synchronize();
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = a * host[i] + b;
  if (std::string bad = first_mismatch("affine", result, want); !bad.empty()) {
    std::fprintf(stderr, "memory_tour: %s\n", bad.c_str());
    return 1;
  }

  // 2. Scratch memory from a pool, freed on the stream at the end of the scope.
  curt::memory_pool pool(curt::memory_pool_properties::device(gpu));
  {
    curt::async_buffer<float> squares = pool.allocate<float>(n, stream);
    curt::launch(stream, config_for(n), square, y, squares);
    curt::copy(result, squares, stream);
    stream.synchronize();
  }
  for (std::size_t i = 0; i < n; ++i) want[i] = want[i] * want[i];
  if (std::string bad = first_mismatch("pool scratch", result, want); !bad.empty()) {
    std::fprintf(stderr, "memory_tour: %s\n", bad.c_str());
    return 1;
  }

  // 3. One batch of K copies: the chunks of `result` land in reverse order in `gathered`.
  const std::size_t chunks = 8, chunk = n / chunks;
  curt::device_buffer<float> gathered(gpu, chunks * chunk);
  curt::fill(gathered, std::nanf(""), stream);  // poisoned: a chunk not copied shows
  curt::copy_batch batch;
  for (std::size_t k = 0; k < chunks; ++k)
    batch.add(curt::span(gathered, (chunks - 1 - k) * chunk, chunk),
              curt::span(result, k * chunk, chunk));
  batch.submit(stream);
  std::vector<float> back(chunks * chunk, std::nanf(""));
  curt::copy(back, gathered, stream);
  stream.synchronize();
  std::vector<float> reversed(chunks * chunk);
  for (std::size_t k = 0; k < chunks; ++k)
    for (std::size_t i = 0; i < chunk; ++i)
      reversed[(chunks - 1 - k) * chunk + i] = want[k * chunk + i];
  if (std::string bad = first_mismatch("copy batch", back, reversed); !bad.empty()) {
    std::fprintf(stderr, "memory_tour: %s\n", bad.c_str());
    return 1;
  }

  // 4. Managed memory: written on the host, moved to the device, updated there, moved back.
  if (gpu.attribute<cudaDevAttrConcurrentManagedAccess>()) {
    curt::managed_buffer<int> counts(gpu, n);
    std::vector<int> start(n);
    for (std::size_t i = 0; i < n; ++i) counts[i] = start[i] = static_cast<int>(rng() % 1000);
    curt::prefetch(counts, curt::memory_location::device(gpu), stream);
    curt::launch(stream, config_for(n), add_one, counts);
    curt::prefetch(counts, curt::memory_location::host(), stream);
    stream.synchronize();
    for (std::size_t i = 0; i < n; ++i)
      if (counts[i] != start[i] + 1) {
        std::fprintf(stderr, "memory_tour: managed element %zu is %d, expected %d\n", i,
                     counts[i], start[i] + 1);
        return 1;
      }
  } else {
    std::printf("memory_tour: the device lacks concurrent managed access: step 4 left out\n");
  }

  std::printf("memory_tour: %zu elements, %zu chunks: PASSED\n", n, chunks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (curt::device_count() == 0) {
    std::printf("memory_tour: no CUDA device: skipped (%s)\n", curt::no_device_reason().c_str());
    return 77;
  }
  std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : std::size_t(1) << 20;
  if (n < 8) n = 8;
  try {
    return run(n);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "memory_tour: %s\n", e.what());
    return 1;
  }
}
