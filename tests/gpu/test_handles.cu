// Owners that hold no handle: moved-from, released and empty (curt::no_handle) streams and events,
// and refs copied from them. Every operation throws a cuda_error that says which state it is in
// (never falls back to the default stream or a null event), no kernel runs on such a stream,
// destroying them reports nothing, and assigning a real handle makes them usable. Also the default
// stream refs, a stream waiting on itself, and what from_native_handle refuses.
//
// Kernels compute on fresh random inputs into outputs poisoned first (all bytes 0xFF, -1 as int)
// and are compared with the CPU.
#include <catch.hpp>
#include <kernels.cuh>
#include <device_array.hpp>
#include <expect.hpp>
#include <host_helpers.hpp>

#include <curt/access_policy.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/launch.hpp>
#include <curt/stream.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using curt_test::destructor_error_counter;
using curt_test::device_array;

using curt_test::global_ns;

// y[i] = a * x[i] + b, after every thread spun for delay_ns.
constexpr auto affine = curt_test::slow_affine_int;

constexpr int block_size = 256;

curt::launch_config config_for(int n) {
  return curt::launch_config(dim3(static_cast<unsigned>(curt::ceil_div(n, block_size))),
                             dim3(block_size));
}

int random_size() { return curt_test::random_ints(1, 1000, 5000)[0]; }
int random_coefficient() { return curt_test::random_ints(1, 2, 50)[0]; }
using curt_test::affine_ref;

// Runs affine on `s` over fresh inputs into a poisoned output and compares with the CPU.
void require_stream_works(curt::stream_ref s) {
  int n = random_size();
  int a = random_coefficient(), b = random_coefficient();
  std::vector<int> x = curt_test::random_ints(std::size_t(n), 0, 100000);
  device_array<int> dx(x), dy(static_cast<std::size_t>(n));
  curt::launch(s, config_for(n), affine, dx.get(), dy.get(), n, a, b, 1'000'000ull);
  s.synchronize();
  CHECK(s.ready());
  CHECK(dy.download() == affine_ref(x, a, b));
}

// Requires `action` to throw the no-handle error naming the state (`word`) and the operation.
template <class Action>
void require_no_handle(const char* type, const char* word, const char* operation, Action&& action) {
  INFO(type << " in state " << word << ", operation " << operation);
  curt_test::require_cuda_error(std::forward<Action>(action), cudaErrorInvalidResourceHandle,
                                {word, operation, type, "holds no handle"});
}

// Every operation of a stream_ref that holds no stream, and every operation that takes one.
void require_every_stream_operation_fails(curt::stream_ref bad, const char* word) {
  const char* type = "curt::stream";
  curt::device d(0);
  curt::stream good(d);
  curt::event e(d);
  curt::event timing(d, curt::event_flags::timing);

  CHECK_FALSE(bad.valid());
  CHECK(good.valid());
  CHECK(bad != good);
  CHECK(bad != curt::stream_ref::legacy_default());
  CHECK(bad != curt::stream_ref::per_thread_default());

  require_no_handle(type, word, "synchronize()", [&] { bad.synchronize(); });
  require_no_handle(type, word, "ready()", [&] { (void)bad.ready(); });
  require_no_handle(type, word, "wait(event)", [&] { bad.wait(e); });
  require_no_handle(type, word, "wait(stream)", [&] { bad.wait(good); });
  require_no_handle(type, word, "the stream waited on", [&] { good.wait(bad); });
  require_no_handle(type, word, "wait(stream)", [&] { bad.wait(bad); });
  require_no_handle(type, word, "conversion to cudaStream_t", [&] { bad.record(e); });
  require_no_handle(type, word, "conversion to cudaStream_t", [&] { e.record(bad); });
  require_no_handle(type, word, "device()", [&] { (void)bad.device(); });
  require_no_handle(type, word, "flags()", [&] { (void)bad.flags(); });
  require_no_handle(type, word, "priority()", [&] { (void)bad.priority(); });
  require_no_handle(type, word, "id()", [&] { (void)bad.id(); });
  require_no_handle(type, word, "is_capturing()", [&] { (void)bad.is_capturing(); });
  require_no_handle(type, word, "set_attribute()",
                    [&] { bad.set_synchronization_policy(cudaSyncPolicyBlockingSync); });
  require_no_handle(type, word, "attribute()", [&] { (void)bad.synchronization_policy(); });
  require_no_handle(type, word, "set_attribute()",
                    [&] { bad.set_access_policy_window(curt::access_policy_window{}); });
  require_no_handle(type, word, "attribute()", [&] { (void)bad.get_access_policy_window(); });
  require_no_handle(type, word, "set_attribute()", [&] { bad.reset_access_policy_window(); });
  require_no_handle(type, word, "set_attribute()",
                    [&] { bad.set_memory_sync_domain(cudaLaunchMemSyncDomainRemote); });
  require_no_handle(type, word, "attribute()", [&] { (void)bad.memory_sync_domain(); });
  require_no_handle(type, word, "set_attribute()", [&] { bad.set_memory_sync_domain_map(0, 1); });
  require_no_handle(type, word, "attribute()", [&] { (void)bad.memory_sync_domain_map(); });
  require_no_handle(type, word, "get()", [&] { (void)bad.get(); });
  require_no_handle(type, word, "conversion to cudaStream_t", [&] {
    cudaStream_t raw = bad;
    (void)raw;
  });
  // stream_timer first asks for the stream's context, through get().
  require_no_handle(type, word, "get()", [&] { curt::stream_timer timer(bad); });

  // host_call: the function never runs and is destroyed exactly once, at once.
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto token = std::make_shared<int>(0);
  require_no_handle(type, word, "host_call()", [&] {
    bad.host_call([calls, token] { calls->fetch_add(1); });
  });
  CHECK(token.use_count() == 1);
  good.host_call([] {});
  good.synchronize();
  CHECK(calls->load() == 0);

  // launch: throws, and no kernel runs anywhere (the output stays poisoned).
  int n = random_size();
  std::vector<int> x = curt_test::random_ints(std::size_t(n), 0, 100000);
  device_array<int> dx(x), dy(static_cast<std::size_t>(n));
  int* out = dy.get();
  const int* in = dx.get();
  require_no_handle(type, word, "get()", [&] {
    curt::launch(bad, config_for(n), affine, in, out, n, 3, 4, 0ull);
  });
  require_no_handle(type, word, "get()", [&] {
    curt::launch(bad, config_for(n), [=] __device__(int a) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) out[i] = a * in[i];
    }, 5);
  });
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(dy.download() == std::vector<int>(static_cast<std::size_t>(n), -1));
  CHECK(cudaGetLastError() == cudaSuccess);

  // The real stream and events are untouched by all of it.
  timing.record(good);
  require_stream_works(good);
  e.record(good);
  e.synchronize();
  CHECK(e.ready());
}

// Every operation of an event_ref that holds no event, and every operation that takes one.
void require_every_event_operation_fails(curt::event_ref bad, const char* word) {
  const char* type = "curt::event";
  curt::device d(0);
  curt::stream s(d);
  curt::event timing(d, curt::event_flags::timing);
  timing.record(s);
  timing.synchronize();

  CHECK_FALSE(bad.valid());
  CHECK(timing.valid());
  CHECK(bad != timing);

  require_no_handle(type, word, "record()", [&] { bad.record(s); });
  require_no_handle(type, word, "record()", [&] { s.record(bad); });
  require_no_handle(type, word, "synchronize()", [&] { bad.synchronize(); });
  require_no_handle(type, word, "ready()", [&] { (void)bad.ready(); });
  require_no_handle(type, word, "ipc_handle()", [&] { (void)bad.ipc_handle(); });
  require_no_handle(type, word, "get()", [&] { (void)bad.get(); });
  require_no_handle(type, word, "get()", [&] { (void)curt::elapsed(bad, timing); });
  require_no_handle(type, word, "get()", [&] { (void)curt::elapsed(timing, bad); });
  require_no_handle(type, word, "get()", [&] { s.wait(bad); });
  CHECK(cudaGetLastError() == cudaSuccess);
  require_stream_works(s);
}

}  // namespace

TEST_CASE("moved-from, released and empty streams fail every operation, saying which") {
  destructor_error_counter errors;
  curt::device d(0);
  {
    curt::stream source(d);
    curt::stream moved_to(std::move(source));
    curt::stream assigned_from(d);
    curt::stream assigned_to(d);
    assigned_to = std::move(assigned_from);
    curt::stream released(d);
    cudaStream_t raw = released.release();
    REQUIRE(raw != nullptr);
    curt::stream empty(curt::no_handle);

    CHECK(moved_to.valid());
    CHECK(assigned_to.valid());
    require_stream_works(moved_to);
    require_stream_works(assigned_to);

    SECTION("moved-from by construction") {
      require_every_stream_operation_fails(source, "moved-from");
      require_no_handle("curt::stream", "moved-from", "release()", [&] { (void)source.release(); });
    }
    SECTION("moved-from by assignment") {
      require_every_stream_operation_fails(assigned_from, "moved-from");
      require_no_handle("curt::stream", "moved-from", "release()",
                        [&] { (void)assigned_from.release(); });
    }
    SECTION("released") {
      require_every_stream_operation_fails(released, "released");
      require_no_handle("curt::stream", "released", "release()", [&] { (void)released.release(); });
    }
    SECTION("empty") {
      require_every_stream_operation_fails(empty, "empty");
      require_no_handle("curt::stream", "empty", "release()", [&] { (void)empty.release(); });
    }
    SECTION("a stream_ref copied from a moved-from owner") {
      curt::stream_ref ref = source;
      require_every_stream_operation_fails(ref, "moved-from");
    }
    SECTION("a stream_ref copied from a released owner") {
      curt::stream_ref ref = released;
      require_every_stream_operation_fails(ref, "released");
    }
    SECTION("a stream_ref copied from an empty owner") {
      curt::stream_ref ref = empty;
      require_every_stream_operation_fails(ref, "empty");
    }
    // The released handle is the caller's: it still works and is destroyed by the caller.
    require_stream_works(curt::stream_ref(raw));
    REQUIRE(cudaStreamDestroy(raw) == cudaSuccess);
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("moved-from, released and empty events fail every operation, saying which") {
  destructor_error_counter errors;
  curt::device d(0);
  {
    curt::event source(d);
    curt::event moved_to(std::move(source));
    curt::event assigned_from(d);
    curt::event assigned_to(d);
    assigned_to = std::move(assigned_from);
    curt::event released(d);
    cudaEvent_t raw = released.release();
    REQUIRE(raw != nullptr);
    curt::event empty(curt::no_handle);
    CHECK(moved_to.valid());
    CHECK(assigned_to.valid());

    SECTION("moved-from by construction") {
      require_every_event_operation_fails(source, "moved-from");
      require_no_handle("curt::event", "moved-from", "release()", [&] { (void)source.release(); });
    }
    SECTION("moved-from by assignment") {
      require_every_event_operation_fails(assigned_from, "moved-from");
      require_no_handle("curt::event", "moved-from", "release()",
                        [&] { (void)assigned_from.release(); });
    }
    SECTION("released") {
      require_every_event_operation_fails(released, "released");
      require_no_handle("curt::event", "released", "release()", [&] { (void)released.release(); });
    }
    SECTION("empty") {
      require_every_event_operation_fails(empty, "empty");
      require_no_handle("curt::event", "empty", "release()", [&] { (void)empty.release(); });
    }
    SECTION("an event_ref copied from a moved-from owner") {
      curt::event_ref ref = source;
      require_every_event_operation_fails(ref, "moved-from");
    }
    // The released handle still works and is the caller's to destroy.
    curt::stream s(d);
    REQUIRE(cudaEventRecord(raw, s) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(raw) == cudaSuccess);
    REQUIRE(cudaEventDestroy(raw) == cudaSuccess);
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("assigning a real stream or event to an owner without one makes it usable") {
  destructor_error_counter errors;
  curt::device d(0);
  {
    curt::stream source(d);
    curt::stream taken(std::move(source));
    curt::stream empty(curt::no_handle);
    curt::stream released(d);
    cudaStream_t raw = released.release();
    REQUIRE(cudaStreamDestroy(raw) == cudaSuccess);

    source = curt::stream(d);
    empty = curt::stream(d);
    released = curt::stream(d);
    for (curt::stream* s : {&source, &empty, &released}) {
      REQUIRE(s->valid());
      CHECK(s->get() != nullptr);
      CHECK(s->flags() == curt::stream_flags::non_blocking);
      require_stream_works(*s);
    }
    CHECK(source != taken);
    CHECK(empty != source);

    curt::event e_source(d);
    curt::event e_taken(std::move(e_source));
    curt::event e_empty(curt::no_handle);
    e_source = curt::event(d, curt::event_flags::timing);
    e_empty = curt::event(d, curt::event_flags::timing);
    REQUIRE(e_source.valid());
    REQUIRE(e_empty.valid());
    e_source.record(source);
    curt::launch(source, config_for(256), affine, static_cast<const int*>(nullptr),
                 static_cast<int*>(nullptr), 0, 1, 1, 1'000'000ull);
    e_empty.record(source);
    e_empty.synchronize();
    CHECK(e_source.ready());
    CHECK(e_empty.ready());
    CHECK(curt::elapsed(e_source, e_empty).count() > 0.0f);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("destroying owners without a handle reports nothing") {
  destructor_error_counter errors;
  curt::device d(0);
  {
    curt::stream a(d);
    curt::stream b(std::move(a));
    curt::stream c(curt::no_handle);
    curt::stream r(d);
    REQUIRE(cudaStreamDestroy(r.release()) == cudaSuccess);
    curt::event ea(d);
    curt::event eb(std::move(ea));
    curt::event ec(curt::no_handle);
    curt::event er(d);
    REQUIRE(cudaEventDestroy(er.release()) == cudaSuccess);
    // Moving an owner without a handle keeps it without one.
    curt::stream d2(std::move(c));
    CHECK_FALSE(d2.valid());
    curt::event ed(std::move(ec));
    CHECK_FALSE(ed.valid());
  }
  CHECK(errors.count() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("the legacy and per-thread default stream refs run kernels and synchronize") {
  destructor_error_counter errors;
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(curt::stream_ref::legacy_default().valid());
  CHECK(curt::stream_ref::per_thread_default().valid());
  CHECK(curt::stream_ref::legacy_default().get() == cudaStreamLegacy);
  CHECK(curt::stream_ref::per_thread_default().get() == cudaStreamPerThread);
  require_stream_works(curt::stream_ref::legacy_default());
  require_stream_works(curt::stream_ref::per_thread_default());
  CHECK(errors.count() == 0);
}

TEST_CASE("a stream waiting on itself returns and the stream keeps working") {
  curt::device d(0);
  curt::stream s(d);
  int n = random_size();
  int a = random_coefficient(), b = random_coefficient(), c = random_coefficient();
  std::vector<int> x = curt_test::random_ints(std::size_t(n), 0, 10000);
  device_array<int> dx(x), dy(static_cast<std::size_t>(n)), dz(static_cast<std::size_t>(n));
  curt::launch(s, config_for(n), affine, dx.get(), dy.get(), n, a, b, 2'000'000ull);
  s.wait(s);
  s.wait(curt::stream_ref(s.get()));
  curt::launch(s, config_for(n), affine, static_cast<const int*>(dy.get()), dz.get(), n, c, a, 0ull);
  s.synchronize();
  CHECK(dz.download() == affine_ref(affine_ref(x, a, b), c, a));
  curt::stream_ref::per_thread_default().wait(curt::stream_ref::per_thread_default());
  curt::stream_ref::per_thread_default().synchronize();
}

TEST_CASE("from_native_handle refuses null and the default streams", "[api-error]") {
  for (cudaStream_t handle : {static_cast<cudaStream_t>(nullptr), cudaStreamLegacy,
                              cudaStreamPerThread}) {
    INFO("handle " << static_cast<const void*>(handle));
    curt_test::require_cuda_error([&] { (void)curt::stream::from_native_handle(handle); },
                                  cudaErrorInvalidResourceHandle,
                                  {"curt::stream::from_native_handle", "only a created stream"});
  }
  curt_test::require_cuda_error([] { (void)curt::event::from_native_handle(nullptr); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::event::from_native_handle"});
  // A real one is adopted.
  curt::device d(0);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  cudaStream_t raw = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) == cudaSuccess);
  curt::stream adopted = curt::stream::from_native_handle(raw);
  CHECK(adopted.get() == raw);
  require_stream_works(adopted);
}
