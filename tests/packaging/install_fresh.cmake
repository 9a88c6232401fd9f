# cmake -DBINARY=<curt build tree> -DPREFIX=<prefix> -P install_fresh.cmake
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY} --prefix ${PREFIX} RESULT_VARIABLE result)
if(result)
  message(FATAL_ERROR "installing curt into ${PREFIX} failed")
endif()
