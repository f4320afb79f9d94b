# tests/soak/soak_tests.cmake: the soak test (stage 2 and every later stage).
#
# One 4-rank run of random collectives and p2p operations on three communicators (soak.cc),
# labelled "soak" so that the default CI run leaves it out (tools/test runs ctest -LE soak):
#   ctest -L soak                        (TCCL_SOAK_SECONDS at configure time, default 120)
#   cmake -DTCCL_SOAK_SECONDS=3600 .     a longer soak; the CTest timeout follows
#   TCCL_SOAK_SECONDS=600 TCCL_SOAK_SEED=42 mpirun -np 4 --oversubscribe <build>/s2_test_soak
# The CTest TIMEOUT is the soak time plus 240 s: setup, the last (up to ~1 Mi-element)
# operation, and teardown, at 4 ranks on 2 cores and under sanitizers.
#
# Added in: reliability (tests/soak).
set(TCCL_SOAK_SECONDS 120 CACHE STRING "Seconds the soak test (ctest -L soak) keeps starting operations")

# CaseRun, Inputs and CollBuffer: the collective checks of the ring tests.
tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_soak PUBLIC_API
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/soak.cc INCLUDES ${CMAKE_CURRENT_LIST_DIR}/../ring)
math(EXPR _soak_timeout "${TCCL_SOAK_SECONDS} + 240")
tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}soak NP 4
  COMMAND ${TCCL_STAGE_PREFIX}test_soak
  LABELS ${TCCL_STAGE_LABEL} soak
  TIMEOUT ${_soak_timeout}
  ENVIRONMENT TCCL_SOAK_SECONDS=${TCCL_SOAK_SECONDS})

# The short soak that every run of the tests includes (label soak-short, not soak): tools/soak
# --ci runs this stage's soak 3-4 times for a few seconds each, at 3, 4 and 5 ranks, random
# seeds (printed; TCCL_SOAK_SEEDS=a,b,c repeats them), one run with every rank pinned to one
# core, SHM disabled for half the runs from stage 5 on (the socket and network transports
# soaked too), the watchdog on at stage 7 plus a stalled rank it must report. A hang fails the
# test at its run's deadline with the seed and the command that repeats it. About 20-30 s per
# stage on the 2-core machine. PROCESSORS 2: ranks pinned to core 0 want no other test there.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_FOUND AND MPIEXEC_EXECUTABLE)
  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}soak_short
    COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/../../tools/soak
            --ci ${TCCL_STAGE_NUM} --bin $<TARGET_FILE:${TCCL_STAGE_PREFIX}test_soak>
    LABELS ${TCCL_STAGE_LABEL} soak-short TIMEOUT 600)
  set_tests_properties(${TCCL_STAGE_PREFIX}soak_short PROPERTIES PROCESSORS 2)
endif()
