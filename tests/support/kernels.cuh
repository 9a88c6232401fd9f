// Test helper (device side): small kernels that several GPU tests share. Each computes with the
// __f*_rn intrinsics (or integers) so that the CPU reference matches exactly. Include it in one
// translation unit per program: the kernels are ordinary (external) definitions.
#pragma once

#include "spin.cuh"

namespace curt_test {

/// y[i] = a * x[i] + b, after every thread spun for delay_ns.
__global__ void slow_affine(const float* x, float* y, int n, float a, float b,
                            unsigned long long delay_ns) {
  spin_for(delay_ns);
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
}

/// out[i] = in[i] * in[i] + c.
__global__ void square_plus(const float* in, float* out, int n, float c) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = __fadd_rn(__fmul_rn(in[i], in[i]), c);
}

/// y[i] = a * x[i] + b in integers, after every thread spun for delay_ns.
__global__ void slow_affine_int(const int* x, int* y, int n, int a, int b,
                                unsigned long long delay_ns) {
  spin_for(delay_ns);
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + b;
}

}  // namespace curt_test
