// curt/peer.hpp: kept for its public path; the header is curt/multi_gpu/peer.hpp.
#pragma once

#include <curt/multi_gpu/peer.hpp>
