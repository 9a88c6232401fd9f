// curt/peer.hpp: the public path of curt/multi_gpu/peer.hpp.
#include <curt/multi_gpu/peer.hpp>
