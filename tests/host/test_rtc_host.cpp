// Run-time compilation without a GPU (include/curt/rtc.hpp): NVRTC compiles, name expressions,
// the log of a failed compilation, options, headers, nvJitLink's link of LTO-IR; and the
// library owner's refusals that come before any driver call (include/curt/library.hpp).
#include <catch.hpp>
#include <expect.hpp>

#include <curt/library.hpp>
#include <curt/rtc.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

const char* const saxpy_source = R"(
template <class T>
__global__ void saxpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void scale(float* x, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}
)";

curt::rtc::options sm90() { return curt::rtc::options().architecture({9, 0}).cpp_standard(17); }

bool is_elf(const std::vector<char>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
         bytes[3] == 'F';
}

template <class Action>
curt::rtc::error require_rtc_error(Action&& action, int code,
                                   std::initializer_list<const char*> fragments) {
  try {
    action();
  } catch (const curt::rtc::error& error) {
    INFO("what(): " << error.what());
    CHECK(error.code().category() != curt::runtime_category());
    CHECK(error.code().value() == code);
    for (const char* fragment : fragments) CHECK_THAT(error.what(), ContainsSubstring(fragment));
    return error;
  }
  FAIL("expected a curt::rtc::error");
  throw;
}

}  // namespace

TEST_CASE("a template compiles for sm_90 through a name expression", "[rtc]") {
  curt::rtc::program program("saxpy.cu", saxpy_source);
  program.add_name_expression("saxpy<float>").add_name_expression("saxpy<double>");
  const curt::rtc::compiled code = program.compile(sm90());
  CHECK(code.name() == "saxpy.cu");
  CHECK(code.options() == "-arch=sm_90 -std=c++17");
  CHECK(is_elf(code.cubin()));  // a real architecture: CUBIN
  CHECK(code.image() == static_cast<const void*>(code.cubin().data()));
  CHECK(code.lto_ir().empty());
  const std::string& f = code.lowered_name("saxpy<float>");
  const std::string& d = code.lowered_name("saxpy<double>");
  CHECK(f == "_Z5saxpyIfEvT_PKS0_PS0_i");  // the Itanium mangling of saxpy<float>
  CHECK(d == "_Z5saxpyIdEvT_PKS0_PS0_i");
  CHECK(code.log().empty());
  // A name never added is refused, naming the ones that were.
  require_rtc_error([&] { (void)code.lowered_name("saxpy<int>"); },
                    NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
                    {"\"saxpy<int>\" was not added", "saxpy.cu",
                     "\"saxpy<float>\", \"saxpy<double>\"", "add_name_expression"});
}

TEST_CASE("a virtual architecture gives PTX only, which is the image", "[rtc]") {
  const curt::rtc::compiled code = curt::rtc::program("scale.cu", saxpy_source)
                                       .compile(curt::rtc::options().architecture({9, 0}, false));
  CHECK(code.options() == "-arch=compute_90");
  CHECK(code.cubin().empty());
  CHECK_THAT(code.ptx(), ContainsSubstring(".entry scale"));
  CHECK_THAT(code.ptx(), ContainsSubstring(".target sm_90"));
  CHECK(code.image() == static_cast<const void*>(code.ptx().c_str()));
}

TEST_CASE("a failed compilation throws with the whole log, its line numbers and the options",
          "[rtc]") {
  const std::string source =
      "#include \"helper.cuh\"\n"
      "__global__ void k(float* x) {\n"
      "  x[0] = helper(x[0]) + undefined_thing;\n"
      "}\n";
  curt::rtc::program program("broken.cu", source,
                             {{"helper.cuh",
                               "__device__ float helper(float "
                               "v) { return v + N; }\n"}});
  const curt::rtc::error e = require_rtc_error(
      [&] { (void)program.compile(sm90().define("N", "3")); }, NVRTC_ERROR_COMPILATION,
      {"curt::rtc::program::compile(broken.cu)", "options: -arch=sm_90 -std=c++17 -DN=3",
       "broken.cu(3): error: identifier \"undefined_thing\" is undefined",
       "1 error detected in the compilation of \"broken.cu\""});
  CHECK(e.options() == "-arch=sm_90 -std=c++17 -DN=3");
  CHECK_THAT(e.log(), ContainsSubstring("broken.cu(3)"));
  CHECK_THAT(e.log(), !ContainsSubstring("helper.cuh"));  // the header compiled: N was defined

  // Without the define, the error is in the header, by its own name and line.
  require_rtc_error([&] { (void)program.compile(sm90()); }, NVRTC_ERROR_COMPILATION,
                    {"helper.cuh(1): error: identifier \"N\" is undefined"});
  // A header nobody provided.
  require_rtc_error([&] { (void)curt::rtc::program("lonely.cu", source).compile(sm90()); },
                    NVRTC_ERROR_COMPILATION, {"lonely.cu(1)", "helper.cuh"});
}

TEST_CASE("a compilation with warnings succeeds and keeps its log", "[rtc]") {
  const curt::rtc::compiled code =
      curt::rtc::program("warn.cu",
                         "__global__ void k(float* x) {\n  int unused;\n  x[0] = 1;\n}\n")
          .compile(sm90());
  CHECK(is_elf(code.cubin()));
  CHECK_THAT(code.log(), ContainsSubstring("warn.cu(2): warning"));
  CHECK_THAT(code.log(), ContainsSubstring("\"unused\""));
}

TEST_CASE("typed options spell NVRTC's flags; a bad one is refused with the list", "[rtc]") {
  curt::rtc::options o;
  o.architecture({8, 6})
      .cpp_standard(20)
      .define("WIDTH", "4")
      .define("FAST")
      .include_path("/opt/x");
  o.fast_math().line_info().debug_info().relocatable_device_code().link_time_optimization();
  o.add("-maxrregcount=64");
  const std::vector<std::string> expected = {
      "-arch=sm_86", "-std=c++20", "-DWIDTH=4", "-DFAST", "-I/opt/x",        "--use_fast_math",
      "-lineinfo",   "-G",         "-rdc=true", "-dlto",  "-maxrregcount=64"};
  CHECK(o.list() == expected);
  CHECK(curt::rtc::options().cpp_standard(17).text() == "-std=c++17");
  CHECK(curt::rtc::options().text().empty());

  require_rtc_error(
      [&] { (void)curt::rtc::program("k.cu", saxpy_source).compile(sm90().add("--no-such-flag")); },
      NVRTC_ERROR_INVALID_OPTION, {"options: -arch=sm_90 -std=c++17 --no-such-flag"});
}

TEST_CASE("defines reach the code", "[rtc]") {
  const char* source = "extern \"C\" __global__ void k(int* x) { x[0] = VALUE; }\n";
  const curt::rtc::compiled code =
      curt::rtc::program("define.cu", source)
          .compile(curt::rtc::options().architecture({9, 0}, false).define("VALUE", "424242"));
  CHECK_THAT(code.ptx(), ContainsSubstring("424242"));
}

TEST_CASE("nvJitLink links LTO-IR of two programs into one CUBIN", "[rtc]") {
  const curt::rtc::options o = sm90().relocatable_device_code().link_time_optimization();
  const curt::rtc::compiled a =
      curt::rtc::program("a.cu", "__device__ float twice(float v) { return 2 * v; }\n").compile(o);
  const curt::rtc::compiled b =
      curt::rtc::program("b.cu",
                         "extern __device__ float twice(float v);\n"
                         "extern \"C\" __global__ void k(float* x) { x[0] = twice(x[0]); }\n")
          .compile(o);
  CHECK_FALSE(a.lto_ir().empty());
  CHECK(a.cubin().empty());
  // LTO-IR alone cannot be loaded: image() says to link.
  curt_test::require_cuda_error([&] { (void)b.image(); }, cudaErrorInvalidValue,
                                {"LTO-IR only", "curt::rtc::linker"});

  const curt::rtc::compiled linked =
      curt::rtc::linker({"-arch=sm_90", "-lto"}).add(a).add(b).link();
  CHECK(is_elf(linked.cubin()));
  CHECK(linked.name() == "linked a.cu b.cu");
  CHECK(linked.image() == static_cast<const void*>(linked.cubin().data()));

  // b alone leaves twice() unresolved: the error log says so.
  const curt::rtc::error e = require_rtc_error(
      [&] {
        (void)curt::rtc::linker({"-arch=sm_90", "-lto"}).add(b).link();
      },
      NVJITLINK_ERROR_PTX_COMPILE,
      {"curt::rtc::linker::link(linked b.cu)", "options: -arch=sm_90 -lto",
       "Unresolved extern function"});
  CHECK_THAT(e.log(), ContainsSubstring("_Z5twicef"));
  // No architecture: nvJitLink refuses at creation.
  require_rtc_error([&] { (void)curt::rtc::linker({"-lto"}).add(a).link(); },
                    NVJITLINK_ERROR_MISSING_ARCH, {"NVJITLINK_ERROR_MISSING_ARCH"});
  // Every nvJitLink result has its name, the last of 13.0's too; a newer one its number.
  const std::error_category& link_errors = curt::nvjitlink_category();
  CHECK(link_errors.message(NVJITLINK_ERROR_THREADPOOL) == "NVJITLINK_ERROR_THREADPOOL");
  CHECK(link_errors.message(NVJITLINK_ERROR_LTO_NOT_ENABLED) == "NVJITLINK_ERROR_LTO_NOT_ENABLED");
  CHECK(link_errors.message(NVJITLINK_ERROR_LTO_NOT_ENABLED + 1) ==
        "nvJitLinkResult " + std::to_string(NVJITLINK_ERROR_LTO_NOT_ENABLED + 1));
}

TEST_CASE("a moved-from library_kernel is a copy: the same kernel and its layout", "[library]") {
  // Found by review: the move emptied the layout's shared_ptr and kept the handle, so the next
  // use read through null (a crash before any driver call).
  const auto handle = reinterpret_cast<cudaKernel_t>(std::uintptr_t{0x1234});  // never called
  curt::library_kernel from(handle);
  curt::library_kernel to = std::move(from);
  CHECK(from.get() == handle);
  CHECK(to.get() == handle);
  if (curt::driver_version().encoded() == 0) {  // no driver: the layout is read as unknown
    CHECK_FALSE(from.parameters_known());
    CHECK(from.parameters().empty());
  }
  curt::library_kernel assigned(handle);
  assigned = std::move(to);
  CHECK(to.get() == handle);
  if (curt::driver_version().encoded() == 0) CHECK_FALSE(to.parameters_known());
}

TEST_CASE("a library owner that holds nothing refuses before the driver", "[library]") {
  curt::library empty(curt::no_handle);
  CHECK_FALSE(empty.valid());
  curt_test::require_cuda_error([&] { (void)empty.kernel("saxpy"); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::library::kernel()", "empty"});
  curt::library moved(curt::no_handle);
  curt::library target = std::move(moved);
  curt_test::require_cuda_error([&] { (void)moved.get(); }, cudaErrorInvalidResourceHandle,
                                {"curt::library::get()", "moved-from"});
  curt_test::require_cuda_error([&] { (void)moved.global<float>(curt::device::from_ordinal_unchecked(0), "x"); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::library::global()", "moved-from"});
  curt_test::require_cuda_error([&] { (void)curt::library::from_native_handle(nullptr); },
                                cudaErrorInvalidResourceHandle,
                                {"curt::library::from_native_handle", "not null"});
}

TEST_CASE("library variables count elements of the declared type", "[library]") {
  float storage[16] = {};
  const curt::library_variable<float[16]> table(storage, sizeof storage);
  CHECK(table.data() == storage);
  CHECK(table.size() == 16u);
  CHECK(table.size_bytes() == 64u);
  const curt::library_variable<float[]> open(storage, 12);
  CHECK(open.size() == 3u);
  static_assert(std::is_same_v<curt::library_variable<const int[4]>::element_type, const int>);
}

TEST_CASE("a refused launch names the argument sizes and the kernel's layout", "[library]") {
  const std::vector<curt::kernel_parameter> layout = {{0, 4}, {8, 8}, {16, 8}, {24, 4}};
  CHECK(curt::detail::describe_layout(layout) ==
        "4 parameters: 4 B at offset 0, 8 B at 8, 8 B at 16, 4 B at 24");
  const std::size_t sizes[] = {4, 8, 8};
  CHECK(curt::detail::describe_sizes("arguments", sizes, 3) == "3 arguments of 4 B, 8 B, 8 B");
  CHECK(curt::detail::describe_sizes("arguments", sizes, 0) == "0 arguments");
}

// The JIT's log buffers are curt's (it captures the error log): options 3 to 6 are refused, so
// that a user's log size never stands beside curt's buffer (lab review, attack13 F3).
TEST_CASE("library options refuse the JIT's log buffers, which curt keeps", "[rtc]") {
  for (int key : {3, 4, 5, 6})
    curt_test::require_cuda_error([&] { (void)curt::library_options().option(key, 1u << 20); },
                                  cudaErrorInvalidValue,
                                  {"curt::library_options::option(", "are curt's"});
  (void)curt::library_options().option(7, 3).option(0, 64);  // others pass
}
