// batched_copies: many small host <-> device copies as one curt::copy_batch
// (cudaMemcpyBatchAsync) against a loop of curt::copy (one cudaMemcpyAsync each), both checked.
// COPIES pieces of random length (1 to 2 * AVERAGE elements) are scattered from pinned host memory
// into a device buffer in a random order (piece k lands in slot perm[k]), then gathered back into
// a second pinned buffer in the original order: 2 * COPIES copies per round trip, either as
// 2 * COPIES curt::copy calls or as two batches of COPIES (built once, submitted every round trip).
// The device buffer and the host output are poisoned before every checked run, and every element
// of the output must equal the input (in place and order). Printed per variant: the GPU time of a
// round trip (median, curt::stream_timer) and the host time to enqueue it: a batch is one call
// into the driver instead of one per copy, which is what saves time for many small copies.
// Fresh random input and sizes each run; the seed is printed (CURT_EXAMPLE_SEED repeats a run).
// Exit code 0 when all matched, 1 on a mismatch or CUDA failure, 2 on bad arguments, 77 without
// a device. Usage: batched_copies [COPIES [AVERAGE]]   (defaults 2048 copies of 256 floats)
#include "example.hpp"

#include <curt/batch_copy.hpp>
#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/memory.hpp>
#include <curt/span.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr unsigned kPoisonBytes = 0xFF;  // every float NaN

struct piece {
  std::size_t host = 0;    // offset in the host buffers
  std::size_t device = 0;  // offset in the device buffer (a shuffled layout)
  std::size_t count = 0;
};

// `copies` pieces of 1 to 2 * average elements; their device slots in a random order.
std::vector<piece> plan(std::size_t copies, std::size_t average, std::size_t& total) {
  const std::vector<std::size_t> counts =
      curt_example::random_values<std::size_t>(copies, 1, 2 * average);
  std::vector<piece> pieces(copies);
  total = 0;
  for (std::size_t k = 0; k < copies; ++k) {
    pieces[k] = {total, 0, counts[k]};
    total += counts[k];
  }
  std::vector<std::size_t> order(copies);
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::shuffle(order.begin(), order.end(), curt_example::rng());
  std::size_t offset = 0;
  for (std::size_t k : order) {
    pieces[k].device = offset;
    offset += pieces[k].count;
  }
  return pieces;
}

struct buffers {
  buffers(curt::device d, std::size_t total)
      : host_in(d, total), host_out(d, total), scattered(d, total) {
    const std::vector<float> values = curt_example::random_values<float>(total, -1.0f, 1.0f);
    std::copy(values.begin(), values.end(), host_in.data());
  }
  curt::pinned_buffer<float> host_in, host_out;
  curt::device_buffer<float> scattered;
};

// The first element of the output that is not the input's, described; empty when all match.
std::string mismatch(const buffers& b) {
  for (std::size_t i = 0; i < b.host_in.size(); ++i)
    if (std::memcmp(&b.host_out.data()[i], &b.host_in.data()[i], sizeof(float)) != 0)
      return "element " + std::to_string(i) + " is " + std::to_string(b.host_out.data()[i]) +
             ", expected " + std::to_string(b.host_in.data()[i]);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  return curt_example::run(
      "batched_copies",
      "batched_copies [COPIES [AVERAGE]]   (COPIES 1..1000000, default 2048; AVERAGE elements per "
      "copy 1..2^20, default 256; COPIES x AVERAGE at most 2^28)",
      [&] {
        const std::size_t copies = curt_example::size_argument(argc, argv, 1, 2048, 1, 1000000);
        const std::size_t average =
            curt_example::size_argument(argc, argv, 2, 256, 1, std::size_t(1) << 20);
        if (copies * average > (std::size_t(1) << 28))  // up to 2 GiB of floats in each buffer
          throw curt_example::usage_error("COPIES x AVERAGE must be at most 2^28 elements");
        const curt::device device(0);
        curt::stream stream(device);
        std::size_t total = 0;
        const std::vector<piece> pieces = plan(copies, average, total);
        buffers b(device, total);
        std::printf("batched_copies: %zu copies each way, %zu floats in all (%.2f MiB), on %s\n",
                    copies, total, static_cast<double>(total * sizeof(float)) / (1 << 20),
                    device.name().c_str());
        curt_example::table table(
            "batched_copies", curt_example::copy_gb_per_s(device, stream, total * sizeof(float)));

        // The two batches, built once: scatter host -> device, gather device -> host.
        curt::copy_batch scatter(copies), gather(copies);
        for (const piece& p : pieces) {
          scatter.add(curt::span(b.scattered, p.device, p.count),
                      curt::span(std::as_const(b.host_in), p.host, p.count));
          gather.add(curt::span(b.host_out, p.host, p.count),
                     curt::span(std::as_const(b.scattered), p.device, p.count));
        }

        struct variant {
          const char* name;
          void (*round_trip)(curt::stream_ref, buffers&, const std::vector<piece>&,
                             const curt::copy_batch&, const curt::copy_batch&);
        };
        const variant variants[] = {
            {"loop of curt::copy",
             [](curt::stream_ref s, buffers& bb, const std::vector<piece>& ps,
                const curt::copy_batch&, const curt::copy_batch&) {
               for (const piece& p : ps)
                 curt::copy(curt::span(bb.scattered, p.device, p.count),
                            curt::span(std::as_const(bb.host_in), p.host, p.count), s);
               for (const piece& p : ps)
                 curt::copy(curt::span(bb.host_out, p.host, p.count),
                            curt::span(std::as_const(bb.scattered), p.device, p.count), s);
             }},
            {"two copy_batch submits",
             [](curt::stream_ref s, buffers&, const std::vector<piece>&, const curt::copy_batch& in,
                const curt::copy_batch& out) {
               in.submit(s);
               out.submit(s);
             }},
        };
        const double bytes = 2.0 * static_cast<double>(total * sizeof(float));
        const std::string size = std::to_string(copies) + " x ~" + std::to_string(average);
        double first_ms = 0;
        for (const variant& v : variants) {
          // Checked run: the device buffer and the host output poisoned first.
          curt::memset(b.scattered, kPoisonBytes, stream);
          stream.synchronize();
          std::memset(b.host_out.data(), kPoisonBytes, total * sizeof(float));
          v.round_trip(stream, b, pieces, scatter, gather);
          stream.synchronize();
          const std::string bad = mismatch(b);

          // Timed runs: GPU time per round trip, and the host's time to enqueue one.
          std::vector<double> host_us;
          const double ms = curt_example::median_ms(stream, 9, [&](curt::stream_ref s) {
            const auto start = std::chrono::steady_clock::now();
            v.round_trip(s, b, pieces, scatter, gather);
            host_us.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                    .count());
          });
          std::sort(host_us.begin(), host_us.end());
          const double enqueue_us = host_us[host_us.size() / 2];
          if (first_ms == 0) first_ms = ms;
          char detail[160];
          std::snprintf(detail, sizeof detail,
                        "every element; host %.1f us to enqueue; GPU %.2fx the loop's speed",
                        enqueue_us, ms > 0 ? first_ms / ms : 0.0);
          table.row(v.name, size, bad.empty(), ms, bytes, bad.empty() ? detail : bad);
        }
        return table.print();
      });
}
