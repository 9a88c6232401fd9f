# Decides which of curt's tests, examples and benchmarks this configure builds (not installed).
# Each of CURT_BUILD_TESTS, CURT_BUILD_EXAMPLES, CURT_BUILD_BENCHMARKS (cache: AUTO, ON or OFF)
# becomes a normal variable, ON or OFF, for the rest of curt's CMake files:
#   AUTO  built where what it needs is found; otherwise skipped, with a STATUS line saying why
#   ON    required: a missing dependency is a FATAL_ERROR naming it
#   OFF   not built
# What each needs: all three the CUDA compiler (nvcc); tests Catch2 (v2.13+ or v3); benchmarks
# Google Benchmark (find_package(benchmark)). Python 3 is optional (a few host tests of scripts).
# Hide a dependency to check the bare-checkout path, e.g.
#   -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON
set(_curt_parts "")
foreach(_curt_part TESTS EXAMPLES BENCHMARKS)
  string(TOUPPER "${CURT_BUILD_${_curt_part}}" _curt_value)
  if(_curt_value STREQUAL "AUTO")
    list(APPEND _curt_parts ${_curt_part})
    set(_curt_required_${_curt_part} OFF)
  elseif(CURT_BUILD_${_curt_part})
    list(APPEND _curt_parts ${_curt_part})
    set(_curt_required_${_curt_part} ON)
  endif()
  set(CURT_BUILD_${_curt_part} OFF)
endforeach()

# _curt_missing(PART "what is missing"): an error if PART was asked for (ON), else a STATUS line
# and PART left out.
macro(_curt_missing part why)
  string(TOLOWER ${part} _curt_part_name)
  if(_curt_required_${part})
    message(FATAL_ERROR "curt: CURT_BUILD_${part}=ON, but ${why}. Configure with "
                        "-DCURT_BUILD_${part}=AUTO to skip the ${_curt_part_name} where it is "
                        "missing, or OFF.")
  endif()
  message(STATUS "curt: ${_curt_part_name} skipped: ${why} (an error with "
                 "-DCURT_BUILD_${part}=ON)")
  list(REMOVE_ITEM _curt_parts ${part})
endmacro()

if(_curt_parts)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
  else()
    foreach(_curt_part IN LISTS _curt_parts)
      _curt_missing(${_curt_part} "no CUDA compiler (nvcc) was found; set CMAKE_CUDA_COMPILER")
    endforeach()
  endif()
endif()
# _curt_needs(PART PACKAGE WHY): PART is built only where find_package(PACKAGE) succeeds.
macro(_curt_needs part package why)
  if(${part} IN_LIST _curt_parts)
    find_package(${package} QUIET)
    if(NOT ${package}_FOUND)
      _curt_missing(${part} "${why}")
    endif()
  endif()
endmacro()
_curt_needs(TESTS Catch2 "Catch2 (v2.13+ or v3) was not found; install it or set Catch2_DIR")
_curt_needs(BENCHMARKS benchmark
            "Google Benchmark was not found; install it or set benchmark_DIR")

foreach(_curt_part IN LISTS _curt_parts)
  set(CURT_BUILD_${_curt_part} ON)
endforeach()
if(_curt_parts)
  string(TOLOWER "${_curt_parts}" _curt_part_names)
  string(REPLACE ";" ", " _curt_part_names "${_curt_part_names}")
  message(STATUS "curt: building ${_curt_part_names}")
elseif(PROJECT_IS_TOP_LEVEL)
  message(STATUS "curt: building no tests, examples or benchmarks (the library installs alone)")
endif()
unset(_curt_parts)
unset(_curt_part_names)
unset(_curt_value)
