// NCCL over curt (include/curt/nccl.hpp), with every local GPU in one process (ncclCommInitAll):
// all-reduce against a CPU sum, broadcast from a random root, reduce, all-gather and
// reduce-scatter, and the errors (NCCL's refusal with its own text, curt's size checks, owners
// that hold nothing); groups that an exception leaves, that hold a refused collective or that are
// cancelled launch nothing; abort(); NCCL calls from a thread with no context leave it with none
// and with its runtime device. Works with one GPU (a communicator of one rank) and with more.
// Several processes: test_nccl_gpu2.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include "nccl_expect.hpp"

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/memory.hpp>
#include <curt/nccl.hpp>
#include <curt/stream.hpp>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct rig {
  std::vector<curt::device> devices;
  std::vector<curt::nccl_communicator> comms;
  std::vector<curt::stream> streams;
};

rig make_rig() {
  rig r;
  for (curt::device d : curt::devices()) r.devices.push_back(d);
  r.comms = curt::nccl_communicator::create_all(r.devices);
  for (curt::device d : r.devices) r.streams.emplace_back(d);
  return r;
}

using curt_test::download;

std::size_t random_count() {
  return static_cast<std::size_t>(curt_test::random_ints(1, 10000, 300000)[0]);
}

// Small integers as floats: every sum over a few ranks is exact, whatever NCCL's order.
std::vector<float> random_small_integers(std::size_t count) {
  std::vector<float> values(count);
  const std::vector<int> ints = curt_test::random_ints(count, -1000, 1000);
  for (std::size_t k = 0; k < count; ++k) values[k] = static_cast<float>(ints[k]);
  return values;
}

// Random small integers for every rank, on its device (uploaded on its stream), and their sum.
struct rank_inputs {
  std::vector<std::vector<float>> x;
  std::vector<curt::device_buffer<float>> buffers;
  std::vector<float> sum() const {
    std::vector<float> total(x.empty() ? 0 : x[0].size(), 0.0f);
    for (const std::vector<float>& xi : x)
      for (std::size_t k = 0; k < total.size(); ++k) total[k] += xi[k];
    return total;
  }
};
rank_inputs upload_small_integers(rig& r, std::size_t count) {
  rank_inputs in;
  for (std::size_t i = 0; i < r.devices.size(); ++i) {
    in.x.push_back(random_small_integers(count));
    in.buffers.emplace_back(r.devices[i], count);
    curt::copy(in.buffers[i], in.x[i], r.streams[i]);
  }
  return in;
}

// The calling thread's runtime device (cudaGetDevice), which makes no context.
int runtime_device() {
  int ordinal = -1;
  CURT_CHECK(cudaGetDevice(&ordinal));
  return ordinal;
}

}  // namespace

TEST_CASE("communicators of every local GPU know their rank, size and device") {
  rig r = make_rig();
  const int n = static_cast<int>(r.devices.size());
  REQUIRE(r.comms.size() == r.devices.size());
  std::printf("NCCL %d, %d rank(s)\n", curt::nccl_version(), n);
  for (int i = 0; i < n; ++i) {
    CHECK(r.comms[std::size_t(i)].rank() == i);
    CHECK(r.comms[std::size_t(i)].size() == n);
    CHECK(r.comms[std::size_t(i)].device() == r.devices[std::size_t(i)]);
    CHECK(r.comms[std::size_t(i)].async_error() == ncclSuccess);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("all-reduce over every local GPU matches a CPU sum") {
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  const std::size_t count = random_count();
  std::vector<std::vector<float>> xf(ranks);
  std::vector<std::vector<std::int32_t>> xi(ranks);
  std::vector<curt::device_buffer<float>> sendf, recvf;
  std::vector<curt::device_buffer<std::int32_t>> sendi;
  for (std::size_t i = 0; i < ranks; ++i) {
    // Multiples of 1/4096 in [-1, 1]: every partial sum is exact in float, so NCCL's order of
    // addition (a ring, not rank order, with more than two ranks) cannot matter near zero, where
    // a relative tolerance would not hold.
    xf[i].resize(count);
    const std::vector<int> steps = curt_test::random_ints(count, -4096, 4096);
    for (std::size_t k = 0; k < count; ++k) xf[i][k] = static_cast<float>(steps[k]) / 4096.0f;
    xi[i] = curt_test::random_ints(count, -100000, 100000);
    sendf.emplace_back(r.devices[i], count);
    recvf.emplace_back(r.devices[i], count);
    sendi.emplace_back(r.devices[i], count);
    curt::copy(sendf[i], xf[i], r.streams[i]);
    curt::copy(sendi[i], xi[i], r.streams[i]);
    curt::memset(recvf[i], 0xFF, r.streams[i]);  // poisoned: NaN until the all-reduce writes it
  }
  {
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i) {
      curt::all_reduce(sendf[i], recvf[i], curt::nccl_op::sum, r.comms[i], r.streams[i]);
      curt::all_reduce(sendi[i], curt::nccl_op::max, r.comms[i], r.streams[i]);  // in place
    }
  }
  std::vector<float> want_sum(count, 0.0f);
  std::vector<std::int32_t> want_max(count, INT32_MIN);
  for (std::size_t i = 0; i < ranks; ++i)
    for (std::size_t k = 0; k < count; ++k) {
      want_sum[k] += xf[i][k];
      want_max[k] = xi[i][k] > want_max[k] ? xi[i][k] : want_max[k];
    }
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    curt_test::require_close_all(download(recvf[i], r.streams[i]), want_sum, 1e-4);
    CHECK(download(sendi[i], r.streams[i]) == want_max);
  }
}

TEST_CASE("broadcast from a random root, reduce to it, all-gather and reduce-scatter") {
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  const int root = curt_test::random_ints(1, 0, static_cast<int>(ranks) - 1)[0];
  const std::size_t count = random_count();
  std::vector<std::vector<double>> x(ranks);
  std::vector<curt::device_buffer<double>> send, bcast, reduced, gathered, scattered;
  for (std::size_t i = 0; i < ranks; ++i) {
    const std::vector<float> values = curt_test::random_floats(count, -1000.0f, 1000.0f);
    x[i].assign(values.begin(), values.end());
    send.emplace_back(r.devices[i], count);
    bcast.emplace_back(r.devices[i], count);
    reduced.emplace_back(r.devices[i], count);
    gathered.emplace_back(r.devices[i], count * ranks);
    scattered.emplace_back(r.devices[i], count);
    curt::copy(send[i], x[i], r.streams[i]);
    for (auto* b : {&bcast[i], &reduced[i], &gathered[i], &scattered[i]})
      curt::memset(*b, 0xFF, r.streams[i]);
  }
  {
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i) {
      curt::broadcast(send[i], bcast[i], root, r.comms[i], r.streams[i]);
      curt::reduce(send[i], reduced[i], curt::nccl_op::sum, root, r.comms[i], r.streams[i]);
      curt::all_gather(send[i], gathered[i], r.comms[i], r.streams[i]);
    }
  }
  {
    // Each rank's gathered buffer (ranks * count) is reduce-scattered: rank i gets block i of
    // the sum, which is ranks * x[i].
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i)
      curt::reduce_scatter(gathered[i], scattered[i], curt::nccl_op::sum, r.comms[i],
                           r.streams[i]);
  }
  std::vector<double> want_reduced(count, 0.0);
  std::vector<double> want_gathered;
  for (std::size_t i = 0; i < ranks; ++i) {
    for (std::size_t k = 0; k < count; ++k) want_reduced[k] += x[i][k];
    want_gathered.insert(want_gathered.end(), x[i].begin(), x[i].end());
  }
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i << ", root " << root);
    CHECK(download(bcast[i], r.streams[i]) == x[std::size_t(root)]);
    if (static_cast<int>(i) == root)
      curt_test::require_close_all(download(reduced[i], r.streams[i]), want_reduced, 1e-9);
    CHECK(download(gathered[i], r.streams[i]) == want_gathered);
    std::vector<double> want_block(x[i]);
    for (double& v : want_block) v *= static_cast<double>(ranks);
    curt_test::require_close_all(download(scattered[i], r.streams[i]), want_block, 1e-9);
  }
}

TEST_CASE("NCCL's refusals come as curt::nccl_error with NCCL's text", "[api-error]") {
  rig r = make_rig();
  const int ranks = static_cast<int>(r.devices.size());
  curt::device_buffer<float> a(r.devices[0], 1024), b(r.devices[0], 1024), c(r.devices[0], 1000);
  const int bad_root = ranks + curt_test::random_ints(1, 0, 5)[0];
  const std::string root_text = "invalid root " + std::to_string(bad_root);
  try {
    curt::broadcast(a, b, bad_root, r.comms[0], r.streams[0]);
    FAIL("a broadcast from root " << bad_root << " of " << ranks << " ranks was not refused");
  } catch (const curt::nccl_error& error) {
    INFO("what(): " << error.what());
    CHECK(error.result() == ncclInvalidArgument);
    CHECK(error.code().category() == curt::nccl_category());
    CHECK_THAT(error.what(), ContainsSubstring("ncclBroadcast"));
    CHECK_THAT(error.what(), ContainsSubstring("ncclInvalidArgument"));
    CHECK_THAT(error.what(), ContainsSubstring(ncclGetErrorString(ncclInvalidArgument)));
    CHECK_THAT(error.what(), ContainsSubstring(root_text));  // ncclGetLastError's text
  }
  // curt's own checks, before NCCL is called.
  curt_test::require_cuda_error(
      [&] { curt::all_reduce(a, c, curt::nccl_op::sum, r.comms[0], r.streams[0]); },
      cudaErrorInvalidValue, {"curt::all_reduce", "1024", "1000", "same size"});
  curt_test::require_cuda_error([&] { curt::all_gather(a, c, r.comms[0], r.streams[0]); },
                                cudaErrorInvalidValue, {"curt::all_gather", "each of the"});
  if (r.devices.size() >= 2) {  // rank 0's communicator (device 0) with a stream of device 1
    curt_test::require_cuda_error(
        [&] { curt::all_reduce(a, b, curt::nccl_op::sum, r.comms[0], r.streams[1]); },
        cudaErrorInvalidValue,
        {"curt::all_reduce", "the stream is on device 1", "on device 0", "nothing was enqueued"});
  }
  curt::nccl_communicator moved = std::move(r.comms[0]);
  curt_test::require_cuda_error([&] { (void)r.comms[0].rank(); }, cudaErrorInvalidResourceHandle,
                                {"curt::nccl_communicator::rank()", "moved-from"});
  curt::nccl_communicator empty(curt::no_handle);
  curt_test::require_cuda_error(
      [&] { curt::all_reduce(a, b, curt::nccl_op::sum, empty, r.streams[0]); },
      cudaErrorInvalidResourceHandle, {"curt::nccl_communicator::get()", "empty"});
  r.comms[0] = std::move(moved);
  CHECK(r.comms[0].rank() == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("NCCL calls leave a thread with no context as they found it") {
  // A fresh thread has no context: NCCL's own device switching would otherwise leave the
  // runtime's current device's (device 0's) primary context current behind.
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  const std::size_t count = 4096;
  std::vector<curt::device_buffer<float>> data;
  std::vector<std::vector<float>> x(ranks);
  for (std::size_t i = 0; i < ranks; ++i) {
    x[i] = curt_test::random_floats(count, -1.0f, 1.0f);
    data.emplace_back(r.devices[i], count);
    curt::copy(data[i], x[i], r.streams[i]);
    r.streams[i].synchronize();
  }
  CUcontext after_group = reinterpret_cast<CUcontext>(1);
  CUcontext after_single = reinterpret_cast<CUcontext>(1);
  CUcontext after_create = reinterpret_cast<CUcontext>(1);
  CUcontext after_destroy = reinterpret_cast<CUcontext>(1);
  // The runtime device too (NCCL sets devices with cudaSetDevice, which sets the thread's runtime
  // device): a fresh thread's is device 0, whose primary context the rig made active, so curt can
  // put it back without making a context.
  int device_before = -1, device_after_group = -1, device_after_single = -1;
  int device_after_create = -1, device_after_destroy = -1;
  curt_test::on_fresh_thread([&] {
    device_before = runtime_device();
    {
      curt::nccl_group group;
      for (std::size_t i = 0; i < ranks; ++i)
        curt::broadcast(data[i], 0, r.comms[i], r.streams[i]);
    }
    after_group = curt_test::current_context();
    device_after_group = runtime_device();
    if (ranks == 1) {  // a collective alone (with more ranks, one thread must group them)
      curt::all_reduce(data[0], curt::nccl_op::sum, r.comms[0], r.streams[0]);
      after_single = curt_test::current_context();
      device_after_single = runtime_device();
    } else {
      after_single = nullptr;
      device_after_single = device_before;
    }
    {
      // Communicators made and destroyed on this thread (NCCL 2.28's ncclCommDestroy leaves the
      // device of the last one it frees current).
      std::vector<curt::nccl_communicator> more = curt::nccl_communicator::create_all(r.devices);
      after_create = curt_test::current_context();
      device_after_create = runtime_device();
    }
    after_destroy = curt_test::current_context();
    device_after_destroy = runtime_device();
    for (std::size_t i = 0; i < ranks; ++i) r.streams[i].synchronize();  // not NCCL: last
  });
  CHECK(after_group == nullptr);
  CHECK(after_single == nullptr);
  CHECK(after_create == nullptr);
  CHECK(after_destroy == nullptr);
  CHECK(device_before == 0);
  CHECK(device_after_group == device_before);
  CHECK(device_after_single == device_before);
  CHECK(device_after_create == device_before);
  CHECK(device_after_destroy == device_before);
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(data[i], r.streams[i]) == x[0]);
  }
}

TEST_CASE("a group that an exception leaves, that holds a refused collective or that is cancelled "
          "launches nothing") {
  // With two ranks or more, rank 0's all-reduce launched without the others' would wait for them
  // forever (and the download below with it); with one rank, NCCL runs a collective as soon as it
  // is issued, so there is nothing to cancel, and the target holds the sentinel or the sum.
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  const std::size_t count = random_count();
  const std::vector<float> sentinel(count, -12345.0f);
  std::vector<std::vector<float>> x(ranks);
  std::vector<curt::device_buffer<float>> send, target;
  for (std::size_t i = 0; i < ranks; ++i) {
    x[i] = random_small_integers(count);
    send.emplace_back(r.devices[i], count);
    target.emplace_back(r.devices[i], count);
    curt::copy(send[i], x[i], r.streams[i]);
    curt::copy(target[i], sentinel, r.streams[i]);
  }
  curt::device_buffer<float> short_by_one(r.devices[0], count - 1);
  std::vector<float> want(count, 0.0f);
  for (std::size_t i = 0; i < ranks; ++i)
    for (std::size_t k = 0; k < count; ++k) want[k] += x[i][k];
  auto nothing_ran = [&](const char* what) {
    for (std::size_t i = 0; i < ranks; ++i) {
      INFO(what << ", rank " << i << " of " << ranks);
      const std::vector<float> got = download(target[i], r.streams[i]);
      if (ranks >= 2) {
        CHECK(got == sentinel);
      } else {
        CHECK((got == sentinel || got == want));
      }
    }
  };

  // 1. An exception leaves the scope after rank 0's collective was issued, before the others'.
  bool thrown = false;
  try {
    curt::nccl_group group;
    curt::all_reduce(send[0], target[0], curt::nccl_op::sum, r.comms[0], r.streams[0]);
    throw std::runtime_error("the program gives up inside the group");
  } catch (const std::runtime_error&) {
    thrown = true;
  }
  CHECK(thrown);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);  // the group did end: this thread is in none
  nothing_ran("an exception left the group");

  // 2. Every rank's collective issued, then one that curt refuses, its exception caught inside:
  // end() throws NCCL's cancellation.
  {
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i)
      curt::all_reduce(send[i], target[i], curt::nccl_op::sum, r.comms[i], r.streams[i]);
    curt_test::require_cuda_error(
        [&] {
          curt::all_reduce(send[0], short_by_one, curt::nccl_op::sum, r.comms[0], r.streams[0]);
        },
        cudaErrorInvalidValue, {"curt::all_reduce", "same size"});
    curt_test::require_group_end_refused(group);
  }
  nothing_ran("a collective of the group was refused");

  // 3. cancel(), after every rank's collective was issued.
  {
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i)
      curt::all_reduce(send[i], target[i], curt::nccl_op::sum, r.comms[i], r.streams[i]);
    group.cancel();
    group.cancel();  // once is enough; again does nothing
    group.end();     // nor does ending a cancelled group
  }
  nothing_ran("the group was cancelled");
  CHECK(ncclGroupEnd() == ncclInvalidUsage);

  // The communicators stay usable, and their ranks still pair up.
  {
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i)
      curt::all_reduce(send[i], target[i], curt::nccl_op::sum, r.comms[i], r.streams[i]);
  }
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(target[i], r.streams[i]) == want);
    CHECK(r.comms[i].async_error() == ncclSuccess);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a group's end puts a user's context back at once, and abort() inside a group is "
          "refused") {
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  rank_inputs in = upload_small_integers(r, 4096);
  std::vector<curt::device_buffer<float>>& data = in.buffers;
  for (curt::stream& s : r.streams) s.synchronize();
  CUcontext mine = nullptr, after_end = nullptr, after_scope = nullptr;
  curt_test::on_fresh_thread([&] {
    curt_test::user_context user(0);  // current: NCCL's cudaSetDevice would replace it
    mine = user.get();
    {
      curt::nccl_group group;
      for (std::size_t i = 0; i < ranks; ++i)
        curt::all_reduce(data[i], curt::nccl_op::sum, r.comms[i], r.streams[i]);
      group.end();
      after_end = curt_test::current_context();  // still inside the group's scope
    }
    after_scope = curt_test::current_context();
  });
  CHECK(mine != nullptr);
  CHECK(after_end == mine);
  CHECK(after_scope == mine);
  const std::vector<float> sum = in.sum();
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(data[i], r.streams[i]) == sum);
  }

  // NCCL defers an abort inside a group to the group's end (and a cancelled group drops it).
  {
    curt::nccl_group group;
    curt_test::require_cuda_error([&] { r.comms[0].abort(); }, cudaErrorNotPermitted,
                                  {"curt::nccl_communicator::abort()", "inside an nccl_group",
                                   "Nothing was aborted"});
    for (std::size_t i = 0; i < ranks; ++i)  // the communicator still works, in this group
      curt::all_reduce(data[i], curt::nccl_op::max, r.comms[i], r.streams[i]);
  }
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(data[i], r.streams[i]) == sum);  // the max of equal sums
  }
  for (std::size_t i = 0; i < ranks; ++i) r.comms[i].abort();  // outside a group: allowed
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("abort() frees communicators at once and leaves empty owners") {
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  rank_inputs in = upload_small_integers(r, 4096);
  std::vector<curt::device_buffer<float>>& data = in.buffers;
  {
    curt::nccl_group group;  // some work first, so that there is something to tear down
    for (std::size_t i = 0; i < ranks; ++i)
      curt::all_reduce(data[i], curt::nccl_op::sum, r.comms[i], r.streams[i]);
  }
  for (std::size_t i = 0; i < ranks; ++i) r.streams[i].synchronize();
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    r.comms[i].abort();
    curt_test::require_cuda_error([&] { (void)r.comms[i].rank(); },
                                  cudaErrorInvalidResourceHandle,
                                  {"curt::nccl_communicator::rank()", "empty"});
    curt_test::require_cuda_error([&] { r.comms[i].abort(); }, cudaErrorInvalidResourceHandle,
                                  {"curt::nccl_communicator::abort()", "empty"});
  }
  // The devices serve new communicators.
  rig again = make_rig();
  {
    curt::nccl_group group;
    for (std::size_t i = 0; i < ranks; ++i)
      curt::all_reduce(data[i], curt::nccl_op::max, again.comms[i], again.streams[i]);
  }
  const std::vector<float> want = in.sum();  // every rank holds the sum: their max is that sum
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(data[i], again.streams[i]) == want);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

// A default stream is the current context's; NCCL launches a group in the device's primary
// context. With another context of the device current (a user's; a green context's alike) the
// collective would not follow the work the caller put on that context's default stream: refused.
TEST_CASE("a collective on a default stream runs in its device's primary context, and is refused "
          "while another context of that device is current") {
  rig r = make_rig();
  const std::size_t ranks = r.devices.size();
  rank_inputs in = upload_small_integers(r, 4096 + static_cast<std::size_t>(random_count() % 4096));
  std::vector<curt::device_buffer<float>>& data = in.buffers;
  for (curt::stream& s : r.streams) s.synchronize();
  const std::vector<float> before = download(data[0], r.streams[0]);
  curt_test::on_fresh_thread([&] {
    curt_test::user_context user(0);
    curt::nccl_group group;
    curt_test::require_cuda_error(
        [&] {
          curt::all_reduce(data[0], curt::nccl_op::sum, r.comms[0],
                           curt::stream_ref::legacy_default());
        },
        cudaErrorNotSupported,
        {"curt::all_reduce", "a default stream", "not its primary context", "named stream",
         "nothing was enqueued"});
  });  // the group, left with a refused collective, launched nothing
  CHECK(download(data[0], r.streams[0]) == before);

  // With the primary context current (the runtime's device), default streams serve every rank.
  curt_test::on_fresh_thread([&] {
    CURT_CHECK(cudaSetDevice(r.devices[0].ordinal()));
    CURT_CHECK(cudaFree(nullptr));
    {
      curt::nccl_group group;
      for (std::size_t i = 0; i < ranks; ++i)
        curt::all_reduce(data[i], curt::nccl_op::sum, r.comms[i],
                         curt::stream_ref::legacy_default());
      group.end();
    }
    for (curt::device d : r.devices) {
      curt::device_guard guard(d);
      CURT_CHECK(cudaDeviceSynchronize());
    }
  });
  const std::vector<float> sum = in.sum();
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(data[i], r.streams[i]) == sum);
  }
}
