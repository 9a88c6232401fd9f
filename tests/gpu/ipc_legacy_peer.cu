// ipc_legacy_peer: the consuming process of test_ipc. Started by the test (posix_spawn: fork+exec,
// so nothing of the parent's CUDA state is used here) with the socket's descriptor number as its
// argument. It receives the bytes of a memory handle, of an interprocess event and of a handle
// whose allocation the exporter freed, then the expected values. It opens the memory (twice: CUDA
// counts the openings) and the event, queues on its stream a wait for the event and a copy of the
// memory into poisoned host memory, tells the test the copy is queued (the test then lets its own
// stream run), checks every value, tries the freed allocation's handle, closes what it opened and
// replies. Exit code 0 when both messages were sent.
#include "ipc_channel.hpp"

#include <curt/copy.hpp>
#include <curt/device.hpp>
#include <curt/error.hpp>
#include <curt/event.hpp>
#include <curt/memory.hpp>
#include <curt/memory_ipc.hpp>
#include <curt/stream.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

namespace {

static_assert(sizeof(ipc_test::legacy_request::memory) == curt::ipc_memory_handle::serialized_size);
static_assert(sizeof(ipc_test::legacy_request::event) == curt::ipc_event_handle::serialized_size);

void copy_text(char (&to)[512], const std::string& text) {
  std::snprintf(to, sizeof to, "%s", text.c_str());
}

void serve(int socket, ipc_test::legacy_queued& note, bool& note_sent, ipc_test::legacy_reply& r) {
  ipc_test::legacy_request q;
  if (!ipc_test::receive_message(socket, &q, sizeof q) || q.n <= 0)
    throw std::runtime_error("no request came");
  const std::size_t n = static_cast<std::size_t>(q.n);
  std::vector<int> want(n);
  if (!ipc_test::receive_message(socket, want.data(), n * sizeof(int)))
    throw std::runtime_error("no expected values came");

  curt::device gpu(0);
  curt::stream s(gpu);
  const auto handle = curt::ipc_memory_handle::from_bytes(q.memory, sizeof q.memory);
  // Pinned: a copy into pageable memory may return only once done (CUDA: "might be synchronous"),
  // which would block here until the exporter's gate opens, and it opens after the note.
  curt::pinned_buffer<int> got(gpu, n);
  std::fill(got.begin(), got.end(), 0x5a5a5a5a);  // poison
  {
    curt::event written = curt::event::from_ipc_handle(
        curt::ipc_event_handle::from_bytes(q.event, sizeof q.event), gpu);
    curt::ipc_buffer<int> shared = curt::open_ipc_memory<int>(handle, n, gpu);
    {
      curt::ipc_buffer<int> again = curt::open_ipc_memory<int>(handle, n, gpu);
      r.same_pointer_twice = again.data() == shared.data();
    }  // one opening closed: `shared` still maps the memory
    s.wait(written);
    curt::copy(got, shared, s);
    note.queued = 1;
    note.done_early = s.ready();  // the exporter's stream is held: the copy must still wait
    note_sent = ipc_test::send_message(socket, &note, sizeof note);
    if (!note_sent) throw std::runtime_error("could not send the note");
    s.synchronize();
  }  // the event and the memory closed before the reply: the exporter frees after it
  r.mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    if (r.mismatches++ == 0) {
      r.first_bad = static_cast<int>(i);
      r.got = got[i];
      r.want = want[i];
    }
  }

  try {
    const auto freed = curt::ipc_memory_handle::from_bytes(q.freed, sizeof q.freed);
    curt::ipc_buffer<int> stale = curt::open_ipc_memory<int>(freed, 1, gpu);
    copy_text(r.freed_message, "the freed allocation's handle opened");
  } catch (const curt::cuda_error& error) {
    r.freed_refused = 1;
    r.freed_status = static_cast<int>(error.status());
    copy_text(r.freed_message, error.what());
  }
  r.ok = 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ipc_legacy_peer SOCKET_FD (started by test_ipc)\n");
    return 2;
  }
  const int socket = std::atoi(argv[1]);
  ipc_test::legacy_queued note;
  ipc_test::legacy_reply r;
  bool note_sent = false;
  try {
    serve(socket, note, note_sent, r);
  } catch (const std::exception& error) {
    r.ok = 0;
    copy_text(r.message, error.what());
  }
  // The test reads the note first, then the reply, whatever happened.
  if ((!note_sent && !ipc_test::send_message(socket, &note, sizeof note)) ||
      !ipc_test::send_message(socket, &r, sizeof r)) {
    std::fprintf(stderr, "ipc_legacy_peer: could not send its messages\n");
    return 1;
  }
  return 0;
}
