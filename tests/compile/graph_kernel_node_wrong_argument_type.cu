// Must not compile: a kernel node's argument (a pointer of another element type) does not convert
// to the kernel's parameter; the check is curt::launch's. With -DCURT_COMPILE_CONTROL the same
// node passes the right type and compiles.
#include <curt/graph_nodes.hpp>

__global__ void scale(float* data, int n, float factor) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] *= factor;
}

curt::graph_node add_it(curt::graph_ref g) {
#ifdef CURT_COMPILE_CONTROL
  float* data = nullptr;
#else
  int* data = nullptr;  // int* does not convert to float*
#endif
  return curt::add_kernel_node(g, {}, curt::launch_config(dim3(1), dim3(32)), scale, data, 32,
                               2.0f);
}
