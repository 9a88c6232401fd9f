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

# curt::NAME (curt + an optional library found by cmake/curtNAME.cmake): an IMPORTED target inside
# find_package(curt), which also sets curt_NAME_FOUND, else a normal INTERFACE library with SYSTEM
# includes (the build tree, add_subdirectory); a status line unless found quietly.
function(_curt_optional_target name include_dir libraries what)
  if(DEFINED CMAKE_FIND_PACKAGE_NAME AND CMAKE_FIND_PACKAGE_NAME STREQUAL "curt")
    add_library(curt::${name} INTERFACE IMPORTED)
    set_target_properties(curt::${name} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${include_dir}"
      INTERFACE_LINK_LIBRARIES "curt::curt;${libraries}")
    set(curt_${name}_FOUND TRUE PARENT_SCOPE)
    if(curt_FIND_QUIETLY)
      return()
    endif()
  else()
    add_library(curt_${name} INTERFACE)
    add_library(curt::${name} ALIAS curt_${name})
    target_include_directories(curt_${name} SYSTEM INTERFACE ${include_dir})
    target_link_libraries(curt_${name} INTERFACE curt::curt ${libraries})
  endif()
  message(STATUS "curt: ${what}")
endfunction()
