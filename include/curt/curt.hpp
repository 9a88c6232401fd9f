// curt/curt.hpp: the whole library but the opt-in headers, which need more than CUDA's runtime:
// cccl.hpp, span.hpp, memory_resource.hpp (CCCL), nccl.hpp (NCCL) and nvtx.hpp (NVTX). Using their
// features without them stops at a static_assert that names the header. Each header can also be
// included alone.
#pragma once

#include <curt/core/context.hpp>
#include <curt/core/device.hpp>
#include <curt/core/error.hpp>
#include <curt/core/version.hpp>
#include <curt/execution/access_policy.hpp>
#include <curt/execution/event.hpp>
#include <curt/execution/green_context.hpp>
#include <curt/execution/launch.hpp>
#include <curt/execution/library.hpp>
#include <curt/execution/occupancy.hpp>
#include <curt/execution/stream.hpp>
#include <curt/graph/capture.hpp>
#include <curt/graph/conditional.hpp>
#include <curt/graph/device_launch.hpp>
#include <curt/graph/graph.hpp>
#include <curt/graph/memory.hpp>
#include <curt/graph/node.hpp>
#include <curt/graph/node_update.hpp>
#include <curt/graph/nodes.hpp>
#include <curt/memory/array.hpp>
#include <curt/memory/batch_copy.hpp>
#include <curt/memory/buffer.hpp>
#include <curt/memory/copy.hpp>
#include <curt/memory/growable.hpp>
#include <curt/memory/ipc.hpp>
#include <curt/memory/location.hpp>
#include <curt/memory/pitched.hpp>
#include <curt/memory/pool.hpp>
#include <curt/memory/pool_ipc.hpp>
#include <curt/memory/texture.hpp>
#include <curt/memory/unified.hpp>
#include <curt/memory/virtual_memory.hpp>
#include <curt/multi_gpu/peer.hpp>
#include <curt/profiling/profiler.hpp>
