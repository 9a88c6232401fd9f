// A consumer of curt::nvtx: <curt/nvtx.hpp> and NVTX's headers found through the target, by the
// host compiler alone. Needs no device: with no tool attached NVTX's calls do nothing.
#include <curt/nvtx.hpp>

#include <cstdio>

int main() {
  static const curt::nvtx::domain domain("curt nvtx consumer");
  {
    curt::nvtx::scoped_range range(domain, "consumer", curt::nvtx::color::rgb(0, 160, 255), 42);
    curt::nvtx::mark(domain, "inside");
  }
  std::printf("curt nvtx consumer: NVTX %d\n", NVTX_VERSION);
}
