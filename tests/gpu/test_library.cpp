// Run-time compiled code on the GPU (include/curt/rtc.hpp, library.hpp): NVRTC compiles for the
// device, curt::library loads it, curt::launch runs its kernels with the same launch_config and
// refusals as compiled kernels; checked against CPU references on fresh random inputs, into
// outputs poisoned first. Globals and managed variables, attributes and occupancy, refused
// launches and lookups, and loading on a thread with no context (no primary context woken).
// A plain C++ file: the device code is compiled at run time.
#include <catch.hpp>
#include <expect.hpp>
#include <isolation.hpp>

#include <curt/copy.hpp>
#include <curt/curt.hpp>
#include <curt/library.hpp>
#include <curt/memory.hpp>
#include <curt/rtc.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

const char* const source = R"(
template <class T>
__global__ void saxpy(T a, const T* x, const T* y, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
__device__ float coefficients[4];  // written by the host
__managed__ unsigned long long calls;
extern "C" __global__ void polynomial(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i == 0) atomicAdd(&calls, 1ull);
  if (i < n) {
    float v = x[i];
    y[i] = coefficients[0] + v * (coefficients[1] + v * (coefficients[2] + v * coefficients[3]));
  }
}
extern "C" __global__ void scale(float* x, float factor, int n) {
  extern __shared__ float scratch[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  scratch[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  if (i < n) x[i] = scratch[threadIdx.x] * factor;
}
)";

int random_size() { return curt_test::random_ints(1, 1000, 300000)[0]; }
float random_float() { return curt_test::random_floats(1, -4.0f, 4.0f)[0]; }
constexpr unsigned block = 256;

curt::rtc::compiled compile_for(curt::device d) {
  curt::rtc::program program("library_test.cu", source);
  program.add_name_expression("saxpy<float>").add_name_expression("saxpy<double>");
  return program.compile(curt::rtc::options().architecture(d).cpp_standard(17));
}

// Every got[i] within bound[i] of want[i] (a NaN never is), reporting how many are not.
template <class T>
void require_within(const std::vector<T>& got, const std::vector<T>& want,
                    const std::vector<T>& bound) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= bound[i]) && bad++ == 0) first = i;
  INFO(bad << " of " << want.size() << " off by more than the bound; first at " << first
            << (bad ? ": got " + std::to_string(got[first]) + ", want " +
                          std::to_string(want[first]) + " +- " + std::to_string(bound[first])
                    : std::string()));
  CHECK(bad == 0);
}

// out = a * x + y through `launch(stream, config, out_data)`, checked against the CPU, with out
// poisoned with NaN first.
template <class T, class Launch>
void check_saxpy(curt::device d, curt::stream_ref stream, Launch launch) {
  const int n = random_size();
  const T a = static_cast<T>(random_float());
  const std::vector<float> xf = curt_test::random_floats(static_cast<std::size_t>(n), -10, 10);
  const std::vector<float> yf = curt_test::random_floats(static_cast<std::size_t>(n), -10, 10);
  const std::vector<T> x(xf.begin(), xf.end()), y(yf.begin(), yf.end());
  // The CPU rounds a * x, then the sum; the GPU may fuse them (one rounding). Each rounding is
  // within eps / 2 of its exact value, so the two differ by at most 2 eps (|a x| + |y|), however
  // near 0 the sum is; a wrong kernel is off by about |y| or |a x|.
  const T eps = std::numeric_limits<T>::epsilon();
  std::vector<T> want(x.size()), bound(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    want[i] = a * x[i] + y[i];
    bound[i] = 2 * eps * (std::fabs(a * x[i]) + std::fabs(y[i]));
  }
  curt::device_buffer<T> dx(d, x.size()), dy(d, y.size()), out(d, x.size());
  curt::copy(dx, x, stream);
  curt::copy(dy, y, stream);
  curt::memset(out, 0xff, stream);  // all bits set: a NaN, as float and as double
  launch(curt::launch_config(curt::ceil_div(n, block), block), a, dx.data(), dy.data(), out.data(),
         n);
  curt::copy_and_wait(got, out, stream);
  require_within(got, want, bound);
}

}  // namespace

TEST_CASE("a compiled template loads and launches, untyped and typed, against the CPU",
          "[library]") {
  const curt::device d(0);
  curt::stream stream(d);
  const curt::rtc::compiled code = compile_for(d);
  INFO("options: " << code.options());
  const curt::library lib(code.image());
  const curt::library_kernel f = lib.kernel(code.lowered_name("saxpy<float>"));
  CHECK(f.name() == "void saxpy<float>(float, float const*, float const*, float*, int)");
  REQUIRE(f.parameters_known());
  REQUIRE(f.parameters().size() == 5u);
  const std::size_t sizes[] = {4, 8, 8, 8, 4}, offsets[] = {0, 8, 16, 24, 32};
  for (std::size_t i = 0; i < 5; ++i) {
    CHECK(f.parameters()[i].size == sizes[i]);
    CHECK(f.parameters()[i].offset == offsets[i]);
  }
  // Untyped: the arguments' sizes are checked against that layout.
  check_saxpy<float>(d, stream, [&](const curt::launch_config& c, auto... args) {
    curt::launch(stream, c, f, args...);
  });
  // Typed: arguments convert at compile time (a double, an int literal).
  const auto typed = f.as<void(float, const float*, const float*, float*, int)>();
  check_saxpy<float>(
      d, stream,
      [&](const curt::launch_config& c, float a, const float* x, const float* y, float* out,
          int n) { curt::launch(stream, c, typed, static_cast<double>(a), x, y, out, n); });
  // The other instantiation, through its own lowered name.
  const curt::library_kernel dbl = lib.kernel(code.lowered_name("saxpy<double>"));
  CHECK(dbl.parameters()[0].size == 8u);
  check_saxpy<double>(d, stream, [&](const curt::launch_config& c, auto... args) {
    curt::launch(stream, c, dbl, args...);
  });
  // The kernels the library holds, by name.
  const std::vector<std::string> names = lib.kernel_names();
  CHECK(names.size() == 4u);
}

TEST_CASE("the same launch_config: clusters, priority, dynamic shared memory", "[library]") {
  const curt::device d(0);
  curt::stream stream(d);
  const curt::rtc::compiled code = compile_for(d);
  const curt::library lib(code.image());
  const auto scale = lib.kernel("scale").as<void(float*, float, int)>();
  const int n = random_size();
  const float factor = random_float();
  const std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n));
  std::vector<float> want(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * factor;
  curt::device_buffer<float> dx(d, x.size());
  curt::copy(dx, x, stream);
  const unsigned blocks = curt::ceil_div(static_cast<unsigned>(n), 2 * block) * 2;  // even
  curt::launch(stream,
               curt::launch_config(blocks, block, block * sizeof(float))
                   .cluster_dims(2)
                   .priority(d.stream_priority_range().first),
               scale, dx.data(), factor, n);
  curt::copy_and_wait(got, dx, stream);
  curt_test::require_close_all(got, want, 1e-6);
}

TEST_CASE("an array argument reaches a library kernel as its address, as it decays",
          "[library]") {
  const curt::device d(0);
  curt::stream stream(d);
  const curt::rtc::compiled code = compile_for(d);
  const curt::library lib(code.image());
  const curt::library_kernel scale = lib.kernel("scale");
  constexpr int n = 1000;
  static float values[n];  // registered: the device reaches it at its host address
  const std::vector<float> x = curt_test::random_floats(n, -10, 10);
  std::copy(x.begin(), x.end(), values);
  const float factor = random_float();
  curt::host_registration registered(d, values, sizeof values);
  // `values` is a float[1000] for the float* parameter: found by review, its first 8 bytes were
  // passed as the pointer (an illegal address) instead of its address.
  curt::launch(stream, curt::launch_config(curt::ceil_div(n, int(block)), block, block * 4), scale,
               values, factor, n);
  stream.synchronize();
  std::vector<float> got(values, values + n), want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * factor;
  CHECK(got == want);  // one rounded product each, on both sides
}

TEST_CASE("a global variable written by the host is read by a kernel; managed variables",
          "[library]") {
  const curt::device d(0);
  curt::stream stream(d);
  const curt::rtc::compiled code = compile_for(d);
  const curt::library lib(code.image());
  const curt::library_variable<float[4]> table = lib.global<float[4]>(d, "coefficients");
  CHECK(table.size() == 4u);
  const std::vector<float> c = curt_test::random_floats(4, -2, 2);
  curt::copy(table, c, stream);

  const int n = random_size();
  const std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n), -2, 2);
  // Horner's rule of degree 3 is within gamma_6 = 6u / (1 - 6u) (u = eps / 2) of the exact value
  // times the sum of |c_k x^k|, with or without fused steps (Higham, Accuracy and Stability of
  // Numerical Algorithms, 5.1): the GPU's and the CPU's differ by at most twice that, < 7 eps.
  const float eps = std::numeric_limits<float>::epsilon();
  std::vector<float> want(x.size()), bound(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i], m = std::fabs(v);
    want[i] = c[0] + v * (c[1] + v * (c[2] + v * c[3]));
    const float terms = std::fabs(c[0]) + m * (std::fabs(c[1]) +
                                               m * (std::fabs(c[2]) + m * std::fabs(c[3])));
    bound[i] = 7 * eps * terms;
  }
  curt::device_buffer<float> dx(d, x.size()), dy(d, x.size());
  curt::copy(dx, x, stream);
  curt::fill(dy, std::numeric_limits<float>::quiet_NaN(), stream);
  const curt::library_variable<unsigned long long> calls =
      lib.managed<unsigned long long>(d, "calls");
  REQUIRE(calls.data() != nullptr);
  stream.synchronize();
  *calls.data() = 0;
  const auto polynomial = lib.kernel("polynomial");
  for (int i = 0; i < 3; ++i)
    curt::launch(stream, curt::launch_config(curt::ceil_div(n, block), block), polynomial,
                 static_cast<const float*>(dx.data()), dy.data(), n);
  curt::copy_and_wait(got, dy, stream);
  require_within(got, want, bound);
  CHECK(*calls.data() == 3u);

  // Sizes that do not match the variable, and a name the library lacks.
  curt_test::require_cuda_error(
      [&] { (void)lib.global<float[3]>(d, "coefficients"); }, cudaErrorInvalidValue,
      {"cuLibraryGetGlobal(\"coefficients\")", "has 16 B", "the requested type has 12 B"});
  struct three_floats {  // 12 B: 16 B is no whole number of them
    float v[3];
  };
  curt_test::require_cuda_error([&] { (void)lib.global<three_floats[]>(d, "coefficients"); },
                                cudaErrorInvalidValue,
                                {"has 16 B, not a whole number of 12-byte elements"});
  CHECK(lib.global<float[]>(d, "coefficients").size() == 4u);
  curt_test::require_cuda_error([&] { (void)lib.global<float>(d, "coefficient"); },
                                cudaErrorSymbolNotFound,  // CUDA_ERROR_NOT_FOUND, 500
                                {"\"coefficient\"", "no global variable"});
}

TEST_CASE("refused launches and lookups are explained as for compiled kernels", "[library]") {
  const curt::device d(0);
  curt::stream stream(d);
  const curt::rtc::compiled code = compile_for(d);
  const curt::library lib(code.image());
  const curt::library_kernel scale = lib.kernel("scale");
  curt::device_buffer<float> x(d, 1024);
  float* data = x.data();
  // The driver refuses: curt says why in numbers, naming the kernel.
  curt_test::require_cuda_error(
      [&] { curt::launch(stream, curt::launch_config(1, 2048), scale, data, 1.0f, 1024); },
      cudaErrorInvalidValue,
      {"curt::launch(scale, grid 1x1x1, block 2048x1x1", "block of 2048 threads exceeds"});
  curt_test::require_cuda_error(
      [&] {
        curt::launch(stream, curt::launch_config(1, 32, std::size_t(1) << 20), scale, data, 1.0f,
                     1024);
      },
      cudaErrorInvalidValue, {"B of dynamic shared memory (+ 0 B static) exceeds"});
  curt_test::require_any_cuda_error(  // cudaErrorInvalidClusterSize, as for compiled kernels
      [&] {
        curt::launch(stream, curt::launch_config(3, 32).cluster_dims(2), scale, data, 1.0f, 1);
      },
      {"grid 3x1x1 is not a multiple of the cluster 2x1x1"});
  // curt refuses before launching: the arguments do not fit the parameter layout.
  curt_test::require_cuda_error(
      [&] { curt::launch(stream, curt::launch_config(1, 32), scale, data, 1.0f); },
      cudaErrorInvalidValue,
      {"curt::launch(scale",
       "2 arguments of 8 B, 4 B do not match the kernel's 3 parameters: "
       "8 B at offset 0, 4 B at 8, 4 B at 12"});
  curt_test::require_cuda_error(
      [&] { curt::launch(stream, curt::launch_config(1, 32), scale, data, 1.0, 1024); },
      cudaErrorInvalidValue, {"3 arguments of 8 B, 8 B, 4 B do not match"});
  curt_test::require_cuda_error([&] { (void)scale.as<void(float*, double, int)>(); },
                                cudaErrorInvalidValue,
                                {"curt::library_kernel::as(scale)", "3 parameters of 8 B, 8 B"});
  // A name the library lacks: the kernels it has are named.
  curt_test::require_cuda_error([&] { (void)lib.kernel("saxpy"); }, cudaErrorSymbolNotFound,
                                {"cuLibraryGetKernel(\"saxpy\")", "no kernel \"saxpy\"", "scale",
                                 "polynomial", "extern \"C\""});
  stream.synchronize();  // nothing was launched by the refusals
}

TEST_CASE("attributes and occupancy of a library kernel, per device", "[library]") {
  const curt::device d(0);
  const curt::rtc::compiled code = compile_for(d);
  const curt::library lib(code.image());
  const curt::library_kernel scale = lib.kernel("scale");
  const cudaFuncAttributes a = curt::kernel_attributes(d, scale);
  CHECK(a.numRegs > 0);
  CHECK(a.maxThreadsPerBlock > 0);
  CHECK(a.binaryVersion == d.compute_capability().as_int());
  CHECK(a.maxDynamicSharedSizeBytes == 48 * 1024);
  curt::set_max_dynamic_shared_memory(d, scale, 96 * 1024);
  CHECK(curt::kernel_attributes(d, scale).maxDynamicSharedSizeBytes == 96 * 1024);
  CHECK(curt::max_active_blocks_per_multiprocessor(d, scale, 256) > 0);
  CHECK(curt::max_potential_block_size(d, scale).block_size > 0);
  CHECK(curt::grid_to_fill_device(d, scale, 256) >=
        static_cast<unsigned>(d.multiprocessor_count()));
  // The raised limit holds for launches: 96 KiB of dynamic shared memory is accepted.
  curt::stream stream(d);
  curt::device_buffer<float> x(d, 256);
  curt::fill(x, 1.0f, stream);
  curt::launch(stream, curt::launch_config(1, 256, 96 * 1024), scale, x.data(), 2.0f, 256);
  std::vector<float> got(256);
  curt::copy_and_wait(got, x, stream);
  CHECK(got == std::vector<float>(256, 2.0f));
}

TEST_CASE("loading from a file, a bad image's JIT log, an unloadable file", "[library]") {
  const curt::device d(0);
  const curt::rtc::compiled code = compile_for(d);
  const std::string path = "curt_test_library.cubin";
  if (!code.cubin().empty()) {
    std::ofstream(path, std::ios::binary)
        .write(code.cubin().data(), static_cast<std::streamsize>(code.cubin().size()));
    const curt::library from_file = curt::library::from_file(path);
    CHECK(from_file.kernel("scale").parameters().size() == 3u);
    std::remove(path.c_str());
  }
  curt_test::require_any_cuda_error([&] { (void)curt::library::from_file("no/such/file.cubin"); },
                                    {"cuLibraryLoadFromFile(\"no/such/file.cubin\")"});
  // PTX with a syntax error. Eager loading (CUDA_MODULE_LOADING=EAGER) compiles it at the load
  // into every context (d's exists: the stream's), so the load throws with the JIT's log. Lazy
  // loading (the default since 12.2) compiles it when a kernel is first needed in a context: the
  // load may pass, and the error comes by the first launch at the latest, as the driver's code.
  curt::stream stream(d);
  CUmoduleLoadingMode mode{};
  CURT_DRIVER_CALL(cuModuleGetLoadingMode, 11070, &mode);
  INFO("module loading: " << (mode == CU_MODULE_LAZY_LOADING ? "lazy" : "eager"));
  const char* bad_ptx =
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      ".visible .entry broken()\n{\n  bogus.instruction;\n  ret;\n}\n";
  std::optional<curt::library> bad;
  try {
    bad.emplace(bad_ptx);
  } catch (const curt::cuda_error& e) {
    CHECK_THAT(e.what(), ContainsSubstring("cuLibraryLoadData(PTX image)"));
    CHECK_THAT(e.what(), ContainsSubstring("JIT error log"));
  }
  if (mode == CU_MODULE_EAGER_LOADING) CHECK_FALSE(bad.has_value());
  if (bad) {
    curt_test::require_any_cuda_error(
        [&] {
          curt::launch(stream, curt::launch_config(1, 1), bad->kernel("broken"));
          stream.synchronize();
        },
        {});
  }
  // PTX loads too (the driver compiles it for the device).
  const curt::rtc::compiled ptx =
      curt::rtc::program("ptx.cu", source)
          .compile(curt::rtc::options().architecture(d.compute_capability(), false));
  const curt::library from_ptx(ptx.image(), curt::library_options().optimization_level(3));
  CHECK(from_ptx.kernel("polynomial").parameters().size() == 3u);
}

TEST_CASE("nvJitLink output loads and runs", "[library]") {
  const curt::device d(0);
  const curt::rtc::options o =
      curt::rtc::options().architecture(d).relocatable_device_code().link_time_optimization();
  const curt::rtc::compiled a =
      curt::rtc::program("a.cu", "__device__ float twice(float v) { return 2 * v; }\n").compile(o);
  const curt::rtc::compiled b =
      curt::rtc::program("b.cu",
                         "extern __device__ float twice(float v);\n"
                         "extern \"C\" __global__ void k(float* x, int n) {"
                         " int i = blockIdx.x * blockDim.x + threadIdx.x;"
                         " if (i < n) x[i] = twice(x[i]); }\n")
          .compile(o);
  const curt::rtc::compiled linked = curt::rtc::linker(d).add(a).add(b).link();
  const curt::library lib(linked.image());
  curt::stream stream(d);
  const int n = random_size();
  const std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n));
  std::vector<float> want(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = 2 * x[i];
  curt::device_buffer<float> dx(d, x.size());
  curt::copy(dx, x, stream);
  curt::launch(stream, curt::launch_config(curt::ceil_div(n, block), block), lib.kernel("k"),
               dx.data(), n);
  curt::copy_and_wait(got, dx, stream);
  CHECK(got == want);  // exact: one multiplication by 2
}

// Runs only in a child process (hidden), where no context exists yet. Compiling, loading,
// looking kernels up, launching on a stream of a user's context (which reads the kernel's layout
// there) and unloading, all from threads with no current context, make no context current and
// wake no primary context (libraries are context-independent). Names are asked with the user's
// context current: the driver may want a context for them, and name() takes the one at hand.
// (Attributes and occupancy are left out: like a compiled kernel's, they are read in the
// device's context.)
TEST_CASE("libraries on a thread with no context (child)", "[.][library-no-context-child]") {
  REQUIRE_FALSE(curt_test::primary_active(0));  // the premise: main() made no context
  std::vector<std::string> broken;
  auto after = [&](const std::string& what) {
    if (curt_test::current_context() != nullptr) {
      broken.push_back(what + ": left a context current");
      CURT_DRIVER_CALL(cuCtxSetCurrent, 4000, nullptr);
    }
    if (curt_test::primary_active(0)) broken.push_back(what + ": woke device 0's primary context");
  };
  const curt::device d(0);
  curt::library lib(curt::no_handle);
  std::optional<curt::library_kernel> scale;
  curt_test::on_fresh_thread([&] {
    const curt::rtc::compiled code = compile_for(d);
    after("compile for the device");
    lib = curt::library(code.image());
    after("load");
    scale.emplace(lib.kernel("scale"));  // reads no layout yet
    after("kernel lookup");
  });
  // A stream and memory of a user's context, then a launch from a fresh thread.
  curt_test::user_context mine(0);  // current now
  const int n = random_size();
  const std::vector<float> x = curt_test::random_floats(static_cast<std::size_t>(n));
  std::vector<float> got(x.size());
  cudaStream_t h = nullptr;
  float* data = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaMalloc(&data, x.size() * sizeof(float)) == cudaSuccess);
  REQUIRE(cudaMemcpy(data, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  CUcontext popped = nullptr;
  CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &popped);
  REQUIRE(curt_test::current_context() == nullptr);
  std::size_t parameter_count = 0;
  curt_test::on_fresh_thread([&] {
    curt::launch(curt::stream_ref(h),
                 curt::launch_config(curt::ceil_div(n, block), block, block * sizeof(float)),
                 *scale, data, 3.0f, n);
    after("launch on a user's stream (the layout read in its context)");
    parameter_count = scale->parameters().size();  // read at the launch: no driver call now
    after("the layout after the launch");
    curt::stream_ref(h).synchronize();
    after("synchronize");
  });
  CHECK(parameter_count == 3u);
  std::string name;
  std::size_t kernel_count = 0;
  curt_test::on_fresh_thread([&] {
    CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, mine.get());
    name = scale->name();
    kernel_count = lib.kernel_names().size();
    CUcontext own = nullptr;
    CURT_DRIVER_CALL(cuCtxPopCurrent, 4000, &own);
    after("names with the user's context current");
    lib = curt::library(curt::no_handle);  // unloaded
    after("unload");
  });
  CHECK(name == "scale");
  CHECK(kernel_count == 4u);
  CURT_DRIVER_CALL(cuCtxPushCurrent, 4000, mine.get());
  REQUIRE(cudaMemcpy(got.data(), data, x.size() * sizeof(float), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(cudaFree(data) == cudaSuccess);
  CHECK(cudaStreamDestroy(h) == cudaSuccess);
  for (std::size_t i = 0; i < x.size(); ++i)
    if (got[i] != 3.0f * x[i]) broken.push_back("result " + std::to_string(i) + " differs");
  for (const std::string& what : broken) FAIL_CHECK(what);
  CHECK_FALSE(curt_test::primary_active(0));
  std::printf("LIBRARY-NO-CONTEXT-CHILD-REACHED-ITS-END\n");
  std::fflush(stdout);
}

TEST_CASE("libraries wake no primary context on a thread without one", "[library]") {
  if (curt_test::under_compute_sanitizer()) {
    WARN("under compute-sanitizer: the child process is not run (the sanitizer makes contexts)");
    return;
  }
  const curt_test::child_result child =
      curt_test::run_self("libraries on a thread with no context (child)");
  INFO("child output:\n" << child.output);
  CHECK(child.exit_code == 0);
  CHECK(child.output.find("LIBRARY-NO-CONTEXT-CHILD-REACHED-ITS-END") != std::string::npos);
}
