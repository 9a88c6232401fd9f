// Must not compile: a kernel node given fewer arguments than the kernel has parameters.
// With -DCURT_COMPILE_CONTROL the node passes all three and compiles.
#include <curt/graph_nodes.hpp>

__global__ void scale(float* data, int n, float factor) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] *= factor;
}

curt::graph_node add_it(curt::graph_ref g, float* data) {
#ifdef CURT_COMPILE_CONTROL
  return curt::add_kernel_node(g, {}, curt::launch_config(dim3(1), dim3(32)), scale, data, 32,
                               2.0f);
#else
  return curt::add_kernel_node(g, {}, curt::launch_config(dim3(1), dim3(32)), scale, data, 32);
#endif
}
