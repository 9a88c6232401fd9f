// NCCL across processes (include/curt/nccl.hpp): the unique-id path, with one rank per process.
//
// The test case makes an id (curt::nccl_unique_id) and starts two copies of this executable,
// each running only the hidden test case "[.][nccl-rank-child]" as rank r on device r; the id's
// 128 bytes (hex), the rank and a seed travel in the environment. Each child first asks for a rank
// out of range (NCCL refuses it, before contacting anyone, with its own text), then makes its
// communicator and runs, on curt buffers and a curt stream: an all-reduce (sum of floats that are
// small integers, so the sum is exact whatever NCCL's order), a group of a broadcast and an
// all-gather, a broadcast NCCL refuses (bad root), a group an exception leaves and a group with a
// collective curt refuses (neither may launch anything: the buffer their all-reduce would write
// must keep its sentinel, and the ranks must still pair their next collective), and one more
// all-reduce. It checks everything against a CPU reference computed from the same seed, checks
// that no call left a context or another runtime device behind, and exits 0 only when all match.
// The parent requires both children to succeed within 60 s (a hung NCCL init or collective gets
// them killed instead of hanging CTest) and shows their output on failure.
//
// Labelled gpu2: NCCL refuses two ranks of different processes on one GPU; main() exits with the
// skip code where fewer than two devices are visible. Catch2 assertions stay in test case bodies,
// free functions and lambdas (cudafe++ 13.0 hangs on them in member functions with Catch2 v3).
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>
#include "nccl_expect.hpp"

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/memory.hpp>
#include <curt/nccl.hpp>
#include <curt/stream.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>  // environ

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// The child test case's name, passed to the copies of this executable as their test spec.
#define CURT_NCCL_CHILD_TEST "one rank of a communicator of two processes (child)"

namespace {

constexpr const char* child_marker = "NCCL-RANK-CHILD-REACHED-ITS-END";
constexpr int child_timeout_s = 60;
constexpr const char* id_variable = "CURT_NCCL_TEST_ID";
constexpr const char* rank_variable = "CURT_NCCL_TEST_RANK";
constexpr const char* seed_variable = "CURT_NCCL_TEST_SEED";

// ---- the id as text ---------------------------------------------------------------------------

std::string to_hex(const ncclUniqueId& id) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * sizeof id.internal);
  for (char byte : id.internal) {
    const auto b = static_cast<unsigned char>(byte);
    text += digits[b >> 4];
    text += digits[b & 15];
  }
  return text;
}

bool from_hex(const std::string& text, ncclUniqueId& id) {
  if (text.size() != 2 * sizeof id.internal) return false;
  auto nibble = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < sizeof id.internal; ++i) {
    const int high = nibble(text[2 * i]), low = nibble(text[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    id.internal[i] = static_cast<char>(high * 16 + low);
  }
  return true;
}

// ---- child processes --------------------------------------------------------------------------

struct child_run {
  int exit_code = -1;  // 128 + the signal when it was killed
  std::string output;  // its stdout and stderr
};

std::string self_path() {
  std::vector<char> path(4096);
  const ssize_t length = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (length <= 0) throw std::runtime_error(std::string("readlink: ") + std::strerror(errno));
  return std::string(path.data(), static_cast<std::size_t>(length));
}

// Starts this executable with only the child test case, with `extra` ("NAME=value") in its
// environment in place of any variable of that name, its stdout and stderr into a pipe whose
// read end goes to `out`. posix_spawn: fork+exec, so nothing of this process's CUDA or NCCL state
// is used in the child.
pid_t start_child(const std::vector<std::string>& extra, int& out) {
  std::vector<std::string> environment;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text(*entry);
    bool replaced = false;
    for (const std::string& mine : extra)
      replaced = replaced || text.compare(0, mine.find('=') + 1, mine, 0, mine.find('=') + 1) == 0;
    if (!replaced) environment.push_back(text);
  }
  environment.insert(environment.end(), extra.begin(), extra.end());
  std::vector<char*> envp;
  for (std::string& text : environment) envp.push_back(text.data());
  envp.push_back(nullptr);

  int ends[2] = {-1, -1};
  if (pipe2(ends, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  std::string path = self_path();
  std::string test = CURT_NCCL_CHILD_TEST;
  char* argv[] = {path.data(), test.data(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDOUT_FILENO);  // dup2 clears CLOEXEC
  posix_spawn_file_actions_adddup2(&actions, ends[1], STDERR_FILENO);
  std::fflush(nullptr);
  pid_t pid = -1;
  const int status = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(ends[1]);
  if (status != 0) {
    close(ends[0]);
    throw std::runtime_error("posix_spawn(" + path + "): " + std::strerror(status));
  }
  out = ends[0];
  return pid;
}

int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs one child per environment, all at once, and collects their output and exit codes. A child
// still running after `timeout_s` seconds is killed (SIGKILL), and `timed_out` set.
std::vector<child_run> run_children(const std::vector<std::vector<std::string>>& environments,
                                    int timeout_s, bool& timed_out) {
  struct running {
    pid_t pid = -1;
    int out = -1;
    bool reaped = false;
  };
  std::vector<running> kids(environments.size());
  std::vector<child_run> results(environments.size());
  auto kill_all = [&] {
    for (running& kid : kids)
      if (kid.pid > 0 && !kid.reaped) kill(kid.pid, SIGKILL);
  };
  try {
    for (std::size_t i = 0; i < kids.size(); ++i)
      kids[i].pid = start_child(environments[i], kids[i].out);
  } catch (...) {
    kill_all();
    for (running& kid : kids) {
      if (kid.out >= 0) close(kid.out);
      int status = 0;
      if (kid.pid > 0) (void)waitpid(kid.pid, &status, 0);
    }
    throw;
  }
  timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<char> buffer(1 << 16);
  auto read_some = [&](std::size_t i) {  // false at the end of the output
    const ssize_t got = read(kids[i].out, buffer.data(), buffer.size());
    if (got > 0) {
      results[i].output.append(buffer.data(), static_cast<std::size_t>(got));
      return true;
    }
    if (got < 0 && errno == EINTR) return true;
    close(kids[i].out);  // the end (or, in the final non-blocking drain, nothing more for now)
    kids[i].out = -1;
    return false;
  };
  for (;;) {
    bool running_any = false;
    for (std::size_t i = 0; i < kids.size(); ++i) {
      if (kids[i].reaped) continue;
      int status = 0;
      const pid_t got = waitpid(kids[i].pid, &status, WNOHANG);
      if (got == kids[i].pid) {
        kids[i].reaped = true;
        results[i].exit_code = exit_code_of(status);
      } else {
        running_any = true;
      }
    }
    bool open_any = false;
    for (const running& kid : kids) open_any = open_any || kid.out >= 0;
    if (!running_any && !open_any) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int wait_ms = static_cast<int>(left.count() < 100 ? left.count() : 100);
    std::vector<pollfd> fds;
    std::vector<std::size_t> owners;
    for (std::size_t i = 0; i < kids.size(); ++i)
      if (kids[i].out >= 0) {
        fds.push_back(pollfd{kids[i].out, POLLIN, 0});
        owners.push_back(i);
      }
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      continue;
    }
    if (poll(fds.data(), fds.size(), wait_ms) <= 0) continue;
    for (std::size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents != 0) (void)read_some(owners[k]);
  }
  if (timed_out) kill_all();
  for (std::size_t i = 0; i < kids.size(); ++i) {
    // What the child wrote before it ended; non-blocking, in case something it started keeps the
    // pipe open.
    if (kids[i].out >= 0) (void)fcntl(kids[i].out, F_SETFL, O_NONBLOCK);
    while (kids[i].out >= 0 && read_some(i)) {
    }
    if (kids[i].reaped) continue;
    int status = 0;
    pid_t got = -1;
    do {
      got = waitpid(kids[i].pid, &status, 0);
    } while (got < 0 && errno == EINTR);
    kids[i].reaped = true;
    results[i].exit_code = got == kids[i].pid ? exit_code_of(status) : -1;
  }
  return results;
}

// ---- what each rank computes ------------------------------------------------------------------

struct rank_inputs {
  std::vector<float> summands;       // small integers: every sum of two is exact in float
  std::vector<std::int32_t> values;  // broadcast from the root
  std::vector<double> pieces;        // all-gathered
};

// Rank `rank`'s inputs, the same in every process for one seed.
rank_inputs inputs_of(std::uint64_t seed, int rank, std::size_t count) {
  std::seed_seq sequence{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                         static_cast<std::uint32_t>(rank)};
  std::mt19937_64 engine(sequence);
  std::uniform_int_distribution<int> small(-1000, 1000);
  std::uniform_int_distribution<std::int32_t> any(INT32_MIN, INT32_MAX);
  std::uniform_real_distribution<double> real(-1e6, 1e6);
  rank_inputs in;
  in.summands.resize(count);
  in.values.resize(count);
  in.pieces.resize(count);
  for (std::size_t k = 0; k < count; ++k) {
    in.summands[k] = static_cast<float>(small(engine));
    in.values[k] = any(engine);
    in.pieces[k] = real(engine);
  }
  return in;
}

std::size_t count_of(std::uint64_t seed) { return 1000 + static_cast<std::size_t>(seed % 200000); }
int root_of(std::uint64_t seed) { return static_cast<int>((seed >> 40) & 1); }

using curt_test::download;

}  // namespace

TEST_CASE("two processes make one communicator from a unique id and reduce on it", "[nccl]") {
  REQUIRE(curt::device_count() >= 2);
  if (curt_test::under_compute_sanitizer()) {
    // The sanitizer would follow both children into NCCL's initialization, far past the
    // timeout; the collectives themselves run under it in test_nccl.
    WARN("under compute-sanitizer: the rank processes are not run");
    return;
  }
  const ncclUniqueId id = curt::nccl_unique_id();  // rank 0's job; this process is no rank
  const std::string id_text = to_hex(id);
  REQUIRE(id_text.size() == 2 * std::size_t(NCCL_UNIQUE_ID_BYTES));
  ncclUniqueId back{};
  REQUIRE(from_hex(id_text, back));
  REQUIRE(std::memcmp(back.internal, id.internal, sizeof id.internal) == 0);
  const std::uint64_t seed = curt_test::rng()();
  INFO("seed " << seed << ": " << count_of(seed) << " elements, root " << root_of(seed));

  std::vector<std::vector<std::string>> environments;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> extra = {std::string(id_variable) + "=" + id_text,
                                      std::string(rank_variable) + "=" + std::to_string(rank),
                                      std::string(seed_variable) + "=" + std::to_string(seed)};
    if (std::getenv("NCCL_DEBUG") == nullptr) extra.push_back("NCCL_DEBUG=WARN");  // its reasons
    environments.push_back(extra);
  }
  bool timed_out = false;
  const std::vector<child_run> children = run_children(environments, child_timeout_s, timed_out);
  for (std::size_t rank = 0; rank < children.size(); ++rank) {
    INFO("rank " << rank << " exited with " << children[rank].exit_code << "; its output:\n"
                 << children[rank].output);
    CHECK(children[rank].exit_code == 0);
    CHECK(children[rank].output.find(child_marker) != std::string::npos);
  }
  INFO("the children were killed after " << child_timeout_s << " s");
  CHECK_FALSE(timed_out);
}

TEST_CASE(CURT_NCCL_CHILD_TEST, "[.][nccl-rank-child]") {
  const char* id_text = std::getenv(id_variable);
  const char* rank_text = std::getenv(rank_variable);
  const char* seed_text = std::getenv(seed_variable);
  if (id_text == nullptr || rank_text == nullptr || seed_text == nullptr)
    FAIL("run by the test case \"two processes make one communicator ...\" only");
  ncclUniqueId id{};
  REQUIRE(from_hex(id_text, id));
  const int rank = std::atoi(rank_text);
  const std::uint64_t seed = std::strtoull(seed_text, nullptr, 10);
  REQUIRE((rank == 0 || rank == 1));
  REQUIRE(curt::device_count() >= 2);
  const curt::device d(rank);
  const std::size_t count = count_of(seed);
  const int root = root_of(seed);
  std::printf("rank %d on device %d: %zu elements, root %d, NCCL %d\n", rank, rank, count, root,
              curt::nccl_version());

  // This thread has no context (main() only counted devices), and every NCCL call below must
  // leave it so, and leave its runtime device (cudaGetDevice) as it was, though NCCL switches
  // devices with cudaSetDevice. curt puts the runtime device back where that makes no context,
  // i.e. where its primary context is active: made so here (without making it current), on
  // device 0 for rank 1.
  int runtime_device = -1;
  REQUIRE(cudaGetDevice(&runtime_device) == cudaSuccess);
  REQUIRE(cudaInitDevice(runtime_device, 0, 0) == cudaSuccess);
  REQUIRE(curt_test::current_context() == nullptr);
  auto left_as_it_was = [&](const char* after) {
    INFO("after " << after);
    CHECK(curt_test::current_context() == nullptr);
    int now = -1;
    CHECK(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == runtime_device);
    CHECK(cudaGetLastError() == cudaSuccess);
  };
  // After curt calls that are not NCCL's (streams, buffers, copies: not this test's subject), the
  // runtime device they leave is the one the next NCCL calls must keep; a change is only noted.
  auto rebase = [&](const char* after) {
    CHECK(curt_test::current_context() == nullptr);
    int now = -1;
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    if (now != runtime_device)
      WARN("note: " << after << " changed the runtime device from " << runtime_device << " to "
                    << now);
    runtime_device = now;
  };

  // A rank out of range: NCCL refuses it before contacting anyone, and curt says so with NCCL's
  // words and the call.
  const int bad_rank = 2 + rank;
  try {
    curt::nccl_communicator refused(d, 2, id, bad_rank);
    FAIL("rank " << bad_rank << " of 2 was not refused");
  } catch (const curt::nccl_error& error) {
    INFO("what(): " << error.what());
    CHECK(error.result() == ncclInvalidArgument);
    CHECK(error.code().category() == curt::nccl_category());
    CHECK_THAT(error.what(), ContainsSubstring("ncclCommInitRank(ranks 2, rank " +
                                               std::to_string(bad_rank) + ", device " +
                                               std::to_string(rank) + ")"));
    CHECK_THAT(error.what(), ContainsSubstring("ncclInvalidArgument"));
    CHECK_THAT(error.what(), ContainsSubstring(ncclGetErrorString(ncclInvalidArgument)));
    CHECK_THAT(error.what(), ContainsSubstring("Invalid rank requested : " +
                                               std::to_string(bad_rank) + "/2"));
  }
  left_as_it_was("a refused communicator");

  curt::nccl_communicator comm(d, 2, id, rank);  // waits for the other process
  left_as_it_was("making the communicator");
  CHECK(comm.rank() == rank);
  CHECK(comm.size() == 2);
  CHECK(comm.device() == d);
  CHECK(comm.async_error() == ncclSuccess);

  const rank_inputs mine = inputs_of(seed, rank, count);
  const rank_inputs in0 = inputs_of(seed, 0, count), in1 = inputs_of(seed, 1, count);
  std::vector<float> want_sum(count);
  for (std::size_t k = 0; k < count; ++k) want_sum[k] = in0.summands[k] + in1.summands[k];
  const std::vector<std::int32_t>& want_values = (root == 0 ? in0 : in1).values;
  std::vector<double> want_gathered(in0.pieces);
  want_gathered.insert(want_gathered.end(), in1.pieces.begin(), in1.pieces.end());
  const std::vector<float> sentinel(count, -12345.0f);

  curt::stream s(d);
  curt::device_buffer<float> summands(d, count), sum(d, count), untouched(d, count),
      again(d, count), short_by_one(d, count - 1);
  curt::device_buffer<std::int32_t> values(d, count), received(d, count);
  curt::device_buffer<double> pieces(d, count), gathered(d, 2 * count);
  curt::copy(summands, mine.summands, s);
  curt::copy(again, mine.summands, s);
  curt::copy(values, mine.values, s);
  curt::copy(pieces, mine.pieces, s);
  curt::copy(untouched, sentinel, s);
  curt::memset(sum, 0xFF, s);  // poisoned (NaN, -1) until the collectives write them
  curt::memset(received, 0xFF, s);
  curt::memset(gathered, 0xFF, s);
  rebase("making a stream and buffers");

  curt::all_reduce(summands, sum, curt::nccl_op::sum, comm, s);
  {
    curt::nccl_group group;
    curt::broadcast(values, received, root, comm, s);
    curt::all_gather(pieces, gathered, comm, s);
  }
  left_as_it_was("an all-reduce and a group");

  // NCCL refuses a root out of range (on both ranks alike); the communicator stays usable.
  try {
    curt::broadcast(values, received, 2 + rank, comm, s);
    FAIL("a broadcast from root " << 2 + rank << " of 2 ranks was not refused");
  } catch (const curt::nccl_error& error) {
    INFO("what(): " << error.what());
    CHECK(error.result() == ncclInvalidArgument);
    CHECK_THAT(error.what(), ContainsSubstring("ncclBroadcast"));
    CHECK_THAT(error.what(), ContainsSubstring("invalid root " + std::to_string(2 + rank)));
  }

  // An exception leaving a group: its all-reduce must not be launched. (Had it been, it would
  // have written `untouched` on both ranks; had one rank's gone and not the other's, the next
  // collectives would have paired wrongly or waited forever.)
  bool left_by_exception = false;
  try {
    curt::nccl_group group;
    curt::all_reduce(summands, untouched, curt::nccl_op::sum, comm, s);
    throw std::runtime_error("the program gives up inside the group");
  } catch (const std::runtime_error&) {
    left_by_exception = true;
  }
  CHECK(left_by_exception);
  CHECK(ncclGroupEnd() == ncclInvalidUsage);  // the group did end: this thread is in none

  // A collective curt refuses inside a group, its exception caught there: the group's end
  // launches nothing, and end() throws NCCL's cancellation.
  {
    curt::nccl_group group;
    curt::all_reduce(summands, untouched, curt::nccl_op::sum, comm, s);
    curt_test::require_cuda_error(
        [&] { curt::all_reduce(summands, short_by_one, curt::nccl_op::sum, comm, s); },
        cudaErrorInvalidValue, {"curt::all_reduce", "same size"});
    curt_test::require_group_end_refused(group);
  }
  left_as_it_was("refusals and cancelled groups");

  curt::all_reduce(again, curt::nccl_op::sum, comm, s);  // in place; pairs with the other rank's
  left_as_it_was("an all-reduce in place");
  s.synchronize();
  CHECK(download(sum, s) == want_sum);
  CHECK(download(received, s) == want_values);
  CHECK(download(gathered, s) == want_gathered);
  CHECK(download(untouched, s) == sentinel);
  CHECK(download(again, s) == want_sum);
  CHECK(comm.async_error() == ncclSuccess);
  rebase("synchronizing and downloading");

  {
    curt::nccl_communicator destroyed = std::move(comm);  // ncclCommDestroy, here
  }
  left_as_it_was("destroying the communicator");
  std::printf("%s\n", child_marker);
  std::fflush(stdout);
}
