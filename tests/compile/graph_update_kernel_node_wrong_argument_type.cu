// Must not compile: an executable graph's kernel node updated with an argument that does not
// convert to the kernel's parameter (a device lambda taking float*, given int*). With
// -DCURT_COMPILE_CONTROL the update passes the right type and compiles.
#include <curt/graph_node_update.hpp>

void update_it(curt::graph_exec_ref exec, curt::graph_node node, float factor) {
#ifdef CURT_COMPILE_CONTROL
  float* data = nullptr;
#else
  int* data = nullptr;  // int* does not convert to float*
#endif
  curt::update_kernel_node(exec, node, curt::launch_config(dim3(1), dim3(32)),
                           [=] __device__(float* d, int n) {
                             int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
                             if (i < n) d[i] *= factor;
                           },
                           data, 32);
}
