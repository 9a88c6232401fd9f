// curt/batch_copy.hpp without a GPU: what the builders hand to CUDA (the attribute and location
// runs, the byte counts of typed and 3D copies, the copies left out for being empty) and what they
// refuse before any CUDA call (count mismatches, null pointers, invalid access orders, extents
// larger than their volumes, the legacy default stream, empty stream owners). No CUDA call is
// made here: the builders call CUDA only in submit(), and the refusals of submit() tested here
// come before it.
#include <catch.hpp>
#include <expect.hpp>

#include <curt/batch_copy.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using curt::copy_attributes;
using curt::memory_location;
using curt::source_access;
using curt_test::require_cuda_error;

CUdeviceptr address(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

// The CUDA device location of ordinal 0, made without asking for a device (there is none here).
memory_location device0() {
  return memory_location::from_native(cudaMemLocation{cudaMemLocationTypeDevice, 0});
}

// The attribute runs a batch must produce, computed the plain way: a new run wherever a copy's
// attributes differ from the previous copy's.
struct expected_runs {
  std::vector<cudaMemcpyAttributes> attributes;
  std::vector<std::size_t> starts;
};
expected_runs runs_of(const std::vector<copy_attributes>& per_copy) {
  expected_runs runs;
  for (std::size_t i = 0; i < per_copy.size(); ++i) {
    if (i == 0 || per_copy[i] != per_copy[i - 1]) {
      runs.attributes.push_back(per_copy[i].native());
      runs.starts.push_back(i);
    }
  }
  return runs;
}

bool same_attributes(const cudaMemcpyAttributes& a, const cudaMemcpyAttributes& b) {
  return a.srcAccessOrder == b.srcAccessOrder && a.flags == b.flags &&
         a.srcLocHint.type == b.srcLocHint.type && a.srcLocHint.id == b.srcLocHint.id &&
         a.dstLocHint.type == b.dstLocHint.type && a.dstLocHint.id == b.dstLocHint.id;
}

}  // namespace

TEST_CASE("copy_attributes: order by default stream, hints none, flag off; setters and equality",
          "[batch]") {
  copy_attributes plain;
  CHECK(plain.order() == source_access::stream);
  CHECK(plain.native().srcAccessOrder == cudaMemcpySrcAccessOrderStream);
  CHECK(plain.source_hint().is_none());
  CHECK(plain.destination_hint().is_none());
  CHECK_FALSE(plain.prefers_overlap_with_compute());
  CHECK(plain.native().flags == 0u);

  copy_attributes any = source_access::any;  // implicit from an order
  CHECK(any.native().srcAccessOrder == cudaMemcpySrcAccessOrderAny);
  CHECK(copy_attributes(source_access::during_api_call).native().srcAccessOrder ==
        cudaMemcpySrcAccessOrderDuringApiCall);

  copy_attributes hinted(source_access::any);
  hinted.source_hint(device0()).destination_hint(memory_location::host_numa(1))
      .prefer_overlap_with_compute();
  CHECK(hinted.native().srcLocHint.type == cudaMemLocationTypeDevice);
  CHECK(hinted.native().srcLocHint.id == 0);
  CHECK(hinted.native().dstLocHint.type == cudaMemLocationTypeHostNuma);
  CHECK(hinted.native().dstLocHint.id == 1);
  CHECK(hinted.native().flags == unsigned(cudaMemcpyFlagPreferOverlapWithCompute));
  CHECK(hinted != any);
  copy_attributes same_again(source_access::any);
  same_again.source_hint(device0()).destination_hint(memory_location::host_numa(1))
      .prefer_overlap_with_compute();
  CHECK(hinted == same_again);
  same_again.prefer_overlap_with_compute(false);
  CHECK(same_again.native().flags == 0u);
  CHECK(hinted != same_again);
  CHECK(curt::to_string(source_access::during_api_call) == "during_api_call");
}

TEST_CASE("copy_batch: random attributes become consecutive runs, copies keep their order",
          "[batch]") {
  auto& rng = curt_test::rng();
  // A few distinct attribute sets, picked with long and short runs.
  std::vector<copy_attributes> kinds = {
      copy_attributes(source_access::stream), copy_attributes(source_access::any),
      copy_attributes(source_access::during_api_call),
      copy_attributes(source_access::stream).destination_hint(device0()),
      copy_attributes(source_access::stream).source_hint(memory_location::host()),
      copy_attributes(source_access::any).prefer_overlap_with_compute()};
  std::uniform_int_distribution<std::size_t> pick(0, kinds.size() - 1);
  std::uniform_int_distribution<std::size_t> run_length(1, 6);
  std::uniform_int_distribution<std::size_t> bytes(1, 1 << 20);

  curt::copy_batch batch;
  for (int round = 0; round < 3; ++round) {  // the same batch reused after clear()
    batch.clear();
    std::size_t count = std::uniform_int_distribution<std::size_t>(1, 300)(rng);
    std::vector<copy_attributes> per_copy;
    while (per_copy.size() < count) {
      copy_attributes a = kinds[pick(rng)];
      for (std::size_t k = run_length(rng); k > 0 && per_copy.size() < count; --k) per_copy.push_back(a);
    }
    std::vector<unsigned char> source(16), destination(16);  // addresses only: nothing is copied
    std::vector<std::size_t> sizes(count);
    for (std::size_t i = 0; i < count; ++i) {
      sizes[i] = bytes(rng);
      batch.add_bytes(destination.data() + i % 16, source.data() + (i * 7) % 16, sizes[i], per_copy[i]);
    }
    REQUIRE(batch.size() == count);
    auto native = batch.native();
    REQUIRE(native.count == count);
    for (std::size_t i = 0; i < count; ++i) {
      CHECK(native.destinations[i] == address(destination.data() + i % 16));
      CHECK(native.sources[i] == address(source.data() + (i * 7) % 16));
      CHECK(native.sizes[i] == sizes[i]);
    }
    expected_runs expected = runs_of(per_copy);
    REQUIRE(native.attribute_count == expected.attributes.size());
    CHECK(native.attribute_count <= native.count);  // CUDA: numAttrs <= count
    for (std::size_t k = 0; k < expected.attributes.size(); ++k) {
      INFO("run " << k);
      CHECK(native.attribute_indices[k] == expected.starts[k]);
      CHECK(same_attributes(native.attributes[k], expected.attributes[k]));
      if (k > 0) CHECK(native.attribute_indices[k] > native.attribute_indices[k - 1]);
    }
    CHECK(native.attribute_indices[0] == 0);  // CUDA: the first run starts at 0
  }
}

TEST_CASE("copy_batch: typed copies count bytes; empty copies are left out but keep their number",
          "[batch]") {
  std::vector<double> d(5), s(5);
  std::array<double, 3> a{};
  const std::vector<double> c(3, 1.0);
  std::vector<int> empty_destination, empty_source;  // data() may be null: fine when empty
  curt::copy_batch batch;
  batch.add(d, s)                                       // #0: 40 bytes, stream
      .add(empty_destination, empty_source, source_access::any)  // #1: left out
      .add(a, c, source_access::any)                    // #2: const source, 24 bytes
      .add(d.data() + 1, s.data() + 2, 3)               // #3: pointers and a count, stream
      .add_bytes(nullptr, nullptr, 0);                  // #4: left out
  CHECK(batch.size() == 5);
  auto native = batch.native();
  REQUIRE(native.count == 3);
  CHECK(native.sizes[0] == 5 * sizeof(double));
  CHECK(native.sizes[1] == 3 * sizeof(double));
  CHECK(native.destinations[1] == address(a.data()));
  CHECK(native.sources[1] == address(c.data()));
  CHECK(native.sizes[2] == 3 * sizeof(double));
  CHECK(native.destinations[2] == address(d.data() + 1));
  CHECK(native.sources[2] == address(s.data() + 2));
  // The left-out copy #1 (any) made no run: stream, any, stream.
  REQUIRE(native.attribute_count == 3);
  CHECK(native.attribute_indices[0] == 0);
  CHECK(native.attribute_indices[1] == 1);
  CHECK(native.attribute_indices[2] == 2);
  CHECK(native.attributes[1].srcAccessOrder == cudaMemcpySrcAccessOrderAny);

  curt::copy_batch only_empty;
  only_empty.add(empty_destination, empty_source);
  CHECK(only_empty.size() == 1);
  CHECK(only_empty.native().count == 0);
  CHECK(only_empty.native().attribute_count == 0);
}

TEST_CASE("copy_batch: a count mismatch, a null pointer or an invalid order names the copy and "
          "leaves the batch as it was",
          "[batch]") {
  std::vector<float> d(10), s(10), shorter(9);
  curt::copy_batch batch;
  batch.add(d, s).add(d, s).add(d.data(), s.data(), 0);  // #0, #1, #2 (empty)
  require_cuda_error([&] { batch.add(d, shorter); }, cudaErrorInvalidValue,
                     {"curt::copy_batch::add(copy #3)", "destination holds 10 elements",
                      "the source 9", "of 4 bytes each"});
  require_cuda_error([&] { batch.add(d.data(), static_cast<const float*>(nullptr), 4); },
                     cudaErrorInvalidValue, {"copy #3", "the source of a copy of 16 bytes is null"});
  require_cuda_error([&] { batch.add_bytes(nullptr, s.data(), 8, source_access::any); },
                     cudaErrorInvalidValue, {"copy #3", "the destination of a copy of 8 bytes is null"});
  require_cuda_error(
      [&] { batch.add(d, s, copy_attributes(static_cast<source_access>(0))); },
      cudaErrorInvalidValue, {"copy #3", "source access order invalid (0)", "requires one"});
  require_cuda_error(
      [&] { batch.add(d.data(), s.data(), SIZE_MAX / 2); }, cudaErrorInvalidValue,
      {"copy #3", "overflow"});
  CHECK(batch.size() == 3);
  auto native = batch.native();
  CHECK(native.count == 2);
  CHECK(native.attribute_count == 1);
  // A later copy still gets number 3.
  batch.add_bytes(nullptr, s.data(), 0);
  require_cuda_error([&] { batch.add(d, shorter); }, cudaErrorInvalidValue, {"copy #4"});
}

TEST_CASE("copy_batch: clear() keeps the storage; copies and moves keep the copies", "[batch]") {
  std::vector<char> d(64), s(64);
  curt::copy_batch batch(100);
  for (int i = 0; i < 100; ++i) batch.add_bytes(d.data() + i % 64, s.data(), 1);
  const CUdeviceptr* destinations = batch.native().destinations;
  const cudaMemcpyAttributes* attributes = batch.native().attributes;
  curt::copy_batch copy = batch;
  batch.clear();
  CHECK(batch.empty());
  CHECK(batch.native().count == 0);
  for (int i = 0; i < 100; ++i) batch.add_bytes(d.data(), s.data() + i % 64, 2, source_access::any);
  CHECK(batch.native().destinations == destinations);  // no reallocation on refill
  CHECK(batch.native().attributes == attributes);
  CHECK(batch.native().attribute_count == 1);
  CHECK(batch.native().attributes[0].srcAccessOrder == cudaMemcpySrcAccessOrderAny);
  REQUIRE(copy.native().count == 100);
  CHECK(copy.native().sizes[99] == 1);
  CHECK(copy.native().attributes[0].srcAccessOrder == cudaMemcpySrcAccessOrderStream);
  curt::copy_batch moved = std::move(copy);
  CHECK(moved.native().count == 100);
  CHECK(moved.native().destinations[5] == address(d.data() + 5));
}

TEST_CASE("batches refuse the legacy default stream and empty stream owners before calling CUDA",
          "[batch]") {
  std::vector<int> d(4), s(4);
  curt::copy_batch batch;
  batch.add(d, s);
  require_cuda_error([&] { batch.submit(curt::stream_ref::legacy_default()); }, cudaErrorInvalidValue,
                     {"curt::copy_batch::submit(legacy default stream)",
                      "refuses batched operations on the legacy default stream",
                      "per_thread_default()"});
  curt::stream empty(curt::no_handle);
  require_cuda_error([&] { batch.submit(empty); }, cudaErrorInvalidResourceHandle, {"empty"});

  curt::copy_3d_batch volumes;
  volumes.add(curt::strided_volume<int>(d.data(), 2, 2), curt::strided_volume<int>(s.data(), 2, 2),
              {2, 2, 1});
  require_cuda_error([&] { volumes.submit(curt::stream_ref::legacy_default()); },
                     cudaErrorInvalidValue, {"curt::copy_3d_batch::submit(legacy default stream)"});

  std::vector<float> managed_stand_in(8);
  curt::prefetch_batch prefetches;
  prefetches.add(managed_stand_in, memory_location::host());
  require_cuda_error([&] { prefetches.submit(curt::stream_ref::legacy_default()); },
                     cudaErrorInvalidValue, {"curt::prefetch_batch::submit(legacy default stream)"});
  curt::discard_batch discards;
  discards.add(managed_stand_in);
  require_cuda_error([&] { discards.submit(curt::stream_ref::legacy_default()); },
                     cudaErrorInvalidValue, {"curt::discard_batch::submit(legacy default stream)"});
  curt::discard_and_prefetch_batch both;
  both.add(managed_stand_in, device0());
  require_cuda_error([&] { both.submit(curt::stream_ref::legacy_default()); }, cudaErrorInvalidValue,
                     {"curt::discard_and_prefetch_batch::submit(legacy default stream)"});

  // An empty batch does nothing, but the stream is still checked.
  curt::copy_batch nothing;
  require_cuda_error([&] { nothing.submit(curt::stream_ref::legacy_default()); },
                     cudaErrorInvalidValue, {"legacy default stream"});
}

TEST_CASE("copy_3d_batch: extents and row lengths in elements become bytes", "[batch]") {
  auto& rng = curt_test::rng();
  std::uniform_int_distribution<std::size_t> dim(1, 40);
  std::vector<double> d(1), s(1);  // addresses only
  curt::copy_3d_batch batch;
  struct shape {
    std::size_t width, height, depth, dst_row, dst_layer, src_pitch, src_layer;
  };
  std::vector<shape> shapes;
  for (int i = 0; i < 50; ++i) {
    shape sh{dim(rng), dim(rng), dim(rng), 0, 0, 0, 0};
    sh.dst_row = sh.width + dim(rng) - 1;                    // elements, >= width
    sh.dst_layer = i % 5 == 0 ? 0 : sh.height + dim(rng) - 1;  // 0: packed
    sh.src_pitch = sh.width * sizeof(double) + dim(rng);     // bytes, any value >= the row
    sh.src_layer = sh.height;
    shapes.push_back(sh);
    batch.add(curt::strided_volume<double>(d.data(), sh.dst_row, sh.dst_layer),
              curt::strided_volume<const double>::with_pitch(s.data(), sh.src_pitch, sh.src_layer),
              {sh.width, sh.height, sh.depth}, i % 2 ? source_access::any : source_access::stream);
  }
  auto native = batch.native();
  REQUIRE(native.count == shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    INFO("copy " << i);
    const cudaMemcpy3DBatchOp& op = native.operations[i];
    const shape& sh = shapes[i];
    CHECK(op.extent.width == sh.width * sizeof(double));
    CHECK(op.extent.height == sh.height);
    CHECK(op.extent.depth == sh.depth);
    CHECK(op.dst.type == cudaMemcpyOperandTypePointer);
    CHECK(op.dst.op.ptr.ptr == d.data());
    CHECK(op.dst.op.ptr.rowLength == sh.dst_row * sizeof(double));
    CHECK(op.dst.op.ptr.layerHeight == sh.dst_layer);
    CHECK(op.src.type == cudaMemcpyOperandTypePointer);
    CHECK(op.src.op.ptr.ptr == s.data());
    CHECK(op.src.op.ptr.rowLength == sh.src_pitch);
    CHECK(op.src.op.ptr.layerHeight == sh.src_layer);
    CHECK(op.srcAccessOrder == (i % 2 ? cudaMemcpySrcAccessOrderAny : cudaMemcpySrcAccessOrderStream));
    CHECK(op.flags == 0u);
    CHECK(op.src.op.ptr.locHint.type == cudaMemLocationTypeNone);
  }
}

TEST_CASE("copy_3d_batch: hints go to the operands; bad shapes name the copy and the numbers",
          "[batch]") {
  std::vector<float> d(1), s(1);
  curt::copy_3d_batch batch;
  batch.add(curt::strided_volume<float>(d.data(), 4, 4), curt::strided_volume<float>(s.data(), 4, 4),
            {4, 4, 0});  // #0: empty, left out
  batch.add(curt::strided_volume<float>(d.data(), 0, 0), curt::strided_volume<float>(s.data(), 0, 0),
            {3, 2, 2},
            copy_attributes(source_access::any)
                .source_hint(memory_location::host_numa_current())
                .destination_hint(device0())
                .prefer_overlap_with_compute());  // #1
  REQUIRE(batch.native().count == 1);
  const cudaMemcpy3DBatchOp& op = batch.native().operations[0];
  CHECK(op.src.op.ptr.locHint.type == cudaMemLocationTypeHostNumaCurrent);
  CHECK(op.dst.op.ptr.locHint.type == cudaMemLocationTypeDevice);
  CHECK(op.flags == unsigned(cudaMemcpyFlagPreferOverlapWithCompute));
  CHECK(op.dst.op.ptr.rowLength == 0);  // packed stays 0 for CUDA

  require_cuda_error(
      [&] {
        batch.add(curt::strided_volume<float>(d.data(), 7, 0),
                  curt::strided_volume<float>(s.data(), 8, 0), {8, 1, 1});
      },
      cudaErrorInvalidValue,
      {"curt::copy_3d_batch::add(copy #2)", "destination's rows are 28 bytes apart",
       "shorter than the 32 bytes", "(8 elements)"});
  require_cuda_error(
      [&] {
        batch.add(curt::strided_volume<float>(d.data(), 8, 5),
                  curt::strided_volume<float>(s.data(), 8, 3), {8, 4, 2});
      },
      cudaErrorInvalidValue, {"copy #2", "source's layers are 3 rows high", "fewer than the 4 rows"});
  require_cuda_error(
      [&] {
        batch.add(curt::strided_volume<float>(nullptr, 8, 5),
                  curt::strided_volume<float>(s.data(), 8, 5), {8, 4, 2});
      },
      cudaErrorInvalidValue, {"copy #2", "the destination is null"});
  CHECK(batch.size() == 2);
  CHECK(batch.native().count == 1);
}

TEST_CASE("prefetch batches: one location run per change; none and null are refused", "[batch]") {
  std::vector<float> a(100), b(50);
  const std::vector<int> c(7);
  curt::prefetch_batch batch;
  batch.add(a, device0())
      .add(b, device0())
      .add(c, memory_location::host())  // const ranges can be prefetched
      .add_bytes(nullptr, 0, memory_location::host())  // left out
      .add_bytes(a.data() + 10, 16, memory_location::host())
      .add(b, device0());
  CHECK(batch.size() == 6);
  auto native = batch.native();
  REQUIRE(native.count == 5);
  CHECK(native.pointers[0] == a.data());
  CHECK(native.sizes[0] == 400);
  CHECK(native.sizes[1] == 200);
  CHECK(native.sizes[2] == 28);
  CHECK(native.pointers[3] == a.data() + 10);
  CHECK(native.sizes[3] == 16);
  REQUIRE(native.location_count == 3);
  CHECK(native.location_indices[0] == 0);
  CHECK(native.location_indices[1] == 2);
  CHECK(native.location_indices[2] == 4);
  CHECK(native.locations[0].type == cudaMemLocationTypeDevice);
  CHECK(native.locations[1].type == cudaMemLocationTypeHost);
  CHECK(native.locations[2].type == cudaMemLocationTypeDevice);

  require_cuda_error([&] { batch.add(a, memory_location::none()); }, cudaErrorInvalidValue,
                     {"curt::prefetch_batch::add(range #6)", "none()"});
  require_cuda_error([&] { batch.add_bytes(nullptr, 8, memory_location::host()); },
                     cudaErrorInvalidValue, {"range #6", "8 bytes starts at null"});
  CHECK(batch.size() == 6);

  curt::discard_batch discards;
  discards.add(a).add_bytes(b.data(), 0).add(b);
  REQUIRE(discards.native().count == 2);
  CHECK(discards.native().location_count == 0);
  CHECK(discards.size() == 3);

  curt::discard_and_prefetch_batch both;
  both.add(a, memory_location::host_numa(0)).add(b, memory_location::host_numa(1));
  REQUIRE(both.native().location_count == 2);
  CHECK(both.native().locations[1].id == 1);
  both.clear();
  CHECK(both.empty());
  CHECK(both.native().location_count == 0);
}

namespace {
// A trivially copyable range that holds its elements inside itself, as a user might write one.
struct inline_floats {
  float values[16];
  float* data() { return values; }
  const float* data() const { return values; }
  std::size_t size() const { return 16; }
};
// A view of someone else's elements (trivially copyable too).
struct float_view {
  float* p;
  std::size_t n;
  float* data() const { return p; }
  std::size_t size() const { return n; }
};
}  // namespace

TEST_CASE("batches refuse, before any CUDA call, a temporary that holds its elements inside "
          "itself; views and named ranges are kept",
          "[batch]") {
  std::vector<float> host(16, 1.0f), other(16, 2.0f);
  curt::copy_batch batch;
  require_cuda_error([&] { batch.add(host, inline_floats{}); }, cudaErrorInvalidValue,
                     {"curt::copy_batch::add: the source", "inside itself", "give it a name"});
  require_cuda_error([&] { batch.add(inline_floats{}, host); }, cudaErrorInvalidValue,
                     {"curt::copy_batch::add: the destination", "inside itself"});
  CHECK(batch.size() == 0);  // nothing was added by the refused calls
  inline_floats named{};
  batch.add(host, named).add(float_view{other.data(), 16}, float_view{host.data(), 16});
  CHECK(batch.size() == 2);
  CHECK(batch.native().sources[0] == address(named.values));

  curt::prefetch_batch prefetch;
  require_cuda_error([&] { prefetch.add(inline_floats{}, device0()); }, cudaErrorInvalidValue,
                     {"curt::prefetch_batch::add: the range", "inside itself"});
  curt::discard_batch discard;
  require_cuda_error([&] { discard.add(inline_floats{}); }, cudaErrorInvalidValue,
                     {"curt::discard_batch::add: the range", "inside itself"});
}
