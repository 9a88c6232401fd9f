# cmake -DSOURCE=... -DBINARY=... -DGENERATOR=... [-DARGS=...] -P run_consumer.cmake
# Configures, builds and runs one consumer project from scratch.
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
execute_process(COMMAND ${BINARY}/consumer RESULT_VARIABLE result)
if(result)
  message(FATAL_ERROR "running the consumer of ${SOURCE} failed: ${result}")
endif()
