// Streams against the raw runtime: creation, flags, priorities, ownership, ordering of work on one
// stream and across streams, host functions and their exceptions, attributes, default streams.
//
// Kernels compute on fresh random inputs in [1, 2) (so nothing cancels and nothing is zero), write
// into outputs poisoned with 0xFF bytes (NaN as float) and are compared with the same arithmetic on
// the CPU. Slow kernels spin on %globaltimer, so they take the same wall time under
// compute-sanitizer. Checks that depend on a kernel still running are made only when the host
// measured that it cannot have finished yet (a sanitizer may make launches blocking).
//
// Test cases tagged [api-error] make CUDA calls fail on purpose; compute-sanitizer's memcheck
// reports those calls unless run with --report-api-errors no, so a sanitizer run may leave them out
// with the filter "~[api-error]".
#include <catch.hpp>
#include <spin.cuh>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>

#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/stream.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using curt_test::destructor_error_counter;
using curt_test::device_array;
using curt_test::host_gate;

// ---- device side ------------------------------------------------------------------------------

using curt_test::global_ns;

__device__ void spin_for(unsigned long long ns) {
  unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

// y[i] = a * x[i] + b, after every thread spun for delay_ns.
__global__ void slow_affine(const float* x, float* y, int n, float a, float b,
                            unsigned long long delay_ns) {
  spin_for(delay_ns);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(__fmul_rn(a, x[i]), b);
}

// out[i] = in[i] * in[i] + c.
__global__ void square_plus(const float* in, float* out, int n, float c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __fadd_rn(__fmul_rn(in[i], in[i]), c);
}

// y[i] = y[i] * y[i] + x[i], in place.
__global__ void square_plus_in_place(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __fadd_rn(__fmul_rn(y[i], y[i]), x[i]);
}

__global__ void spin_kernel(unsigned long long ns) { spin_for(ns); }

// ---- host side --------------------------------------------------------------------------------

constexpr int block_size = 256;
unsigned blocks_for(int n) { return static_cast<unsigned>((n + block_size - 1) / block_size); }

void require_launched() { REQUIRE(cudaGetLastError() == cudaSuccess); }

float affine(float x, float a, float b) { return a * x + b; }
float square_plus_ref(float v, float c) { return v * v + c; }

template <class T>
class pinned_buffer {
 public:
  explicit pinned_buffer(std::size_t n) : n_(n) {
    CURT_CHECK(cudaMallocHost(&p_, n * sizeof(T)));
    std::memset(static_cast<void*>(p_), 0xFF, n * sizeof(T));
  }
  ~pinned_buffer() {
    if (p_) (void)cudaFreeHost(p_);
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  T* get() const { return p_; }
  T& operator[](std::size_t i) const { return p_[i]; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  std::vector<T> to_vector() const { return std::vector<T>(p_, p_ + n_); }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

int random_size() { return curt_test::random_ints(1, 3000, 9000)[0]; }
float random_coefficient() { return curt_test::random_floats(1, 0.5f, 2.0f)[0]; }

unsigned raw_stream_flags(cudaStream_t s) {
  unsigned flags = 0;
  REQUIRE(cudaStreamGetFlags(s, &flags) == cudaSuccess);
  return flags;
}
int raw_stream_priority(cudaStream_t s) {
  int priority = 0;
  REQUIRE(cudaStreamGetPriority(s, &priority) == cudaSuccess);
  return priority;
}
unsigned long long raw_stream_id(cudaStream_t s) {
  unsigned long long id = 0;
  REQUIRE(cudaStreamGetId(s, &id) == cudaSuccess);
  return id;
}
int raw_stream_device(cudaStream_t s) {
  int ordinal = -1;
  REQUIRE(cudaStreamGetDevice(s, &ordinal) == cudaSuccess);
  return ordinal;
}
cudaStreamAttrValue raw_attribute(cudaStream_t s, cudaStreamAttrID id) {
  cudaStreamAttrValue value{};
  REQUIRE(cudaStreamGetAttribute(s, id, &value) == cudaSuccess);
  return value;
}

// A slow producer on `producer` writes data = a * x + b; after `order(consumer)` the consumer
// stream computes out = data * data + c and copies it back. Correct only if the consumer really
// waited: without the wait it would read the poison while the producer still spins.
template <class Order>
void check_cross_stream_order(curt::stream_ref producer, curt::stream_ref consumer, Order order,
                              std::chrono::nanoseconds delay) {
  int n = random_size();
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  device_array<float> dx(static_cast<std::size_t>(n)), data(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  dx.upload(x);
  data.poison();
  out.poison();
  pinned_buffer<float> back(static_cast<std::size_t>(n));

  slow_affine<<<blocks_for(n), block_size, 0, producer>>>(dx.get(), data.get(), n, a, b,
                                                          static_cast<unsigned long long>(delay.count()));
  require_launched();
  order(consumer);
  square_plus<<<blocks_for(n), block_size, 0, consumer>>>(data.get(), out.get(), n, c);
  require_launched();
  REQUIRE(cudaMemcpyAsync(back.get(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, consumer) ==
          cudaSuccess);
  consumer.synchronize();

  std::vector<float> want(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) want[i] = square_plus_ref(affine(x[i], a, b), c);
  curt_test::require_close_all(back.to_vector(), want);
  // The consumer waited for the producer, so the producer is done too.
  CHECK(producer.ready());
  producer.synchronize();
}

}  // namespace

TEST_CASE("streams are non-blocking by default and blocking on request, as the raw API reports") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);

  curt::stream fast(d);
  REQUIRE(fast.get() != nullptr);
  CHECK(fast.flags() == curt::stream_flags::non_blocking);
  CHECK((raw_stream_flags(fast) & cudaStreamNonBlocking) != 0u);

  curt::stream blocking(d, curt::stream_flags::blocking);
  REQUIRE(blocking.get() != nullptr);
  CHECK(blocking.flags() == curt::stream_flags::blocking);
  CHECK((raw_stream_flags(blocking) & cudaStreamNonBlocking) == 0u);

  // The same flags as streams made by the raw API with the corresponding flags.
  cudaStream_t raw_fast = nullptr, raw_blocking = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&raw_fast, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&raw_blocking, cudaStreamDefault) == cudaSuccess);
  CHECK(raw_stream_flags(fast) == raw_stream_flags(raw_fast));
  CHECK(raw_stream_flags(blocking) == raw_stream_flags(raw_blocking));
  CHECK(curt::stream_ref(raw_fast).flags() == curt::stream_flags::non_blocking);
  CHECK(curt::stream_ref(raw_blocking).flags() == curt::stream_flags::blocking);
  REQUIRE(cudaStreamDestroy(raw_fast) == cudaSuccess);
  REQUIRE(cudaStreamDestroy(raw_blocking) == cudaSuccess);

  // Priority 0 unless asked otherwise; a new stream has no work.
  CHECK(fast.priority() == 0);
  CHECK(raw_stream_priority(fast) == 0);
  CHECK(blocking.priority() == raw_stream_priority(blocking));
  CHECK(fast.ready());
  CHECK(blocking.ready());
  CHECK(fast != blocking);
}

TEST_CASE("every priority in the device's range round-trips; out of range is an error, not clamped") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::pair<int, int> range = d.stream_priority_range();
  int greatest = range.first, least = range.second;
  int raw_least = 0, raw_greatest = 0;
  REQUIRE(cudaDeviceGetStreamPriorityRange(&raw_least, &raw_greatest) == cudaSuccess);
  REQUIRE(greatest == raw_greatest);
  REQUIRE(least == raw_least);
  REQUIRE(greatest <= least);
  INFO("priority range [" << greatest << ", " << least << "]");

  for (int p = greatest; p <= least; ++p) {
    INFO("priority " << p);
    for (curt::stream_flags flags : {curt::stream_flags::non_blocking, curt::stream_flags::blocking}) {
      curt::stream s(d, flags, p);
      CHECK(s.priority() == p);
      CHECK(raw_stream_priority(s) == p);
      CHECK(s.flags() == flags);
    }
  }

  for (int p : {least + 1, greatest - 1}) {
    INFO("priority " << p);
    std::string shown = "[" + std::to_string(greatest) + ", " + std::to_string(least) + "]";
    std::string named = "priority " + std::to_string(p);
    auto error = curt_test::require_cuda_error(
        [&] { curt::stream s(d, curt::stream_flags::non_blocking, p); }, cudaErrorInvalidValue,
        {"outside the device's range", shown.c_str(), named.c_str(), "curt::stream(device 0"});
    CHECK_FALSE(error.from_driver());
    // The raw API would have clamped it silently instead.
    cudaStream_t raw = nullptr;
    REQUIRE(cudaStreamCreateWithPriority(&raw, cudaStreamNonBlocking, p) == cudaSuccess);
    CHECK(raw_stream_priority(raw) == (p > least ? least : greatest));
    REQUIRE(cudaStreamDestroy(raw) == cudaSuccess);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("device() and id() match cudaStreamGetDevice and cudaStreamGetId") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream a(d), b(d, curt::stream_flags::blocking);
  CHECK(a.device() == d);
  CHECK(a.device().ordinal() == raw_stream_device(a));
  CHECK(b.device().ordinal() == raw_stream_device(b));
  CHECK(a.id() == raw_stream_id(a));
  CHECK(b.id() == raw_stream_id(b));
  CHECK(a.id() != b.id());
  // A stream_ref views the same stream.
  curt::stream_ref ref = a;
  CHECK(ref == a);
  CHECK(ref.get() == a.get());
  CHECK(ref.id() == a.id());
  cudaStream_t raw = a;
  CHECK(raw == a.get());
  // The default streams have ids and devices too.
  CHECK(curt::stream_ref::per_thread_default().id() == raw_stream_id(cudaStreamPerThread));
  CHECK(curt::stream_ref::legacy_default().id() == raw_stream_id(cudaStreamLegacy));
  CHECK(curt::stream_ref::per_thread_default().device() == d);
}

TEST_CASE("from_native_handle adopts a raw stream and release() gives it back") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  destructor_error_counter errors;

  cudaStream_t raw = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) == cudaSuccess);
  unsigned long long raw_id = raw_stream_id(raw);
  {
    curt::stream adopted = curt::stream::from_native_handle(raw);
    CHECK(adopted.get() == raw);
    CHECK(adopted.id() == raw_id);
    CHECK(adopted.flags() == curt::stream_flags::non_blocking);
    // Usable for work.
    int n = random_size();
    std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
    float c = random_coefficient();
    device_array<float> dx(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
    dx.upload(x);
    out.poison();
    square_plus<<<blocks_for(n), block_size, 0, adopted>>>(dx.get(), out.get(), n, c);
    require_launched();
    adopted.synchronize();
    std::vector<float> want(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) want[i] = square_plus_ref(x[i], c);
    curt_test::require_close_all(out.download(), want);

    cudaStream_t back = adopted.release();
    CHECK(back == raw);
    CHECK_FALSE(adopted.valid());
    CHECK_THROWS_WITH(adopted.get(), ContainsSubstring("released"));
  }  // the released wrapper destroys nothing
  // Still alive, and still ours to destroy.
  CHECK(raw_stream_id(raw) == raw_id);
  CHECK(cudaStreamQuery(raw) == cudaSuccess);
  CHECK(cudaStreamDestroy(raw) == cudaSuccess);

  // An adopted stream is destroyed by its owner, without error.
  cudaStream_t owned = nullptr;
  REQUIRE(cudaStreamCreate(&owned) == cudaSuccess);
  {
    curt::stream adopted = curt::stream::from_native_handle(owned);
    CHECK(adopted.flags() == curt::stream_flags::blocking);
    adopted.synchronize();
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("moving a stream moves the handle, empties the source and destroys exactly once") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  destructor_error_counter errors;
  {
    curt::stream a(d);
    cudaStream_t handle = a.get();
    unsigned long long id = a.id();

    curt::stream b(std::move(a));
    CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state
    CHECK_THROWS_WITH(a.get(), ContainsSubstring("moved-from"));
    CHECK(b.get() == handle);
    CHECK(b.id() == id);

    curt::stream c(d, curt::stream_flags::blocking);
    c = std::move(b);  // destroys c's own stream, takes b's
    CHECK_FALSE(b.valid());  // NOLINT(bugprone-use-after-move): the moved-from state
    CHECK_THROWS_WITH(b.get(), ContainsSubstring("moved-from"));
    CHECK(c.get() == handle);
    CHECK(c.id() == id);
    CHECK(c.flags() == curt::stream_flags::non_blocking);

    curt::stream& alias = c;
    c = std::move(alias);  // self-move keeps the stream
    CHECK(c.get() == handle);
    CHECK(c.id() == id);

    // A moved-from stream can be assigned again and used.
    a = curt::stream(d);
    REQUIRE(a.get() != nullptr);
    CHECK(a.get() != handle);
    CHECK(a.id() != id);

    // The moved stream still works.
    c.synchronize();
    CHECK(cudaStreamQuery(c) == cudaSuccess);
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("work on one stream runs in submission order") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  int n = random_size();
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  float a = random_coefficient(), b = random_coefficient();
  device_array<float> dx(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
  pinned_buffer<float> back(static_cast<std::size_t>(n));

  // Everything asynchronous on s: upload, poison, slow kernel A, kernel B reading A's output,
  // download. Kernel B would read the poison if it overtook A.
  REQUIRE(cudaMemcpyAsync(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice, s) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), s) == cudaSuccess);
  slow_affine<<<blocks_for(n), block_size, 0, s>>>(dx.get(), y.get(), n, a, b, 2'000'000ull);
  require_launched();
  square_plus_in_place<<<blocks_for(n), block_size, 0, s>>>(dx.get(), y.get(), n);
  require_launched();
  REQUIRE(cudaMemcpyAsync(back.get(), y.get(), y.bytes(), cudaMemcpyDeviceToHost, s) == cudaSuccess);
  s.synchronize();
  CHECK(s.ready());

  std::vector<float> want(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    float v = affine(x[i], a, b);
    want[i] = v * v + x[i];
  }
  curt_test::require_close_all(back.to_vector(), want);
}

TEST_CASE("wait(event) makes another stream wait for the work the event captured") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream producer(d), consumer(d);
  curt::event e(d);
  SECTION("recorded with stream.record(event)") {
    check_cross_stream_order(
        producer, consumer,
        [&](curt::stream_ref waiting) {
          producer.record(e);
          waiting.wait(e);
        },
        20ms);
  }
  SECTION("recorded with event.record(stream)") {
    check_cross_stream_order(
        producer, consumer,
        [&](curt::stream_ref waiting) {
          e.record(producer);
          waiting.wait(curt::event_ref(e));
        },
        20ms);
  }
  CHECK(e.ready());
}

TEST_CASE("wait(stream) makes another stream wait for all work submitted to it so far") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream producer(d), consumer(d, curt::stream_flags::non_blocking, d.stream_priority_range().first);
  // Twice: the second wait re-records the same per-thread scratch event.
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    check_cross_stream_order(
        producer, consumer, [&](curt::stream_ref waiting) { waiting.wait(producer); }, 20ms);
  }
  // Both directions, and through plain refs.
  check_cross_stream_order(
      consumer, producer,
      [&](curt::stream_ref waiting) { waiting.wait(curt::stream_ref(consumer.get())); }, 10ms);
}

// Ends a capture whatever state it is in, destroying the graph it may give.
static void end_capture_quietly(cudaStream_t s) {
  cudaGraph_t g = nullptr;
  (void)cudaStreamEndCapture(s, &g);
  if (g) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();
}

TEST_CASE("a failed wait(stream) keeps the runtime's code, as the raw pair reports it", "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  // Two separate captures: waiting one on the other would merge them, which CUDA refuses.
  cudaError_t raw = cudaSuccess;
  {
    curt::stream a(d), b(d);
    cudaEvent_t ev = nullptr;
    REQUIRE(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(a.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(b.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess);
    raw = cudaEventRecord(ev, b.get());
    if (raw == cudaSuccess) raw = cudaStreamWaitEvent(a.get(), ev, 0);
    end_capture_quietly(a.get());
    end_capture_quietly(b.get());
    REQUIRE(cudaEventDestroy(ev) == cudaSuccess);
  }
  REQUIRE(raw != cudaSuccess);
  curt::stream a(d), b(d);
  for (int how = 0; how < 2; ++how) {  // owner, then ref
    INFO((how == 0 ? "a.wait(b) on owners" : "a.wait(b) on refs"));
    REQUIRE(cudaStreamBeginCapture(a.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess);
    REQUIRE(cudaStreamBeginCapture(b.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess);
    bool threw = false;
    try {
      if (how == 0)
        a.wait(b);
      else
        curt::stream_ref(a).wait(curt::stream_ref(b));
    } catch (const curt::cuda_error& e) {
      threw = true;
      CHECK(e.status() == raw);
      CHECK(e.code() == curt::make_error_code(raw));  // the runtime's category, as before
      CHECK(e.code() == curt::make_error_condition(raw));
    }
    CHECK(threw);
    CHECK(cudaGetLastError() == cudaSuccess);
    end_capture_quietly(a.get());
    end_capture_quietly(b.get());
  }
}

TEST_CASE("a blocking stream waits for the legacy default stream") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream blocking(d, curt::stream_flags::blocking);
  // No explicit wait: CUDA orders work on a blocking stream after earlier legacy-stream work.
  check_cross_stream_order(curt::stream_ref::legacy_default(), blocking, [](curt::stream_ref) {},
                           20ms);
}

TEST_CASE("ready() is false while work runs and true after synchronize(), as cudaStreamQuery says") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  CHECK(s.ready());
  CHECK(cudaStreamQuery(s) == cudaSuccess);

  SECTION("a long kernel") {
    auto spin = 20ms;
    auto start = std::chrono::steady_clock::now();
    spin_kernel<<<1, 1, 0, s>>>(static_cast<unsigned long long>(std::chrono::nanoseconds(spin).count()));
    require_launched();
    bool ready = s.ready();
    cudaError_t raw = cudaStreamQuery(s);
    auto asked = std::chrono::steady_clock::now() - start;
    if (asked < spin - 2ms) {
      // The kernel spins for `spin` from its start, which came after `start`: it cannot be done.
      CHECK_FALSE(ready);
      CHECK(raw == cudaErrorNotReady);
    } else {
      WARN("the launch took "
           << std::chrono::duration_cast<std::chrono::microseconds>(asked).count()
           << " us (blocking launches?): ready() not checked while the kernel runs");
    }
    s.synchronize();
    CHECK(s.ready());
    CHECK(cudaStreamQuery(s) == cudaSuccess);
  }
  SECTION("a host function that has not returned yet") {
    host_gate gate;
    gate.block(s);
    spin_kernel<<<1, 1, 0, s>>>(1000ull);
    require_launched();
    CHECK_FALSE(s.ready());
    CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
    CHECK_FALSE(s.ready());  // asking does not change it
    gate.open();
    s.synchronize();
    CHECK(s.ready());
    CHECK(cudaStreamQuery(s) == cudaSuccess);
  }
}

TEST_CASE("host_call runs after the work before it and before the work after it") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  int n = random_size();
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  float scale = random_coefficient(), shift = random_coefficient();
  device_array<float> dx(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n)), z(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
  dx.upload(x);
  y.poison();
  z.poison();
  out.poison();
  pinned_buffer<float> from_device(static_cast<std::size_t>(n)), to_device(static_cast<std::size_t>(n)), back(static_cast<std::size_t>(n));

  std::atomic<int> calls{0};
  std::thread::id caller = std::this_thread::get_id(), ran_on;
  // Before: a slow kernel and a download into pinned memory; the host function reads that memory.
  slow_affine<<<blocks_for(n), block_size, 0, s>>>(dx.get(), y.get(), n, a, b, 5'000'000ull);
  require_launched();
  REQUIRE(cudaMemcpyAsync(from_device.get(), y.get(), y.bytes(), cudaMemcpyDeviceToHost, s) ==
          cudaSuccess);
  s.host_call([&] {
    for (int i = 0; i < n; ++i) to_device[i] = from_device[i] * scale + shift;
    ran_on = std::this_thread::get_id();
    calls.fetch_add(1);
  });
  // After: an upload of what the host function wrote, and a kernel on it.
  REQUIRE(cudaMemcpyAsync(z.get(), to_device.get(), to_device.bytes(), cudaMemcpyHostToDevice, s) ==
          cudaSuccess);
  square_plus<<<blocks_for(n), block_size, 0, s>>>(z.get(), out.get(), n, c);
  require_launched();
  REQUIRE(cudaMemcpyAsync(back.get(), out.get(), out.bytes(), cudaMemcpyDeviceToHost, s) ==
          cudaSuccess);
  s.synchronize();

  CHECK(calls.load() == 1);
  CHECK(ran_on != caller);  // a runtime thread ran it
  std::vector<float> mid(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    mid[i] = affine(x[i], a, b) * scale + shift;
    want[i] = square_plus_ref(mid[i], c);
  }
  curt_test::require_close_all(to_device.to_vector(), mid);
  curt_test::require_close_all(back.to_vector(), want);
}

namespace {
struct host_failure : std::exception {
  explicit host_failure(int c) : code(c) {}
  const char* what() const noexcept override { return "host_failure"; }
  int code;
};
}  // namespace

TEST_CASE("an exception from a host function is rethrown once, by that stream's next synchronize()") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream failing(d), healthy(d);
  curt::event after(d);
  std::string message = "host function failed #" + std::to_string(curt_test::rng()() % 1000000);

  std::atomic<int> healthy_calls{0};
  failing.host_call([message] { throw std::runtime_error(message); });
  failing.host_call([] { throw std::logic_error("a second exception on the same stream"); });
  failing.record(after);
  healthy.host_call([&healthy_calls] { healthy_calls.fetch_add(1); });

  // Both host functions of `failing` have run once `after` completes; waiting on the event
  // does not take the exception.
  after.synchronize();
  // Another stream is not affected.
  CHECK_NOTHROW(healthy.synchronize());
  CHECK(healthy_calls.load() == 1);

  bool caught = false;
  try {
    failing.synchronize();
  } catch (const std::logic_error& e) {
    FAIL("the second exception was rethrown instead of the first: " << e.what());
  } catch (const std::runtime_error& e) {
    caught = true;
    CHECK(std::string(e.what()) == message);
  }
  CHECK(caught);
  // Only once; the stream goes on working.
  CHECK_NOTHROW(failing.synchronize());
  CHECK(failing.ready());
  std::atomic<int> later_calls{0};
  failing.host_call([&later_calls] { later_calls.fetch_add(1); });
  CHECK_NOTHROW(failing.synchronize());
  CHECK(later_calls.load() == 1);

  // The dynamic type survives, with its data, whatever it derives from.
  int code = static_cast<int>(curt_test::rng()() % 100000) + 1;
  failing.host_call([code] { throw host_failure(code); });
  try {
    failing.synchronize();
    FAIL("no exception");
  } catch (const host_failure& e) {
    CHECK(e.code == code);
  }
  failing.host_call([code] { throw code; });
  try {
    failing.synchronize();
    FAIL("no exception");
  } catch (int thrown) {
    CHECK(thrown == code);
  }
  CHECK_NOTHROW(failing.synchronize());
  CHECK_NOTHROW(healthy.synchronize());
}

TEST_CASE("the synchronization policy round-trips through cudaStreamGetAttribute") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream s(d);
  std::vector<cudaSynchronizationPolicy> policies = {cudaSyncPolicyAuto, cudaSyncPolicySpin,
                                                     cudaSyncPolicyYield, cudaSyncPolicyBlockingSync};
  std::shuffle(policies.begin(), policies.end(), curt_test::rng());
  for (cudaSynchronizationPolicy policy : policies) {
    INFO("policy " << int(policy));
    s.set_synchronization_policy(policy);
    CHECK(s.synchronization_policy() == policy);
    CHECK(raw_attribute(s, cudaStreamAttributeSynchronizationPolicy).syncPolicy == policy);
    // And synchronize() still works under it.
    spin_kernel<<<1, 1, 0, s>>>(100'000ull);
    require_launched();
    s.synchronize();
  }
  // Set through the raw API, read through curt.
  cudaStreamAttrValue value{};
  value.syncPolicy = cudaSyncPolicyYield;
  REQUIRE(cudaStreamSetAttribute(s, cudaStreamAttributeSynchronizationPolicy, &value) == cudaSuccess);
  CHECK(s.synchronization_policy() == cudaSyncPolicyYield);
}

TEST_CASE("a refused attribute is the raw API's error, naming the attribute", "[api-error]") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::stream probe(d), s(d);
  cudaStreamAttrValue bogus{};
  bogus.syncPolicy = static_cast<cudaSynchronizationPolicy>(77);
  cudaError_t raw = cudaStreamSetAttribute(probe, cudaStreamAttributeSynchronizationPolicy, &bogus);
  (void)cudaGetLastError();
  if (raw == cudaSuccess) {
    WARN("this driver accepts synchronization policy 77: nothing to compare");
    return;
  }
  curt_test::require_cuda_error(
      [&] { s.set_synchronization_policy(static_cast<cudaSynchronizationPolicy>(77)); }, raw,
      {"cudaStreamSetAttribute(stream, synchronization policy)"});
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an access-policy window round-trips and reset removes it") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  std::size_t max_window = static_cast<std::size_t>(d.access_policy_max_window_size());
  if (max_window == 0) {
    WARN("device 0 has no L2 access-policy windows");
    return;
  }
  curt::stream s(d);
  // A new stream has no window.
  CHECK(raw_attribute(s, cudaStreamAttributeAccessPolicyWindow).accessPolicyWindow.num_bytes == 0u);
  CHECK(s.get_access_policy_window().bytes == 0u);

  int n = 1 << 18;  // 1 MiB of floats
  device_array<float> dx(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
  std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
  dx.upload(x);
  y.poison();
  std::size_t limit = std::min(dx.bytes(), max_window);
  std::uniform_int_distribution<std::size_t> bytes_dist(std::min<std::size_t>(4096, limit), limit);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);

  struct props {
    cudaAccessProperty hit, miss;
  };
  for (props p : {props{cudaAccessPropertyPersisting, cudaAccessPropertyStreaming},
                  props{cudaAccessPropertyStreaming, cudaAccessPropertyNormal}}) {
    curt::access_policy_window window;
    window.base = dx.get();
    window.bytes = bytes_dist(curt_test::rng());
    window.hit_ratio = 1.0f - unit(curt_test::rng());  // in (0, 1]
    window.hit = p.hit;
    window.miss = p.miss;
    INFO("window of " << window.bytes << " bytes (at most " << max_window << "), hit ratio "
                      << window.hit_ratio);
    s.set_access_policy_window(window);

    cudaAccessPolicyWindow raw = raw_attribute(s, cudaStreamAttributeAccessPolicyWindow).accessPolicyWindow;
    CHECK(raw.base_ptr == window.base);
    CHECK(raw.num_bytes == window.bytes);
    CHECK(raw.hitRatio == window.hit_ratio);
    CHECK(raw.hitProp == window.hit);
    CHECK(raw.missProp == window.miss);
    curt::access_policy_window got = s.get_access_policy_window();
    CHECK(got.base == window.base);
    CHECK(got.bytes == window.bytes);
    CHECK(got.hit_ratio == window.hit_ratio);
    CHECK(got.hit == window.hit);
    CHECK(got.miss == window.miss);

    // Kernels on the stream still compute the same.
    float a = random_coefficient(), b = random_coefficient();
    slow_affine<<<blocks_for(n), block_size, 0, s>>>(dx.get(), y.get(), n, a, b, 0ull);
    require_launched();
    s.synchronize();
    std::vector<float> want(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) want[i] = affine(x[i], a, b);
    curt_test::require_close_all(y.download(), want);
    y.poison();
  }

  s.reset_access_policy_window();
  CHECK(raw_attribute(s, cudaStreamAttributeAccessPolicyWindow).accessPolicyWindow.num_bytes == 0u);
  CHECK(s.get_access_policy_window().bytes == 0u);
}

TEST_CASE("the memory synchronization domain and its map round-trip") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  if (d.compute_capability().major < 9) {
    WARN("memory synchronization domains need compute capability 9.0");
    return;
  }
  curt::stream s(d);
  for (cudaLaunchMemSyncDomain domain :
       {cudaLaunchMemSyncDomainRemote, cudaLaunchMemSyncDomainDefault, cudaLaunchMemSyncDomainRemote}) {
    INFO("domain " << int(domain));
    s.set_memory_sync_domain(domain);
    CHECK(s.memory_sync_domain() == domain);
    CHECK(raw_attribute(s, cudaStreamAttributeMemSyncDomain).memSyncDomain == domain);
    spin_kernel<<<1, 1, 0, s>>>(1000ull);
    require_launched();
    s.synchronize();
  }
  s.set_memory_sync_domain(cudaLaunchMemSyncDomainDefault);

  int domains = d.attribute(cudaDevAttrMemSyncDomainCount);
  INFO(domains << " hardware domains");
  REQUIRE(domains >= 1);
  std::uniform_int_distribution<int> pick(0, domains - 1);
  auto default_domain = static_cast<unsigned char>(pick(curt_test::rng()));
  auto remote_domain = static_cast<unsigned char>(pick(curt_test::rng()));
  s.set_memory_sync_domain_map(default_domain, remote_domain);
  cudaLaunchMemSyncDomainMap map = s.memory_sync_domain_map();
  CHECK(int(map.default_) == int(default_domain));
  CHECK(int(map.remote) == int(remote_domain));
  cudaLaunchMemSyncDomainMap raw = raw_attribute(s, cudaStreamAttributeMemSyncDomainMap).memSyncDomainMap;
  CHECK(int(raw.default_) == int(default_domain));
  CHECK(int(raw.remote) == int(remote_domain));
}

TEST_CASE("the legacy and per-thread default streams run work and synchronize") {
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  for (curt::stream_ref s : {curt::stream_ref::legacy_default(), curt::stream_ref::per_thread_default()}) {
    INFO((s == curt::stream_ref::legacy_default() ? "legacy default stream"
                                                  : "per-thread default stream"));
    int n = random_size();
    std::vector<float> x = curt_test::random_floats(std::size_t(n), 1.0f, 2.0f);
    float a = random_coefficient(), b = random_coefficient();
    device_array<float> dx(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
    pinned_buffer<float> back(static_cast<std::size_t>(n));
    dx.upload(x);
    y.poison();
    slow_affine<<<blocks_for(n), block_size, 0, s>>>(dx.get(), y.get(), n, a, b, 2'000'000ull);
    require_launched();
    REQUIRE(cudaMemcpyAsync(back.get(), y.get(), y.bytes(), cudaMemcpyDeviceToHost, s) == cudaSuccess);
    std::atomic<int> calls{0};
    s.host_call([&calls] { calls.fetch_add(1); });
    s.synchronize();
    CHECK(s.ready());
    CHECK(calls.load() == 1);
    std::vector<float> want(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) want[i] = affine(x[i], a, b);
    curt_test::require_close_all(back.to_vector(), want);
  }
}
