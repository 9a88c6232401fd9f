# cmake -DSOURCE=... -DBINARY=... -DGENERATOR=... [-DARGS=...] -P run_consumer.cmake
# Configures, builds and runs one consumer project from scratch (nccl_consumer too, where the
# consumer built one).
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
foreach(program consumer nccl_consumer)
  if(program STREQUAL "consumer" OR EXISTS ${BINARY}/${program})
    execute_process(COMMAND ${BINARY}/${program} RESULT_VARIABLE result)
    if(result)
      message(FATAL_ERROR "running the ${program} of ${SOURCE} failed: ${result}")
    endif()
  endif()
endforeach()
