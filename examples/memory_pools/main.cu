// memory_pools: stream-ordered memory pools, device and pinned host, through curt.
//   1. A loop of ITERATIONS steps on one stream; each step takes two scratch buffers,
//        t from a pool of our own:          pool.allocate<T>(n, stream), cudaMallocFromPoolAsync
//        u from the device's current pool:  curt::allocate_async<T>(n, stream), cudaMallocAsync
//      uses them in three kernels (t = state * a + b; u = t ^ t rotated by `shift`; state += u)
//      and lets them go out of scope: an async_buffer frees on its stream (cudaFreeAsync), after
//      the kernels, without waiting; the next step's allocations reuse the same memory. Run with
//      the pools' release threshold at 0 (CUDA's default: at each synchronization a pool tries to
//      give back to the system all the memory it holds and does not use) and at never_release
//      (it keeps it for the next allocations). The state ends in pinned memory poisoned first
//      and is compared exactly with the CPU's (32-bit unsigned arithmetic).
//   2. The pool's statistics (reserved and used memory, their high watermarks) after each loop,
//      after trim_to(0) and after reset_high_watermarks(); the firm ones are checked: nothing is
//      used once the stream is synchronized, the high watermark holds one step's scratch, a pool
//      at never_release keeps its memory over a synchronization, trim_to(0) returns it.
//   3. A pinned host pool (memory_pool_properties::pinned_host()), where the device supports host
//      memory pools (cudaDevAttrHostMemoryPoolsSupported; otherwise skipped, saying so): the host
//      writes an input into pool memory and a kernel reads it and writes its output into pool
//      memory too, across the bus, after set_access (a host pool gives devices NO access until
//      then: a kernel touching it before faults, and the context is lost). Checked exactly.
//   4. Host time of an allocation + free pair (median of many, std::chrono): from the pool, from
//      the current pool, from the host pool, against device_buffer (cudaMalloc + cudaFree) and
//      pinned_buffer (cudaHostAlloc + cudaFreeHost) in the same run. Printed, never asserted.
// Every loop also runs at 1, 3 and 1000 elements. Fresh random input every run (the seed is
// printed). The result table comes last; exit code 0 when every check passed, 1 on a mismatch or
// CUDA failure, 2 on bad arguments, 77 without a CUDA device. CURT_EXAMPLE_SEED repeats a run.
//
// Usage: memory_pools [ELEMENTS [ITERATIONS]]   (default 1048573 = 2^20 - 3 unsigned ints, 6
// iterations; ELEMENTS up to 2^28, ITERATIONS up to 1000). Larger: memory_pools 67108864 20.
#include "example.hpp"

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr unsigned kBlockThreads = 256;
constexpr std::uint32_t kPoison = 0xDEADBEEFu;

// ---- Kernels (one thread per element) --------------------------------------------------------

// out[i] = in[i] * a + b
__global__ void scale(const std::uint32_t* in, std::uint32_t* out, std::size_t n, std::uint32_t a,
                      std::uint32_t b) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * a + b;
}

// u[i] = t[i] ^ t[(i + shift) % n]: reads an element another thread of the previous kernel wrote,
// so t must be complete first, which the stream's order gives (shift < n).
__global__ void mix(const std::uint32_t* t, std::uint32_t* u, std::size_t n, std::size_t shift) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) u[i] = t[i] ^ t[i < n - shift ? i + shift : i - (n - shift)];
}

// state[i] += u[i]
__global__ void accumulate(std::uint32_t* state, const std::uint32_t* u, std::size_t n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) state[i] += u[i];
}

curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(static_cast<unsigned>(curt::ceil_div(n, std::size_t(kBlockThreads))),
                             kBlockThreads);
}

// ---- The loop ---------------------------------------------------------------------------------

struct step {
  std::uint32_t a, b;
  std::size_t shift;  // < n
};

std::vector<step> random_steps(std::size_t n, std::size_t iterations) {
  std::vector<step> steps(iterations);
  for (step& s : steps) {
    s.a = static_cast<std::uint32_t>(curt_example::rng()());
    s.b = static_cast<std::uint32_t>(curt_example::rng()());
    s.shift = static_cast<std::size_t>(curt_example::rng()() % n);
  }
  return steps;
}

// One step on `stream`, its scratch from `pool` and from the device's current pool. No
// synchronization: the buffers are freed on the stream, ordered after the kernels that use them.
void enqueue_step(curt::stream_ref stream, curt::memory_pool_ref pool, std::uint32_t* state,
                  std::size_t n, const step& s) {
  curt::async_buffer<std::uint32_t> t = pool.allocate<std::uint32_t>(n, stream);
  curt::async_buffer<std::uint32_t> u = curt::allocate_async<std::uint32_t>(n, stream);
  curt::launch(stream, config_for(n), scale, state, t.data(), n, s.a, s.b);
  curt::launch(stream, config_for(n), mix, t.data(), u.data(), n, s.shift);
  curt::launch(stream, config_for(n), accumulate, state, u.data(), n);
}  // ~u, ~t: cudaFreeAsync on `stream`

// The CPU's loop, the same arithmetic (modulo 2^32).
std::vector<std::uint32_t> cpu_loop(std::vector<std::uint32_t> state,
                                    const std::vector<step>& steps) {
  const std::size_t n = state.size();
  std::vector<std::uint32_t> t(n);
  for (const step& s : steps) {
    for (std::size_t i = 0; i < n; ++i) t[i] = state[i] * s.a + s.b;
    for (std::size_t i = 0; i < n; ++i) state[i] += t[i] ^ t[(i + s.shift) % n];
  }
  return state;
}

// Random input and the loop's expected result; the device state and a pinned result buffer.
struct problem {
  problem(curt::device device, curt::stream_ref stream, std::size_t n, std::size_t iterations)
      : input(curt_example::random_values<std::uint32_t>(
            n, 0, std::numeric_limits<std::uint32_t>::max())),
        steps(random_steps(n, iterations)),
        expected(cpu_loop(input, steps)),
        initial(device, n),
        state(device, n),
        result(device, n) {
    curt::copy(initial, input, stream);
  }
  std::size_t size() const { return input.size(); }

  // Every step, from the initial state.
  void enqueue(curt::stream_ref stream, curt::memory_pool_ref pool) {
    curt::copy(state, initial, stream);
    for (const step& s : steps) enqueue_step(stream, pool, state.data(), size(), s);
  }

  std::vector<std::uint32_t> input;
  std::vector<step> steps;
  std::vector<std::uint32_t> expected;
  curt::device_buffer<std::uint32_t> initial, state;
  curt::pinned_buffer<std::uint32_t> result;
};

// The first element of got[0, n) that differs from want, described; empty when all match.
std::string first_mismatch(const char* what, const std::uint32_t* got,
                           const std::vector<std::uint32_t>& want) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) {
      char text[200];
      std::snprintf(text, sizeof text, "%s, n = %zu: element %zu is 0x%08x, expected 0x%08x%s",
                    what, want.size(), i, static_cast<unsigned>(got[i]),
                    static_cast<unsigned>(want[i]), got[i] == kPoison ? " (poison)" : "");
      return text;
    }
  return {};
}

// One checked run: the pinned result poisoned, the loop, the state copied back and compared.
std::string check(curt::stream& stream, curt::memory_pool_ref pool, problem& p) {
  std::fill(p.result.begin(), p.result.end(), kPoison);  // nothing in flight writes it now
  p.enqueue(stream, pool);
  curt::copy(p.result, p.state, stream);
  stream.synchronize();
  return first_mismatch("loop", p.result.data(), p.expected);
}

// ---- Statistics -------------------------------------------------------------------------------

double mib(std::size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void print_statistics(const char* when, curt::memory_pool_ref pool) {
  const curt::memory_pool_statistics s = pool.statistics();
  std::printf("  %-44s %10.2f %10.2f %10.2f %10.2f\n", when, mib(s.reserved), mib(s.reserved_high),
              mib(s.used), mib(s.used_high));
}

// ---- Allocation + free pairs ------------------------------------------------------------------

// The median host time, in microseconds, of `pairs` calls of pair() (after a few untimed ones).
template <class Pair>
double median_pair_us(int pairs, const Pair& pair) {
  for (int i = 0; i < 3; ++i) pair();
  std::vector<double> us(static_cast<std::size_t>(pairs));
  for (double& t : us) {
    const auto start = std::chrono::steady_clock::now();
    pair();
    t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// ---- The pinned host pool ---------------------------------------------------------------------

// Host-pool memory that the host writes and a kernel reads, and that the kernel writes and the
// host reads. Returns the first mismatch, described (empty when all match); `ms` gets the kernel's
// GPU time.
std::string host_pool_round_trip(curt::stream& stream, curt::memory_pool_ref host_pool,
                                 std::size_t n, double& ms) {
  const std::vector<std::uint32_t> values =
      curt_example::random_values<std::uint32_t>(n, 0, std::numeric_limits<std::uint32_t>::max());
  const std::uint32_t a = static_cast<std::uint32_t>(curt_example::rng()()) | 1u;
  const std::uint32_t b = static_cast<std::uint32_t>(curt_example::rng()());
  std::vector<std::uint32_t> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = values[i] * a + b;

  curt::async_buffer<std::uint32_t> in = host_pool.allocate<std::uint32_t>(n, stream);
  curt::async_buffer<std::uint32_t> out = host_pool.allocate<std::uint32_t>(n, stream);
  // compute-sanitizer's initcheck does not see the host's stores into pool memory: a memset on
  // the stream first, so that what the kernel reads counts as written for it too.
  curt::memset(in, 0, stream);
  stream.synchronize();  // the allocations are done: from here the host may touch the memory
  std::copy(values.begin(), values.end(), in.data());
  std::fill(out.data(), out.data() + n, kPoison);
  curt::stream_timer timer(stream);
  curt::launch(stream, config_for(n), scale, in.data(), out.data(), n, a, b);  // across the bus
  ms = timer.stop().count();  // waits for the kernel: the host may read `out`
  return first_mismatch("host pool", out.data(), want);
}  // ~out, ~in: freed on the stream

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "memory_pools",
      "memory_pools [ELEMENTS [ITERATIONS]]   (1 <= ELEMENTS <= 2^28, default 1048573; 1 <= "
      "ITERATIONS <= 1000, default 6)",
      [&] {
        const std::size_t n =
            curt_example::size_argument(argc, argv, 1, 1048573, 1, std::size_t(1) << 28);
        const std::size_t iterations = curt_example::size_argument(argc, argv, 2, 6, 1, 1000);
        const curt::device device(0);
        // A host pool belongs to no device: curt runs its calls in the current device's context,
        // so make ours current (it is device 0 anyway, but say which).
        curt::set_current_device(device);
        curt::stream stream(device);
        const std::size_t scratch_bytes = n * sizeof(std::uint32_t);
        std::printf(
            "memory_pools: %zu unsigned ints (%.2f MiB per scratch buffer), %zu "
            "iterations, on %s\n",
            n, mib(scratch_bytes), iterations, device.name().c_str());

        // Our pool, and the device's current pool (its default pool, unless someone changed it),
        // whose release threshold this example changes and puts back at the end.
        curt::memory_pool pool(curt::memory_pool_properties::device(device));
        const curt::memory_pool_ref current = curt::current_memory_pool(device);
        const std::size_t current_threshold = current.release_threshold();

        curt_example::table table("memory_pools",
                                  curt_example::copy_gb_per_s(device, stream, scratch_bytes));
        problem p(device, stream, n, iterations);
        const std::size_t edge_sizes[] = {1, 3, 1000};
        std::string edges = "exact; also n =";
        for (std::size_t size : edge_sizes) edges += " " + std::to_string(size);
        // Per step, the kernels read 5 and write 3 arrays of n elements.
        const double loop_bytes =
            8.0 * static_cast<double>(scratch_bytes) * static_cast<double>(iterations);

        std::printf("\n  %-44s %10s %10s %10s %10s\n", "our pool's statistics (MiB)", "reserved",
                    "high", "used", "high");
        print_statistics("new pool", pool);

        // ---- 1 and 2: the loop at two release thresholds, the statistics after each ----------
        std::string stats_failure;
        const auto expect = [&](bool holds, const std::string& what) {
          if (!holds && stats_failure.empty()) stats_failure = what;
        };
        struct threshold_variant {
          const char* name;
          std::size_t threshold;
        };
        const threshold_variant variants[] = {
            {"loop, release threshold 0", 0},
            {"loop, release threshold never_release", curt::memory_pool_ref::never_release},
        };
        for (const threshold_variant& v : variants) {
          pool.set_release_threshold(v.threshold);
          current.set_release_threshold(v.threshold);
          pool.reset_high_watermarks();
          std::string mismatch = check(stream, pool, p);
          const std::string label = std::string("after the loop, synchronized, threshold ") +
                                    (v.threshold == 0 ? "0" : "max");
          print_statistics(label.c_str(), pool);
          expect(pool.used_memory() == 0, label + ": the pool still has memory in use");
          expect(pool.used_memory_high() >= scratch_bytes,
                 label + ": the used high watermark is below one scratch buffer");
          if (v.threshold != 0)
            expect(pool.reserved_memory() >= scratch_bytes,
                   label + ": the pool gave its memory back despite never_release");
          for (std::size_t size : edge_sizes) {
            if (!mismatch.empty()) break;
            problem edge(device, stream, size, iterations);
            mismatch = check(stream, pool, edge);
          }

          // GPU time of the whole loop, and the host's time to enqueue it. The timer synchronizes,
          // so at threshold 0 each run may start from a pool that gave its memory back and must
          // get it from the system again.
          std::vector<double> host_us;
          const double ms = curt_example::median_ms(stream, 3, [&](curt::stream_ref s) {
            const auto start = std::chrono::steady_clock::now();
            p.enqueue(s, pool);
            host_us.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
          });
          host_us.erase(host_us.begin());  // median_ms's untimed warm-up run
          std::sort(host_us.begin(), host_us.end());
          char detail[120];
          std::snprintf(detail, sizeof detail, "; host %.1f us per step to enqueue",
                        host_us[host_us.size() / 2] / static_cast<double>(iterations));
          table.row(v.name, std::to_string(n) + " x " + std::to_string(iterations),
                    mismatch.empty(), ms, loop_bytes, mismatch.empty() ? edges + detail : mismatch);
        }

        // Memory that a never_release pool keeps goes back on request: trim_to(bytes to keep).
        stream.synchronize();  // a free is known to be done only after a synchronization
        pool.trim_to(0);
        print_statistics("after trim_to(0)", pool);
        expect(pool.reserved_memory() == 0, "trim_to(0) left memory reserved");
        pool.reset_high_watermarks();
        print_statistics("after reset_high_watermarks()", pool);
        expect(pool.reserved_memory_high() == pool.reserved_memory() &&
                   pool.used_memory_high() == pool.used_memory(),
               "reset_high_watermarks() did not bring the watermarks down to the current values");
        std::printf(
            "(one step holds %.2f MiB of scratch from this pool; %zu steps without reuse "
            "would have held %.2f MiB)\n",
            mib(scratch_bytes), iterations, mib(scratch_bytes * iterations));
        table.row("pool statistics", "-", stats_failure.empty(), 0, 0,
                  stats_failure.empty() ? "used 0 after sync; kept at never_release; trim_to(0)"
                                        : stats_failure);

        // ---- 3: the pinned host pool --------------------------------------------------------
        curt::memory_pool host_pool(curt::no_handle);
        if (device.attribute<cudaDevAttrHostMemoryPoolsSupported>()) {
          host_pool = curt::memory_pool(curt::memory_pool_properties::pinned_host());
          // No device access yet (CUDA's rule for host pools); ours gets read-write.
          const bool none_before = host_pool.access(device) == curt::pool_access::none;
          host_pool.set_access(device, curt::pool_access::read_write);
          double ms = 0;
          std::string mismatch = host_pool_round_trip(stream, host_pool, n, ms);
          for (std::size_t size : edge_sizes) {
            if (!mismatch.empty()) break;
            double edge_ms = 0;
            mismatch = host_pool_round_trip(stream, host_pool, size, edge_ms);
          }
          if (!none_before && mismatch.empty())
            mismatch = "the new host pool already gave the device access";
          stream.synchronize();
          std::printf(
              "\nhost pool after the round trips: reserved %.2f MiB, used %.2f MiB, used "
              "high %.2f MiB\n",
              mib(host_pool.reserved_memory()), mib(host_pool.used_memory()),
              mib(host_pool.used_memory_high()));
          table.row("pinned host pool, kernel across the bus", std::to_string(n), mismatch.empty(),
                    ms, 2.0 * static_cast<double>(scratch_bytes),
                    mismatch.empty() ? edges + "; no access until set_access" : mismatch);
        } else {
          std::printf(
              "\nmemory_pools: %s does not support host memory pools "
              "(cudaDevAttrHostMemoryPoolsSupported is 0): the pinned host pool part is "
              "skipped\n",
              device.name().c_str());
        }

        // ---- 4: allocation + free pairs, host time ------------------------------------------
        // The pools keep their memory (never_release), as a program that allocates in a loop
        // should set them; a stream-ordered free returns the memory to the pool for the next
        // allocation on the stream at once, without waiting for the GPU.
        pool.set_release_threshold(curt::memory_pool_ref::never_release);
        current.set_release_threshold(curt::memory_pool_ref::never_release);
        if (host_pool.valid())
          host_pool.set_release_threshold(curt::memory_pool_ref::never_release);
        for (const std::size_t count : {std::size_t(1024), n}) {
          const std::size_t bytes = count * sizeof(std::uint32_t);
          const int pairs = bytes > (std::size_t(64) << 20) ? 11 : 101;  // cudaHostAlloc is slow
          struct pair_variant {
            const char* name;
            bool available;
            std::function<void()> pair;  // allocates, and frees at the end of the call
          };
          using u32 = std::uint32_t;
          const pair_variant pair_variants[] = {
              {"memory_pool::allocate + free (stream-ordered)", true,
               [&] { curt::async_buffer<u32> b = pool.allocate<u32>(count, stream); }},
              {"allocate_async + free (current pool, stream-ordered)", true,
               [&] { curt::async_buffer<u32> b = curt::allocate_async<u32>(count, stream); }},
              {"device_buffer (cudaMalloc + cudaFree)", true,
               [&] { curt::device_buffer<u32> b(device, count); }},
              {"host pool allocate + free (stream-ordered)", host_pool.valid(),
               [&] { curt::async_buffer<u32> b = host_pool.allocate<u32>(count, stream); }},
              {"pinned_buffer (cudaHostAlloc + cudaFreeHost)", true,
               [&] { curt::pinned_buffer<u32> b(device, count); }},
          };
          std::printf("\nallocation + free of %zu bytes, host time per pair (median of %d):\n",
                      bytes, pairs);
          double pool_us = 0;
          for (const pair_variant& v : pair_variants) {
            if (!v.available) continue;
            const double us = median_pair_us(pairs, v.pair);
            if (pool_us == 0) pool_us = us;  // the first: our pool
            std::printf("  %-52s %10.2f us  %8.1fx the pool's\n", v.name, us,
                        pool_us > 0 ? us / pool_us : 0.0);
          }
          stream.synchronize();
        }
        current.set_release_threshold(current_threshold);  // the process's pool as it was
        return table.print();
      });
}
