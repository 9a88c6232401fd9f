// <curt/curt.hpp> in a C++ translation unit, built by tests/packaging with g++ and
// -Wall -Wextra -Wconversion -Wsign-conversion -Wshadow -Werror: curt's headers add no warning.
#include "uses.hpp"

int main() {
  if (curt::device_count() == 0) return 0;
  return static_cast<int>(strict_warnings_uses(curt::device(0)));
}
