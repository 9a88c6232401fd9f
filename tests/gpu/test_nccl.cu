// NCCL over curt (include/curt/nccl.hpp), with every local GPU in one process (ncclCommInitAll):
// all-reduce against a CPU sum, broadcast from a random root, reduce, all-gather and
// reduce-scatter, and the errors (NCCL's refusal with its own text, curt's size checks, owners
// that hold nothing). Works with one GPU (a communicator of one rank) and with more.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/memory.hpp>
#include <curt/nccl.hpp>
#include <curt/stream.hpp>

#include <cstdint>
#include <cstdio>
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

template <class T>
std::vector<T> download(const curt::device_buffer<T>& buffer, curt::stream_ref stream) {
  std::vector<T> host(buffer.size());
  curt::copy(host, buffer, stream);
  stream.synchronize();
  return host;
}

std::size_t random_count() {
  return static_cast<std::size_t>(curt_test::random_ints(1, 10000, 300000)[0]);
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
  curt_test::on_fresh_thread([&] {
    {
      curt::nccl_group group;
      for (std::size_t i = 0; i < ranks; ++i)
        curt::broadcast(data[i], 0, r.comms[i], r.streams[i]);
    }
    after_group = curt_test::current_context();
    if (ranks == 1) {
      curt::all_reduce(data[0], curt::nccl_op::sum, r.comms[0], r.streams[0]);
      after_single = curt_test::current_context();
    } else {
      after_single = nullptr;
    }
    for (std::size_t i = 0; i < ranks; ++i) r.streams[i].synchronize();
  });
  CHECK(after_group == nullptr);
  CHECK(after_single == nullptr);
  for (std::size_t i = 0; i < ranks; ++i) {
    INFO("rank " << i);
    CHECK(download(data[i], r.streams[i]) == x[0]);
  }
}
