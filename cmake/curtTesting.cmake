# Helpers for curt's own tests, examples and benchmarks (not installed).

# CURT_SANITIZE=address,undefined builds the host tests with those sanitizers (CI runs this).
set(CURT_SANITIZE "" CACHE STRING "Sanitizers for host tests, e.g. address,undefined")
# Exit code of a GPU test or example that found no usable device; CTest reports it as skipped.
set(CURT_SKIP_CODE 77)

function(_curt_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
endfunction()

# curt_add_example(NAME source...): an example, run by CTest with label "examples".
function(curt_add_example name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE curt::curt)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/examples/common)
  _curt_warnings(${name})
  add_test(NAME example.${name} COMMAND ${name})
  set_tests_properties(example.${name} PROPERTIES LABELS examples SKIP_RETURN_CODE ${CURT_SKIP_CODE})
endfunction()
