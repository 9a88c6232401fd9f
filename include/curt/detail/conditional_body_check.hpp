// curt/detail/conditional_body_check.hpp: lets stream.hpp ask whether a capture goes into the
// body of a conditional node without compiling the table of bodies (detail/graph_bodies.hpp) in
// every translation unit. That header installs the check; until a translation unit that can
// make conditional nodes is part of the program, no graph is a body and the pointer stays null.
#pragma once

#include <cuda_runtime_api.h>

namespace curt::detail {

inline bool (*conditional_body_check)(cudaGraph_t) noexcept = nullptr;

/// Whether `graph` is the body of a conditional node curt made.
inline bool captures_into_conditional_body(cudaGraph_t graph) noexcept {
  return conditional_body_check != nullptr && conditional_body_check(graph);
}

}  // namespace curt::detail
