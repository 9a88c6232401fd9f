// One translation unit of test_default_stream, compiled twice: once as it is (0 is the legacy
// default stream) and once with CUDA_API_PER_THREAD_DEFAULT_STREAM (what nvcc --default-stream
// per-thread defines: 0 is the per-thread stream). CURT_TU_NAME names the functions of each.
#include <curt/stream.hpp>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#  define CURT_TU_NAME(name) per_thread_tu_##name
#else
#  define CURT_TU_NAME(name) legacy_tu_##name
#endif

#include <cuda/stream_ref>

cudaStream_t CURT_TU_NAME(from_zero)() {
  cudaStream_t zero = nullptr;
  curt::stream_ref ref(zero);
  return ref.get();
}

cudaStream_t CURT_TU_NAME(from_cccl_zero)() {
  cudaStream_t zero = nullptr;
  ::cuda::stream_ref cccl(zero);
  curt::stream_ref ref = cccl;
  return ref.get();
}
