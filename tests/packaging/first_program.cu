// y = a * x + y on the GPU, checked on the host.
#include <curt/curt.hpp>

#include <cstdio>
#include <vector>

__global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  if (curt::device_count() == 0) { std::puts("no CUDA device"); return 77; }
  const int n = 1 << 20;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) { x[i] = 0.5f * (i % 100); y[i] = float(i % 7); }

  curt::device gpu(0);
  curt::stream stream(gpu);
  curt::device_buffer<float> dx(gpu, n), dy(gpu, n);
  curt::copy(dx, x, stream);  // queued on the stream; sizes checked
  curt::copy(dy, y, stream);
  curt::launch(stream, curt::launch_config(curt::ceil_div(n, 256), 256), saxpy, 2.0f,
               dx.data(), dy.data(), n);
  curt::copy_and_wait(out, dy, stream);  // copy back, then wait for the stream

  for (int i = 0; i < n; ++i)
    if (out[i] != 2.0f * x[i] + y[i]) { std::printf("mismatch at %d\n", i); return 1; }
  std::puts("PASS");
}
