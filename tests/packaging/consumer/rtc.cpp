// Links curt::rtc and compiles a kernel with NVRTC (no GPU needed).
#include <curt/rtc.hpp>

#include <cstdio>

int main() {
  const curt::rtc::compiled code =
      curt::rtc::program("k.cu", "extern \"C\" __global__ void k(int* x) { x[0] = 1; }")
          .compile(curt::rtc::options().architecture({9, 0}));
  std::printf("rtc_consumer: %zu B of CUBIN\n", code.cubin().size());
  return code.cubin().empty() ? 1 : 0;
}
