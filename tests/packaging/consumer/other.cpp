// A consumer's plain C++ translation unit, built by the host compiler alone.
#include <curt/curt.hpp>

int count_devices_from_cpp() { return curt::device_count(); }
