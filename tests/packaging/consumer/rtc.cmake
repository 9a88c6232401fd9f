# Shared by the consumers: curt::rtc must be defined exactly where NVRTC is expected to be found
# (CURT_EXPECT_RTC: the curt build found it); where it is, rtc_consumer links it and
# run_consumer.cmake runs it (it compiles a kernel with NVRTC: no GPU needed).
if(CURT_EXPECT_RTC AND NOT TARGET curt::rtc)
  message(FATAL_ERROR "curt::rtc is not defined, but NVRTC is there")
elseif(NOT CURT_EXPECT_RTC AND TARGET curt::rtc)
  message(FATAL_ERROR "curt::rtc is defined, but NVRTC was not expected")
endif()
if(TARGET curt::rtc)
  add_executable(rtc_consumer ${CMAKE_CURRENT_LIST_DIR}/rtc.cpp)
  target_link_libraries(rtc_consumer PRIVATE curt::rtc)
endif()
