# tests/ring/ring_tests.cmake: the ring-collective tests (stage 2 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage, with
#   TCCL_STAGE_NUM, TCCL_STAGE_DIR, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX, TCCL_STAGE_LABEL
# and the helper tccl_stage_test_executable(<target> SOURCES ...), which links the stage library
# and the MPI test harness (whose main() runs GoogleTest under MPI). Labels: stage<N>, coll.
#
#   ring_sweep    every collective x type x op x count x in/out of place x root (1..5 ranks;
#                 the small counts also at 7 ranks; at 3 ranks once more with a 64 KiB FIFO
#                 and two channels forced, so medium counts take many ring loops and counts
#                 smaller than the ring leave channels with nothing to do)
#   ring_large    64 Mi elements, one type/op per collective (2 and 4 ranks)
#   ring_group    collectives in groups, with send/recv, back to back, a failing group
#   ring_redop    premulsum scalar residence, live ops and slot reuse, float avg's definition
#   ring_errors   bad input: exact codes, messages, nothing hangs (1..3 ranks)
#   ring_threads  tcclCommInitAll, 1..5 ranks in one process (no MPI: GoogleTest's own main)
#   ring_engine_handoff  issue #36 in a fixed order: a reduce's sends left behind its item
#                 while the caller waits for another communicator of the group (stage 3 on:
#                 the executors are the progress engine from the host fast path on)
#
# Budget: the whole ring suite runs in about 2 minutes on the 2-core CI machine (np 3+ is
# oversubscribed there). Timeouts are caps for hangs, not estimates.
#
# Added in: stage 2.

set(_ring_src ${CMAKE_CURRENT_LIST_DIR})
set(_ring_labels ${TCCL_STAGE_LABEL} coll)

# ---- MPI tests ----------------------------------------------------------------------------
foreach(name sweep large group redop errors)
  tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_ring_${name} PUBLIC_API
    SOURCES ${_ring_src}/ring_${name}_test.cc)
endforeach()

tccl_stage_nps(_nps 1 2 3 4 5)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_sweep NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_sweep
    LABELS ${_ring_labels} TIMEOUT 300)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_group NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_group
    LABELS ${_ring_labels} TIMEOUT 120)
endforeach()
# 7 ranks: the small counts only (every root of 7, rings longer than the CI machine's cores).
if(NOT TCCL_FEATURE_REPEAT)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_sweep_small NP 7
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_sweep --gtest_filter=*Small*:RingReferences.*
    LABELS ${_ring_labels} TIMEOUT 300)
endif()
# A 64 KiB FIFO (8 KiB steps, 32 KiB chunks) and at least two channels.
tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_sweep_smallfifo NP 3
  COMMAND ${TCCL_STAGE_PREFIX}test_ring_sweep
  LABELS ${_ring_labels} TIMEOUT 300
  ENVIRONMENT TCCL_BUFFSIZE=65536 TCCL_MIN_NCHANNELS=2)
tccl_stage_nps(_nps 2 4)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_large NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_large
    LABELS ${_ring_labels} TIMEOUT 300)
endforeach()
tccl_stage_nps(_nps 1 2 3)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_redop NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_redop
    LABELS ${_ring_labels} TIMEOUT 120)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_errors NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_errors
    LABELS ${_ring_labels} TIMEOUT 120)
endforeach()

# ---- Non-MPI tests ------------------------------------------------------------------------
# GTEST_MAIN: this one needs GoogleTest's own main(), not the harness's MPI one.
# find_package's imported targets are directory-scoped: common/ found GTest for itself.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest QUIET)
endif()
if(TARGET GTest::gtest_main)
  set(_t ${TCCL_STAGE_PREFIX}test_ring_threads)
  tccl_stage_test_executable(${_t} PUBLIC_API GTEST_MAIN SOURCES ${_ring_src}/ring_threads_test.cc)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}ring_threads COMMAND ${_t}
    LABELS ${_ring_labels} TIMEOUT 120)
endif()
if(TARGET GTest::gtest_main AND TCCL_STAGE_NUM GREATER_EQUAL 3)
  # Issue #36 replayed: a group's second communicator leaves sends behind its last item
  # (the stage's internals: not PUBLIC_API; ranks as threads of a forked child). From stage 3,
  # where host items become the proxy's progress engine (the host fast path).
  set(_t ${TCCL_STAGE_PREFIX}test_ring_engine_handoff)
  tccl_stage_test_executable(${_t} GTEST_MAIN SOURCES ${_ring_src}/ring_engine_handoff_test.cc
    INCLUDES ${_ring_src}/../p2p)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}ring_engine_handoff COMMAND ${_t}
    LABELS ${_ring_labels} TIMEOUT 60)
endif()
