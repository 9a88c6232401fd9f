// Green contexts (include/curt/green_context.hpp) on the GPU: partitions hold their kernels, the
// splits the device offers are reported as delivered, curt's refusals come with the promised
// errors, green streams are curt::streams everywhere, and contexts and lifetimes are kept.
//
// Where blocks run: tagged_affine writes %smid per block (thread 0) and computes
// y = a * x + b (unsigned, so the CPU's arithmetic is the same modulo 2^32) on fresh random input
// into outputs poisoned with 0xFF bytes; a block whose SM stayed 0xFFFFFFFF did not run. Launches
// have many more blocks than the device has SMs, and each block spins on %globaltimer, so that
// every SM the launch may use gets blocks. Expected: a launch on a green stream (or a graph
// captured there) runs on no more SMs than its partition; partitions used at once run on disjoint
// SMs; the same launch on an ordinary stream uses more SMs than the partition (the control that
// makes the first check mean something). The number of SMs of a partition is read from the split,
// never assumed (132 on the H200).
//
// The split sweep asks, with and without ignore_coscheduling, for every minimum size from 0 to the
// device's SM count and checks the bookkeeping: as many groups as the dry run said, equal sizes of
// at least the minimum, multiples of the co-scheduling alignment (of the finest group with
// ignore_coscheduling) unless one group takes every SM, groups plus remainder adding up to the
// device's SMs; an exact request of what was delivered succeeds, an exact request the driver
// rounds is refused. Then each distinct layout's first group and its remainder become green
// contexts that must hold their kernel.
//
// Threads: checks made on another thread are noted there and reported on the test's thread
// (Catch2 assertions are not thread-safe); Catch2 macros appear only in TEST_CASE bodies, free
// functions and lambdas (cudafe++ 13.0 hangs on them in member functions with g++ 13).
#include <catch.hpp>
#include <device_array.hpp>
#include <error_recorder.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include <spin.cuh>

#include <curt/copy.hpp>
#include <curt/detail/driver.hpp>
#include <curt/device.hpp>
#include <curt/event.hpp>
#include <curt/graph.hpp>
#include <curt/graph_capture.hpp>
#include <curt/green_context.hpp>
#include <curt/launch.hpp>
#include <curt/memory.hpp>
#include <curt/memory_pool.hpp>
#include <curt/stream.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using curt_test::current_context;
using curt_test::device_array;

// ---- device side ------------------------------------------------------------------------------

__device__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// y[i] = a * x[i] + b after every thread spun for spin_ns; thread 0 of each block writes the
// block's SM and the block's start and end on the GPU's clock.
__global__ void tagged_affine(const unsigned* x, unsigned* y, int n, unsigned a, unsigned b,
                              unsigned* block_sm, unsigned long long* block_start,
                              unsigned long long* block_end, unsigned long long spin_ns) {
  const unsigned long long start = curt_test::global_ns();
  curt_test::spin_for(spin_ns);
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + b;
  if (threadIdx.x == 0) {
    block_sm[blockIdx.x] = sm_id();
    block_start[blockIdx.x] = start;
    block_end[blockIdx.x] = curt_test::global_ns();
  }
}

// y[i] = a * x[i] + b after every thread spun for delay_ns: the producer of the wait checks.
__global__ void slow_affine_u32(const unsigned* x, unsigned* y, int n, unsigned a, unsigned b,
                                unsigned long long delay_ns) {
  curt_test::spin_for(delay_ns);
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = a * x[i] + b;
}

// out[i] = p[i] * q[i] + c: the consumer of the wait checks (it reads poison unless it waited).
__global__ void mix(const unsigned* p, const unsigned* q, unsigned* out, int n, unsigned c) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = p[i] * q[i] + c;
}

// ---- host side --------------------------------------------------------------------------------

constexpr unsigned threads = 128;
constexpr unsigned poison_word = 0xFFFFFFFFu;

curt::device gpu() { return curt::device(0); }
unsigned sm_total() { return static_cast<unsigned>(gpu().multiprocessor_count()); }
curt::launch_config config_for(std::size_t n) {
  return curt::launch_config(dim3(static_cast<unsigned>((n + threads - 1) / threads)), dim3(threads));
}

unsigned random_word() {
  return static_cast<unsigned>(std::uniform_int_distribution<std::uint32_t>()(curt_test::rng()));
}
std::vector<unsigned> random_words(std::size_t n) {
  std::vector<unsigned> v(n);
  for (unsigned& w : v) w = random_word();
  return v;
}

// One launch of tagged_affine: its input, its poisoned outputs and what the CPU expects.
struct tagged_work {
  explicit tagged_work(unsigned block_count, unsigned long long spin = 20'000)
      : blocks(block_count),
        n(std::size_t(block_count) * threads),
        x(random_words(n)),
        a(random_word() | 1u),
        b(random_word()),
        dx(x),
        dy(n),
        sm(block_count),
        start(block_count),
        end(block_count),
        spin_ns(spin) {}
  void launch(curt::stream_ref s) const {
    curt::launch(s, curt::launch_config(dim3(blocks), dim3(threads)), tagged_affine, dx.get(),
                 dy.get(), static_cast<int>(n), a, b, sm.get(), start.get(), end.get(), spin_ns);
  }
  void poison() const {
    dy.poison();
    sm.poison();
    start.poison();
    end.poison();
  }
  unsigned blocks;
  std::size_t n;
  std::vector<unsigned> x;
  unsigned a, b;
  device_array<unsigned> dx, dy, sm;
  device_array<unsigned long long> start, end;
  unsigned long long spin_ns;
};

// Where a tagged launch ran and whether it computed right.
struct placement {
  std::set<unsigned> sms;
  std::size_t unrecorded = 0;  // blocks whose SM stayed poisoned: they did not run
  unsigned long long first_start = ~0ull, last_end = 0;
  std::string wrong;  // y against the CPU; empty when right
};

// Only once the work is known to be done (after a synchronize()).
placement observe(const tagged_work& w) {
  placement p;
  const std::vector<unsigned> sm = w.sm.download(), y = w.dy.download();
  const std::vector<unsigned long long> start = w.start.download(), end = w.end.download();
  for (std::size_t i = 0; i < sm.size(); ++i) {
    if (sm[i] == poison_word) {
      ++p.unrecorded;
      continue;
    }
    p.sms.insert(sm[i]);
    p.first_start = std::min(p.first_start, start[i]);
    p.last_end = std::max(p.last_end, end[i]);
  }
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (y[i] != w.a * w.x[i] + w.b && bad++ == 0) first = i;
  if (bad)
    p.wrong = std::to_string(bad) + " of " + std::to_string(y.size()) + " results wrong; first at " +
              std::to_string(first) + ": got " + std::to_string(y[first]) + ", want " +
              std::to_string(w.a * w.x[first] + w.b);
  return p;
}

std::string describe(const std::set<unsigned>& sms) {
  std::string text = "{";
  std::size_t shown = 0;
  for (unsigned sm : sms) {
    if (shown++ == 40) {
      text += ", ...";
      break;
    }
    text += (shown == 1 ? "" : ", ") + std::to_string(sm);
  }
  return text + "}";
}

std::set<unsigned> common(const std::set<unsigned>& a, const std::set<unsigned>& b) {
  std::set<unsigned> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::inserter(both, both.end()));
  return both;
}

// The launch computed right, every block ran, and on at most `limit` SMs.
void check_inside(const placement& p, unsigned limit, const std::string& where) {
  INFO(where << ": the blocks ran on " << p.sms.size() << " SMs " << describe(p.sms)
             << "; the partition has " << limit << " SMs");
  INFO(p.wrong);
  CHECK(p.wrong.empty());
  CHECK(p.unrecorded == 0);
  CHECK_FALSE(p.sms.empty());
  CHECK(p.sms.size() <= limit);
}

// What goes wrong when a tagged launch runs in a green context of `resource` (made, given a
// stream, launched, synchronized, observed); empty when it held its kernel. No Catch2 inside: a
// failure of one partition must not hide the others.
std::string partition_problem(const curt::sm_resource& resource, tagged_work& w) {
  try {
    w.poison();
    curt::green_context gc(gpu(), resource);
    const unsigned sms = gc.resources().sm_count();
    if (sms != resource.sm_count())
      return "its resources() report " + std::to_string(sms) + " SMs, not " +
             std::to_string(resource.sm_count());
    curt::stream s = gc.make_stream();
    w.launch(s);
    s.synchronize();
    placement p = observe(w);
    if (!p.wrong.empty()) return p.wrong;
    if (p.unrecorded) return std::to_string(p.unrecorded) + " blocks did not run";
    if (p.sms.size() > sms)
      return "the blocks ran on " + std::to_string(p.sms.size()) + " SMs " + describe(p.sms) +
             ", more than its " + std::to_string(sms);
    return {};
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
}

// A split of the whole device into `groups` groups of its smallest size (8 SMs on the H200).
curt::sm_split smallest_groups(unsigned groups) {
  curt::sm_resource all = curt::device_sm_resource(gpu());
  curt::sm_split split = all.split(groups, all.min_partition_size());
  REQUIRE(split.group_count() == groups);
  return split;
}

const char* flags_name(curt::sm_split_flags flags) {
  return flags == curt::sm_split_flags::none ? "no flags" : "ignore_coscheduling";
}

// A producer writes data = a * x + b slowly on `producer`; `wait()` orders `consumer` after it;
// the consumer computes out = data * data + c and copies it back. Right only if the wait waited:
// otherwise the consumer reads the poison while the producer still spins. Returns what went
// wrong, empty when nothing did; no Catch2 inside, so it runs on any thread.
template <class Wait>
std::string wait_problem(curt::stream_ref producer, curt::stream_ref consumer, Wait&& wait,
                         unsigned long long delay_ns = 20'000'000) {
  const std::size_t n = 4096 + random_word() % 4096;
  const std::vector<unsigned> x = random_words(n);
  const unsigned a = random_word(), b = random_word(), c = random_word();
  device_array<unsigned> dx(x), data(n), out(n);
  std::vector<unsigned> back(n, 0u);
  curt::launch(producer, config_for(n), slow_affine_u32, dx.get(), data.get(), static_cast<int>(n),
               a, b, delay_ns);
  wait();
  curt::launch(consumer, config_for(n), mix, data.get(), data.get(), out.get(),
               static_cast<int>(n), c);
  curt::copy(back, curt_test::all_of(out), consumer);
  consumer.synchronize();
  producer.synchronize();
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned d = a * x[i] + b;
    if (back[i] != d * d + c && bad++ == 0) first = i;
  }
  if (bad == 0) return {};
  return std::to_string(bad) + " of " + std::to_string(n) + " differ; first at " +
         std::to_string(first);
}

// Checks noted on another thread, reported on the test's thread.
struct thread_notes {
  std::vector<std::string> failed;
  std::vector<std::string> reported;  // not covered by curt's rule: a WARN, not a failure
};
#define GREEN_NOTE(notes, ...)                                                                  \
  do {                                                                                          \
    if (!(__VA_ARGS__))                                                                         \
      (notes).failed.push_back("line " + std::to_string(__LINE__) + ": " + #__VA_ARGS__);      \
  } while (0)

template <class Body>
void on_fresh_thread_noted(Body body) {
  thread_notes notes;
  std::string thrown;
  std::thread t([&] {
    try {
      body(notes);
    } catch (const std::exception& e) {
      thrown = e.what();
    } catch (...) {
      thrown = "an exception not derived from std::exception";
    }
  });
  t.join();
  for (const std::string& failure : notes.failed) FAIL_CHECK("on the thread: " << failure);
  for (const std::string& note : notes.reported) WARN("on the thread: " << note);
  if (!thrown.empty()) FAIL("the thread threw: " << thrown);
}

}  // namespace

TEST_CASE("the device's SM resource: SM count, minimum partition size, co-scheduling alignment") {
  const curt::device d = gpu();
  const curt::sm_resource all = curt::device_sm_resource(d);
  INFO("SMs " << all.sm_count() << ", minimum partition " << all.min_partition_size()
              << ", co-scheduling alignment " << all.coscheduled_alignment());
  CHECK(all.sm_count() == static_cast<unsigned>(d.multiprocessor_count()));
  CHECK(all.min_partition_size() >= 1);
  CHECK(all.min_partition_size() <= all.sm_count());
  CHECK(all.coscheduled_alignment() >= 1);
  CHECK(all.kind() == curt::sm_resource_kind::whole);
  CHECK(all.split_id() == 0);
  CHECK(all.device() == d);
  CHECK(all.native().type == CU_DEV_RESOURCE_TYPE_SM);
}

TEST_CASE("every split the device offers reports its groups and remainder, and works") {
  const curt::device d = gpu();
  const curt::sm_resource all = curt::device_sm_resource(d);
  const unsigned total = all.sm_count();
  tagged_work w(4 * total, 5'000);
  for (curt::sm_split_flags flags :
       {curt::sm_split_flags::none, curt::sm_split_flags::ignore_coscheduling}) {
    // Each distinct layout (groups, size) and the first minimum that gave it.
    std::map<std::pair<unsigned, unsigned>, unsigned> layouts;
    unsigned finest = 0;
    for (unsigned min = 0; min <= total; ++min) {
      INFO(flags_name(flags) << ", groups of at least " << min << " SMs");
      const unsigned fit = all.max_groups(min, flags);
      REQUIRE(fit >= 1);
      const curt::sm_split split = all.split(fit, min, flags);
      const unsigned size = split.group_sm_count();
      const unsigned left = split.remainder().sm_count();
      INFO("delivered " << split.group_count() << " x " << size << " + " << left);
      CHECK(split.group_count() == fit);
      CHECK(split.requested_groups() == fit);
      CHECK(split.requested_sm_count() == min);
      CHECK(split.flags() == flags);
      CHECK(split.id() != 0);
      CHECK(size >= std::max(min, 1u));
      for (unsigned i = 0; i < split.group_count(); ++i) {
        const curt::sm_resource& g = split.group(i);
        CHECK(g.sm_count() == size);
        CHECK(g.kind() == curt::sm_resource_kind::group);
        CHECK(g.split_id() == split.id());
        CHECK(g.index() == i);
        CHECK(g.device() == d);
      }
      CHECK(split.remainder().kind() == curt::sm_resource_kind::remainder);
      CHECK(split.remainder().split_id() == split.id());
      CHECK(split.remainder().index() == fit);
      CHECK(fit * size + left == total);
      if (finest == 0) finest = size;  // min 0: the driver's smallest group
      if (flags == curt::sm_split_flags::none) {
        CHECK((size % all.coscheduled_alignment() == 0 || size == total));
        CHECK((size >= all.min_partition_size() || size == total));
      } else {
        CHECK((size % finest == 0 || size == total));
      }
      CHECK(split.exact() == (size == min));
      // Asking exactly for what was delivered is exact; asking exactly for a size the driver
      // rounds, or for one group more than fits, is refused.
      const curt::sm_split again = all.split(fit, size, flags, curt::sm_split_mode::exact);
      CHECK(again.group_count() == fit);
      CHECK(again.group_sm_count() == size);
      CHECK(again.id() != split.id());
      if (min > 0 && size != min)
        curt_test::require_cuda_error(
            [&] { (void)all.split(fit, min, flags, curt::sm_split_mode::exact); },
            cudaErrorInvalidResourceConfiguration, {"delivered", "rounds a group up", "exact"});
      const curt::sm_split over = all.split(fit + 1, min, flags);
      CHECK(over.group_count() == fit);
      CHECK_FALSE(over.exact());
      curt_test::require_cuda_error(
          [&] { (void)all.split(fit + 1, size, flags, curt::sm_split_mode::exact); },
          cudaErrorInvalidResourceConfiguration, {"no more groups of that size fit"});
      layouts.emplace(std::make_pair(fit, size), min);
    }
    // Each layout's first group, and its remainder, hold their kernels.
    for (const auto& [layout, min] : layouts) {
      const curt::sm_split split = all.split(layout.first, min, flags);
      INFO(flags_name(flags) << ": " << layout.first << " x " << layout.second << " + "
                             << split.remainder().sm_count() << " (asked at least " << min << ")");
      std::string group = partition_problem(split.group(0), w);
      INFO("group 0: " << group);
      CHECK(group.empty());
      if (split.remainder().sm_count() > 0) {
        std::string rest = partition_problem(split.remainder(), w);
        INFO("remainder: " << rest);
        CHECK(rest.empty());
      }
    }
  }
}

TEST_CASE("a kernel on a green stream runs only on its partition; on an ordinary stream, on more") {
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const unsigned partition = split.group_sm_count();
  curt::green_context gc(d, split.group(0));
  REQUIRE(gc.resources().sm_count() == partition);
  curt::stream s = gc.make_stream();
  tagged_work w(16 * sm_total());
  w.launch(s);
  s.synchronize();
  check_inside(observe(w), partition, "green stream");

  // The control: the same launch on an ordinary stream spreads wider.
  w.poison();
  curt::stream ordinary(d);
  w.launch(ordinary);
  ordinary.synchronize();
  const placement wide = observe(w);
  INFO("ordinary stream: the blocks ran on " << wide.sms.size() << " SMs " << describe(wide.sms));
  CHECK(wide.wrong.empty());
  CHECK(wide.sms.size() > partition);
}

TEST_CASE("two partitions and the remainder used at once run on disjoint SMs, next to primary work") {
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(2);
  const unsigned left = split.remainder().sm_count();
  REQUIRE(left > 0);  // every device so far leaves SMs over when split into two smallest groups
  curt::green_context first(d, split.group(0)), second(d, split.group(1)), rest(d, split.remainder());
  curt::stream s1 = first.make_stream(), s2 = second.make_stream(), s3 = rest.make_stream();
  curt::stream primary(d);
  tagged_work w1(16 * sm_total(), 50'000), w2(16 * sm_total(), 50'000), w3(16 * sm_total(), 50'000),
      wp(16 * sm_total(), 50'000);
  w1.launch(s1);
  w2.launch(s2);
  w3.launch(s3);
  wp.launch(primary);  // the primary context's work at the same time
  s1.synchronize();
  s2.synchronize();
  s3.synchronize();
  primary.synchronize();
  const placement p1 = observe(w1), p2 = observe(w2), p3 = observe(w3), pp = observe(wp);
  check_inside(p1, split.group_sm_count(), "group 0");
  check_inside(p2, split.group_sm_count(), "group 1");
  check_inside(p3, left, "the remainder");
  INFO(pp.wrong);
  CHECK(pp.wrong.empty());
  CHECK(pp.unrecorded == 0);
  INFO("group 0 on " << describe(p1.sms) << ", group 1 on " << describe(p2.sms)
                     << ", the remainder on " << describe(p3.sms));
  CHECK(common(p1.sms, p2.sms).empty());
  CHECK(common(p1.sms, p3.sms).empty());
  CHECK(common(p2.sms, p3.sms).empty());
  // They ran at the same time (the driver does not promise it; reported, not judged).
  if (!(p1.first_start < p2.last_end && p2.first_start < p1.last_end))
    WARN("the two groups' kernels did not overlap in time");
}

TEST_CASE("a graph captured on a green stream stays on the partition, also launched elsewhere") {
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const unsigned partition = split.group_sm_count();
  curt::green_context gc(d, split.group(0));
  curt::stream s = gc.make_stream();
  curt::stream ordinary(d);
  tagged_work w(16 * sm_total(), 10'000);
  curt::graph g = curt::capture(s, [&] { w.launch(s); });
  curt::graph_exec exec = g.instantiate();
  exec.launch(ordinary);
  ordinary.synchronize();
  check_inside(observe(w), partition, "graph captured on the green stream, launched on an ordinary one");
  w.poison();
  exec.launch(s);
  s.synchronize();
  check_inside(observe(w), partition, "the same graph launched on the green stream");
  // The control: captured on the ordinary stream, the same work spreads wider.
  w.poison();
  curt::graph wide = curt::capture(ordinary, [&] { w.launch(ordinary); });
  wide.instantiate().launch(ordinary);
  ordinary.synchronize();
  const placement p = observe(w);
  INFO("captured on an ordinary stream: " << p.sms.size() << " SMs " << describe(p.sms));
  CHECK(p.wrong.empty());
  CHECK(p.sms.size() > partition);
}

TEST_CASE("a green context's own SMs split again make partitions inside it") {
  const curt::device d = gpu();
  const curt::sm_resource all = curt::device_sm_resource(d);
  const curt::sm_split outer = all.split(1, 2 * all.min_partition_size());
  REQUIRE(outer.group_count() == 1);
  curt::green_context big(d, outer.group(0));
  const curt::sm_resource inside = big.resources();
  CHECK(inside.kind() == curt::sm_resource_kind::whole);
  CHECK(inside.sm_count() == outer.group_sm_count());
  const curt::sm_split inner = inside.split(1, inside.min_partition_size());
  REQUIRE(inner.group_count() == 1);
  CHECK(inner.group_sm_count() < inside.sm_count());
  curt::green_context small(d, inner.group(0));
  curt::stream big_stream = big.make_stream(), small_stream = small.make_stream();
  tagged_work wide(16 * sm_total()), narrow(16 * sm_total());
  wide.launch(big_stream);
  big_stream.synchronize();
  narrow.launch(small_stream);
  small_stream.synchronize();
  const placement pw = observe(wide), pn = observe(narrow);
  check_inside(pw, inside.sm_count(), "the outer green context");
  check_inside(pn, inner.group_sm_count(), "the green context split from it");
  INFO("outer on " << describe(pw.sms) << ", inner on " << describe(pn.sms));
  CHECK(common(pn.sms, pw.sms).size() == pn.sms.size());  // the inner SMs are the outer's
}

// Its own test case: compute-sanitizer 13.0's initcheck crashes (SIGSEGV on the main thread, no
// error reported) on stream-ordered pool memory used on a green stream, raw CUDA included
// (cudaMallocFromPoolAsync, memset, a kernel, a copy and cudaFreeAsync on a stream of
// cuGreenCtxStreamCreate; the same on an ordinary stream passes). docs/design.md lists it.
TEST_CASE("stream-ordered allocation from a pool on a green stream", "[no-initcheck]") {
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  curt::green_context gc(d, split.group(0));
  curt::stream s = gc.make_stream();
  const std::size_t n = 10'000 + random_word() % 10'000;
  const std::vector<unsigned> x = random_words(n);
  const unsigned a = random_word(), b = random_word();
  device_array<unsigned> dx(x);
  std::vector<unsigned> back(n, 0u);
  {
    curt::async_buffer<unsigned> y = curt::default_memory_pool(d).allocate<unsigned>(n, s);
    curt::memset(y, 0xFF, s);
    curt::launch(s, config_for(n), slow_affine_u32, dx.get(), y.data(), static_cast<int>(n), a, b,
                 1'000'000ull);
    curt::copy(back, y, s);
    s.synchronize();
  }  // freed on s (cudaFreeAsync)
  s.synchronize();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += back[i] != a * x[i] + b;
  CHECK(bad == 0);
}

TEST_CASE("green streams are curt::streams: copies, fills, waits, events, timers, host functions") {
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(2);
  curt::green_context gc(d, split.group(0)), other_gc(d, split.group(1));
  curt::stream s = gc.make_stream(), s_too = gc.make_stream(), t = other_gc.make_stream();
  curt::stream ordinary(d);

  SECTION("what the stream says of itself, and which green context it belongs to") {
    CHECK(s.flags() == curt::stream_flags::non_blocking);
    CHECK(s.device() == d);
    const std::pair<int, int> range = d.stream_priority_range();
    const int greatest = range.first, least = range.second;
    curt::stream urgent = gc.make_stream(greatest), lazy = gc.make_stream(least);
    CHECK(urgent.priority() == greatest);
    CHECK(lazy.priority() == least);
    curt_test::require_cuda_error([&] { (void)gc.make_stream(greatest - 1); },
                                  cudaErrorInvalidValue, {"make_stream", "outside the device's range"});
    const auto found = curt::green_context_of(s);
    REQUIRE(found.has_value());
    CHECK(*found == gc);
    CHECK(found->id() == gc.id());
    CHECK(found->device() == d);
    const auto of_t = curt::green_context_of(t);
    REQUIRE(of_t.has_value());
    CHECK(*of_t == other_gc);
    CHECK_FALSE(curt::green_context_of(ordinary).has_value());
    CHECK(gc.id() != other_gc.id());
    CHECK(gc.device() == d);
    CUcontext converted = gc.context();
    CHECK(converted != nullptr);
    CHECK(converted != other_gc.context());
  }

  SECTION("copies, memset and fill on the green stream") {
    const std::size_t n = 10'000 + random_word() % 10'000;
    const std::vector<unsigned> x = random_words(n);
    const unsigned a = random_word(), b = random_word(), filler = random_word();
    curt::pinned_buffer<unsigned> host_in(d, n), host_out(d, n);
    std::copy(x.begin(), x.end(), host_in.data());
    std::fill(host_out.data(), host_out.data() + n, poison_word);
    curt::device_buffer<unsigned> in(d, n), out(d, n), filled(d, n);
    curt::memset(out, 0xFF, s);
    curt::copy(in, host_in, s);
    curt::launch(s, config_for(n), slow_affine_u32, in.data(), out.data(), static_cast<int>(n), a,
                 b, 0ull);
    curt::copy(host_out, out, s);
    curt::fill(filled, filler, s);
    s.synchronize();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += host_out.data()[i] != a * x[i] + b;
    CHECK(bad == 0);
    std::vector<unsigned> back(n, 0u);
    curt::copy_and_wait(back, filled, s);
    CHECK(std::count(back.begin(), back.end(), filler) == static_cast<std::ptrdiff_t>(n));
  }

  SECTION("stream-on-stream waits between green and ordinary streams, both ways") {
    std::string problem = wait_problem(s, ordinary, [&] { ordinary.wait(s); });
    INFO("ordinary.wait(green): " << problem);
    CHECK(problem.empty());
    problem = wait_problem(ordinary, s, [&] { s.wait(ordinary); });
    INFO("green.wait(ordinary): " << problem);
    CHECK(problem.empty());
    problem = wait_problem(s, t, [&] { t.wait(s); });
    INFO("green.wait(green of another context): " << problem);
    CHECK(problem.empty());
    problem = wait_problem(s, t, [&] { t.wait(curt::stream_ref(s)); });
    INFO("the same through a stream_ref: " << problem);
    CHECK(problem.empty());
  }

  SECTION("events recorded on a green stream, and on the whole green context") {
    curt::event e(d);
    std::string problem = wait_problem(s, ordinary, [&] {
      e.record(s);
      ordinary.wait(e);
    });
    INFO("event recorded on the green stream: " << problem);
    CHECK(problem.empty());
    // The green context's record covers both of its streams: the consumer reads what each wrote.
    const std::size_t n = 4096;
    const std::vector<unsigned> x = random_words(n);
    const unsigned a = random_word(), b = random_word(), c = random_word();
    device_array<unsigned> dx(x), p(n), q(n), out(n);
    curt::launch(s, config_for(n), slow_affine_u32, dx.get(), p.get(), static_cast<int>(n), a, b,
                 20'000'000ull);
    curt::launch(s_too, config_for(n), slow_affine_u32, dx.get(), q.get(), static_cast<int>(n), b,
                 a, 30'000'000ull);
    curt::event all_of_gc(d);
    gc.record(all_of_gc);
    ordinary.wait(all_of_gc);
    curt::launch(ordinary, config_for(n), mix, p.get(), q.get(), out.get(), static_cast<int>(n), c);
    ordinary.synchronize();
    std::vector<unsigned> back = out.download();
    std::size_t bad = 0;
    for (std::size_t i = 0; i < n; ++i) bad += back[i] != (a * x[i] + b) * (b * x[i] + a) + c;
    CHECK(bad == 0);
    s.synchronize();
    s_too.synchronize();
    // The green context waits: every stream of it, for an event of the ordinary stream.
    curt::event from_primary(d);
    problem = wait_problem(ordinary, s_too, [&] {
      from_primary.record(ordinary);
      gc.wait(from_primary);
    });
    INFO("green_context::wait(event): " << problem);
    CHECK(problem.empty());
  }

  SECTION("a timer and a host function on the green stream") {
    tagged_work w(1, 2'000'000);
    curt::stream_timer timer(s);
    w.launch(s);
    const float ms = timer.stop().count();
    CHECK(ms >= 1.9f);
    CHECK(ms < 1000.0f);
    std::atomic<bool> ran{false};
    s.host_call([&ran] { ran = true; });
    s.synchronize();
    CHECK(ran.load());
    CHECK(observe(w).wrong.empty());
  }
}

TEST_CASE("streams made while a green context is current belong to it") {
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  curt::green_context gc(d, split.group(0));
  tagged_work w(16 * sm_total());
  const CUcontext before = current_context();
  const CUcontext converted = gc.context();
  {
    curt::detail::context_scope in(converted);
    curt::stream made_inside(d);
    CHECK(current_context() == converted);
    const auto found = curt::green_context_of(made_inside);
    REQUIRE(found.has_value());
    CHECK(*found == gc);
    w.launch(made_inside);
    made_inside.synchronize();
  }  // the stream goes before the green context: the caller's rule for such streams
  CHECK(current_context() == before);
  check_inside(observe(w), split.group_sm_count(), "a runtime stream made under the green context");
}

TEST_CASE("calls on green contexts leave a thread's context exactly as it was") {
  const curt::device d = gpu();
  tagged_work w(4 * sm_total(), 5'000);
  const unsigned partition = smallest_groups(1).group_sm_count();
  // Made here: the thread below has no context, this one has the primary one current.
  on_fresh_thread_noted([&](thread_notes& notes) {
    GREEN_NOTE(notes, current_context() == nullptr);
    // Event records and waits go to the runtime unchanged (docs/design.md), which may make a
    // context current: reported, not judged. Everything else must leave none.
    auto note = [&](std::vector<std::string>& list, const char* what) {
      if (current_context() == nullptr) return;
      list.push_back(std::string("left a context current on a thread that had none: ") + what);
      CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);  // go on from a clean thread
    };
    auto step = [&](const char* what) { note(notes.failed, what); };
    auto runtime_step = [&](const char* what) { note(notes.reported, what); };
    {
      const curt::sm_resource all = curt::device_sm_resource(d);
      step("device_sm_resource");
      const curt::sm_split split = all.split(1, all.min_partition_size());
      step("sm_resource::split");
      (void)all.max_groups(all.min_partition_size());
      step("sm_resource::max_groups");
      curt::green_context gc(d, split.group(0));
      step("green_context(device, resource)");
      (void)gc.id();
      step("green_context::id");
      (void)gc.resources();
      step("green_context::resources");
      (void)gc.context();
      step("green_context::context");
      curt::stream s = gc.make_stream();
      step("green_context::make_stream");
      w.launch(s);
      step("curt::launch on the green stream");
      (void)s.ready();
      step("stream::ready");
      std::optional<curt::stream> ordinary(std::in_place, d);
      step("curt::stream(device)");
      ordinary->wait(s);
      runtime_step("ordinary.wait(green stream)");
      s.wait(*ordinary);
      runtime_step("green.wait(ordinary stream)");
      std::optional<curt::event> e(std::in_place, d);
      step("curt::event(device)");
      gc.record(*e);
      step("green_context::record");
      gc.wait(*e);
      step("green_context::wait");
      GREEN_NOTE(notes, curt::green_context_of(s).has_value());
      step("green_context_of(green stream)");
      GREEN_NOTE(notes, !curt::green_context_of(*ordinary).has_value());
      step("green_context_of(ordinary stream)");
      s.synchronize();
      step("stream::synchronize");
      {
        curt::stream_timer timer(s);
        (void)timer.stop();
      }
      step("stream_timer on the green stream");
      s.host_call([] {});
      s.synchronize();
      step("stream::host_call");
      // Each destruction its own step: an event's goes to the runtime unchanged (reported).
      e.reset();
      runtime_step("destroying an event");
      ordinary.reset();
      step("destroying the ordinary stream");
      s = curt::stream(curt::no_handle);
      step("destroying the green stream");
    }
    step("destroying the green context");
  });
  check_inside(observe(w), partition, "launched from a thread without a context");

  // A thread with the primary context current, or a context of the user's, keeps exactly it.
  for (bool users_own : {false, true}) {
    w.poison();
    on_fresh_thread_noted([&](thread_notes& notes) {
      CUcontext mine = nullptr;
      if (users_own) {
        CUdevice device = 0;
        CURT_DRIVER_CALL(cuDeviceGet, 2000, &device, d.ordinal());
        CURT_DRIVER_CALL(cuCtxCreate, 12050, &mine, nullptr, 0u, device);  // current now
      } else {
        CURT_CHECK(cudaSetDevice(d.ordinal()));
        CURT_CHECK(cudaFree(nullptr));  // makes the primary context current
      }
      const CUcontext current = current_context();
      GREEN_NOTE(notes, current != nullptr);
      {
        const curt::sm_resource all = curt::device_sm_resource(d);
        const curt::sm_split split = all.split(1, all.min_partition_size());
        curt::green_context gc(d, split.group(0));
        (void)gc.id();
        (void)gc.resources();
        curt::stream s = gc.make_stream();
        GREEN_NOTE(notes, current_context() == current);
        if (!users_own) {  // an event of the user's context is not one of the green context's
          curt::event e(d);
          gc.record(e);
          gc.wait(e);
        }
        GREEN_NOTE(notes, curt::green_context_of(s).has_value());
        GREEN_NOTE(notes, current_context() == current);
        if (!users_own) {  // a launch into another context than the user's current one: not asked
          w.launch(s);
          s.synchronize();
          GREEN_NOTE(notes, current_context() == current);
        }
      }
      GREEN_NOTE(notes, current_context() == current);
      if (mine) CURT_DRIVER_CALL(cuCtxDestroy, 4000, mine);
    });
    if (!users_own) check_inside(observe(w), partition, "launched with the primary context current");
  }
}

TEST_CASE("invalid requests and overlapping combinations raise the promised errors") {
  using curt_test::require_cuda_error;
  const curt::device d = gpu();
  const curt::sm_resource all = curt::device_sm_resource(d);
  const unsigned total = all.sm_count();
  const unsigned smallest = all.min_partition_size();

  require_cuda_error([&] { (void)all.split(0, smallest); }, cudaErrorInvalidValue,
                     {"curt::sm_resource::split(0 groups", "at least one group"});
  require_cuda_error([&] { (void)all.split(1, total + 1); }, cudaErrorInvalidResourceConfiguration,
                     {"cannot come from a set of", std::to_string(total).c_str()});
  require_cuda_error([&] { (void)all.max_groups(total + 1); },
                     cudaErrorInvalidResourceConfiguration, {"max_groups", "cannot come from"});
  require_cuda_error([&] { (void)all.split(2, 0, curt::sm_split_flags::none, curt::sm_split_mode::exact); },
                     cudaErrorInvalidValue, {"exact split needs the group size"});

  // Exact mode and a size the driver rounds up: the first such size above the smallest group
  // (9 -> 16 on the H200).
  unsigned rounded = 0, delivered = 0;
  for (unsigned min = smallest + 1; min <= total && rounded == 0; ++min) {
    const unsigned size = all.split(1, min).group_sm_count();
    if (size != min) {
      rounded = min;
      delivered = size;
    }
  }
  if (rounded == 0) {
    WARN("this device rounds no group size: the exact-mode refusal of a rounded size is not tried");
  } else {
    INFO(rounded << " SMs become " << delivered);
    const curt::sm_split loose = all.split(1, rounded);
    CHECK_FALSE(loose.exact());
    CHECK(loose.group_sm_count() == delivered);
    const std::string expected = "delivered 1 group of " + std::to_string(delivered) + " SMs";
    require_cuda_error(
        [&] { (void)all.split(1, rounded, curt::sm_split_flags::none, curt::sm_split_mode::exact); },
        cudaErrorInvalidResourceConfiguration, {"exact", "rounds a group up", expected.c_str()});
  }
  // Exact mode and more groups than fit.
  const unsigned fit = all.max_groups(smallest);
  require_cuda_error(
      [&] { (void)all.split(fit + 1, smallest, curt::sm_split_flags::none, curt::sm_split_mode::exact); },
      cudaErrorInvalidResourceConfiguration, {"no more groups of that size fit"});

  // A piece of a split cannot be split again.
  const curt::sm_split one = all.split(2, smallest), another = all.split(2, smallest);
  REQUIRE(one.group_count() == 2);
  require_cuda_error([&] { (void)one.group(0).split(1, 0); }, cudaErrorInvalidResourceConfiguration,
                     {"cannot be split again"});
  require_cuda_error([&] { (void)one.remainder().max_groups(0); },
                     cudaErrorInvalidResourceConfiguration, {"cannot be split again"});
  require_cuda_error([&] { (void)one.group(2); }, cudaErrorInvalidValue, {"the split made 2 group(s)"});

  // Pieces of different splits, the same piece twice, a whole set with a piece: they overlap.
  require_cuda_error([&] { curt::green_context gc(d, {one.group(0), another.group(1)}); },
                     cudaErrorInvalidResourceConfiguration,
                     {"curt::green_context(device", "different splits"});
  require_cuda_error([&] { curt::green_context gc(d, {one.group(0), another.remainder()}); },
                     cudaErrorInvalidResourceConfiguration, {"different splits"});
  require_cuda_error([&] { curt::green_context gc(d, {one.group(1), one.group(1)}); },
                     cudaErrorInvalidResourceConfiguration, {"is given twice"});
  require_cuda_error([&] { curt::green_context gc(d, {all, one.group(0)}); },
                     cudaErrorInvalidResourceConfiguration, {"overlaps every one"});
  require_cuda_error([&] { curt::green_context gc(d, std::vector<curt::sm_resource>{}); },
                     cudaErrorInvalidValue, {"at least one set of SMs"});
  // A remainder with no SM (one group of every SM leaves none).
  const curt::sm_split everything = all.split(1, total);
  REQUIRE(everything.remainder().sm_count() == 0);
  require_cuda_error([&] { curt::green_context gc(d, everything.remainder()); },
                     cudaErrorInvalidResourceConfiguration, {"holds no SM"});

  // Pieces of one split combine: two groups and the remainder make one partition.
  curt::green_context combined(d, one.rest(0));
  CHECK(combined.resources().sm_count() == 2 * one.group_sm_count() + one.remainder().sm_count());
  curt::green_context pair(d, {one.group(0), one.group(1)});
  CHECK(pair.resources().sm_count() == 2 * one.group_sm_count());
  tagged_work w(16 * total);
  curt::stream s = pair.make_stream();
  w.launch(s);
  s.synchronize();
  check_inside(observe(w), 2 * one.group_sm_count(), "two groups of one split combined");
}

TEST_CASE("moved-from and released owners throw, saying which; an adopted handle is owned") {
  using curt_test::require_cuda_error;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  curt::green_context gc(d, split.group(0));
  const unsigned long long id = gc.id();
  curt::green_context moved(std::move(gc));
  CHECK(moved.id() == id);
  curt::event e(d);
  require_cuda_error([&] { (void)gc.id(); }, cudaErrorInvalidResourceHandle,
                     {"curt::green_context::id()", "moved-from"});
  require_cuda_error([&] { (void)gc.make_stream(); }, cudaErrorInvalidResourceHandle,
                     {"make_stream()", "moved-from"});
  require_cuda_error([&] { (void)gc.resources(); }, cudaErrorInvalidResourceHandle, {"moved-from"});
  require_cuda_error([&] { gc.record(e); }, cudaErrorInvalidResourceHandle, {"record(event)", "moved-from"});
  require_cuda_error([&] { gc.wait(e); }, cudaErrorInvalidResourceHandle, {"wait(event)", "moved-from"});
  require_cuda_error([&] { (void)gc.context(); }, cudaErrorInvalidResourceHandle, {"moved-from"});

  curt::stream s = moved.make_stream();
  curt::stream s_moved(std::move(s));
  require_cuda_error([&] { s.synchronize(); }, cudaErrorInvalidResourceHandle, {"moved-from"});
  require_cuda_error([&] { (void)curt::green_context_of(s); }, cudaErrorInvalidResourceHandle,
                     {"moved-from"});
  s_moved = curt::stream(curt::no_handle);  // the stream goes before the release below

  CUgreenCtx raw = moved.release();
  require_cuda_error([&] { (void)moved.id(); }, cudaErrorInvalidResourceHandle, {"released"});
  curt::green_context adopted = curt::green_context::from_native_handle(d, raw);
  CHECK(adopted.id() == id);
  CHECK(adopted.get() == raw);
  curt::green_context assigned(curt::no_handle);
  assigned = std::move(adopted);  // destroys nothing: it held nothing
  CHECK(assigned.id() == id);
  require_cuda_error([&] { (void)adopted.id(); }, cudaErrorInvalidResourceHandle, {"moved-from"});
}

TEST_CASE("a green context lives until its owner and every stream made by it are gone") {
  curt_test::error_recorder errors;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const unsigned partition = split.group_sm_count();
  tagged_work w(16 * sm_total(), 10'000);

  // The owner goes first; the stream keeps the green context and its partition.
  curt::stream kept(curt::no_handle);
  unsigned long long id = 0;
  {
    curt::green_context gc(d, split.group(0));
    id = gc.id();
    kept = gc.make_stream();
  }
  const auto found = curt::green_context_of(kept);
  REQUIRE(found.has_value());
  CHECK(found->id() == id);
  w.launch(kept);
  kept.synchronize();
  check_inside(observe(w), partition, "a stream whose green_context owner is gone");
  kept = curt::stream(curt::no_handle);  // the last one: the green context goes now

  // Streams move-assigned over each other let go of their contexts one by one.
  {
    curt::green_context first(d, split.group(0));
    curt::stream s = first.make_stream();
    curt::green_context second(d, split.group(0));
    s = second.make_stream();  // the first context's stream is destroyed here
    w.poison();
    w.launch(s);
    s.synchronize();
    check_inside(observe(w), partition, "a stream of the second of two green contexts");
  }  // `second`'s owner goes before `s`, which keeps it alive until it goes itself

  // A released stream keeps its green context for good (the driver needs it to exist until the
  // raw stream is destroyed; curt cannot know when that is). Destroyed raw here, the context leaks.
  cudaStream_t raw = nullptr;
  {
    curt::green_context gc(d, split.group(0));
    raw = gc.make_stream().release();
  }
  w.poison();
  w.launch(curt::stream_ref(raw));
  CURT_CHECK(cudaStreamSynchronize(raw));
  check_inside(observe(w), partition, "a released stream after its green_context owner is gone");
  CURT_CHECK(cudaStreamDestroy(raw));
  INFO("first error handed to the handler: " << errors.message(0));
  CHECK(errors.count.load() == 0);
}

// ---- What is left when a green context goes ---------------------------------------------------
// curt keeps nothing of its own in a green context any more (no thread's wait event, no stream of
// synchronous pool calls): what once left such things there (exp/attack6 claims 1 and 4, attack9
// claim 2) must work, and the green context must go with its owner and last stream, or stay its
// new owner's once released, without errors. Graphs captured on a green stream must not outlive
// their green context (CUDA's rule): the tests of graphs keeping it alive are gone.

namespace {

bool context_has_id(CUcontext context, unsigned long long id) {
  unsigned long long now = 0;
  return CURT_DRIVER_FUNCTION(cuCtxGetId, 12000)(context, &now) == CUDA_SUCCESS && now == id;
}

unsigned long long context_id(CUcontext context) {
  unsigned long long id = 0;
  CURT_DRIVER_CALL(cuCtxGetId, 12000, context, &id);
  return id;
}

std::size_t count_differences(const std::vector<unsigned>& got, const std::vector<unsigned>& want) {
  std::size_t bad = got.size() == want.size() ? 0 : std::max(got.size(), want.size());
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) bad += got[i] != want[i];
  return bad;
}

// Synchronous pool calls with `context` current (as a library working in it): random words
// written and read back; what went wrong, empty when nothing did.
std::string allocate_sync_in(CUcontext context, const curt::memory_pool_ref& pool, std::size_t n) {
  const std::vector<unsigned> x = random_words(n);
  std::vector<unsigned> back(n, 0u);
  curt::detail::context_scope in(context);
  void* p = pool.allocate_sync(n * sizeof(unsigned));
  CURT_CHECK(cudaMemcpy(p, x.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
  CURT_CHECK(cudaMemcpy(back.data(), p, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  pool.deallocate_sync(p, n * sizeof(unsigned));
  const std::size_t bad = count_differences(back, x);
  return bad ? std::to_string(bad) + " of " + std::to_string(n) + " words differ" : std::string();
}

}  // namespace

// attack6 claim 1 (a stream of curt's left in a destroyed green context). [no-initcheck]: pool
// memory used in a green context (see the pool test above).
TEST_CASE("synchronous pool calls with a green context current work, and it goes without errors",
          "[no-initcheck]") {
  curt_test::error_recorder errors;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const curt::memory_pool_ref pool = curt::default_memory_pool(d);
  const std::size_t n = (std::size_t(1) << 18) + random_word() % 4096;
  const CUcontext primary = curt::detail::primary_context(d.ordinal());
  CHECK(allocate_sync_in(primary, pool, 4096).empty());
  std::string problem;
  {
    curt::green_context gc(d, split.group(0));
    problem = allocate_sync_in(gc.context(), pool, n);
  }  // the owner goes, and with no stream of it left the green context goes too
  INFO("allocate_sync's memory under the green context: " << problem);
  CHECK(problem.empty());
  CHECK(allocate_sync_in(primary, pool, 4096).empty());  // the primary context's are untouched
  INFO("first error handed to the handler: " << errors.message(0));
  CHECK(errors.count.load() == 0);
}

// attack6 claim 4 (a thread's wait event left in each green context it waited on).
TEST_CASE("waits on green streams of green contexts made and destroyed in turn leave no errors") {
  curt_test::error_recorder errors;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  constexpr int cycles = 8;
  auto lasting = std::make_unique<curt::green_context>(d, split.group(0));
  on_fresh_thread_noted([&](thread_notes& notes) {
    CURT_CHECK(cudaSetDevice(d.ordinal()));
    CURT_CHECK(cudaFree(nullptr));  // the primary context current, as after any runtime call
    curt::stream ordinary(d);
    // ordinary waits on the green stream (the data says whether it waited).
    auto wait_on = [&](const curt::stream& green_stream) {
      const std::string problem =
          wait_problem(green_stream, ordinary, [&] { ordinary.wait(green_stream); });
      if (!problem.empty()) notes.failed.push_back("ordinary.wait(green stream): " + problem);
    };
    for (int i = 0; i < cycles; ++i) {
      auto gc = std::make_unique<curt::green_context>(d, split.group(0));
      std::optional<curt::stream> s(gc->make_stream());
      wait_on(*s);
      s.reset();
      gc.reset();  // the green context goes
    }
    curt::stream s = lasting->make_stream();
    wait_on(s);
  });  // the thread exits before `lasting` goes
  lasting.reset();
  INFO("first error handed to the handler: " << errors.message(0));
  CHECK(errors.count.load() == 0);
}

// A released green context is its new owner's to destroy: once its last stream is gone curt
// leaves it alive, holding nothing of curt's. [no-initcheck]: pool memory in a green context.
TEST_CASE("a released green context stays alive for its new owner once its streams are gone",
          "[no-initcheck]") {
  curt_test::error_recorder errors;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const curt::memory_pool_ref pool = curt::default_memory_pool(d);
  CUgreenCtx released = nullptr;
  CUcontext converted = nullptr;
  unsigned long long id = 0;
  std::string problem;
  {
    curt::green_context gc(d, split.group(0));
    curt::stream s = gc.make_stream();
    converted = gc.context();
    id = context_id(converted);
    problem = allocate_sync_in(converted, pool, 4096 + random_word() % 4096);
    released = gc.release();
  }  // the last stream goes
  INFO(problem);
  CHECK(problem.empty());
  INFO("the released green context is alive, its new owner's");
  CHECK(context_has_id(converted, id));
  CURT_DRIVER_CALL(cuGreenCtxDestroy, 12040, released);  // the new owner's part
  INFO("first error handed to the handler: " << errors.message(0));
  CHECK(errors.count.load() == 0);
}

// attack9 claim 2: graphs captured on the streams of a released green context run while its new
// owner keeps it, and the new owner destroys it after them. [no-initcheck]: pool memory used in
// a green context (see the pool test above).
TEST_CASE("graphs captured on a released green context's streams run until its new owner "
          "destroys it",
          "[no-initcheck]") {
  curt_test::error_recorder errors;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const unsigned partition = split.group_sm_count();
  const curt::memory_pool_ref pool = curt::default_memory_pool(d);
  const std::size_t n = 4096 + random_word() % 4096;
  curt::stream ordinary(d);
  tagged_work w(16 * sm_total(), 10'000);
  std::optional<curt::graph> first_graph, second_graph;
  CUgreenCtx first = nullptr, second = nullptr;
  CUcontext first_context = nullptr, second_context = nullptr;
  unsigned long long first_id = 0, second_id = 0;
  {  // released while its stream lives; the stream goes, the graph stays
    curt::green_context gc(d, split.group(0));
    curt::stream s = gc.make_stream();
    first_context = gc.context();
    first_id = context_id(first_context);
    CHECK(allocate_sync_in(first_context, pool, n).empty());
    first_graph.emplace(curt::capture(s, [&] { w.launch(s); }));
    first = gc.release();
  }
  INFO("released, its last stream gone, a graph alive: the context is alive");
  CHECK(context_has_id(first_context, first_id));
  {  // the stream goes first; released while only the owner and a graph hold it
    curt::green_context gc(d, split.group(0));
    second_context = gc.context();
    second_id = context_id(second_context);
    {
      curt::stream s = gc.make_stream();
      CHECK(allocate_sync_in(second_context, pool, n).empty());
      second_graph.emplace(curt::capture(s, [&] { w.launch(s); }));
    }
    second = gc.release();
  }
  CHECK(context_has_id(second_context, second_id));
  // The graphs still run on their partitions: the contexts are alive, the new owner's.
  auto run = [&](curt::graph& g, const char* what) {
    w.poison();
    curt::graph_exec exec = g.instantiate();
    exec.launch(ordinary);
    ordinary.synchronize();
    check_inside(observe(w), partition, what);
  };
  run(*first_graph, "the graph of the context released while its stream lived");
  run(*second_graph, "the graph of the context released after its stream went");
  // The new owner's part: the graphs first (they must not outlive their green contexts).
  first_graph.reset();
  second_graph.reset();
  ordinary.synchronize();
  CURT_DRIVER_CALL(cuGreenCtxDestroy, 12040, first);
  CURT_DRIVER_CALL(cuGreenCtxDestroy, 12040, second);
  INFO("first error handed to the handler: " << errors.message(0));
  CHECK(errors.count.load() == 0);
}

// attack7 claim 3: an async_buffer of a default stream, allocated while a green context was
// current, recorded the green context as the place to free it; curt destroyed the green context
// first and the free failed or crashed. Now the allocation is refused, saying why.
// [no-initcheck]: initcheck crashed here on the H200 (SIGSEGV on the main thread, no frames): pool
// memory used in a green context (see the pool test above).
TEST_CASE("a default-stream allocation while a green context is current is refused, saying why",
          "[no-initcheck]") {
  using curt_test::require_cuda_error;
  const curt::device d = gpu();
  const curt::sm_split split = smallest_groups(1);
  const curt::memory_pool_ref pool = curt::default_memory_pool(d);
  const std::size_t n = 4096 + random_word() % 4096;
  const std::vector<unsigned> x = random_words(n);
  curt::green_context gc(d, split.group(0));
  curt::stream s = gc.make_stream();
  std::vector<unsigned> back(n, 0u);
  {
    curt::detail::context_scope in(gc.context());
    const char* why[] = {"on a default stream", "green_context", "make_stream()"};
    require_cuda_error([&] { (void)curt::allocate_async<unsigned>(n, curt::stream_ref::legacy_default()); },
                       cudaErrorNotSupported, {"curt::allocate_async<T>", why[0], why[1], why[2]});
    require_cuda_error(
        [&] { (void)pool.allocate<unsigned>(n, curt::stream_ref::per_thread_default()); },
        cudaErrorNotSupported, {"curt::memory_pool_ref::allocate<T>", why[0], why[1], why[2]});
    unsigned* raw = nullptr;
    CURT_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&raw), n * sizeof(unsigned), s));
    require_cuda_error(
        [&] { (void)curt::async_buffer<unsigned>::adopt(raw, n, curt::stream_ref::legacy_default()); },
        cudaErrorNotSupported, {"curt::async_buffer::adopt", why[0], why[1]});
    curt::async_buffer<unsigned> adopted = curt::async_buffer<unsigned>::adopt(raw, n, s);
    // On the green context's own stream it works, and the buffer keeps the context alive.
    curt::async_buffer<unsigned> y = curt::allocate_async<unsigned>(n, s);
    curt::copy(y, x, s);
    curt::copy(back, y, s);
    s.synchronize();
  }
  INFO("allocate_async on the green stream: random words written and read back");
  CHECK(count_differences(back, x) == 0);

  // The control: with the primary context current a default stream is fine.
  std::vector<unsigned> again(n, 0u);
  curt_test::on_fresh_thread([&] {
    CURT_CHECK(cudaSetDevice(d.ordinal()));
    CURT_CHECK(cudaFree(nullptr));
    {
      curt::async_buffer<unsigned> z =
          curt::allocate_async<unsigned>(n, curt::stream_ref::legacy_default());
      curt::copy(z, x, curt::stream_ref::legacy_default());
      curt::copy(again, z, curt::stream_ref::legacy_default());
      curt::stream_ref::legacy_default().synchronize();
    }
    CURT_CHECK(cudaStreamSynchronize(cudaStreamLegacy));  // the free is done
  });
  INFO("allocate_async on the legacy default stream with the primary context current");
  CHECK(count_differences(again, x) == 0);
}
