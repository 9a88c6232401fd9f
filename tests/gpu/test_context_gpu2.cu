// Two devices: work on device 1 from a thread that never chose a device makes no context of
// device 0; a refused launch is diagnosed on the stream's device; an event recorded on another
// device's stream says which; stream.wait(stream) orders work across devices.
//
// Labelled gpu2: main() exits with the skip code where fewer than two devices are visible.
//
// The first check must run in a process where nothing has touched device 0 yet (main() only
// called cudaGetDeviceCount, which makes no context). So the test case re-runs this executable
// (/proc/self/exe) with only the hidden test case "[.][device1-child]" and checks its exit code
// and output: that holds whatever the order of the test cases and whatever else ran before.
// Driver functions are reached through CURT_DRIVER_CALL: no test links libcuda.
#include <catch.hpp>
#include <isolation.hpp>
#include <kernels.cuh>
#include <device_array.hpp>
#include <expect.hpp>

#include <curt/detail/driver.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/graph.hpp>
#include <curt/graph_memory.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/copy.hpp>
#include <curt/occupancy.hpp>
#include <curt/profiler.hpp>
#include <curt/stream.hpp>
#include <curt/unified_memory.hpp>

#include <unistd.h>  // environ

#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using curt_test::run_self;
using curt_test::on_fresh_thread;
using curt_test::current_context;
using curt_test::primary_active;
using curt_test::child_result;

using namespace std::chrono_literals;
using curt_test::device_array;

constexpr const char* child_test_name = "device 1 from a fresh thread (child)";
constexpr const char* child_marker = "DEVICE1-CHILD-REACHED-ITS-END";

// ---- device side ------------------------------------------------------------------------------

using curt_test::global_ns;

using curt_test::slow_affine;
using curt_test::square_plus;

// Rotates each block's slice of `in` through dynamic shared memory.
__global__ void shared_rotate(const float* in, float* out, int count, int shift) {
  extern __shared__ float smem[];
  std::size_t base = std::size_t(blockIdx.x) * std::size_t(count);
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    smem[i] = in[base + std::size_t(i)];
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x))
    out[base + std::size_t(i)] = smem[(i + shift) % count];
}

// ---- host side --------------------------------------------------------------------------------

constexpr int block_size = 256;
unsigned blocks_for(int n) { return static_cast<unsigned>((n + block_size - 1) / block_size); }
curt::launch_config config_for(int n) { return curt::launch_config(dim3(blocks_for(n)), dim3(block_size)); }
float affine_ref(float x, float a, float b) { return a * x + b; }
float square_plus_ref(float v, float c) { return v * v + c; }
int random_size() { return curt_test::random_ints(1, 3000, 9000)[0]; }
float random_coefficient() { return curt_test::random_floats(1, 0.5f, 2.0f)[0]; }

using curt_test::under_compute_sanitizer;

// REQUIRE for the child's thread (Catch2 assertions are not thread-safe there): throws, and
// on_fresh_thread reports it on the test's thread.
void thread_require(bool ok, const char* what, int line) {
  if (!ok) throw std::runtime_error("line " + std::to_string(line) + ": required " + what);
}
#define THREAD_REQUIRE(...) thread_require(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __LINE__)

}  // namespace

// Runs only in the child process (hidden): nothing in it has touched device 0.
TEST_CASE("device 1 from a fresh thread (child)", "[.][device1-child]") {
  REQUIRE(curt::device_count() >= 2);
  REQUIRE_FALSE(primary_active(0));  // the premise: a process that has not used device 0
  curt::device d1(1);
  const int n = random_size();
  std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n), 1.0f, 2.0f);
  const float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  std::vector<float> back(static_cast<std::size_t>(n), -1.0f);

  // After each step: still no context on the thread, and none of device 0 anywhere.
  std::vector<std::string> broken;
  int blocks_per_sm = -1;
  cudaFuncAttributes attributes{};
  float ms = -1.0f;
  bool runtime_woke_device_0 = false;  // by an observed (not judged) operation
  on_fresh_thread([&] {
    if (current_context() != nullptr) {
      broken.push_back("the fresh thread had a context");
      return;
    }
    // The documented rule: these leave no context behind and never wake device 0.
    // Once device 0's primary context is active it stays so: only the step that woke it is
    // named (the later ones cannot be told apart from it).
    bool device_0_reported = false;
    auto step = [&](const char* what) {
      bool left = current_context() != nullptr;
      bool zero = primary_active(0) && !runtime_woke_device_0 && !device_0_reported;
      if (zero) device_0_reported = true;
      if (!left && !zero) return;
      broken.push_back(std::string(what) + (left ? ": left a context current" : "") +
                       (zero ? ": made device 0's primary context active" : ""));
      if (left) CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
    };
    // Operations on existing streams and events go to the runtime unchanged (documented): what
    // the runtime does there is reported, not judged, and any context it left current is
    // cleared, so the judged steps after them start from a thread without one again.
    auto observe = [&](const char* what) {
      bool left = current_context() != nullptr, zero = primary_active(0);
      std::printf("note: %s %s\n", what,
                  left || zero ? (zero ? "made device 0's primary context active (runtime)"
                                       : "left a context current (runtime)")
                               : "left no context");
      if (zero) runtime_woke_device_0 = true;
      if (left) CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
    };
    // Buffers of device 1, made and freed through a guard (raw runtime calls need a context).
    float* dx = nullptr;
    float* data = nullptr;
    float* out = nullptr;
    {
      curt::device_guard guard(d1);
      THREAD_REQUIRE(cudaMalloc(&dx, sizeof(float) * x.size()) == cudaSuccess);
      THREAD_REQUIRE(cudaMalloc(&data, sizeof(float) * x.size()) == cudaSuccess);
      THREAD_REQUIRE(cudaMalloc(&out, sizeof(float) * x.size()) == cudaSuccess);
      THREAD_REQUIRE(cudaMemcpy(dx, x.data(), sizeof(float) * x.size(),
                                cudaMemcpyHostToDevice) == cudaSuccess);
      THREAD_REQUIRE(cudaMemset(data, 0xFF, sizeof(float) * x.size()) == cudaSuccess);
      THREAD_REQUIRE(cudaMemset(out, 0xFF, sizeof(float) * x.size()) == cudaSuccess);
      THREAD_REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    }
    step("device_guard(device 1) and allocations under it");
    {
      curt::stream producer(d1), consumer(d1);
      step("curt::stream(device 1)");
      {  // the events go first: destroying them is an event operation (observed, not judged)
        curt::event done(d1);
        step("curt::event(device 1)");
        blocks_per_sm = curt::max_active_blocks_per_multiprocessor(d1, slow_affine, block_size);
        step("max_active_blocks_per_multiprocessor(device 1)");
        attributes = curt::kernel_attributes(d1, square_plus);
        step("kernel_attributes(device 1)");
        (void)d1.limit(cudaLimitStackSize);
        (void)d1.memory_info();
        step("device 1 limit and memory_info");
        (void)curt::graph_memory(d1);
        curt::reset_graph_memory_high(d1);
        curt::trim_graph_memory(d1);
        step("graph_memory, reset_graph_memory_high and trim_graph_memory(device 1)");
        curt::profiler_scope(d1).stop();
        step("profiler_scope(device 1) and stop()");
        (void)producer.device();
        (void)producer.priority();
        step("stream::device() and priority()");
        curt::launch(producer, config_for(n), slow_affine, dx, data, n, a, b, 10'000'000ull);
        step("curt::launch(device-1 stream)");
        curt::launch(producer, config_for(n), square_plus, data, out, n, c);
        step("curt::launch(device-1 stream), second");
        (void)producer.ready();
        step("stream::ready");
        producer.synchronize();
        step("stream::synchronize");

        consumer.wait(producer);
        observe("stream.wait(stream) on device 1");
        done.record(consumer);
        observe("event::record(device-1 stream)");
        done.synchronize();
        observe("event::synchronize");
        consumer.synchronize();
        step("stream::synchronize (consumer)");
        {
          curt::stream_timer timer(consumer);
          step("stream_timer (records in the stream's context)");
          curt::launch(consumer, config_for(n), slow_affine, dx, data, n, a, b, 10'000'000ull);
          step("curt::launch(device-1 stream), after the timer's start");
          ms = timer.stop().count();
          step("stream_timer::stop()");
        }
        step("destroying a stream_timer");
      }
      observe("destroying events of device 1");
    }
    step("destroying streams of device 1");
    {
      curt::device_guard guard(d1);
      THREAD_REQUIRE(cudaMemcpy(back.data(), out, sizeof(float) * back.size(),
                                cudaMemcpyDeviceToHost) == cudaSuccess);
      THREAD_REQUIRE(cudaFree(dx) == cudaSuccess);
      THREAD_REQUIRE(cudaFree(data) == cudaSuccess);
      THREAD_REQUIRE(cudaFree(out) == cudaSuccess);
    }
    step("copy back and free under device_guard(device 1)");
  });
  for (const std::string& what : broken) {
    std::printf("broken: %s\n", what.c_str());
    FAIL_CHECK(what);
  }
  CHECK((runtime_woke_device_0 || !primary_active(0)));
  CHECK(blocks_per_sm > 0);
  CHECK(attributes.maxThreadsPerBlock >= block_size);
  CHECK(ms >= 10.0f * 0.9f);  // the timer covered the 10 ms producer the consumer waited for
  std::vector<float> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = square_plus_ref(affine_ref(x[i], a, b), c);
  curt_test::require_close_all(back, want);
  std::printf("%s\n", child_marker);
  std::fflush(stdout);
}

TEST_CASE("work on device 1 from a fresh thread leaves no context and never wakes device 0") {
  REQUIRE(curt::device_count() >= 2);
  if (under_compute_sanitizer()) {
    // The sanitizer follows the child and works in it: the premise (a process where nothing
    // touched device 0) is not the program's alone there. The check ran without it.
    WARN("under compute-sanitizer: the device-1 child process is not run");
    return;
  }
  child_result child = run_self(child_test_name);
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find(child_marker) != std::string::npos);
}

namespace {

constexpr const char* queries_child_name = "device-less queries on device 1's memory (child)";
constexpr const char* queries_child_marker = "QUERIES-CHILD-REACHED-ITS-END";

unsigned long long context_id(CUcontext context) {
  unsigned long long id = 0;
  CURT_DRIVER_CALL(cuCtxGetId, 12000, context, &id);
  return id;
}

// The id of device `ordinal`'s primary context, which this retains (and so creates when it is
// inactive) and releases again.
unsigned long long primary_context_id(int ordinal) {
  CUdevice device = 0;
  CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, ordinal);
  CUcontext context = nullptr;
  CURT_DRIVER_CALL(cuDevicePrimaryCtxRetain, 7000, &context, device);
  unsigned long long id = context_id(context);
  CURT_DRIVER_CALL(cuDevicePrimaryCtxRelease, 11000, device);
  return id;
}

}  // namespace

// Runs only in the child process (hidden). Pointer and range queries and advice take no stream:
// on a thread with no context they need some context. Before the fix they retained the runtime's
// current device's (device 0's) primary context and released it again: in a process that works
// on device 1 only, every call created and destroyed a context of device 0 (about 160 ms each on
// the H200). Context ids are unique and handed out as contexts are made, so the id device 0's
// primary context gets at the end tells whether contexts were made (and destroyed) meanwhile.
TEST_CASE("device-less queries on device 1's memory (child)", "[.][queries-child]") {
  REQUIRE(curt::device_count() >= 2);
  REQUIRE_FALSE(primary_active(0));  // the premise: a process that has not used device 0
  curt::device d1(1);
  const std::size_t n = static_cast<std::size_t>(random_size());
  curt::managed_buffer<float> managed(d1, n);
  curt::device_buffer<float> on_device(d1, n);
  const unsigned long long before = primary_context_id(1);  // active: the buffers hold it
  constexpr int rounds = 5;
  std::vector<std::string> broken;
  std::vector<curt::pointer_info> seen;
  std::vector<bool> read_mostly;
  std::size_t graph_nodes = 0;
  on_fresh_thread([&] {
    auto step = [&](const std::string& what) {
      if (current_context() != nullptr) {
        broken.push_back(what + ": left a context current");
        CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
      }
      if (primary_active(0)) broken.push_back(what + ": device 0's primary context is active");
    };
    for (int round = 0; round < rounds; ++round) {
      std::string tag = " (round " + std::to_string(round) + ")";
      bool mostly = round % 2 == 0;
      curt::advise(managed, mostly ? curt::memory_advice::set_read_mostly
                                   : curt::memory_advice::unset_read_mostly);
      step("advise" + tag);
      read_mostly.push_back(curt::is_read_mostly(managed));
      step("is_read_mostly" + tag);
      (void)curt::preferred_location(managed);
      step("preferred_location" + tag);
      seen.push_back(curt::pointer_attributes(managed.data()));
      step("pointer_attributes(managed)" + tag);
      seen.push_back(curt::pointer_attributes(on_device.data()));
      step("pointer_attributes(device)" + tag);
    }
    // A graph has no device: its queries and its destruction need only some context.
    std::optional<curt::graph> g;
    std::optional<curt::graph_exec> exec;
    {
      curt::device_guard guard(d1);
      g.emplace(curt::graph::create());
      curt::add_empty_node(*g, {});
      exec.emplace(g->instantiate());
    }
    step("a graph and its executable graph made under device_guard(device 1)");
    graph_nodes = g->node_count();
    step("graph::node_count");
    exec.reset();
    step("destroying the executable graph");
    g.reset();
    step("destroying the graph");
  });
  const unsigned long long zero = primary_context_id(0);  // made now, for the first time
  for (const std::string& what : broken) FAIL_CHECK(what);
  INFO("device 1's primary context id " << before << ", device 0's, made afterwards, " << zero);
  CHECK(zero == before + 1);  // no context was made in between
  CHECK(graph_nodes == 1u);
  REQUIRE(read_mostly.size() == static_cast<std::size_t>(rounds));
  for (int round = 0; round < rounds; ++round)
    CHECK(read_mostly[static_cast<std::size_t>(round)] == (round % 2 == 0));
  REQUIRE(seen.size() == 2u * rounds);
  for (std::size_t i = 0; i < seen.size(); ++i) {
    INFO("answer " << i);
    CHECK(seen[i].kind == (i % 2 == 0 ? curt::memory_kind::managed : curt::memory_kind::device));
    CHECK(seen[i].device == 1);
  }
  std::printf("%s\n", queries_child_marker);
  std::fflush(stdout);
}

TEST_CASE("pointer and range queries, advice and graph queries and destruction for device 1, from "
          "a fresh thread, never make a context of device 0") {
  REQUIRE(curt::device_count() >= 2);
  if (under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (see above)");
    return;
  }
  child_result child = run_self(queries_child_name);
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find(queries_child_marker) != std::string::npos);
}

TEST_CASE("nested device_guards of two devices restore each context exactly") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d0(0), d1(1);
  // Observed on the thread, asserted here (Catch2 assertions are not thread-safe there).
  CUcontext before = reinterpret_cast<CUcontext>(1), zero = nullptr, one = nullptr;
  CUcontext in_innermost = nullptr, after_innermost = nullptr, after_inner = nullptr;
  CUcontext after_outer = reinterpret_cast<CUcontext>(1);
  on_fresh_thread([&] {
    before = current_context();
    {
      curt::device_guard outer(d0);
      zero = current_context();
      {
        curt::device_guard inner(d1);
        one = current_context();
        {
          curt::device_guard innermost(d0);
          in_innermost = current_context();
        }
        after_innermost = current_context();
      }
      after_inner = current_context();
    }
    after_outer = current_context();
  });
  REQUIRE(before == nullptr);
  REQUIRE(zero != nullptr);
  CHECK(one != nullptr);
  CHECK(one != zero);
  CHECK(in_innermost == zero);
  CHECK(after_innermost == one);
  CHECK(after_inner == zero);
  CHECK(after_outer == nullptr);
}

TEST_CASE("a refused launch is diagnosed on the stream's device, not the current one",
          "[api-error]") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d0(0), d1(1);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  const int count = 64 * 1024 / int(sizeof(float));  // 64 KiB of shared memory per block
  const std::size_t bytes = std::size_t(count) * sizeof(float);
  const unsigned blocks = static_cast<unsigned>(curt_test::random_ints(1, 2, 8)[0]);
  const int shift = curt_test::random_ints(1, 1, count - 1)[0];
  std::vector<float> in = curt_test::random_floats(std::size_t(count) * blocks, 1.0f, 2.0f);
  std::vector<float> expected(in.size());
  for (unsigned b = 0; b < blocks; ++b)
    for (int i = 0; i < count; ++i)
      expected[std::size_t(b) * count + std::size_t(i)] =
          in[std::size_t(b) * count + std::size_t((i + shift) % count)];
  const curt::launch_config config(dim3(blocks), dim3(256), bytes);

  // Device 0 only: its limit for this kernel is raised to 100 KiB; device 1 keeps the default.
  curt::set_max_dynamic_shared_memory(d0, shared_rotate, 100 * 1024);
  CHECK(curt::kernel_attributes(d0, shared_rotate).maxDynamicSharedSizeBytes == 100 * 1024);
  const int limit1 = curt::kernel_attributes(d1, shared_rotate).maxDynamicSharedSizeBytes;
  REQUIRE(limit1 == 48 * 1024);

  {
    // On device 0 the launch works.
    curt::stream s0(d0);
    device_array<float> d_in(in), d_out(in.size());
    curt::launch(s0, config, shared_rotate, d_in.get(), d_out.get(), count, shift);
    s0.synchronize();
    std::vector<float> out = d_out.download();
    CHECK(out == expected);
  }

  // On a device-1 stream, with device 0 current, the driver refuses; curt reads device 1's limit.
  curt::stream s1(d1);
  float* in1 = nullptr;
  float* out1 = nullptr;
  {
    curt::device_guard guard(d1);
    REQUIRE(cudaMalloc(&in1, bytes * blocks) == cudaSuccess);
    REQUIRE(cudaMalloc(&out1, bytes * blocks) == cudaSuccess);
  }
  const std::string want = std::to_string(bytes) +
                           " B of dynamic shared memory exceeds this kernel's limit of " +
                           std::to_string(limit1) + " B";
  try {
    curt::launch(s1, config, shared_rotate, in1, out1, count, shift);
    FAIL("a launch with 64 KiB over device 1's 48 KiB limit was not refused");
  } catch (const curt::cuda_error& error) {
    INFO("what(): " << error.what());
    CHECK_THAT(error.what(), ContainsSubstring(want));
    CHECK_THAT(error.what(), ContainsSubstring("shared_rotate"));
  }
  CHECK(cudaGetLastError() == cudaSuccess);
  {
    curt::device_guard guard(d1);
    CHECK(cudaFree(in1) == cudaSuccess);
    CHECK(cudaFree(out1) == cudaSuccess);
  }
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
}

TEST_CASE("recording an event of device 0 on a stream of device 1 says which device the stream is on",
          "[api-error]") {
  REQUIRE(curt::device_count() >= 2);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  curt::device d0(0), d1(1);
  curt::event e0(d0);
  curt::stream s1(d1), s0(d0);
  curt_test::require_cuda_error([&] { e0.record(s1); }, cudaErrorInvalidResourceHandle,
                                {"cudaEventRecord", "device 1",
                                 "only on a stream of the device and context it was created in"});
  curt_test::require_cuda_error([&] { s1.record(e0); }, cudaErrorInvalidResourceHandle,
                                {"this stream is on device 1"});
  CHECK(cudaGetLastError() == cudaSuccess);
  // The event still works on its own device's stream.
  e0.record(s0);
  e0.synchronize();
  CHECK(e0.ready());
}

TEST_CASE("stream.wait(stream) orders a consumer on device 1 after a producer on device 0") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d0(0), d1(1);
  int can_access = 0;
  REQUIRE(cudaDeviceCanAccessPeer(&can_access, 1, 0) == cudaSuccess);
  if (can_access) {
    REQUIRE(cudaSetDevice(1) == cudaSuccess);
    cudaError_t status = cudaDeviceEnablePeerAccess(0, 0);
    if (status == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else REQUIRE(status == cudaSuccess);
  }
  INFO("device 1 " << (can_access ? "reads device 0's memory directly" : "copies through cudaMemcpyPeerAsync"));

  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    const int n = random_size();
    std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n), 1.0f, 2.0f);
    const float a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    device_array<float> dx(x), data(static_cast<std::size_t>(n));
    REQUIRE(cudaSetDevice(1) == cudaSuccess);
    device_array<float> copy(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
    REQUIRE(cudaSetDevice(0) == cudaSuccess);  // the current device is the producer's
    curt::stream producer(d0), consumer(d1);
    std::vector<float> back(static_cast<std::size_t>(n), -1.0f);

    curt::launch(producer, config_for(n), slow_affine, dx.get(), data.get(), n, a, b,
                 20'000'000ull);
    consumer.wait(producer);
    const float* source = data.get();
    if (!can_access) {
      REQUIRE(cudaMemcpyPeerAsync(copy.get(), 1, data.get(), 0, data.bytes(), consumer) ==
              cudaSuccess);
      source = copy.get();
    }
    {
      // The wait above ran with device 0 current; a kernel goes to a stream of the current
      // device (curt::launch switches contexts only on a thread that has none).
      curt::device_guard on_consumer(d1);
      curt::launch(consumer, config_for(n), square_plus, source, out.get(), n, c);
    }
    REQUIRE(cudaMemcpyAsync(back.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost,
                            consumer) == cudaSuccess);
    consumer.synchronize();
    std::vector<float> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      want[i] = square_plus_ref(affine_ref(x[i], a, b), c);
    curt_test::require_close_all(back, want);
    CHECK(producer.ready());
    producer.synchronize();
  }
}

// A default stream is a pseudo-handle: which stream it is depends on the context current when it
// is used. An async_buffer allocated on device 1's per-thread default stream (under a
// device_guard) and destroyed on a thread with no context current used to free on device 0's
// per-thread stream (the runtime's current device): not ordered after the kernel still writing
// the memory on device 1, so the pool handed the block to the next allocation while the kernel
// wrote it (seen on the H200s: every element overwritten). It frees in its allocation's context.
TEST_CASE("an async_buffer of device 1's default stream, destroyed on a thread with no context, "
          "frees after the work that uses it") {
  REQUIRE(curt::device_count() >= 2);
  curt::device d1(1);
  const int n = random_size();
  const std::vector<int> x = curt_test::random_ints(static_cast<std::size_t>(n), -1000, 1000);
  const int a = curt_test::random_ints(1, 2, 50)[0], b = curt_test::random_ints(1, -50, 50)[0];
  const int marker = curt_test::random_ints(1, -100000, -2000)[0];  // never a * x + b here
  curt::device_buffer<int> dx(d1, x.size());
  curt::stream other(d1);
  curt::copy_and_wait(dx, x, other);
  std::vector<int> second_back;
  std::string error;
  on_fresh_thread([&] {
    std::optional<curt::async_buffer<int>> y;
    {
      curt::device_guard guard(d1);
      y.emplace(curt::allocate_async<int>(x.size(), curt::stream_ref::per_thread_default()));
      // Writes y 200 ms from now, on device 1's per-thread default stream.
      curt::launch(curt::stream_ref::per_thread_default(), config_for(n),
                   curt_test::slow_affine_int, static_cast<const int*>(dx.data()), y->data(), n,
                   a, b, 200'000'000ull);
    }
    if (current_context() != nullptr) error = "device_guard left a context current";
    y.reset();  // no context current: must free on device 1's per-thread stream, after the kernel
    curt::async_buffer<int> second = curt::allocate_async<int>(x.size(), other);
    curt::fill(second, marker, other);
    second_back.resize(x.size());
    curt::copy_and_wait(second_back, second, other);
  });
  INFO(error);
  CHECK(error.empty());
  REQUIRE(second_back.size() == x.size());
  std::size_t overwritten = 0;
  for (int v : second_back) overwritten += v != marker;
  CHECK(overwritten == 0);
}

namespace {
__global__ void set_doubles(double* data, int n, double value) {
  int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] = value;
}
std::vector<double> download_doubles(const curt::device_buffer<double>& b, curt::stream_ref s) {
  std::vector<double> out(b.size(), -1.0);
  curt::copy_and_wait(out, b, s);
  return out;
}
}  // namespace

// With device 0's primary context current (the state after any raw runtime call), curt::fill's
// kernel on a device-1 stream runs there, as curt::launch does (the runtime refuses a launch on
// a stream that is not the current device's).
TEST_CASE("fill of a value no memset writes, on a device-1 stream while device 0 is current") {
  const int n = 4099;
  const double value = 1.5 + curt_test::random_ints(1, 1, 1000)[0];
  curt::device d1(1);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);
  curt::stream s1(d1);
  curt::device_buffer<double> launched(d1, n), filled(d1, n);
  curt::launch(s1, curt::launch_config(dim3((n + 255) / 256), dim3(256)), set_doubles,
               launched.data(), n, value);
  CHECK(download_doubles(launched, s1) == std::vector<double>(n, value));
  curt::fill(filled, value, s1);
  CHECK(download_doubles(filled, s1) == std::vector<double>(n, value));
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);
}
