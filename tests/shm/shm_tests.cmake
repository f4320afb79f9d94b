# tests/shm/shm_tests.cmake: the SHM transport (stage 5 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage, with
#   TCCL_STAGE_NUM, TCCL_STAGE_DIR, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX, TCCL_STAGE_LABEL
# and the helper tccl_stage_test_executable(<target> SOURCES ...). Labels: stage<N>, shm.
#
# From stage 5 on, ranks of one host talk over SHM by default, so every earlier feature's
# tests (re-run by this stage) already exercise it. This fragment adds:
#   proto_choice     TCCL_PROTO and the protocol choice of the cost model (no communication)
#   plan_cache       the kept plan of the last host collective: reused for calls of its
#                    shape only, each time with the call's own buffers (1..3 ranks)
#   p2p_order        the parts of a large GPU send/recv, and the item order that lets a p2p
#                    kernel with fewer blocks than items run them in turns (a simulation)
#   shm              segments, descriptor passing, and what a communicator leaves behind
#                    (1..4 ranks over SHM; 3 ranks with TCCL_SHM_DISABLE=1, which must keep
#                    it out)
#   shm_ring_sweep   the ring sweep over SHM at 2 and 5 ranks (the re-run covers 3)
#   *_socket         the ring, tree and P2P sweeps, large P2P messages and a peer killed
#                    mid-transfer with SHM disabled: the network path stays tested on one host
#                    (the peer-death test itself, re-run by this stage, now runs over SHM)
#
# Budget: about 40 s on the 2-core CI machine.
#
# Added in: stage 5.

set(_shm_src ${CMAKE_CURRENT_LIST_DIR})
set(_shm_labels ${TCCL_STAGE_LABEL} shm)

# shm_segment.cc is compiled in: the library exports only the tccl* API.
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_shm SOURCES ${_shm_src}/shm_test.cc
  ${TCCL_STAGE_DIR}/src/transport/shm/shm_segment.cc)
target_link_libraries(${TCCL_STAGE_PREFIX}test_shm PRIVATE tccl_common)

# TCCL_PROTO and the protocol choice (the LL protocol), compiled from the stage's tuning.cc
# (libtccl.so exports only the API), without communication: as tree_tests.cmake's tree_shapes.
set(_t ${TCCL_STAGE_PREFIX}test_proto_choice)
add_executable(${_t} ${_shm_src}/proto_choice_test.cc ${TCCL_STAGE_DIR}/src/tuning.cc)
target_include_directories(${_t} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src)
target_link_libraries(${_t} PRIVATE tccl_common GTest::gtest_main Threads::Threads)
if(TCCL_HAVE_CUDA)
  target_link_libraries(${_t} PRIVATE CUDA::cudart_static)
endif()
tccl_warnings(${_t})
tccl_add_test(NAME ${TCCL_STAGE_PREFIX}proto_choice COMMAND ${_t} LABELS ${_shm_labels} TIMEOUT 60)

# The p2p parts and item order (device/p2p.h, plan.h): header functions, no library.
set(_t ${TCCL_STAGE_PREFIX}test_p2p_order)
add_executable(${_t} ${_shm_src}/p2p_order_test.cc)
target_include_directories(${_t} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src)
target_link_libraries(${_t} PRIVATE tccl_common GTest::gtest_main Threads::Threads)
tccl_warnings(${_t})
tccl_add_test(NAME ${TCCL_STAGE_PREFIX}p2p_order COMMAND ${_t} LABELS ${_shm_labels} TIMEOUT 60)

# The kept plan of the last host collective (plan_cache.cc): reused only for its shape.
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_plan_cache PUBLIC_API
  SOURCES ${_shm_src}/plan_cache_test.cc INCLUDES ${_shm_src}/../ring)
tccl_stage_nps(_nps 1 2 3)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}plan_cache NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_plan_cache
    LABELS ${_shm_labels} coll TIMEOUT 120)
endforeach()

tccl_stage_nps(_nps 1 2 3 4)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}shm NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_shm
    LABELS ${_shm_labels} TIMEOUT 120)
endforeach()
tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}shm_disabled NP 3
  COMMAND ${TCCL_STAGE_PREFIX}test_shm --gtest_filter=ShmComm.*
  LABELS ${_shm_labels} TIMEOUT 120
  ENVIRONMENT TCCL_SHM_DISABLE=1)

# Earlier features over SHM at the rank counts their own re-run does not cover.
if(TARGET ${TCCL_STAGE_PREFIX}test_ring_sweep)
  tccl_stage_nps(_nps 2 5)
  if(NOT TCCL_FEATURE_REPEAT)
    foreach(np IN LISTS _nps)
      tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}shm_ring_sweep NP ${np}
        COMMAND ${TCCL_STAGE_PREFIX}test_ring_sweep
        LABELS ${_shm_labels} coll TIMEOUT 300)
    endforeach()
  endif()
endif()

# The same features with SHM disabled: the network transport between ranks of one host.
if(TARGET ${TCCL_STAGE_PREFIX}test_ring_sweep)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}ring_sweep_socket NP 3
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_sweep
    LABELS ${_shm_labels} TIMEOUT 300 ENVIRONMENT TCCL_SHM_DISABLE=1)
endif()
if(TARGET ${TCCL_STAGE_PREFIX}test_ring_sweep AND TCCL_STAGE_NUM GREATER_EQUAL 3)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}tree_sweep_socket NP 3
    COMMAND ${TCCL_STAGE_PREFIX}test_ring_sweep --gtest_filter=*allreduce*
    LABELS ${_shm_labels} TIMEOUT 300 ENVIRONMENT TCCL_SHM_DISABLE=1 TCCL_ALGO=tree)
endif()
if(TARGET ${TCCL_STAGE_PREFIX}test_p2p_patterns)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_patterns_socket NP 3
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_patterns
    LABELS ${_shm_labels} TIMEOUT 300 ENVIRONMENT TCCL_SHM_DISABLE=1)
endif()
if(TARGET ${TCCL_STAGE_PREFIX}test_p2p_large)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_large_socket NP 2
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_large
    LABELS ${_shm_labels} TIMEOUT 300 ENVIRONMENT TCCL_SHM_DISABLE=1)
endif()
if(TARGET ${TCCL_STAGE_PREFIX}test_p2p_peer_death)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}p2p_peer_death_socket
    COMMAND ${TCCL_STAGE_PREFIX}test_p2p_peer_death
    LABELS ${_shm_labels} TIMEOUT 180 ENVIRONMENT TCCL_SHM_DISABLE=1)
endif()
