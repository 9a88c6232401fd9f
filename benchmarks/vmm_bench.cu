// vmm_bench: issue 30's virtual memory goals, measured side by side in one run:
//   paired/vmm_grow   growing a buffer from 2 MiB to TOP by doubling (host time of the whole
//                     growth, the last one's memory released included, after a device sync):
//                     raw   a raw VMM loop: one cuMemAddressReserve of TOP, then per step
//                           cuMemCreate + cuMemMap + cuMemSetAccess + cuMemRelease of the new part
//                     curt  curt::growable_buffer<char>(gpu, TOP).resize() per step
//                     copy  cudaMalloc of the new size + cudaMemcpy of the old + cudaFree of the
//                           old per step (what a buffer without VMM does), as context
//                     counters raw_ns, curt_ns, copy_ns (medians), curt_over_raw (goal <= 1.05)
//                     and copy_over_curt (goal >= 10 at 8 GiB).
//   paired/vmm_map    the host cost of mapping one granule of physical memory into a reserved
//                     range, giving the device read-write access, and unmapping it:
//                     raw cuMemMap + cuMemSetAccess + cuMemUnmap vs curt::mapping + set_access +
//                     ~mapping (goal <= 1.03).
// TOP is 8 GiB; CURT_VMM_BENCH_TOP_MIB sets another (in MiB, a power of two >= 4). Where the
// copy loop would not fit (it holds 1.5 TOP at its last step, plus the others' TOP), TOP is
// halved until it does, and the run says so (curt_top_mib in the JSON context).
// Run, e.g.: vmm_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Exit code 77 when there is no device.
#include "harness.hpp"

#include <curt/driver.hpp>
#include <curt/virtual_memory.hpp>

#include <benchmark/benchmark.h>

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace bench {

constexpr std::size_t kStart = std::size_t(2) << 20;
constexpr int kMaps = 32;  // map + set_access + unmap per timed batch

struct context {
  curt::device device;
  std::size_t top;
  std::size_t granularity;
  curt::physical_memory granule;  // what paired/vmm_map maps
  curt::address_range range;
  context(curt::device d, std::size_t top_bytes)
      : device(d),
        top(top_bytes),
        granularity(curt::granularity(curt::memory_location::device(d))),
        granule(curt::memory_location::device(d), granularity),
        range(granularity, granularity) {}
};
context* g = nullptr;

// The driver's functions, typed by <cudaTypedefs.h>, found once (no libcuda link).
struct raw_vmm {
  PFN_cuMemCreate_v10020 create = CURT_DRIVER_FUNCTION(cuMemCreate, 10020);
  PFN_cuMemRelease_v10020 release = CURT_DRIVER_FUNCTION(cuMemRelease, 10020);
  PFN_cuMemAddressReserve_v10020 reserve = CURT_DRIVER_FUNCTION(cuMemAddressReserve, 10020);
  PFN_cuMemAddressFree_v10020 free = CURT_DRIVER_FUNCTION(cuMemAddressFree, 10020);
  PFN_cuMemMap_v10020 map = CURT_DRIVER_FUNCTION(cuMemMap, 10020);
  PFN_cuMemUnmap_v10020 unmap = CURT_DRIVER_FUNCTION(cuMemUnmap, 10020);
  PFN_cuMemSetAccess_v10020 set_access = CURT_DRIVER_FUNCTION(cuMemSetAccess, 10020);
};

double ns_of(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
      .count();
}

// One growth from kStart to g->top by doubling, each way; ns, or a negative value on failure.
double grow_raw(const raw_vmm& vmm) {
  const auto start = std::chrono::steady_clock::now();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, g->device.ordinal()};
  CUmemAccessDesc access{prop.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CUdeviceptr base = 0;
  if (vmm.reserve(&base, g->top, g->granularity, 0, 0) != CUDA_SUCCESS) return -1;
  std::vector<std::size_t> chunks;
  bool failed = false;
  for (std::size_t mapped = 0, size = kStart; size <= g->top && !failed; size *= 2) {
    const std::size_t grow = size - mapped;
    CUmemGenericAllocationHandle h = 0;
    failed = vmm.create(&h, grow, &prop, 0) != CUDA_SUCCESS ||
             vmm.map(base + mapped, grow, 0, h, 0) != CUDA_SUCCESS ||
             vmm.set_access(base + mapped, grow, &access, 1) != CUDA_SUCCESS ||
             vmm.release(h) != CUDA_SUCCESS;
    chunks.push_back(grow);
    mapped = size;
  }
  for (std::size_t i = chunks.size(), end = g->top; i-- > 0;) {
    end -= chunks[i];
    (void)vmm.unmap(base + end, chunks[i]);
  }
  (void)vmm.free(base, g->top);
  return failed ? -1 : ns_of(start);
}
double grow_curt() {
  const auto start = std::chrono::steady_clock::now();
  {
    curt::growable_buffer<char> buffer(g->device, g->top);
    for (std::size_t size = kStart; size <= g->top; size *= 2) buffer.resize(size);
  }
  return ns_of(start);
}
double grow_copy() {
  const auto start = std::chrono::steady_clock::now();
  void* old = nullptr;
  if (cudaMalloc(&old, kStart) != cudaSuccess) return -1;
  for (std::size_t size = 2 * kStart; size <= g->top; size *= 2) {
    void* grown = nullptr;
    if (cudaMalloc(&grown, size) != cudaSuccess) return -1;
    (void)cudaMemcpy(grown, old, size / 2, cudaMemcpyDeviceToDevice);
    (void)cudaFree(old);
    old = grown;
  }
  (void)cudaFree(old);
  (void)cudaDeviceSynchronize();
  return ns_of(start);
}

void paired_grow(benchmark::State& state) {
  const raw_vmm vmm;
  std::vector<double> raw_ns, curt_ns, copy_ns, ratio, copy_ratio;
  int turn = 0;
  for (auto _ : state) {
    (void)_;
    double r = 0, c = 0, m = 0;
    switch (turn) {  // rotate the order
      case 0: r = grow_raw(vmm); c = grow_curt(); m = grow_copy(); break;
      case 1: c = grow_curt(); m = grow_copy(); r = grow_raw(vmm); break;
      default: m = grow_copy(); r = grow_raw(vmm); c = grow_curt(); break;
    }
    turn = (turn + 1) % 3;
    if (r < 0 || m < 0 || cudaGetLastError() != cudaSuccess) {
      state.SkipWithError("a CUDA call failed");
      return;
    }
    raw_ns.push_back(r);
    curt_ns.push_back(c);
    copy_ns.push_back(m);
    ratio.push_back(c / r);
    copy_ratio.push_back(m / c);
  }
  state.counters["raw_ns"] = curt_bench::median_of(raw_ns);
  state.counters["curt_ns"] = curt_bench::median_of(curt_ns);
  state.counters["copy_ns"] = curt_bench::median_of(copy_ns);
  state.counters["curt_over_raw"] = curt_bench::median_of(ratio);
  state.counters["copy_over_curt"] = curt_bench::median_of(copy_ratio);
}

void paired_map(benchmark::State& state) {
  const raw_vmm vmm;
  const CUdeviceptr at = reinterpret_cast<CUdeviceptr>(g->range.data());
  const CUmemGenericAllocationHandle h = g->granule.get();
  const std::size_t size = g->granularity;
  const CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, g->device.ordinal()},
                               CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  const curt::device gpu = g->device;
  curt_bench::paired(
      state, kMaps,
      [&] {
        for (int i = 0; i < kMaps; ++i) {
          if (vmm.map(at, size, 0, h, 0) != CUDA_SUCCESS) continue;
          (void)vmm.set_access(at, size, &access, 1);
          (void)vmm.unmap(at, size);
        }
      },
      [&] {
        for (int i = 0; i < kMaps; ++i) {
          curt::mapping m(g->range, 0, g->granule);
          m.set_access(gpu, curt::memory_access::read_write);
        }
      },
      [] {});
}

// TOP from CURT_VMM_BENCH_TOP_MIB (default 8 GiB), halved while the copy loop would not fit.
std::size_t top_bytes(curt::device d) {
  std::size_t top = std::size_t(8) << 30;
  if (const char* text = std::getenv("CURT_VMM_BENCH_TOP_MIB"))
    top = std::size_t(std::strtoull(text, nullptr, 10)) << 20;
  if (top < 2 * kStart || (top & (top - 1)) != 0) {
    std::fprintf(stderr, "CURT_VMM_BENCH_TOP_MIB must be a power of two >= 4; using 8192\n");
    top = std::size_t(8) << 30;
  }
  const curt::memory_info info = d.memory_info();
  while (top > 2 * kStart && top / 2 * 5 > info.free) {  // copy: 1.5 TOP; raw, curt: TOP
    std::fprintf(stderr, "vmm_bench: %zu MiB free, growing to %zu MiB would not fit: halved\n",
                 info.free >> 20, top >> 20);
    top /= 2;
  }
  return top;
}

}  // namespace bench

int main(int argc, char** argv) {
  std::unique_ptr<bench::context> context;
  return curt_bench::run(argc, argv, "vmm_bench", [&](curt::device device) {
    context = std::make_unique<bench::context>(device, bench::top_bytes(device));
    bench::g = context.get();
    {  // warm-up: the driver's first VMM calls and the runtime's first allocation
      curt::growable_buffer<char> warm(device, bench::kStart);
      warm.resize(bench::kStart);
      void* p = nullptr;
      CURT_CHECK(cudaMalloc(&p, bench::kStart));
      CURT_CHECK(cudaFree(p));
    }
    const std::string top = std::to_string(context->top >> 20);
    curt_bench::add("paired/vmm_grow_to_" + top + "MiB", bench::paired_grow);
    curt_bench::add("paired/vmm_map", bench::paired_map);
    benchmark::AddCustomContext("curt_top_mib", top);
    benchmark::AddCustomContext("curt_granularity", std::to_string(context->granularity));
  });
}
