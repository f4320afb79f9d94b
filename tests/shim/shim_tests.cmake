# tests/shim/shim_tests.cmake: the nccl.h shim's tests (stage 2 and every later stage).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) for stages >= 2, with
# TCCL_STAGE_NUM, TCCL_STAGE_LIB, TCCL_STAGE_PREFIX and TCCL_STAGE_LABEL set. The stage's shim
# target is nccl_shim_stage<N> (stage2-ring/shim/CMakeLists.txt); a stage without one gets no
# shim tests (a message says so).
#
#   s<N>_shim.np1..4  test_shim.cc under mpirun: an NCCL program (nccl.h only, linked with the
#                     shim only) checked end to end.
#   s<N>_shim_exports the exports of both libraries (nm -D --defined-only): libtccl.so exports
#                     no nccl* or pnccl* symbol (a process with PyTorch has the real NCCL loaded
#                     globally, and must never reach tccl by an nccl* name), and libnccl.so
#                     exports every function of nccl.h with its pnccl* twin, and nothing else.
#
# This file is also the script behind s<N>_shim_exports: run as `cmake -P` with TCCL_LIB,
# SHIM_LIB and NM defined, it does the export check (the section below, before the fragment).
# Added in: stage 2.

# The functions of nccl.h (NCCL 2.19). Each must be exported as nccl<name> and pnccl<name>.
set(_shim_functions
  GetVersion GetUniqueId CommInitRank CommInitRankConfig CommInitAll CommFinalize CommDestroy
  CommAbort CommSplit CommCount CommCuDevice CommUserRank CommGetAsyncError GetErrorString
  GetLastError GroupStart GroupEnd Send Recv AllReduce AllGather ReduceScatter Broadcast Bcast
  Reduce RedOpCreatePreMulSum RedOpDestroy MemAlloc MemFree CommRegister CommDeregister)

# ---- Script mode: the export check ----------------------------------------------------------
if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)  # a script starts with no policies set (IN_LIST)
  foreach(var TCCL_LIB SHIM_LIB NM)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "shim export check: -D${var}=... is required")
    endif()
  endforeach()
  # The names a shared library exports (the last field of each `nm -D --defined-only` line).
  function(_shim_exports lib out_var)
    execute_process(COMMAND ${NM} -D --defined-only ${lib} OUTPUT_VARIABLE text
                    RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${NM} -D --defined-only ${lib} failed: ${err}")
    endif()
    string(REGEX REPLACE "\n$" "" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(names "")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^.* " "" name "${line}")
      list(APPEND names ${name})
    endforeach()
    set(${out_var} ${names} PARENT_SCOPE)
  endfunction()

  set(failures "")
  _shim_exports(${TCCL_LIB} tccl_names)
  foreach(name IN LISTS tccl_names)
    if(name MATCHES "^p?nccl")
      string(APPEND failures "  ${TCCL_LIB} exports ${name} (the core library must not)\n")
    endif()
  endforeach()
  _shim_exports(${SHIM_LIB} shim_names)
  foreach(f IN LISTS _shim_functions)
    foreach(name nccl${f} pnccl${f})
      if(NOT name IN_LIST shim_names)
        string(APPEND failures "  ${SHIM_LIB} does not export ${name}\n")
      endif()
    endforeach()
  endforeach()
  foreach(name IN LISTS shim_names)
    # _init/_fini come with every shared object; the rest must be NCCL's API.
    if(NOT name MATCHES "^p?nccl" AND NOT name MATCHES "^_(init|fini)$")
      string(APPEND failures "  ${SHIM_LIB} exports ${name}, which nccl.h does not declare\n")
    endif()
  endforeach()
  list(LENGTH tccl_names n_tccl)
  list(LENGTH shim_names n_shim)
  if(failures)
    message(FATAL_ERROR "shim export check failed:\n${failures}")
  endif()
  message(STATUS "shim export check passed: ${TCCL_LIB} (${n_tccl} symbols, no nccl*), "
                 "${SHIM_LIB} (${n_shim} symbols, all nccl.h)")
  return()
endif()

# ---- Fragment mode: register the tests -----------------------------------------------------
set(_shim_target nccl_shim_stage${TCCL_STAGE_NUM})
if(NOT TARGET ${_shim_target})
  message(STATUS "tccl: stage ${TCCL_STAGE_NUM} has no target ${_shim_target}: no shim tests "
                 "(add_subdirectory(shim) comes before the stage's tests)")
else()
  set(_shim_labels ${TCCL_STAGE_LABEL} shim)

  # Not tccl_stage_test_executable: that one puts the stage's include/ (tccl.h) on the path and
  # links libtccl.so; an NCCL program sees nccl.h and libnccl.so only. Its objects are shared
  # by the stages whose shim headers (nccl.h) are the same, as PUBLIC_API tests' are.
  get_target_property(_shim_headers ${_shim_target} INTERFACE_INCLUDE_DIRECTORIES)
  tccl_stage_shared_objects(_shim_objs NAME test_shim
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shim.cc HEADERS ${_shim_headers}
    LIBS tccl_test_harness)
  add_executable(${TCCL_STAGE_PREFIX}test_shim $<TARGET_OBJECTS:${_shim_objs}>)
  set_target_properties(${TCCL_STAGE_PREFIX}test_shim PROPERTIES LINKER_LANGUAGE CXX)
  target_link_libraries(${TCCL_STAGE_PREFIX}test_shim PRIVATE ${_shim_target} tccl_test_harness)
  tccl_stage_nps(_nps 1 2 3 4)
  foreach(np IN LISTS _nps)
    tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}shim NP ${np}
      COMMAND ${TCCL_STAGE_PREFIX}test_shim
      LABELS ${_shim_labels} TIMEOUT 180)
  endforeach()

  if(TCCL_STAGE_NUM GREATER_EQUAL 3)
    # NCCL_ALGO reaches tccl through the shim (test_shim.cc, ShimKnobs).
    tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}shim_nccl_algo NP 1
      COMMAND ${TCCL_STAGE_PREFIX}test_shim --gtest_filter=ShimKnobs.*
      LABELS ${_shim_labels} TIMEOUT 60
      ENVIRONMENT NCCL_ALGO=tree,bogus TCCL_SHIM_EXPECT_BAD_ALGO=1)
  endif()

  tccl_add_test(NAME ${TCCL_STAGE_PREFIX}shim_exports
    COMMAND ${CMAKE_COMMAND} -DTCCL_LIB=$<TARGET_FILE:${TCCL_STAGE_LIB}>
            -DSHIM_LIB=$<TARGET_FILE:${_shim_target}> -DNM=${CMAKE_NM}
            -P ${CMAKE_CURRENT_LIST_FILE}
    LABELS ${_shim_labels} TIMEOUT 30)
endif()
