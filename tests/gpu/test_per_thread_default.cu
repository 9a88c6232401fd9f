// Built with --default-stream per-thread (tests/gpu/CMakeLists.txt): curt's driver calls that take
// a stream must exist in such a unit (the driver's per-thread flavour of cuEventRecord,
// cuStreamWaitEvent and cuMemsetD16/D32Async starts at a newer ABI than curt asks for), and a
// stream handle of 0 must mean the per-thread default stream there, as it does for the runtime.
#include <catch.hpp>
#include <expect.hpp>
#include <spin.cuh>
#include <curt/copy.hpp>
#include <curt/detail/driver.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

static_assert(CURT_DETAIL_PER_THREAD_DEFAULT_STREAM, "this unit is built per-thread");

// y[i] = a * x[i], after spinning: a consumer that did not wait reads the poison.
__global__ void slow_scale(const float* x, float* y, int n, float a, unsigned long long delay_ns) {
  curt_test::spin_for(delay_ns);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fmul_rn(a, x[i]);
}
__global__ void plus_one(const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(y[i], 1.0f);
}

int random_n() { return std::uniform_int_distribution<int>(1000, 200000)(curt_test::rng()); }

// producer: slow_scale; consumer, after `order`: plus_one, copied back and compared.
template <class Order>
void check_order(curt::stream_ref producer, curt::stream_ref consumer, Order order) {
  const int n = random_n();
  const float a = std::uniform_real_distribution<float>(0.5f, 2.0f)(curt_test::rng());
  std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n), 1.0f, 2.0f);
  curt::device d(0);
  curt::device_buffer<float> dx(d, x.size()), y(d, x.size()), out(d, x.size());
  curt::pinned_buffer<float> back(d, x.size());
  curt::copy_and_wait(dx, x, curt::stream_ref::per_thread_default());
  REQUIRE(cudaMemset(y.data(), 0xFF, y.size_bytes()) == cudaSuccess);  // NaN poison
  REQUIRE(cudaMemset(out.data(), 0xFF, out.size_bytes()) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const int blocks = (n + 255) / 256;
  slow_scale<<<blocks, 256, 0, producer.get()>>>(dx.data(), y.data(), n, a, 20'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  order();
  plus_one<<<blocks, 256, 0, consumer.get()>>>(y.data(), out.data(), n);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  curt::copy(back, out, consumer);
  consumer.synchronize();
  for (int i = 0; i < n; ++i) {
    const float want = a * x[std::size_t(i)] + 1.0f;
    if (!(std::abs(back.data()[i] - want) <= 1e-6f * std::abs(want))) {
      FAIL_CHECK("element " << i << ": " << back.data()[i] << ", want " << want);
      break;
    }
  }
  producer.synchronize();
}

}  // namespace

namespace curt_test {
unsigned long long default_stream_id_through_driver_in_legacy_unit();  // the legacy unit's
}

// The two units' lookups go through one inline function (find_driver_function): the flavour each
// unit means by a handle of 0 must come from the unit, not from whichever copy the linker kept.
TEST_CASE("a handle of 0 given to CURT_DRIVER_CALL is the default stream of the calling unit") {
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // device 0's primary context, current
  unsigned long long per_thread = 0, legacy = 0, here = 0;
  REQUIRE(cudaStreamGetId(cudaStreamPerThread, &per_thread) == cudaSuccess);
  REQUIRE(cudaStreamGetId(cudaStreamLegacy, &legacy) == cudaSuccess);
  REQUIRE(per_thread != legacy);
  CURT_DRIVER_CALL(cuStreamGetId, 12000, nullptr, &here);
  CHECK(here == per_thread);
  CHECK(curt_test::default_stream_id_through_driver_in_legacy_unit() == legacy);
}

// The driver's per-thread flavours of its pre-7.0 stream functions start at the 7.0 ABI, which
// <cudaTypedefs.h> names only PFN_..._v7000_ptsz: asked for at the ABI of their PFN_ typedef,
// this unit must still get them, the per-thread ones (0 is this unit's per-thread stream).
TEST_CASE("in a per-thread unit, CURT_DRIVER_CALL finds the stream functions at their first ABI") {
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // device 0's primary context, current
  auto per_thread_at_7 = [](const char* symbol) {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    REQUIRE(cudaGetDriverEntryPointByVersion(symbol, &function, 7000,
                                             cudaEnablePerThreadDefaultStream,
                                             &found) == cudaSuccess);
    REQUIRE(found == cudaDriverEntryPointSuccess);
    return function;
  };
  CHECK(reinterpret_cast<void*>(CURT_DRIVER_FUNCTION(cuStreamQuery, 2000)) ==
        per_thread_at_7("cuStreamQuery"));
  CHECK(reinterpret_cast<void*>(CURT_DRIVER_FUNCTION(cuEventRecord, 2000)) ==
        per_thread_at_7("cuEventRecord"));
  CHECK(reinterpret_cast<void*>(CURT_DRIVER_FUNCTION(cuMemsetD32Async, 3020)) ==
        per_thread_at_7("cuMemsetD32Async"));

  // And they work on a handle of 0 (that it is the per-thread stream: the cuStreamGetId test).
  const int n = random_n();
  curt::device d(0);
  curt::device_buffer<int> b(d, static_cast<std::size_t>(n));
  const int value = std::uniform_int_distribution<int>(1, 1 << 30)(curt_test::rng());
  CURT_DRIVER_CALL(cuMemsetD32Async, 3020, reinterpret_cast<CUdeviceptr>(b.data()),
                   static_cast<unsigned>(value), static_cast<std::size_t>(n), nullptr);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
  CURT_DRIVER_CALL(cuEventRecord, 2000, e, nullptr);
  CURT_DRIVER_CALL(cuStreamSynchronize, 2000, nullptr);
  CHECK(cudaEventQuery(e) == cudaSuccess);
  CHECK(CURT_DRIVER_FUNCTION(cuStreamQuery, 2000)(nullptr) == CUDA_SUCCESS);
  std::vector<int> back(static_cast<std::size_t>(n), 0);
  curt::copy_and_wait(back, b, curt::stream_ref::per_thread_default());
  CHECK(std::count(back.begin(), back.end(), value) == n);
  CHECK(cudaEventDestroy(e) == cudaSuccess);
}

TEST_CASE("in a per-thread unit, wait(stream) between created streams orders the work") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::device d(0);
  curt::stream producer(d), consumer(d);
  check_order(producer, consumer, [&] { consumer.wait(producer); });  // owner
  const curt::stream_ref p = producer, c = consumer;
  check_order(p, c, [&] { c.wait(p); });  // ref, looked up
  check_order(p, c, [&] { c.wait(p); });  // ref, remembered
}

TEST_CASE("in a per-thread unit, wait(stream) with the default stream (0) orders the work") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::device d(0);
  curt::stream other(d);
  const curt::stream_ref zero(cudaStream_t{nullptr});
  check_order(other, zero, [&] { zero.wait(other); });
  check_order(zero, other, [&] { other.wait(zero); });
}

TEST_CASE("in a per-thread unit, fill of 2- and 4-byte values works on stream 0 and created streams") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::device d(0);
  curt::stream s(d);
  const std::size_t n = static_cast<std::size_t>(random_n());
  const auto i32 = static_cast<std::int32_t>(std::uniform_int_distribution<std::int32_t>(
      1 << 20, 1 << 30)(curt_test::rng()) | 0x01020300);  // bytes differ: the driver memset
  const auto i16 = static_cast<std::int16_t>(0x0102 + (i32 & 0x0F00));
  for (curt::stream_ref target : {curt::stream_ref(cudaStream_t{nullptr}), curt::stream_ref(s)}) {
    curt::device_buffer<std::int32_t> a(d, n);
    curt::device_buffer<std::int16_t> b(d, n);
    REQUIRE(cudaMemset(a.data(), 0x55, a.size_bytes()) == cudaSuccess);  // poison
    REQUIRE(cudaMemset(b.data(), 0x55, b.size_bytes()) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    curt::fill(a, i32, target);
    curt::fill(b, i16, target);
    std::vector<std::int32_t> back_a(n);
    std::vector<std::int16_t> back_b(n);
    curt::copy(back_a, a, target);
    curt::copy_and_wait(back_b, b, target);
    CHECK(std::count(back_a.begin(), back_a.end(), i32) == static_cast<std::ptrdiff_t>(n));
    CHECK(std::count(back_b.begin(), back_b.end(), i16) == static_cast<std::ptrdiff_t>(n));
  }
}
