# Runs one compiler command and checks how it ended; used by tests/compile/CMakeLists.txt.
#
#   cmake -DEXPECT=failure "-DMESSAGE=<text>" -P check_compile.cmake -- <compiler> <args>...
#     passes only if the compiler exits non-zero AND its output contains <text> (a plain
#     substring, not a regular expression). A file that compiles, even with <text> printed as
#     a warning, fails; so does a file that fails for another reason.
#   cmake -DEXPECT=success -P check_compile.cmake -- <compiler> <args>...
#     passes only if the compiler exits with 0 (the positive control).
#
# Either way it prints the command, the exit status and the compiler's output.
cmake_minimum_required(VERSION 3.25)

if(NOT EXPECT MATCHES "^(failure|success)$")
  message(FATAL_ERROR "check_compile.cmake: EXPECT must be 'failure' or 'success', not '${EXPECT}'")
endif()
if(EXPECT STREQUAL "failure" AND "${MESSAGE}" STREQUAL "")
  message(FATAL_ERROR "check_compile.cmake: EXPECT=failure needs MESSAGE")
endif()

# The command is everything after "--".
set(command "")
set(seen_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 1 ${last})
  if(seen_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(seen_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "check_compile.cmake: no compiler command after --")
endif()

list(JOIN command " " shown)
message("command: ${shown}")
execute_process(COMMAND ${command} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("exit status: ${status}")
message("compiler output:\n${out}--- end of compiler output")

if(EXPECT STREQUAL "success")
  if(NOT status STREQUAL "0")
    message(FATAL_ERROR "FAIL: the control must compile, but the compiler exited with ${status}")
  endif()
  message("PASS: compiled")
  return()
endif()

string(FIND "${out}" "${MESSAGE}" found)
if(status STREQUAL "0")
  if(found EQUAL -1)
    message(FATAL_ERROR "FAIL: the file compiled (exit status 0); it must not")
  else()
    message(FATAL_ERROR "FAIL: the file compiled (exit status 0), printing the expected message "
                        "only as a diagnostic that is not an error; it must not compile")
  endif()
endif()
if(found EQUAL -1)
  message(FATAL_ERROR "FAIL: the compiler failed (exit status ${status}), but not with the "
                      "expected message:\n  ${MESSAGE}")
endif()
message("PASS: failed to compile (exit status ${status}) with the expected message:\n  ${MESSAGE}")
