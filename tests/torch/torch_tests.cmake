# tests/torch/torch_tests.cmake: the torch.distributed backend's tests (stage 4 and later).
#
# Included by tccl_add_stage_tests (tests/StageTests.cmake) once per stage. The backend is
# built by <stage>/torch/CMakeLists.txt only when a python3 with torch is found; it leaves the
# interpreter and the PYTHONPATH of the built package in global properties
# TCCL_STAGE<N>_TORCH_PYTHON / _PYTHONPATH. Without them every test below is still registered,
# as a test that reports itself skipped with the reason (ctest counts and lists it, and
# tools/test's summary shows the count): a chapter's tests are never left out silently.
#
# Every test runs its ranks through tests/torch/launch.py (a small torchrun with one timeout
# for the whole job), CPU tensors, labels stage<N> and torch:
#   torch_collectives   every collective x dtype x op x count, vs a reference and vs gloo
#                       (2 and 3 ranks; 5 ranks with init_method tcp://, 2 with file://, quick)
#   torch_ddp           DDP steps = single-process reference on the whole batch = gloo's DDP
#   torch_errors_*      usage errors, a rank that dies, a silent rank and the timeout
#   torch_example_*     the examples, launched by torch.distributed.run (torchrun)
# Budget: about 40 s in all on the 2-core CI machine (python startup and `import torch` are
# most of it). Timeouts are caps for hangs; the launcher's own --timeout fires first.
# Added in: stage 4.

get_property(_torch_python GLOBAL PROPERTY TCCL_STAGE${TCCL_STAGE_NUM}_TORCH_PYTHON)
get_property(_torch_pythonpath GLOBAL PROPERTY TCCL_STAGE${TCCL_STAGE_NUM}_TORCH_PYTHONPATH)
set(_torch_skip "")
if(NOT _torch_pythonpath)
  string(CONCAT _torch_skip "SKIPPED: stage ${TCCL_STAGE_NUM}'s torch backend is not built "
                "(TCCL_WITH_TORCH=${TCCL_WITH_TORCH}, the configure output says why)")
  message(STATUS "tccl: stage ${TCCL_STAGE_NUM}: the torch backend is not built: its tests "
                 "are registered as skipped")
endif()

# tccl_torch_skipped(name): registers `name` as a test that says why it cannot run and is
# reported skipped (the backend is not built).
function(tccl_torch_skipped name)
  add_test(NAME ${name} COMMAND ${CMAKE_COMMAND} -E echo "${_torch_skip}")
  set_tests_properties(${name} PROPERTIES LABELS "${_torch_labels}"
    SKIP_REGULAR_EXPRESSION "SKIPPED:")
endfunction()

set(_torch_dir ${CMAKE_CURRENT_LIST_DIR})
set(_torch_labels ${TCCL_STAGE_LABEL} torch)
# PYTHONPATH: the built package (tccl_torch) and the test library (torch_testlib).
set(_torch_env PYTHONPATH=${_torch_pythonpath}:${_torch_dir} PYTHONDONTWRITEBYTECODE=1
    OMP_NUM_THREADS=1)

# tccl_torch_test(NAME n NP np SCRIPT s [ARGS ...] [LAUNCH ...] [TIMEOUT t])
function(tccl_torch_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "" "NAME;NP;SCRIPT;TIMEOUT" "ARGS;LAUNCH")
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  math(EXPR launcher_timeout "${T_TIMEOUT} - 10")
  set(name ${TCCL_STAGE_PREFIX}${T_NAME}.np${T_NP})
  if(_torch_skip)
    tccl_torch_skipped(${name})
    return()
  endif()
  add_test(NAME ${name}
    COMMAND ${_torch_python} ${_torch_dir}/launch.py --np ${T_NP} --timeout ${launcher_timeout}
            ${T_LAUNCH} ${_torch_dir}/${T_SCRIPT} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} PROCESSORS ${T_NP}
    LABELS "${_torch_labels}" ENVIRONMENT "${_torch_env}")
endfunction()

# A later stage re-runs these at 2 ranks only: every rank is a Python process with torch
# loaded, the dearest part of these tests on 2 cores (the tcp:// run below keeps 3).
if(TCCL_FEATURE_REPEAT)
  set(_nps 2)
else()
  set(_nps 2 3)
endif()
foreach(np IN LISTS _nps)
  tccl_torch_test(NAME torch_collectives NP ${np} SCRIPT test_collectives.py)
  tccl_torch_test(NAME torch_ddp NP ${np} SCRIPT test_ddp.py)
  tccl_torch_test(NAME torch_errors_usage NP ${np} SCRIPT test_errors.py ARGS --case usage)
endforeach()
# tcp:// at 5 ranks in stage 4; a later stage re-runs it at 3 (tccl_stage_nps).
tccl_stage_nps(_nps 5 3)
list(GET _nps 0 _np)
tccl_torch_test(NAME torch_collectives_tcp NP ${_np} SCRIPT test_collectives.py
                ARGS --init tcp --quick TIMEOUT 180)
tccl_torch_test(NAME torch_collectives_file NP 2 SCRIPT test_collectives.py
                ARGS --init file --quick)
tccl_torch_test(NAME torch_errors_rank_dies NP 3 SCRIPT test_errors.py
                ARGS --case rank-dies LAUNCH --expect-fail 2)
# Rank 0 starts 3 s late, past the 2-s timeout: joining the job must not be bound by the
# process group's timeout (torch_testlib.init says why).
tccl_torch_test(NAME torch_errors_timeout NP 2 SCRIPT test_errors.py
                ARGS --case timeout --timeout 2 LAUNCH --late-rank0 3)

# The examples, through torch.distributed.run as a user runs them. Debian 12's torch 1.13
# needs --redirects/--tee to start at all (design notes); later torch accepts them too.
# --monitor_interval 0.5: torch 1.13's agent looks at its workers every 5 s, so a job that
# was done waited 2.5 s on average for it (ddp_mlp: 6.7 s, 4.3 s with this); later torch
# polls a few times a second by default and accepts the same spelling.
# torchrun writes its log folders under TMPDIR: keep them in the build tree. --standalone in
# torch 1.13 serves its rendezvous on the fixed port 29400, so two of these at once (ctest -j4)
# collide ("Address already in use"): they share a RESOURCE_LOCK and run one at a time.
set(_examples_dir ${TCCL_STAGE_DIR}/torch/examples)
set(_run_tmp ${CMAKE_CURRENT_BINARY_DIR}/${TCCL_STAGE_PREFIX}torchrun_tmp)
file(MAKE_DIRECTORY ${_run_tmp})
foreach(example ddp_one_param ddp_mlp)
  set(name ${TCCL_STAGE_PREFIX}torch_example_${example}.np2)
  if(_torch_skip)
    tccl_torch_skipped(${name})
    continue()
  endif()
  add_test(NAME ${name}
    COMMAND ${_torch_python} -m torch.distributed.run --redirects 9:0 --tee 9:0
            --monitor_interval 0.5 --standalone --nproc_per_node=2
            ${_examples_dir}/${example}.py)
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 PROCESSORS 2 RESOURCE_LOCK torchrun_29400
    LABELS "${_torch_labels};examples" ENVIRONMENT "${_torch_env};TMPDIR=${_run_tmp}"
    PASS_REGULAR_EXPRESSION "verified OK" FAIL_REGULAR_EXPRESSION "WRONG|Traceback")
endforeach()
