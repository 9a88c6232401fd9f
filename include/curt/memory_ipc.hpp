#include <curt/memory/ipc.hpp>  // a kept public path
