# Shared by the consumers: curt::nvtx is defined wherever the CUDA toolkit has NVTX 3 (every
# toolkit curt supports); nvtx_consumer links it (run_consumer.cmake runs it too).
if(NOT TARGET curt::nvtx)
  message(FATAL_ERROR "curt::nvtx is not defined, but the toolkit has NVTX 3")
endif()
add_executable(nvtx_consumer ${CMAKE_CURRENT_LIST_DIR}/nvtx.cpp)
target_link_libraries(nvtx_consumer PRIVATE curt::nvtx)
