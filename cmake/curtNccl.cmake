# NCCL, optional: <curt/nccl.hpp> needs nccl.h and libnccl; nothing else in curt depends on NCCL.
# Shared by the build tree (curt's tests and examples, and projects that add_subdirectory curt)
# and the installed package (curtConfig.cmake includes it after curtDependencies.cmake), so both
# look for NCCL the same way:
# in the CUDA toolkit (development machine: include/nccl.h, lib/libnccl.so.2), in the system's
# paths (GPU machines: /usr/include/nccl.h, /usr/lib/x86_64-linux-gnu/libnccl.so.2), and under
# NCCL_ROOT / $NCCL_ROOT / $NCCL_HOME when set. The results are the cache variables
# CURT_NCCL_INCLUDE_DIR and CURT_NCCL_LIBRARY (set them to choose an NCCL; a directory without
# nccl.h or a library that does not exist counts as no NCCL).
# Defines CURT_HAS_NCCL (ON/OFF) and, where NCCL is found, the target curt::nccl (curt + NCCL):
# a normal INTERFACE library in the build tree (visible to a parent project), an IMPORTED one
# inside find_package(curt), which also sets curt_nccl_FOUND for find_package(curt COMPONENTS
# nccl). NCCL missing is never an error here: curt::nccl is simply not defined.
if(TARGET curt::nccl)  # included again (a second find_package(curt), a second include)
  set(CURT_HAS_NCCL ON)
  set(curt_nccl_FOUND TRUE)
  return()
endif()

if(DEFINED CMAKE_FIND_PACKAGE_NAME AND CMAKE_FIND_PACKAGE_NAME STREQUAL "curt")
  set(_curt_nccl_in_package ON)
else()
  set(_curt_nccl_in_package OFF)
endif()

set(_curt_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT}
    ${CUDAToolkit_TARGET_DIR})
find_path(CURT_NCCL_INCLUDE_DIR nccl.h
          HINTS ${_curt_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include
          DOC "curt: the directory of NCCL's nccl.h")
# libnccl.so.2 alone (no libnccl.so development link) is what some installs ship.
find_library(CURT_NCCL_LIBRARY NAMES nccl libnccl.so.2
             HINTS ${_curt_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu
             DOC "curt: NCCL's library (libnccl)")
unset(_curt_nccl_hints)

if(CURT_NCCL_INCLUDE_DIR AND CURT_NCCL_LIBRARY AND EXISTS "${CURT_NCCL_INCLUDE_DIR}/nccl.h"
   AND EXISTS "${CURT_NCCL_LIBRARY}")
  set(CURT_HAS_NCCL ON)
  _curt_optional_target(nccl "${CURT_NCCL_INCLUDE_DIR}" "${CURT_NCCL_LIBRARY}"
                        "NCCL found: ${CURT_NCCL_INCLUDE_DIR}/nccl.h, ${CURT_NCCL_LIBRARY}")
else()
  set(CURT_HAS_NCCL OFF)
  if(_curt_nccl_in_package)
    set(curt_nccl_FOUND FALSE)
    string(CONCAT curt_nccl_NOT_FOUND_MESSAGE "NCCL (nccl.h and libnccl) was not found, so "
           "curt::nccl is not defined (set NCCL_ROOT, or CURT_NCCL_INCLUDE_DIR and "
           "CURT_NCCL_LIBRARY)")
    if(NOT curt_FIND_QUIETLY)
      message(STATUS "curt: NCCL not found: curt::nccl is not defined")
    endif()
  else()
    message(STATUS "curt: NCCL not found: curt::nccl is not defined, and <curt/nccl.hpp>'s "
                   "tests and examples are not built")
  endif()
endif()
unset(_curt_nccl_in_package)
