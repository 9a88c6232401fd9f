# NVTX 3, for <curt/nvtx.hpp>: header-only, shipped with the CUDA toolkit; FindCUDAToolkit's
# CUDA::nvtx3 gives its include directory and libdl (NVTX loads a tool with dlopen). Shared by
# the build tree and the installed package (curtConfig.cmake includes it after
# curtDependencies.cmake), as curtNccl.cmake is, so both define the target the same way.
# Defines CURT_HAS_NVTX (ON/OFF) and, where CUDA::nvtx3 exists, the target curt::nvtx (curt +
# NVTX): a normal INTERFACE library in the build tree (visible to a parent project), an IMPORTED
# one inside find_package(curt), which also sets curt_nvtx_FOUND for
# find_package(curt COMPONENTS nvtx). A toolkit without NVTX 3 is never an error here.
if(TARGET curt::nvtx)  # included again (a second find_package(curt), a second include)
  set(CURT_HAS_NVTX ON)
  set(curt_nvtx_FOUND TRUE)
  return()
endif()

if(TARGET CUDA::nvtx3)
  set(CURT_HAS_NVTX ON)
  if(DEFINED CMAKE_FIND_PACKAGE_NAME AND CMAKE_FIND_PACKAGE_NAME STREQUAL "curt")
    add_library(curt::nvtx INTERFACE IMPORTED)
    set_target_properties(curt::nvtx PROPERTIES INTERFACE_LINK_LIBRARIES "curt::curt;CUDA::nvtx3")
    set(curt_nvtx_FOUND TRUE)
  else()
    add_library(curt_nvtx INTERFACE)
    add_library(curt::nvtx ALIAS curt_nvtx)
    target_link_libraries(curt_nvtx INTERFACE curt::curt CUDA::nvtx3)
  endif()
else()
  set(CURT_HAS_NVTX OFF)
  if(DEFINED CMAKE_FIND_PACKAGE_NAME AND CMAKE_FIND_PACKAGE_NAME STREQUAL "curt")
    set(curt_nvtx_FOUND FALSE)
    set(curt_nvtx_NOT_FOUND_MESSAGE
        "the CUDA toolkit has no NVTX 3 (CUDA::nvtx3), so curt::nvtx is not defined")
  else()
    message(STATUS "curt: the CUDA toolkit has no NVTX 3: curt::nvtx is not defined, and "
                   "<curt/nvtx.hpp>'s tests and benchmark are not built")
  endif()
endif()
