# tests/StageTests.cmake: compiles the shared tests against one stage's library.
#
# The same test sources run against every stage that has the feature (stage 7 still passes
# every stage-1 test). This file turns "stage N" into the list of feature fragments it gets:
#
#   tccl_add_stage_tests(NUM <n> DIR <stage source dir> LIB <stage library target>)
#     Sets, for the fragments it includes:
#       TCCL_STAGE_NUM     n
#       TCCL_STAGE_DIR     the stage's source directory (its include/ and src/)
#       TCCL_STAGE_LIB     the stage's library target
#       TCCL_STAGE_PREFIX  "s<n>_", the prefix of every target and CTest name of this stage
#       TCCL_STAGE_LABEL   "stage<n>", the CTest label every test of this stage carries
#     then includes, when the file exists:
#       tests/primitives/primitives_tests.cmake  for n >= 1   (FIFO primitives, host backend)
#       tests/p2p/p2p_tests.cmake                for n >= 1   (grouped send/recv, P2P patterns)
#       tests/trace/trace_tests.cmake            for n >= 1   (the step timeline, TCCL_TRACE_FILE)
#       tests/ring/ring_tests.cmake              for n >= 2   (ring collectives)
#       tests/errors/errors_tests.cmake          for n >= 2   (the error table, docs/errors.md)
#       tests/soak/soak_tests.cmake              for n >= 2   (the soak, label "soak")
#       tests/tree/tree_tests.cmake              for n >= 3   (trees, recursive doubling, tuning)
#       tests/torch/torch_tests.cmake            for n >= 4   (the torch.distributed backend)
#       tests/shm/shm_tests.cmake                for n >= 5   (the SHM transport)
#       tests/gpu/gpu_tests.cmake                for n >= 5   (the GPU path: CUDA graphs)
#     A new chapter adds its line to the table in the function body.
#     A fragment included for a later stage than its feature's (TCCL_FEATURE_REPEAT, whole-tree
#     builds only) registers its multi-rank tests at fewer rank counts: it writes
#     `tccl_stage_nps(_nps 1 2 3 4 5)` + `foreach(np IN LISTS _nps)`, and guards extra rank
#     counts of one test (e.g. a 7-rank run) with `if(NOT TCCL_FEATURE_REPEAT)`. Configuration
#     variants (another FIFO size, another socket count) keep running in every stage.
#     Calling it twice for the same n does nothing the second time: a stage built inside the
#     whole tree may register its own tests, and tests/CMakeLists.txt then skips that stage.
#     Without the harness (no GoogleTest or MPI) it prints a message and adds nothing.
#
#   tccl_stage_test_executable(<target> SOURCES <files...> [PUBLIC_API] [GTEST_MAIN]
#                              [INCLUDES <dirs...>] [DEFINITIONS <defs...>])
#     For use inside a fragment: an executable linked with ${TCCL_STAGE_LIB} and
#     tccl_test_harness (whose main() runs GoogleTest under MPI; GTEST_MAIN: GoogleTest's own
#     main, for tests that make their ranks themselves), with ${TCCL_STAGE_DIR}/include and
#     ${TCCL_STAGE_DIR}/src on its include path (tests of internals include "transport.h" etc.
#     from the stage being tested), INCLUDES and DEFINITIONS, and the project's warnings on.
#     PUBLIC_API: the sources see the stage's include/ (tccl.h) but not its src/, so their
#     objects do not depend on the stage: they are compiled once per distinct include/ and
#     shared by every stage whose include/ holds the same bytes (tccl_stage_shared_objects),
#     the line `#define TCCL_STAGE <n>` aside for sources that never name TCCL_STAGE (nor
#     do the headers they can include from directories every stage shares).
#     Stages 2 to 6 have one tccl.h but for that line: ring_sweep_test.cc is compiled once for
#     the five of them and linked five times, each program against its own stage's
#     libtccl.so, which is what the test tests; errors_test.cc, which reads TCCL_STAGE, is
#     compiled per stage. A stage whose tccl.h changes gets its own objects by itself.
#
#   tccl_stage_shared_objects(<out-var> NAME <name> SOURCES <files...> [HEADERS <dirs...>]
#                             [INCLUDES <dirs...>] [DEFINITIONS <defs...>] [LIBS <targets...>])
#     The OBJECT library behind PUBLIC_API, for a fragment that links its program itself (the
#     shim test: nccl.h, not tccl.h). HEADERS are the stage's own header directories on the
#     include path (default ${TCCL_STAGE_DIR}/include): the library is keyed on the names and
#     contents of their headers, not on their paths. INCLUDES are directories every stage
#     shares (tests/, common/): keyed on their paths. LIBS lend their usage requirements
#     (include directories, definitions) to the compile. Sets <out-var> to the target; use it
#     as `add_executable(<target> $<TARGET_OBJECTS:${<out-var>}>)`. Editing a header under
#     HEADERS re-runs CMake, which then keys the objects anew.
#
# A fragment (for example tests/p2p/p2p_tests.cmake) looks like:
#   tccl_stage_test_executable(${TCCL_STAGE_PREFIX}test_p2p_patterns
#                              SOURCES ${CMAKE_CURRENT_LIST_DIR}/p2p_patterns_test.cc)
#   foreach(np 1 2 3 4)
#     tccl_add_mpi_test(NAME ${TCCL_STAGE_PREFIX}p2p_patterns NP ${np}
#                       COMMAND ${TCCL_STAGE_PREFIX}test_p2p_patterns
#                       LABELS ${TCCL_STAGE_LABEL} p2p)
#   endforeach()
# Source paths in a fragment must be absolute (${CMAKE_CURRENT_LIST_DIR}/...): the fragment is
# included from the directory that calls tccl_add_stage_tests, not from its own.
#
# A stage built on its own (cmake -S stage1-p2p) does
#   include(${CMAKE_CURRENT_SOURCE_DIR}/../tests/StageTests.cmake)
#   tccl_add_stage_tests(NUM 1 DIR ${CMAKE_CURRENT_SOURCE_DIR} LIB <its library target>)
# after add_subdirectory(../common ...). Every path here is found from this file's own location,
# so that works from any top-level project.
#
# Added in: foundation (tests/).
include_guard(GLOBAL)

# By path, not through CMAKE_MODULE_PATH: common/ appends to that only in its own scope.
include(${CMAKE_CURRENT_LIST_DIR}/../common/cmake/TcclOptions.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../common/cmake/TcclTesting.cmake)

function(tccl_add_stage_tests)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NUM;DIR;LIB" "")
  if(NOT ARG_NUM OR NOT ARG_DIR OR NOT ARG_LIB)
    message(FATAL_ERROR "tccl_add_stage_tests: NUM, DIR and LIB are required")
  endif()
  get_property(done GLOBAL PROPERTY TCCL_STAGE_TESTS_ADDED)
  if(ARG_NUM IN_LIST done)
    return()
  endif()
  if(NOT TARGET tccl_test_harness)
    message(STATUS "tccl: no test harness (GoogleTest or MPI missing): stage ${ARG_NUM} tests "
                   "are not built")
    return()
  endif()
  if(NOT TARGET ${ARG_LIB})
    message(FATAL_ERROR "tccl_add_stage_tests: stage ${ARG_NUM} library '${ARG_LIB}' is not a "
                        "target (add the stage before its tests)")
  endif()
  set_property(GLOBAL APPEND PROPERTY TCCL_STAGE_TESTS_ADDED ${ARG_NUM})

  set(TCCL_STAGE_NUM ${ARG_NUM})
  get_filename_component(TCCL_STAGE_DIR "${ARG_DIR}" ABSOLUTE)
  set(TCCL_STAGE_LIB ${ARG_LIB})
  set(TCCL_STAGE_PREFIX "s${ARG_NUM}_")
  set(TCCL_STAGE_LABEL "stage${ARG_NUM}")

  # Inside a function CMAKE_CURRENT_LIST_DIR names the caller's file; this names ours.
  set(tests_dir ${CMAKE_CURRENT_FUNCTION_LIST_DIR})
  # The feature table: <first stage that has it> <fragment>.
  set(features
      1 primitives/primitives_tests.cmake
      1 p2p/p2p_tests.cmake
      1 trace/trace_tests.cmake
      2 ring/ring_tests.cmake
      2 shim/shim_tests.cmake
      2 errors/errors_tests.cmake
      2 soak/soak_tests.cmake
      3 tree/tree_tests.cmake
      4 torch/torch_tests.cmake
      5 shm/shm_tests.cmake
      5 gpu/gpu_tests.cmake
      6 net/net_tests.cmake
      7 faults/faults_tests.cmake)
  # A feature runs at every rank count in the stage that introduced it; a later stage of the
  # whole tree re-runs it at fewer rank counts (tccl_stage_nps), which keeps CI's time flat as
  # chapters are added. A stage built on its own, or TCCL_TEST_ALL_RANKS=ON, runs them all.
  if(DEFINED TCCL_TEST_ALL_RANKS)
    set(all_ranks ${TCCL_TEST_ALL_RANKS})
  elseif(TCCL_STANDALONE_STAGE)
    set(all_ranks ON)
  else()
    set(all_ranks OFF)
  endif()
  while(features)
    list(POP_FRONT features since fragment)
    if(TCCL_STAGE_NUM GREATER_EQUAL since AND EXISTS ${tests_dir}/${fragment})
      if(NOT all_ranks AND TCCL_STAGE_NUM GREATER since)
        set(TCCL_FEATURE_REPEAT ON)
      else()
        set(TCCL_FEATURE_REPEAT OFF)
      endif()
      include(${tests_dir}/${fragment})
    endif()
  endwhile()
endfunction()

# tccl_stage_nps(<out-var> <np>...): the rank counts a fragment registers a test at. All of
# them normally; when TCCL_FEATURE_REPEAT is on (an earlier stage's feature, re-run in a later
# stage), one: 3 (odd, more than two, cheap) when listed, else the first.
function(tccl_stage_nps out)
  set(nps ${ARGN})
  if(TCCL_FEATURE_REPEAT)
    if(3 IN_LIST nps)
      set(nps 3)
    else()
      list(GET nps 0 nps)
    endif()
  endif()
  set(${out} ${nps} PARENT_SCOPE)
endfunction()

# The digest of the headers (names relative to their directory, and contents) under each of
# dirs, in order; each header is a CMake configure dependency. Kept per directory for the run.
# STAGE_NEUTRAL: the line `#define TCCL_STAGE <n>` counts as the same in every stage, which
# makes stages whose headers differ in nothing else one key (see tccl_stage_shared_objects).
function(_tccl_headers_digest out)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "STAGE_NEUTRAL" "" "")
  set(text "")
  foreach(dir IN LISTS ARG_UNPARSED_ARGUMENTS)
    get_filename_component(dir "${dir}" ABSOLUTE)
    string(SHA256 dir_key "${dir}|${ARG_STAGE_NEUTRAL}")
    get_property(digest GLOBAL PROPERTY TCCL_HEADERS_DIGEST_${dir_key})
    if(NOT digest)
      if(NOT IS_DIRECTORY "${dir}")
        message(FATAL_ERROR "tccl_stage_shared_objects: HEADERS directory ${dir} does not exist")
      endif()
      file(GLOB_RECURSE files LIST_DIRECTORIES false CONFIGURE_DEPENDS RELATIVE "${dir}"
           "${dir}/*.h" "${dir}/*.hh" "${dir}/*.hpp" "${dir}/*.hxx" "${dir}/*.cuh" "${dir}/*.inc")
      list(SORT files)
      set(listing "")
      foreach(f IN LISTS files)
        if(ARG_STAGE_NEUTRAL)
          file(READ "${dir}/${f}" body)
          string(REGEX REPLACE "#define TCCL_STAGE [0-9]+" "#define TCCL_STAGE N" body "${body}")
          string(SHA256 sum "${body}")
        else()
          file(SHA256 "${dir}/${f}" sum)
        endif()
        string(APPEND listing "${f} ${sum}\n")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${dir}/${f}")
      endforeach()
      string(SHA256 digest "${listing}")
      set_property(GLOBAL PROPERTY TCCL_HEADERS_DIGEST_${dir_key} ${digest})
    endif()
    string(APPEND text "${digest}\n")
  endforeach()
  string(SHA256 digest "${text}")
  set(${out} ${digest} PARENT_SCOPE)
endfunction()

# True in <out> when a source, or a header it can include from a directory it shares with
# every stage (its own directory, INCLUDES, the include directories LIBS lend), names
# TCCL_STAGE, the stage number the public header defines: such objects are the stage's own.
# Usage: _tccl_reads_stage(<out> SOURCES <files...> DIRS <dirs...> LIBS <targets...>)
function(_tccl_reads_stage out)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;DIRS;LIBS")
  set(dirs ${ARG_DIRS})
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(dir "${src}" DIRECTORY)
    list(APPEND dirs "${dir}")
  endforeach()
  foreach(lib IN LISTS ARG_LIBS)
    if(TARGET ${lib})
      get_target_property(lib_dirs ${lib} INTERFACE_INCLUDE_DIRECTORIES)
      foreach(d IN LISTS lib_dirs)
        if(d AND NOT d MATCHES "\\$<" AND IS_DIRECTORY "${d}")  # generator expressions: skip
          list(APPEND dirs "${d}")
        endif()
      endforeach()
    endif()
  endforeach()
  set(found OFF)
  foreach(f IN LISTS ARG_SOURCES)
    file(STRINGS "${f}" hits REGEX "TCCL_STAGE([^_A-Za-z0-9]|$)")
    if(hits)
      set(found ON)
    endif()
  endforeach()
  # Per directory, once per configure run (every stage asks about the same few).
  list(REMOVE_DUPLICATES dirs)
  foreach(dir IN LISTS dirs)
    string(SHA256 dir_key "${dir}")
    get_property(known GLOBAL PROPERTY TCCL_READS_STAGE_${dir_key} SET)
    if(NOT known)
      file(GLOB_RECURSE headers "${dir}/*.h")
      set(reads OFF)
      foreach(h IN LISTS headers)
        file(STRINGS "${h}" hits REGEX "TCCL_STAGE([^_A-Za-z0-9]|$)")
        if(hits)
          set(reads ON)
        endif()
      endforeach()
      set_property(GLOBAL PROPERTY TCCL_READS_STAGE_${dir_key} ${reads})
    endif()
    get_property(reads GLOBAL PROPERTY TCCL_READS_STAGE_${dir_key})
    if(reads)
      set(found ON)
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

function(tccl_stage_shared_objects out)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "NAME" "SOURCES;HEADERS;INCLUDES;DEFINITIONS;LIBS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "tccl_stage_shared_objects: NAME and SOURCES are required")
  endif()
  if(NOT ARG_HEADERS)
    if(NOT TCCL_STAGE_DIR)
      message(FATAL_ERROR "tccl_stage_shared_objects(${ARG_NAME}): call it from a fragment "
                          "included by tccl_add_stage_tests, or give HEADERS")
    endif()
    set(ARG_HEADERS ${TCCL_STAGE_DIR}/include)
  endif()
  set(sources "")
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE)
    list(APPEND sources "${src}")
  endforeach()
  # Objects that never read TCCL_STAGE are the same for every stage whose headers differ only
  # in it (stages 2 to 6 today): one compile for all of them.
  _tccl_reads_stage(reads_stage SOURCES ${sources} DIRS ${ARG_INCLUDES} LIBS ${ARG_LIBS})
  if(reads_stage)
    _tccl_headers_digest(headers ${ARG_HEADERS})
  else()
    _tccl_headers_digest(headers STAGE_NEUTRAL ${ARG_HEADERS})
  endif()
  # Everything that decides the objects, except the HEADERS directories' paths.
  string(SHA256 key
         "${ARG_NAME}|${sources}|${headers}|${ARG_INCLUDES}|${ARG_DEFINITIONS}|${ARG_LIBS}")
  string(SUBSTRING ${key} 0 12 key)
  set(objs tccl_shared_${ARG_NAME}_${key})
  if(NOT TARGET ${objs})
    add_library(${objs} OBJECT ${sources})
    target_include_directories(${objs} PRIVATE ${ARG_HEADERS} ${ARG_INCLUDES})
    target_compile_definitions(${objs} PRIVATE ${ARG_DEFINITIONS})
    # tccl_common: common/include (tccl.h includes "tccl/result.h"), as the stage library
    # would lend it.
    target_link_libraries(${objs} PRIVATE ${ARG_LIBS} tccl_common)
    tccl_warnings(${objs})
    tccl_test_pch(${objs})
  endif()
  set(${out} ${objs} PARENT_SCOPE)
endfunction()

# The test programs' precompiled headers (tests/CMakeLists.txt), where that build has them.
# For the shared objects only: they are compiled as position-independent code, as the header
# was; a test executable's own sources are compiled as a position-independent executable
# (-fPIE), which GCC will not mix with it.
function(tccl_test_pch target)
  if(TARGET tccl_test_pch)
    target_precompile_headers(${target} REUSE_FROM tccl_test_pch)
  endif()
endfunction()

function(tccl_stage_test_executable target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "PUBLIC_API;GTEST_MAIN" ""
                        "SOURCES;INCLUDES;DEFINITIONS")
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "tccl_stage_test_executable(${target}): SOURCES is required")
  endif()
  if(NOT TCCL_STAGE_LIB OR NOT TCCL_STAGE_DIR)
    message(FATAL_ERROR "tccl_stage_test_executable(${target}): call it from a fragment "
                        "included by tccl_add_stage_tests")
  endif()
  if(ARG_GTEST_MAIN)
    set(libs GTest::gtest_main Threads::Threads)
    if(TCCL_HAVE_CUDA)
      # In-process ranks (tests/thread_devices.h) ask how many GPUs there are.
      list(APPEND libs CUDA::cudart)
      list(APPEND ARG_DEFINITIONS TCCL_TEST_HAVE_CUDA)
    endif()
  else()
    set(libs tccl_test_harness)
  endif()
  if(ARG_PUBLIC_API)
    string(REGEX REPLACE "^${TCCL_STAGE_PREFIX}" "" name "${target}")
    tccl_stage_shared_objects(objs NAME ${name} SOURCES ${ARG_SOURCES}
      INCLUDES ${ARG_INCLUDES} DEFINITIONS ${ARG_DEFINITIONS} LIBS ${libs})
    add_executable(${target} $<TARGET_OBJECTS:${objs}>)
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  else()
    add_executable(${target} ${ARG_SOURCES})
    target_include_directories(${target} PRIVATE ${TCCL_STAGE_DIR}/include ${TCCL_STAGE_DIR}/src
                                                 ${ARG_INCLUDES})
    target_compile_definitions(${target} PRIVATE ${ARG_DEFINITIONS})
    tccl_warnings(${target})
  endif()
  target_link_libraries(${target} PRIVATE ${TCCL_STAGE_LIB} ${libs})
endfunction()
