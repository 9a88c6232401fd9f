# NCCL, optional: <curt/nccl.hpp> and what uses it (tests/gpu/test_nccl, examples/multi_gpu) are
# built only where nccl.h and libnccl are found. Nothing else in curt depends on NCCL.
# Looked for in the CUDA toolkit (development machine: include/nccl.h, lib/libnccl.so.2), in the
# system's paths (GPU machines: /usr/include/nccl.h, /usr/lib/x86_64-linux-gnu/libnccl.so.2), and
# under NCCL_ROOT / $NCCL_HOME when set.
# Defines CURT_HAS_NCCL and, where found, the target curt::nccl (curt + NCCL).
if(NOT TARGET curt::nccl)
  set(_curt_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT}
      ${CUDAToolkit_TARGET_DIR})
  find_path(CURT_NCCL_INCLUDE_DIR nccl.h
            HINTS ${_curt_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  # libnccl.so.2 alone (no libnccl.so development link) is what some installs ship.
  find_library(CURT_NCCL_LIBRARY NAMES nccl libnccl.so.2
               HINTS ${_curt_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(CURT_NCCL_INCLUDE_DIR AND CURT_NCCL_LIBRARY)
    set(CURT_HAS_NCCL ON)
    add_library(curt_nccl INTERFACE)
    add_library(curt::nccl ALIAS curt_nccl)
    target_include_directories(curt_nccl SYSTEM INTERFACE ${CURT_NCCL_INCLUDE_DIR})
    target_link_libraries(curt_nccl INTERFACE curt::curt ${CURT_NCCL_LIBRARY})
    message(STATUS "curt: NCCL found: ${CURT_NCCL_INCLUDE_DIR}/nccl.h, ${CURT_NCCL_LIBRARY}")
  else()
    set(CURT_HAS_NCCL OFF)
    message(STATUS "curt: NCCL not found: <curt/nccl.hpp>'s tests and examples are not built")
  endif()
  unset(_curt_nccl_hints)
endif()
