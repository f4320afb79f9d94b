# tests/errors/errors_tests.cmake: the error-table tests (stage 2 and every later stage).
#
# errors_test       (MPI, 1 and 2 ranks) misuses docs/errors.md lists that the p2p and ring
#                   error tests do not cover; the count-mismatch case needs 2 ranks.
# errors_fork       (no MPI) misuses that need fresh processes: TCCL_BUFFSIZE differing
#                   between ranks, a rank that never arrives, nobody at the root address. A
#                   plain GoogleTest program (gtest_main): its ranks are forked children.
#                   Also an invalid TCCL_BUFFSIZE (a knob read once per process).
# Every row of docs/errors.md names the test that backs it.
#
# Added in: reliability (tests/errors).
set(_errors_src ${CMAKE_CURRENT_LIST_DIR})
set(_errors_labels ${TCCL_STAGE_LABEL} errors)

tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_errors PUBLIC_API
  SOURCES ${_errors_src}/errors_test.cc)
tccl_stage_nps(_nps 1 2)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}errors NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_errors
    LABELS ${_errors_labels} TIMEOUT 120)
endforeach()

if(NOT TARGET GTest::gtest_main)
  find_package(GTest QUIET)
endif()
if(TARGET GTest::gtest_main)
  set(_t ${TCCL_STAGE_PREFIX}test_errors_fork)
  # p2p_fork_util.h: forked ranks with deadlines, shared with the peer-death test.
  tccl_stage_test_executable(${_t} PUBLIC_API GTEST_MAIN SOURCES ${_errors_src}/errors_fork_test.cc
    INCLUDES ${_errors_src}/../p2p)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}errors_fork COMMAND ${_t}
    LABELS ${_errors_labels} TIMEOUT 180)
endif()
