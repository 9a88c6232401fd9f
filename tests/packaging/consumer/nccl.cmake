# Shared by the consumers: curt::nccl must be defined exactly where NCCL is expected to be found
# (CURT_EXPECT_NCCL: the curt build found NCCL, and the test does not hide it); where it is,
# nccl_consumer links it (run_consumer.cmake runs it too).
if(CURT_EXPECT_NCCL AND NOT TARGET curt::nccl)
  message(FATAL_ERROR "curt::nccl is not defined, but NCCL is there")
elseif(NOT CURT_EXPECT_NCCL AND TARGET curt::nccl)
  message(FATAL_ERROR "curt::nccl is defined, but NCCL was hidden")
endif()
if(TARGET curt::nccl)
  add_executable(nccl_consumer ${CMAKE_CURRENT_LIST_DIR}/nccl.cu)
  target_link_libraries(nccl_consumer PRIVATE curt::nccl)
endif()
