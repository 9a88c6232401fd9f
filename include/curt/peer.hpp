#include <curt/multi_gpu/peer.hpp>  // a kept public path
