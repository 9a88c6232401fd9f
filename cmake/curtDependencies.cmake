# What curt::curt needs: the CUDA runtime and CCCL (libcu++, CUB, Thrust), both from the toolkit.
# Shared by the build tree and the installed package so both find them the same way.
if(DEFINED CMAKE_FIND_PACKAGE_NAME)  # inside find_package(curt): report through find_dependency
  include(CMakeFindDependencyMacro)
  macro(_curt_find_dependency)
    find_dependency(${ARGV})
  endmacro()
else()
  macro(_curt_find_dependency)
    find_package(${ARGV} REQUIRED)
  endmacro()
endif()

if(NOT TARGET CUDA::cudart)
  _curt_find_dependency(CUDAToolkit)
endif()
if(NOT TARGET CCCL::CCCL)
  _curt_find_dependency(CCCL CONFIG HINTS "${CUDAToolkit_LIBRARY_DIR}/cmake"
                        "${CUDAToolkit_LIBRARY_ROOT}/lib64/cmake")
endif()
