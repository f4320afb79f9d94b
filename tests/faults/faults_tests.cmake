# tests/faults/faults_tests.cmake: failing well -- the flight recorder and the watchdog
# (stage 7 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage, with
#   TCCL_STAGE_NUM, TCCL_STAGE_DIR, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX, TCCL_STAGE_LABEL
# and the helper tccl_stage_test_executable(<target> SOURCES ...). Labels: stage<N>, faults.
#
#   flight_recorder   every operation recorded once, in order, with PyTorch's names; the
#                     dump API's errors (1..3 ranks); flight_recorder_signal: SIGUSR1 dumps
#                     (TCCL_FR_DUMP_ON_SIGNAL=1, 2 ranks)
#   watchdog          a rank that never joins collective 2 (it waits for a message instead):
#                     every rank's call ends in tcclRemoteError naming its operation, within
#                     TCCL_TIMEOUT=3 plus a margin, each leaving its dump (2 and 3 ranks)
#   frtrace           tools/frtrace on those dumps says rank 1 never joined collective 2
#   peer_departure    a peer on this host that destroyed its communicator and exited fails
#                     nothing; one that died fails the communicator (PeerWatch, no MPI)
#   check_mode        TCCL_CHECK_MODE=1: a count, type, root, reduction or collective that
#                     differs on one rank is refused on every rank, naming both calls (2, 3)
#
# Budget: about 15 s (the two watchdog runs wait 3 s each).
#
# Added in: stage 7.

set(_faults_src ${CMAKE_CURRENT_LIST_DIR})
set(_faults_labels ${TCCL_STAGE_LABEL} faults)

tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_flight_recorder PUBLIC_API
  SOURCES ${_faults_src}/flight_recorder_test.cc INCLUDES ${_faults_src}/../ring)

tccl_stage_nps(_nps 1 2 3)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}flight_recorder NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_flight_recorder --gtest_filter=FlightRecorder.*
    LABELS ${_faults_labels} TIMEOUT 120)
endforeach()
# The dump on SIGUSR1, into a directory of its own.
set(_dir ${CMAKE_CURRENT_BINARY_DIR}/${TCCL_STAGE_PREFIX}fr_signal)
file(MAKE_DIRECTORY ${_dir})
tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}flight_recorder_signal NP 2
  COMMAND ${TCCL_STAGE_PREFIX}test_flight_recorder --gtest_filter=FlightRecorder.SignalDumps
  LABELS ${_faults_labels} TIMEOUT 60
  ENVIRONMENT TCCL_FR_DUMP_ON_SIGNAL=1 TCCL_FR_DUMP=${_dir}/sig_)

# The watchdog, then the analyzer on the dumps it left (a fixture: the dumps come first).
tccl_stage_nps(_nps 2 3)
foreach(np IN LISTS _nps)
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/${TCCL_STAGE_PREFIX}fr_dumps_np${np})
  file(MAKE_DIRECTORY ${_dir})
  set(_name ${TCCL_STAGE_PREFIX}watchdog)
  tccl_add_mpi_test(NAME ${_name} NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_flight_recorder --gtest_filter=Watchdog.*
    LABELS ${_faults_labels} TIMEOUT 120
    ENVIRONMENT TCCL_TIMEOUT=3 TCCL_FR_DUMP=${_dir}/fr_)
  if(TEST ${_name}.np${np})
    set_tests_properties(${_name}.np${np} PROPERTIES FIXTURES_SETUP ${_name}_dumps_np${np})
    add_test(NAME ${TCCL_STAGE_PREFIX}frtrace.np${np}
      COMMAND ${TCCL_STAGE_DIR}/../tools/frtrace analyze ${_dir} --prefix fr_)
    # It exits 1 (problems found): the report is what must match.
    set_tests_properties(${TCCL_STAGE_PREFIX}frtrace.np${np} PROPERTIES
      LABELS "${_faults_labels}" TIMEOUT 60 FIXTURES_REQUIRED ${_name}_dumps_np${np}
      PASS_REGULAR_EXPRESSION "collective 2 \\(all_reduce of 1000 x Float \\(sum\\)\\): rank 1 never joined it")
  endif()
endforeach()

# The check mode: every mismatch refused on every rank.
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_check_mode PUBLIC_API
  SOURCES ${_faults_src}/check_mode_test.cc INCLUDES ${_faults_src}/../ring)
tccl_stage_nps(_nps 2 3)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}check_mode NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_check_mode
    LABELS ${_faults_labels} TIMEOUT 120 ENVIRONMENT TCCL_CHECK_MODE=1)
endforeach()

# A communicator's life: non-blocking, finalize, split, shrink, revoke, abort from a thread.
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_lifecycle PUBLIC_API
  SOURCES ${_faults_src}/lifecycle_test.cc)
tccl_stage_nps(_nps 2 3)
foreach(np IN LISTS _nps)
  tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}lifecycle NP ${np}
    COMMAND ${TCCL_STAGE_PREFIX}test_lifecycle LABELS ${_faults_labels} TIMEOUT 120)
endforeach()

# A peer that left against one that died (transport/shm/peer_watch.cc), compiled from the
# stage's sources (libtccl.so exports only the API), a forked child as the peer.
set(_t ${TCCL_STAGE_PREFIX}test_peer_departure)
add_executable(${_t} ${_faults_src}/peer_departure_test.cc
  ${TCCL_STAGE_DIR}/src/transport/shm/peer_watch.cc ${TCCL_STAGE_DIR}/src/comm_context.cc)
target_include_directories(${_t} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src)
target_link_libraries(${_t} PRIVATE tccl_common GTest::gtest_main Threads::Threads)
tccl_warnings(${_t})
tccl_add_test(NAME ${TCCL_STAGE_PREFIX}peer_departure COMMAND ${_t} LABELS ${_faults_labels}
  TIMEOUT 60)

# Fault injection: ranks as forked processes (a dying rank would end an mpirun job).
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_fault_inject PUBLIC_API GTEST_MAIN
  SOURCES ${_faults_src}/fault_inject_test.cc
  DEFINITIONS TCCL_FRTRACE="${TCCL_STAGE_DIR}/../tools/frtrace")
add_test(NAME ${TCCL_STAGE_PREFIX}fault_inject COMMAND ${TCCL_STAGE_PREFIX}test_fault_inject)
set_tests_properties(${TCCL_STAGE_PREFIX}fault_inject PROPERTIES LABELS "${_faults_labels}"
  TIMEOUT 240)
