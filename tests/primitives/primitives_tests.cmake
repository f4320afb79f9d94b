# Unit tests of a stage's primitives (host backend, no communicator). Included by
# tccl_add_stage_tests for every stage >= 1; see tests/StageTests.cmake.
find_package(GTest QUIET)
if(GTest_FOUND)
  set(_t ${TCCL_STAGE_PREFIX}test_primitives)
  add_executable(${_t} ${CMAKE_CURRENT_LIST_DIR}/test_primitives.cc)
  target_include_directories(${_t} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src
                                           ${CMAKE_CURRENT_LIST_DIR}/../../common/include)
  target_link_libraries(${_t} PRIVATE GTest::gtest_main Threads::Threads)
  tccl_warnings(${_t})
  add_test(NAME ${_t} COMMAND ${_t})
  set_tests_properties(${_t} PROPERTIES TIMEOUT 60 LABELS "stage${TCCL_STAGE_NUM};primitives;unit")
endif()
