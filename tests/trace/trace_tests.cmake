# tests/trace/trace_tests.cmake: the step-timeline tests (stage 1 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage. Each test runs one
# case of trace_test.cc with TCCL_TRACE_FILE pointing into a directory of its own in the build
# tree; rank 0 then runs tools/trace check on the files of every rank. Labels: stage<N>, trace.
#
#   trace_sendrecv   a 4 MiB send/recv ring, twice (2 and 3 ranks): complete and causal
#   trace_allreduce  a 4 MiB ring all-reduce (stage 2 on; 3 ranks, and 4)
#   trace_tree / trace_rd  the same all-reduce on the double binary tree (4 and 5 ranks: inner
#                    nodes with two children, fan-in and fan-out) and by recursive doubling
#                    (3 ranks: the fold), TCCL_ALGO forced (stage 3 on)
#   trace_bounded    TCCL_TRACE_EVENTS=16: bounded, drops counted, the file still valid
#   trace_hosts      ranks on "different hosts" (TCCL_HOSTID) measure clock offsets to rank 0
#   trace_unwritable a directory that does not exist: a WARN, the operations succeed
#
# Added in: stage 1 (observability).

set(_trace_labels ${TCCL_STAGE_LABEL} trace)
set(_trace_exe ${TCCL_STAGE_PREFIX}test_trace)
tccl_stage_test_executable(${_trace_exe} PUBLIC_API SOURCES ${CMAKE_CURRENT_LIST_DIR}/trace_test.cc
  INCLUDES ${CMAKE_CURRENT_LIST_DIR}/..
  DEFINITIONS TCCL_TOOLS_DIR="${CMAKE_CURRENT_LIST_DIR}/../../tools")

# _tccl_trace_test(<name> <np> <gtest case> [ENV...]): one case, its own trace directory.
function(_tccl_trace_test name np filter)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${TCCL_STAGE_PREFIX}${name}.np${np})
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}${name} NP ${np}
    COMMAND ${_trace_exe} --gtest_filter=Trace.${filter}
    LABELS ${_trace_labels} TIMEOUT 120
    ENVIRONMENT TCCL_TRACE_FILE=${dir}/trace.%h.%p TCCL_TRACE_TEST_DIR=${dir} ${ARGN})
endfunction()

tccl_stage_nps(_nps 2 3)
foreach(np IN LISTS _nps)
  _tccl_trace_test(trace_sendrecv ${np} SendRecvPipelineIsCompleteAndCausal)
endforeach()
if(TCCL_STAGE_NUM GREATER_EQUAL 2)
  tccl_stage_nps(_nps 3 4)
  foreach(np IN LISTS _nps)
    _tccl_trace_test(trace_allreduce ${np} RingAllReduceIsCompleteAndCausal)
  endforeach()
endif()
if(TCCL_STAGE_NUM GREATER_EQUAL 3)
  tccl_stage_nps(_nps 4 5)
  foreach(np IN LISTS _nps)
    _tccl_trace_test(trace_tree ${np} RingAllReduceIsCompleteAndCausal TCCL_ALGO=tree)
  endforeach()
  _tccl_trace_test(trace_rd 3 RingAllReduceIsCompleteAndCausal TCCL_ALGO=recdoubling)
endif()
_tccl_trace_test(trace_bounded 2 EventsAreBoundedAndDropsAreCounted TCCL_TRACE_EVENTS=16)
_tccl_trace_test(trace_hosts 3 ClockOffsetsAreMeasuredAcrossHosts)
tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}trace_unwritable NP 2
  COMMAND ${_trace_exe} --gtest_filter=Trace.UnwritableFileIsAWarningNotAFailure
  LABELS ${_trace_labels} TIMEOUT 60
  ENVIRONMENT TCCL_TRACE_FILE=/nonexistent-tccl-dir/trace.%p)
