// Translation units built with and without --default-stream per-thread agree on every curt
// function: a 0 handle means the default stream of the translation unit that builds the ref.
// Built at -O0 so that nothing is inlined: if curt gave one function two meanings (an ODR
// violation), the linker would keep one of them and one translation unit would get the other's.
#include <catch.hpp>

#include <cuda_runtime_api.h>

cudaStream_t legacy_tu_from_zero();
cudaStream_t legacy_tu_from_cccl_zero();
cudaStream_t per_thread_tu_from_zero();
cudaStream_t per_thread_tu_from_cccl_zero();

TEST_CASE("a 0 stream is the default stream of the translation unit that names it") {
  CHECK(legacy_tu_from_zero() == cudaStreamLegacy);
  CHECK(per_thread_tu_from_zero() == cudaStreamPerThread);
}

TEST_CASE("a CCCL stream_ref of 0 converts to the default stream of its translation unit") {
  CHECK(legacy_tu_from_cccl_zero() == cudaStreamLegacy);
  CHECK(per_thread_tu_from_cccl_zero() == cudaStreamPerThread);
}
