# cmake -DSOURCE=.. -DBINARY=.. -DGENERATOR=.. [-DARGS=..] [-DPROGRAMS=..] -P run_consumer.cmake
# Configures, builds and runs one consumer project from scratch. PROGRAMS: what to run
# (default: consumer, and nccl_consumer, rtc_consumer and nvtx_consumer where the consumer built
# them); a program that is not "consumer" and was not built is not run. Exit code 77 (no CUDA
# device) counts as built and linked, not run.
if(NOT DEFINED PROGRAMS)
  set(PROGRAMS consumer nccl_consumer rtc_consumer nvtx_consumer)
endif()
file(REMOVE_RECURSE ${BINARY})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G ${GENERATOR} ${ARGS}
                RESULT_VARIABLE result)
if(result)
  message(FATAL_ERROR "configuring ${SOURCE} failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} RESULT_VARIABLE result)
if(result)
  message(FATAL_ERROR "building ${SOURCE} failed")
endif()
foreach(program IN LISTS PROGRAMS)
  if(program STREQUAL "consumer" OR EXISTS ${BINARY}/${program})
    execute_process(COMMAND ${BINARY}/${program} RESULT_VARIABLE result)
    if(result EQUAL 77)
      message("${program} of ${SOURCE}: built and linked; not run (no CUDA device, exit code 77)")
    elseif(result)
      message(FATAL_ERROR "running the ${program} of ${SOURCE} failed: ${result}")
    endif()
  endif()
endforeach()
