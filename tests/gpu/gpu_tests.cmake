# tests/gpu/gpu_tests.cmake: the GPU data path's own tests (stage 5 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage, with
#   TCCL_STAGE_NUM, TCCL_STAGE_DIR, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX, TCCL_STAGE_LABEL
# and the helper tccl_stage_test_executable(<target> SOURCES ...). Labels: stage<N>, gpu.
#
# Every collective's correctness on device buffers is the earlier features' tests, run with
# TCCL_TEST_MEM=device on the GPU machine (tools/gpu/stage5.sh). This fragment adds what only
# a GPU has:
#   cuda_graph   collectives and send/recv captured in a CUDA graph and replayed 100 times
#                (1 and 2 ranks; on a machine without a GPU, such as CI's, every case skips)
#
# Added in: stage 5.

set(_gpu_src ${CMAKE_CURRENT_LIST_DIR})
set(_gpu_labels ${TCCL_STAGE_LABEL} gpu)

set(_gpu_defs "")
if(TCCL_HAVE_CUDA)
  set(_gpu_defs TCCL_HAVE_CUDA=1)
endif()
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_cuda_graph PUBLIC_API
  SOURCES ${_gpu_src}/cuda_graph_test.cc DEFINITIONS ${_gpu_defs})

tccl_stage_nps(_nps 1 2)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}cuda_graph NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_cuda_graph
    LABELS ${_gpu_labels} TIMEOUT 180)
endforeach()
