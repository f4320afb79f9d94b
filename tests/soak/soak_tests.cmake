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
