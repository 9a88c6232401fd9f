// Graph memory of a device (include/curt/graph_memory.hpp): a graph's allocation node, launched,
// shows in the used and reserved amounts and their high watermarks while its allocation lives
// (the kernel that wrote it computed right, from fresh random inputs); freed by another graph, it
// leaves the used amount; trimmed, the reserved amount drops; the high watermarks reset to what
// is left; the calls leave a thread with no context without one, and (in a child process, where
// no context exists yet) wake no primary context, also while the program's own context of the
// device lives; values CUDA refuses are refused before it is called. Everything is measured
// against what the device held before the test, so graph memory held elsewhere in the process
// does not matter.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include <kernels.cuh>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/graph.hpp>
#include <curt/graph_memory.hpp>
#include <curt/graph_nodes.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/stream.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using attribute = curt::graph_memory_attribute;

// Several MiB, so that the allocation is more than any granularity the pool rounds to.
std::size_t random_count() {
  return static_cast<std::size_t>(curt_test::random_ints(1, 4 << 20, 8 << 20)[0]);
}

std::string describe(const curt::graph_memory_info& m) {
  return "used " + std::to_string(m.used) + ", used_high " + std::to_string(m.used_high) +
         ", reserved " + std::to_string(m.reserved) + ", reserved_high " +
         std::to_string(m.reserved_high);
}

}  // namespace

// initcheck does not follow a kernel's writes into a graph allocation that outlives its graph
// (docs/design.md, "What compute-sanitizer cannot see"; 732,626 reports on an H100, results
// checked right), hence [no-initcheck]; memcheck, racecheck and synccheck run it.
TEST_CASE("an allocation node's memory is used while it lives, reserved until trimmed, and the "
          "high watermarks reset", "[graph_memory][no-initcheck]") {
  const curt::device d(0);
  curt::stream s(d);
  const std::size_t n = random_count();
  const std::uint64_t bytes = n * sizeof(float);
  const std::vector<float> x = curt_test::random_floats(n);
  const float a = curt_test::random_floats(1, 0.5f, 2.0f)[0];
  const float b = curt_test::random_floats(1, -1.0f, 1.0f)[0];
  curt::device_buffer<float> dx(d, n), out(d, n);
  curt::copy(dx, x, s);
  curt::fill(out, -1.0f, s);  // poisoned: the graph must overwrite every element
  s.synchronize();

  curt::trim_graph_memory(d);  // start from what the rest of the process holds
  const curt::graph_memory_info before = curt::graph_memory(d);
  INFO("before: " << describe(before));

  curt::graph make = curt::graph::create();
  curt::allocation_node<float> scratch = curt::add_allocation_node<float>(make, {}, d, n);
  const int count = static_cast<int>(n);
  curt::graph_node k = curt::add_kernel_node(
      make, {scratch}, curt::launch_config(curt::ceil_div(count, 256), 256), curt_test::slow_affine,
      static_cast<const float*>(dx.data()), scratch.data(), count, a, b, 0ull);
  curt::add_memcpy_node(make, {k}, out, scratch);
  curt::graph release = curt::graph::create();
  curt::add_free_node(release, {}, scratch);
  {
    curt::graph_exec made = make.instantiate(), freed = release.instantiate();
    made.launch(s);
    s.synchronize();

    const curt::graph_memory_info held = curt::graph_memory(d);
    INFO("held: " << describe(held));
    CHECK(held.used >= before.used + bytes);
    CHECK(held.used == curt::graph_memory(d, attribute::used_current));
    CHECK(held.reserved >= held.used);
    CHECK(held.used_high >= held.used);
    CHECK(held.reserved_high >= held.reserved);
    std::vector<float> back(n);
    curt::copy_and_wait(back, out, s);
    std::vector<float> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = a * x[i] + b;
    curt_test::require_close_all(back, want);

    freed.launch(s);
    s.synchronize();
    const curt::graph_memory_info after_free = curt::graph_memory(d);
    INFO("after the free: " << describe(after_free));
    // A free node does not lower `used` (13.0, driver 580, measured): the trim below does.
    CHECK(after_free.used_high >= held.used);  // a watermark stays until reset

    curt::reset_graph_memory_high(d);
    const curt::graph_memory_info reset = curt::graph_memory(d);
    INFO("after the reset: " << describe(reset));
    CHECK(reset.used_high == reset.used);  // a reset sets the watermarks to the current amounts
    CHECK(reset.reserved_high == reset.reserved);

    // Neither graph runs or is queued (the stream is idle): a trim gives the freed memory back,
    // while the executable graphs still exist.
    const std::uint64_t reserved_before_trim = curt::graph_memory(d, attribute::reserved_current);
    curt::trim_graph_memory(d);
    const curt::graph_memory_info trimmed = curt::graph_memory(d);
    INFO("reserved before the trim " << reserved_before_trim << "; trimmed: "
                                     << describe(trimmed));
    CHECK(reserved_before_trim >= bytes);
    CHECK(trimmed.reserved + bytes <= reserved_before_trim);
    CHECK(trimmed.used + bytes <= after_free.used);  // the freed block no longer counts
    curt::set_graph_memory(d, attribute::reserved_high, 0);
    CHECK(curt::graph_memory(d, attribute::reserved_high) < reserved_before_trim);
  }
}

TEST_CASE("graph memory calls on a thread with no context leave it without one",
          "[graph_memory]") {
  const curt::device d(0);
  // Seen on the thread, checked here (Catch2's assertions are not thread-safe).
  bool had_context = true, left_context = true;
  curt::graph_memory_info m;
  curt_test::on_fresh_thread([&] {
    had_context = curt_test::current_context() != nullptr;
    m = curt::graph_memory(d);
    curt::reset_graph_memory_high(d);
    curt::trim_graph_memory(d);
    left_context = curt_test::current_context() != nullptr;
  });
  CHECK_FALSE(had_context);
  CHECK_FALSE(left_context);
  CHECK(m.reserved_high >= m.reserved);
}

// Runs only in a child process (hidden), where no context exists yet. The calls go to the
// driver's cuDevice*GraphMem* functions, which take the device: neither the calling thread nor
// device 0's primary context may get a context from them. A driver that needs a context there
// fails a call (the thread's exception names it) or wakes the primary context (named below).
TEST_CASE("graph memory calls in a process without a primary context (child)",
          "[.][graph-memory-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise: main() made no context
  const curt::device d(0);
  std::vector<std::string> broken;
  std::vector<curt::graph_memory_info> seen;
  auto calls = [&](const std::string& when) {
    curt_test::on_fresh_thread([&] {
      if (curt_test::current_context() != nullptr) {
        broken.push_back(when + ": the fresh thread had a context");
        return;
      }
      seen.push_back(curt::graph_memory(d));
      (void)curt::graph_memory(d, attribute::reserved_high);
      curt::reset_graph_memory_high(d);
      curt::trim_graph_memory(d);
      if (curt_test::current_context() != nullptr)
        broken.push_back(when + ": left a context current");
      if (curt_test::primary_active(0))
        broken.push_back(when + ": made device 0's primary context active");
    });
  };
  calls("no context in the process");
  {
    curt_test::user_context mine(0);  // the program's own, current on this thread only
    calls("the program's own context current on another thread");
  }
  for (const std::string& what : broken) FAIL_CHECK(what);
  REQUIRE(seen.size() == 2u);
  for (const curt::graph_memory_info& m : seen) CHECK(m.reserved_high >= m.reserved);
  CHECK_FALSE(curt_test::primary_active(0));
  std::printf("GRAPH-MEMORY-CHILD-REACHED-ITS-END\n");
  std::fflush(stdout);
}

TEST_CASE("graph memory calls wake no primary context the program did not use",
          "[graph_memory]") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (the sanitizer makes contexts "
         "in it)");
    return;
  }
  const curt_test::child_result child =
      curt_test::run_self("graph memory calls in a process without a primary context (child)");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find("GRAPH-MEMORY-CHILD-REACHED-ITS-END") != std::string::npos);
}

TEST_CASE("graph memory values CUDA refuses are refused first, and nothing changes",
          "[graph_memory]") {
  const curt::device d(0);
  const std::uint64_t used = curt::graph_memory(d, attribute::used_current);
  curt_test::require_cuda_error([&] { curt::set_graph_memory(d, attribute::used_current, 0); },
                                cudaErrorInvalidValue, {"used_current", "only the high"});
  curt_test::require_cuda_error([&] { curt::set_graph_memory(d, attribute::used_high, 4096); },
                                cudaErrorInvalidValue, {"used_high", "4096", "reset, to 0"});
  CHECK(curt::graph_memory(d, attribute::used_current) == used);
}
