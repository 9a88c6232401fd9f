# cmake -DREADME=<README.md> -DPROGRAM=<tests/packaging/first_program.cu> -P readme_first_program.cmake
# The README's first program is the file tests/packaging builds, byte for byte: the ```cpp block
# right after the line `<!-- first_program.cu -->` holds exactly the file's text. Without the
# marker the test reports itself skipped (SKIP_REGULAR_EXPRESSION "SKIPPED:").
file(READ ${README} readme)
file(READ ${PROGRAM} program)
set(marker "<!-- first_program.cu -->\n")
string(FIND "${readme}" "${marker}" at)
if(at EQUAL -1)
  message("SKIPPED: ${README} has no line '<!-- first_program.cu -->' yet, so there is no copy "
          "of ${PROGRAM} to compare")
  return()
endif()
string(LENGTH "${marker}" length)
math(EXPR at "${at} + ${length}")
string(SUBSTRING "${readme}" ${at} -1 rest)
set(fence "```cpp\n")
string(FIND "${rest}" "${fence}" fence_at)
if(NOT fence_at EQUAL 0)
  message(FATAL_ERROR "FAIL: the line after '<!-- first_program.cu -->' in ${README} is not ```cpp")
endif()
string(LENGTH "${fence}" length)
string(SUBSTRING "${rest}" ${length} -1 rest)
string(FIND "${rest}" "\n```" end)
if(end EQUAL -1)
  message(FATAL_ERROR "FAIL: the ```cpp block after the marker in ${README} is not closed")
endif()
math(EXPR end "${end} + 1")  # the block's last line ends with its newline
string(SUBSTRING "${rest}" 0 ${end} block)
if(NOT block STREQUAL program)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/readme_first_program.cu "${block}")
  message(FATAL_ERROR "FAIL: the README's first program differs from ${PROGRAM}; the README's "
                      "copy is in ${CMAKE_CURRENT_BINARY_DIR}/readme_first_program.cu "
                      "(diff the two)")
endif()
string(LENGTH "${program}" length)
message("PASS: ${README} holds ${PROGRAM} byte for byte (${length} bytes)")
