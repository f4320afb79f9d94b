# TcclTesting.cmake: registering tests with CTest.
#
# tccl_add_mpi_test(NAME <name> NP <n> COMMAND <exe> [args...]
#                   [LABELS l1 l2...] [TIMEOUT <seconds>] [ENVIRONMENT K=V...])
#   Registers "<name>.np<n>" that runs `mpirun -np <n> <exe> args` (with --allow-run-as-root,
#   --oversubscribe, --bind-to none), always with a timeout (default 120 s).
#   <exe> is a target name (its file is used) or a path. Labels always include "mpi".
#   TCCL_TEST_TIMEOUT (the per-test watchdog of common/harness/mpi_main.cc) is set to
#   max(TIMEOUT - 10, TIMEOUT * 0.9) seconds, so a hang is reported as "TIMEOUT: test <name> on
#   rank r" before CTest kills the whole run without saying where it was.
#   The PROCESSORS property is NP, so `ctest -j` does not start more ranks than it counts.
#
# tccl_add_test(NAME <name> COMMAND <exe> [args...]
#               [LABELS l1 l2...] [TIMEOUT <seconds>] [ENVIRONMENT K=V...])
#   A test run without mpirun (thread-rank tests, unit tests). Default timeout 60 s; the same
#   watchdog variable is set. A program linked with the harness main still calls MPI_Init, which
#   Open MPI and MPICH accept without mpirun (a "singleton", rank 0 of 1).
#
# Example:
#   tccl_add_mpi_test(NAME s1_sendrecv NP 4 COMMAND s1_test_sendrecv --gtest_brief=1
#                     LABELS stage1 p2p TIMEOUT 60 ENVIRONMENT TCCL_DEBUG=WARN)
#   -> CTest test "s1_sendrecv.np4", labels mpi;stage1;p2p.
#
# Open MPI only flags are given only when mpiexec is Open MPI (MPICH's hydra rejects them). The
# environment below makes Open MPI 4.1 work quietly as root in a container:
#   OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1          root is allowed (also --allow-run-as-root)
#   OMPI_MCA_rmaps_base_oversubscribe=1         more ranks than cores (2-core CI machine)
#   OMPI_MCA_mpi_yield_when_idle=1              oversubscribed ranks yield instead of spinning
#   OMPI_MCA_btl_vader_single_copy_mechanism=none  CMA needs ptrace rights a container lacks
#   OMPI_MCA_pml=ob1, OMPI_MCA_btl=self,vader,tcp  plain shared memory/TCP for MPI's own small
#                                                messages: no UCX/openib probing, warnings or
#                                                CUDA-aware paths (tccl moves the data, not MPI)
#   OMPI_MCA_btl_base_warn_component_unused=0   no "component was found but not used" noise
#   GTEST_COLOR=no                              mpirun gives ranks a pty, so GoogleTest would
#                                               write colour codes into the CTest log
# Added in: foundation (common/).
include_guard(GLOBAL)

find_package(MPI QUIET COMPONENTS CXX)

# Defaults live in functions, not in variables: this file is included once (include_guard) from
# common/, and variables of that directory scope would not be visible from tests/ or a stage.
function(_tccl_test_defaults)
  set(TCCL_TEST_DEFAULT_TIMEOUT 60 PARENT_SCOPE)
  set(TCCL_MPI_TEST_DEFAULT_TIMEOUT 120 PARENT_SCOPE)
  set(TCCL_MPI_TEST_ENVIRONMENT
      OMPI_ALLOW_RUN_AS_ROOT=1
      OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      OMPI_MCA_rmaps_base_oversubscribe=1
      OMPI_MCA_mpi_yield_when_idle=1
      OMPI_MCA_btl_vader_single_copy_mechanism=none
      OMPI_MCA_pml=ob1
      OMPI_MCA_btl=self,vader,tcp
      OMPI_MCA_btl_base_warn_component_unused=0
      GTEST_COLOR=no
      PARENT_SCOPE)
endfunction()

# Is mpiexec Open MPI? Asked once per build tree.
if(MPIEXEC_EXECUTABLE AND NOT DEFINED TCCL_MPIEXEC_IS_OPENMPI)
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version
                  OUTPUT_VARIABLE _tccl_mpiexec_version ERROR_VARIABLE _tccl_mpiexec_version
                  TIMEOUT 20)
  if(_tccl_mpiexec_version MATCHES "Open MPI|OpenRTE")
    set(TCCL_MPIEXEC_IS_OPENMPI ON CACHE INTERNAL "mpiexec is Open MPI")
  else()
    set(TCCL_MPIEXEC_IS_OPENMPI OFF CACHE INTERNAL "mpiexec is Open MPI")
  endif()
endif()

# The watchdog's limit for a CTest TIMEOUT: max(t - 10, t * 0.9), at least 1.
function(_tccl_watchdog_seconds timeout out_var)
  math(EXPR a "${timeout} - 10")
  math(EXPR b "${timeout} * 9 / 10")
  if(a LESS b)
    set(a ${b})
  endif()
  if(a LESS 1)
    set(a 1)
  endif()
  set(${out_var} ${a} PARENT_SCOPE)
endfunction()

# A target name becomes its file; anything else is passed through.
function(_tccl_test_command out_var exe)
  if(TARGET ${exe})
    set(${out_var} "$<TARGET_FILE:${exe}>" PARENT_SCOPE)
  else()
    set(${out_var} "${exe}" PARENT_SCOPE)
  endif()
endfunction()

function(tccl_add_mpi_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;NP;TIMEOUT" "COMMAND;LABELS;ENVIRONMENT")
  if(NOT ARG_NAME OR NOT ARG_NP OR NOT ARG_COMMAND)
    message(FATAL_ERROR "tccl_add_mpi_test: NAME, NP and COMMAND are required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tccl_add_mpi_test(${ARG_NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  _tccl_test_defaults()
  if(NOT MPIEXEC_EXECUTABLE)
    message(STATUS "tccl: no mpiexec, skipping MPI test ${ARG_NAME}.np${ARG_NP}")
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT ${TCCL_MPI_TEST_DEFAULT_TIMEOUT})
  endif()
  list(POP_FRONT ARG_COMMAND exe)
  _tccl_test_command(exe_path ${exe})
  set(launcher_flags ${MPIEXEC_PREFLAGS})
  if(TCCL_MPIEXEC_IS_OPENMPI)
    list(APPEND launcher_flags --allow-run-as-root --oversubscribe --bind-to none)
  endif()
  set(test_name "${ARG_NAME}.np${ARG_NP}")
  add_test(NAME ${test_name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${launcher_flags} ${MPIEXEC_NUMPROC_FLAG} ${ARG_NP}
                   ${exe_path} ${MPIEXEC_POSTFLAGS} ${ARG_COMMAND})
  _tccl_watchdog_seconds(${ARG_TIMEOUT} watchdog)
  set(env ${TCCL_MPI_TEST_ENVIRONMENT} TCCL_TEST_TIMEOUT=${watchdog} ${ARG_ENVIRONMENT})
  set(labels mpi ${ARG_LABELS})
  list(REMOVE_DUPLICATES labels)
  set_tests_properties(${test_name} PROPERTIES
    TIMEOUT ${ARG_TIMEOUT}
    LABELS "${labels}"
    PROCESSORS ${ARG_NP}
    ENVIRONMENT "${env}")
endfunction()

function(tccl_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;TIMEOUT" "COMMAND;LABELS;ENVIRONMENT")
  if(NOT ARG_NAME OR NOT ARG_COMMAND)
    message(FATAL_ERROR "tccl_add_test: NAME and COMMAND are required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tccl_add_test(${ARG_NAME}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  _tccl_test_defaults()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT ${TCCL_TEST_DEFAULT_TIMEOUT})
  endif()
  list(POP_FRONT ARG_COMMAND exe)
  _tccl_test_command(exe_path ${exe})
  add_test(NAME ${ARG_NAME} COMMAND ${exe_path} ${ARG_COMMAND})
  _tccl_watchdog_seconds(${ARG_TIMEOUT} watchdog)
  set(env ${TCCL_MPI_TEST_ENVIRONMENT} TCCL_TEST_TIMEOUT=${watchdog} ${ARG_ENVIRONMENT})
  set_tests_properties(${ARG_NAME} PROPERTIES
    TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "${env}")
  if(ARG_LABELS)
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
