# tests/net/net_tests.cmake: the network interface (stage 6 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage, with
#   TCCL_STAGE_NUM, TCCL_STAGE_DIR, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX, TCCL_STAGE_LABEL
# and the helper tccl_stage_test_executable(<target> SOURCES ...). Labels: stage<N>, net.
#
# Every earlier feature's network tests (the *_socket runs of shm_tests.cmake, the peer-death
# and network-namespace tests) already run over the network transport and the socket Net of
# this stage. This fragment adds:
#   net_socket        the Net interface as the socket Net implements it, driven call by call
#                     (no MPI: both ends in one process), with one socket per connection and
#                     with three (large messages cut into parts)
#   net_ib            the verbs Net against an in-process fake verbs device (where the verbs
#                     headers are); net_ib_wrong_gid: a wrong GID index fails in words
#   net_fake_ib       collectives through the whole library over NET/IB, the same fake built
#                     as a libibverbs.so.1 that LD_LIBRARY_PATH puts before rdma-core's (ranks
#                     are threads of one process); on a GPU also the GPUDirect RDMA path
#                     (TCCL_NET_GDR_ENABLE=1 and a fake that registers dma-bufs)
#
# Budget: about ten seconds.
#
# Added in: stage 6.

set(_net_src ${CMAKE_CURRENT_LIST_DIR})
set(_net_labels ${TCCL_STAGE_LABEL} net)

# net_socket.cc is compiled in: the library exports only the tccl* API.
set(_t ${TCCL_STAGE_PREFIX}test_net_socket)
add_executable(${_t} ${_net_src}/net_socket_test.cc
  ${TCCL_STAGE_DIR}/src/transport/net/socket/net_socket.cc)
target_include_directories(${_t} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src)
target_link_libraries(${_t} PRIVATE tccl_common GTest::gtest_main Threads::Threads)
tccl_warnings(${_t})
tccl_add_test(NAME ${TCCL_STAGE_PREFIX}net_socket COMMAND ${_t} LABELS ${_net_labels}
  TIMEOUT 120)
tccl_add_test(NAME ${TCCL_STAGE_PREFIX}net_socket_3socks COMMAND ${_t} LABELS ${_net_labels}
  TIMEOUT 120 ENVIRONMENT TCCL_NSOCKS_PERCONN=3)

# The verbs Net against the fake verbs device (fake_verbs.h), where the verbs headers are
# (TCCL_HAVE_IB): metadata, GID choice, the QP state machine, the data path and its flow
# control; and once more with TCCL_IB_GID_INDEX=2 (a RoCE v1 GID on the fake's v2-only
# fabric): the first message fails with status 12, in words.
if(TCCL_HAVE_IB)
  set(_t ${TCCL_STAGE_PREFIX}test_net_ib)
  set(_ib ${TCCL_STAGE_DIR}/src/transport/net/ib)
  add_executable(${_t} ${_net_src}/net_ib_test.cc ${_net_src}/fake_verbs.cc
    ${_ib}/ib_device.cc ${_ib}/ibvwrap.cc ${_ib}/net_ib_connect.cc ${_ib}/net_ib.cc
    ${TCCL_STAGE_DIR}/src/transport/net/socket/net_socket.cc)
  target_include_directories(${_t} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src
    ${TCCL_IBVERBS_INCLUDE_DIR})
  target_link_libraries(${_t} PRIVATE tccl_common GTest::gtest_main Threads::Threads
    ${CMAKE_DL_LIBS})
  tccl_warnings(${_t})
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}net_ib COMMAND ${_t} LABELS ${_net_labels} TIMEOUT 120)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}net_ib_wrong_gid COMMAND ${_t} LABELS ${_net_labels}
    TIMEOUT 120 ENVIRONMENT TCCL_IB_GID_INDEX=2)

  # The fake as libibverbs.so.1, in a directory of its own (fake_verbs_lib.cc).
  set(_fake ${TCCL_STAGE_PREFIX}fake_ibverbs)
  set(_fake_dir ${CMAKE_CURRENT_BINARY_DIR}/${_fake})
  add_library(${_fake} SHARED ${_net_src}/fake_verbs_lib.cc ${_net_src}/fake_verbs.cc)
  set_target_properties(${_fake} PROPERTIES OUTPUT_NAME ibverbs VERSION 1 SOVERSION 1
    LIBRARY_OUTPUT_DIRECTORY ${_fake_dir})
  target_include_directories(${_fake} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src
    ${TCCL_IBVERBS_INCLUDE_DIR})
  target_link_libraries(${_fake} PRIVATE tccl_common)
  set(_fake_defs "")
  if(TCCL_HAVE_CUDA)
    target_compile_definitions(${_fake} PRIVATE TCCL_HAVE_CUDA=1)
    target_link_libraries(${_fake} PRIVATE CUDA::cudart)
    set(_fake_defs TCCL_HAVE_CUDA=1)
  endif()
  tccl_warnings(${_fake})

  set(_t ${TCCL_STAGE_PREFIX}test_net_fake_ib)
  tccl_stage_test_executable(${_t} PUBLIC_API SOURCES ${_net_src}/net_fake_ib_test.cc
    DEFINITIONS ${_fake_defs})
  add_dependencies(${_t} ${_fake})
  # Every connector a network one (no SHM, no P2P); the fake's RoCE v2 IPv4 GID (its type is
  # not in sysfs); GPUDirect RDMA asked for, and the fake able to register dma-bufs.
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}net_fake_ib NP 1 COMMAND ${_t}
    LABELS ${_net_labels} TIMEOUT 180
    ENVIRONMENT TCCL_SHM_DISABLE=1 TCCL_P2P_DISABLE=1 TCCL_IB_GID_INDEX=3
                TCCL_NET_GDR_ENABLE=1 FAKE_VERBS_DMABUF=1)
  if(TEST ${TCCL_STAGE_PREFIX}net_fake_ib.np1)
    set_property(TEST ${TCCL_STAGE_PREFIX}net_fake_ib.np1 APPEND PROPERTY
      ENVIRONMENT_MODIFICATION LD_LIBRARY_PATH=path_list_prepend:${_fake_dir})
  endif()
endif()
