// Must not compile: a linker keeps a pointer to each part until link(), so a temporary part is
// refused (found by review: it was read after its destruction). With -DCURT_COMPILE_CONTROL the
// part is a named object that outlives link(), and it compiles.
#include <curt/rtc.hpp>

curt::rtc::compiled link_one(curt::rtc::program& program, const curt::rtc::options& options) {
  curt::rtc::linker linker({"-arch=sm_90", "-lto"});
#ifdef CURT_COMPILE_CONTROL
  const curt::rtc::compiled part = program.compile(options);
  linker.add(part);
#else
  linker.add(program.compile(options));
#endif
  return linker.link();
}
