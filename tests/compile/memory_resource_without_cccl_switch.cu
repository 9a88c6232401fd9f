// Must not compile: without CCCL's switch its memory resources are empty, and
// <curt/memory_resource.hpp> says which macro to define. With -DCURT_COMPILE_CONTROL the switch is
// defined first, and it compiles.
#ifdef CURT_COMPILE_CONTROL
#  define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif
#include <curt/memory_resource.hpp>

int main() { return 0; }
