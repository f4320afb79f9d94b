# tests/p2p/p2p_tests.cmake: the P2P tests (stage 1 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage, with
#   TCCL_STAGE_NUM, TCCL_STAGE_DIR, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX
# and the helper tccl_stage_test_executable(<target> SOURCES ...), which links the stage library
# and the MPI test harness (whose main() runs GoogleTest under MPI). Every source here sees only
# tccl.h (PUBLIC_API): its objects are shared by the stages whose tccl.h is the same.
#
# MPI tests run at 1..5 ranks where the rank count matters; the 64 Mi-element cases only at 2
# and 4 ranks. The non-MPI tests (thread ranks, a killed peer, two network namespaces) are
# plain GoogleTest programs: they link gtest_main, not the harness, because they fork or
# create their ranks themselves.
#
# Budget: the whole stage-1 suite stays well under 5 minutes on a 2-core CI machine (np 5 is
# oversubscribed there). Timeouts are caps for hangs, not estimates.
#
# Added in: stage 1.

set(_p2p_src ${CMAKE_CURRENT_LIST_DIR})
set(_p2p_labels ${TCCL_STAGE_LABEL} p2p)

# ---- MPI tests ----------------------------------------------------------------------------
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_p2p_patterns PUBLIC_API
  SOURCES ${_p2p_src}/p2p_patterns_test.cc)
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_p2p_large PUBLIC_API
  SOURCES ${_p2p_src}/p2p_large_test.cc)
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_p2p_group PUBLIC_API
  SOURCES ${_p2p_src}/p2p_group_test.cc)
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_p2p_errors PUBLIC_API
  SOURCES ${_p2p_src}/p2p_errors_test.cc)

tccl_stage_nps(_nps 1 2 3 4 5)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_patterns NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_patterns
    LABELS ${_p2p_labels} TIMEOUT 300)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_group NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_group
    LABELS ${_p2p_labels} TIMEOUT 300)
endforeach()
# Three sockets per connection and small kernel buffers: steps are split over sockets and
# leave in many partial sends, the size header's gathered send too. The 4 KiB asked for is
# raised to TCCL_SOCKET_BUFFER's 64 KiB floor; without the floor TCP stalls on delayed ACKs
# (~25 s per MiB) and this test, ~2 s with it, runs into its timeout. TCCL_SHM_DISABLE: from
# stage 5 on, ranks of one host would otherwise not use sockets at all.
tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_patterns_multisock NP 3
  COMMAND ${TCCL_STAGE_PREFIX}test_p2p_patterns
  LABELS ${_p2p_labels} TIMEOUT 120
  ENVIRONMENT TCCL_NSOCKS_PERCONN=3 TCCL_SOCKET_BUFFER=4096 TCCL_SHM_DISABLE=1)
tccl_stage_nps(_nps 2 4)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_large NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_large
    LABELS ${_p2p_labels} TIMEOUT 300)
endforeach()
tccl_stage_nps(_nps 1 2)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_errors NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_errors
    LABELS ${_p2p_labels} TIMEOUT 120)
endforeach()

# ---- Non-MPI tests ------------------------------------------------------------------------
# These need GoogleTest's own main(), not the harness's MPI one.
function(_tccl_p2p_plain_test target source)
  tccl_stage_test_executable(${target} PUBLIC_API GTEST_MAIN SOURCES ${source}
    INCLUDES ${_p2p_src})
endfunction()

# find_package's imported targets are directory-scoped: common/ found GTest for itself.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest QUIET)
endif()
if(TARGET GTest::gtest_main)
  _tccl_p2p_plain_test(${TCCL_STAGE_PREFIX}test_p2p_threads ${_p2p_src}/p2p_threads_test.cc)
  _tccl_p2p_plain_test(${TCCL_STAGE_PREFIX}test_p2p_peer_death ${_p2p_src}/p2p_peer_death_test.cc)
  _tccl_p2p_plain_test(${TCCL_STAGE_PREFIX}test_p2p_netns ${_p2p_src}/p2p_netns_test.cc)

  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}p2p_threads
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_threads
    LABELS ${_p2p_labels} TIMEOUT 180)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}p2p_peer_death
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_peer_death
    LABELS ${_p2p_labels} TIMEOUT 180)
  # Creates network namespaces: needs root (CAP_SYS_ADMIN); skips itself where not permitted.
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}p2p_netns
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_netns
    LABELS ${_p2p_labels} netns TIMEOUT 180)
  set_tests_properties(${TCCL_STAGE_PREFIX}p2p_netns PROPERTIES
    SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endif()
