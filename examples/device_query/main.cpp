// device_query: what curt sees of each CUDA device. Plain C++: no CUDA compiler needed.
#include <curt/device.hpp>

#include <cstdio>

int main() {
  std::printf("CUDA runtime %s, driver %s\n", curt::runtime_version().to_string().c_str(),
              curt::driver_version().to_string().c_str());
  if (curt::device_count() == 0) {
    std::printf("no CUDA device: skipped (%s)\n", curt::no_device_reason().c_str());
    return 77;  // the skip code CTest expects
  }
  for (curt::device d : curt::devices()) {
    curt::memory_info memory = d.memory_info();
    curt::compute_capability cc = d.compute_capability();
    std::printf("device %d: %s, compute capability %d.%d, %s, PCI %s\n", d.ordinal(),
                d.name().c_str(), cc.major, cc.minor, d.uuid().to_string().c_str(),
                d.pci_bus_id().c_str());
    std::printf("  %d multiprocessors, %d threads/block, %zu KiB shared memory/block (opt-in)\n",
                d.multiprocessor_count(), d.max_threads_per_block(),
                d.max_shared_memory_per_block_optin() / 1024);
    std::printf("  memory: %.1f GiB free of %.1f GiB, L2 %d MiB, bus %d bits\n",
                memory.free / 1073741824.0, memory.total / 1073741824.0,
                d.l2_cache_size() >> 20, d.memory_bus_width());
    std::printf("  cooperative launch: %s, clusters: %s, memory pools: %s\n",
                d.supports_cooperative_launch() ? "yes" : "no",
                d.supports_cluster_launch() ? "yes" : "no",
                d.supports_memory_pools() ? "yes" : "no");
  }
  return 0;
}
