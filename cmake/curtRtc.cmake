# NVRTC and nvJitLink, optional: <curt/rtc.hpp> needs nvrtc.h, nvJitLink.h and their libraries;
# nothing else in curt depends on them (<curt/library.hpp> loads what they make through the
# driver's entry points, with no new link). Shared by the build tree and the installed package
# (curtConfig.cmake includes it after curtDependencies.cmake), so both find them the same way:
# in the CUDA toolkit, and under CURT_RTC_ROOT / $CURT_RTC_ROOT when set. The results are the
# cache variables CURT_NVRTC_INCLUDE_DIR, CURT_NVRTC_LIBRARY and CURT_NVJITLINK_LIBRARY (a
# directory without nvrtc.h or a library that does not exist counts as not found).
# CMake's own CUDA::nvrtc is not used: before CMake 3.26 it links CUDA::cuda_driver (libcuda),
# which curt never links (a binary must start where no driver is installed).
# Defines CURT_HAS_RTC (ON/OFF) and, where both are found, the target curt::rtc (curt + NVRTC +
# nvJitLink), as curtNccl.cmake defines curt::nccl: a normal INTERFACE library in the build tree,
# an IMPORTED one inside find_package(curt), which also sets curt_rtc_FOUND for
# find_package(curt COMPONENTS rtc). Never an error here: curt::rtc is simply not defined.
if(TARGET curt::rtc)  # included again (a second find_package(curt), a second include)
  set(CURT_HAS_RTC ON)
  set(curt_rtc_FOUND TRUE)
  return()
endif()

if(DEFINED CMAKE_FIND_PACKAGE_NAME AND CMAKE_FIND_PACKAGE_NAME STREQUAL "curt")
  set(_curt_rtc_in_package ON)
else()
  set(_curt_rtc_in_package OFF)
endif()

set(_curt_rtc_hints ${CURT_RTC_ROOT} $ENV{CURT_RTC_ROOT} ${CUDAToolkit_LIBRARY_ROOT}
    ${CUDAToolkit_TARGET_DIR})
find_path(CURT_NVRTC_INCLUDE_DIR nvrtc.h
          HINTS ${_curt_rtc_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include
          DOC "curt: the directory of NVRTC's nvrtc.h (and nvJitLink.h)")
find_library(CURT_NVRTC_LIBRARY NAMES nvrtc
             HINTS ${_curt_rtc_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 lib/x64
             DOC "curt: NVRTC's library (libnvrtc)")
find_library(CURT_NVJITLINK_LIBRARY NAMES nvJitLink
             HINTS ${_curt_rtc_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 lib/x64
             DOC "curt: nvJitLink's library (libnvJitLink)")
unset(_curt_rtc_hints)

if(CURT_NVRTC_INCLUDE_DIR AND CURT_NVRTC_LIBRARY AND CURT_NVJITLINK_LIBRARY
   AND EXISTS "${CURT_NVRTC_INCLUDE_DIR}/nvrtc.h"
   AND EXISTS "${CURT_NVRTC_INCLUDE_DIR}/nvJitLink.h"
   AND EXISTS "${CURT_NVRTC_LIBRARY}" AND EXISTS "${CURT_NVJITLINK_LIBRARY}")
  set(CURT_HAS_RTC ON)
  _curt_optional_target(rtc "${CURT_NVRTC_INCLUDE_DIR}"
                        "${CURT_NVRTC_LIBRARY};${CURT_NVJITLINK_LIBRARY}"
                        "NVRTC found: ${CURT_NVRTC_LIBRARY}, ${CURT_NVJITLINK_LIBRARY}")
else()
  set(CURT_HAS_RTC OFF)
  if(_curt_rtc_in_package)
    set(curt_rtc_FOUND FALSE)
    string(CONCAT curt_rtc_NOT_FOUND_MESSAGE "NVRTC and nvJitLink (nvrtc.h, nvJitLink.h and their "
           "libraries) were not found, so curt::rtc is not defined (set CURT_RTC_ROOT, or "
           "CURT_NVRTC_INCLUDE_DIR, CURT_NVRTC_LIBRARY and CURT_NVJITLINK_LIBRARY)")
    if(NOT curt_FIND_QUIETLY)
      message(STATUS "curt: NVRTC not found: curt::rtc is not defined")
    endif()
  else()
    message(STATUS "curt: NVRTC not found: curt::rtc is not defined, and <curt/rtc.hpp>'s "
                   "tests and examples are not built")
  endif()
endif()
unset(_curt_rtc_in_package)
