// A consumer's CUDA translation unit: includes all of curt and runs a kernel when it can.
#include <curt/curt.hpp>

#include <cstdio>

int count_devices_from_cpp();  // other.cpp

__global__ void write_answer(int* out) { *out = 42; }

int main() {
  int count = curt::device_count();
  if (count != count_devices_from_cpp()) {
    std::printf("device count differs between .cu and .cpp\n");
    return 1;
  }
  std::printf("curt consumer: %d CUDA device(s), runtime %s\n", count,
              curt::runtime_version().to_string().c_str());
  if (count == 0) return 0;
  int* out = nullptr;
  CURT_CHECK(cudaMalloc(&out, sizeof(int)));
  write_answer<<<1, 1>>>(out);
  CURT_CHECK(cudaGetLastError());
  int answer = 0;
  CURT_CHECK(cudaMemcpy(&answer, out, sizeof answer, cudaMemcpyDeviceToHost));
  CURT_CHECK(cudaFree(out));
  std::printf("kernel answered %d\n", answer);
  return answer == 42 ? 0 : 1;
}
