// Test helper (device side): the GPU's nanosecond clock, and spinning on it, so that slow kernels
// take the same wall time natively and under compute-sanitizer.
#pragma once

namespace curt_test {

__device__ inline unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline void spin_for(unsigned long long ns) {
  unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

}  // namespace curt_test
