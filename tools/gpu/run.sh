#!/usr/bin/env bash
# tools/gpu/run.sh: build, test and benchmark tccl on a GPU machine, in one go.
#
# What it is: the single script the device machine runs (GPU time is scarce: one call does
# everything). It builds the whole tree with CUDA for Hopper (without the torch backend:
# tools/gpu/torch.sh builds and tests that), runs the stage tests on device
# buffers at 2 and 4 ranks (and whatever else TCCL_GPU_NP lists), then, when an nccl-tests
# source tree is present in .nccl-tests/ (fetched separately, never committed), builds it
# against the real NCCL and against tccl's nccl.h shim and runs both side by side.
#
# Usage: tools/gpu/run.sh [build] [test] [ncclt] [bench] [algos] [trace]   (default: all six)
# (algos, stage 3: device-buffer all-reduce with each algorithm forced, tools/bench/
# compare_algos.sh without MPI, and tools/bench/tune.sh's fit: the cost model's device row.)
# Environment: OUT (where logs go; default ./gpu-out), TCCL_GPU_NP (default "2 4"),
#              TCCL_GPU_STAGE (e.g. stage5-transport-shm: build that stage on its own, without
#              the torch backend, instead of the whole tree -- several times faster; its tests
#              are then the ones run, under the label stageN),
#              TCCL_GPU_CTEST_REGEX (extra ctest -R filter), TCCL_GPU_CTEST_EXCLUDE (ctest -LE
#              labels, e.g. soak), TCCL_GPU_COUNT=0 (skip the device-case counts), NCCL_HOME (real NCCL; default:
#              the one inside the installed torch wheel), TCCL_NCCLT_NP (rank counts of the
#              nccl-tests correctness sweep; default "2 3 4"), TCCL_NCCLT_PERF_NP (of the
#              NCCL-vs-tccl runs; default "2 4"). nccl-tests gives each rank its own GPU, so
#              these stay at or below the GPU count.
# Added in: stage 1 (tools/gpu).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
NP_LIST=${TCCL_GPU_NP:-"2 4"}
STEPS=("$@")
((${#STEPS[@]})) || STEPS=(build test ncclt bench algos trace)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
log() { echo "== $(date +%T) $*"; }
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
log "GPUs: $NGPU; steps: ${STEPS[*]}"
nvidia-smi topo -m 2>/dev/null | head -8

BUILD=$ROOT/build-gpu
SRC=.
STAGE=${TCCL_GPU_STAGE:-}
if [[ -n $STAGE ]]; then
  SRC=$STAGE BUILD=$ROOT/build-gpu-$STAGE
  SN=${STAGE#stage} SN=${SN%%-*}  # the stage's number: stage1-p2p -> 1 (not the 2 of "p2p")
  TCCL_GPU_LABELS=${TCCL_GPU_LABELS:-stage$SN}
fi
if want build; then
  log "build ${STAGE:-the whole tree}"
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DTCCL_WITH_TORCH=OFF >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  # -k 0: keep going, so one broken target does not stop the tests of the others.
  cmake --build "$BUILD" -j"$(nproc)" -- -k 0 >"$OUT/build.log" 2>&1 || grep -E "error" "$OUT/build.log" | head -20
  log "build done"
fi

if want test; then
  # Device buffers only (host buffers are CI's job); the netns test needs privileges that a
  # GPU machine may not grant, so it may skip.
  for np in $NP_LIST; do
    log "ctest on device buffers, np=$np"
    labels=${TCCL_GPU_LABELS:-"stage1|stage2|stage3"}
    [[ $np == 2 ]] || labels=${TCCL_GPU_LABELS_BIG:-$labels}
    (cd "$BUILD" && TCCL_TEST_MEM=device ctest -R "np${np}\$${TCCL_GPU_CTEST_REGEX:+|$TCCL_GPU_CTEST_REGEX}" \
      -L "$labels" ${TCCL_GPU_CTEST_EXCLUDE:+-LE "$TCCL_GPU_CTEST_EXCLUDE"} -j4 --timeout 300 \
      --output-on-failure >"$OUT/ctest-np$np.log" 2>&1)
    tail -4 "$OUT/ctest-np$np.log"
    grep -E "^\s+[0-9]+ - .*(Failed|Timeout|Exception)" "$OUT/ctest-np$np.log" | head -20
    # Proof that the device path ran: count the test cases that passed on device buffers.
    [[ ${TCCL_GPU_COUNT:-1} == 1 ]] || continue
    tests="s1_test_p2p_patterns s2_test_ring_sweep s3_test_ring_sweep"
    [[ -z $STAGE ]] || tests="s${SN}_test_p2p_patterns s${SN}_test_ring_sweep"
    for t in $tests; do
      exe=$BUILD/tests/$t  # the whole tree's layout; a stage built alone has them at its top
      [[ -x $exe ]] || exe=$BUILD/$t
      [[ -x $exe ]] || continue  # stage 1 has no ring sweep
      n=$(TCCL_TEST_MEM=device timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$np" \
          "$exe" 2>&1 | grep -cE "\[ +OK +\] .*_device")
      echo "np=$np $t: $n test cases passed on device buffers"
    done
  done
fi

if want ncclt && [[ -d .nccl-tests ]]; then
  # nvidia.nccl is a namespace package (its __file__ is None): take its first path entry.
  NCCL_HOME=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)}
  log "nccl-tests: real NCCL at $NCCL_HOME; tccl shim from $BUILD"
  NB=$ROOT/ncclt-build  # not under $OUT: only logs come back
  bash tools/nccl-tests.sh --out "$NB" --nccl-home "$NCCL_HOME" --tccl-build "$BUILD" .nccl-tests \
    >"$OUT/ncclt-build.log" 2>&1 || { tail -20 "$OUT/ncclt-build.log"; }
  run_ncclt() {  # impl np test args...: one nccl-tests run, appended to ncclt-<impl>.log
    local impl=$1 np=$2 t=$3; shift 3
    local dir; dir=$([[ $impl == nccl ]] && echo real || echo tccl)
    local exe=$NB/$dir/${t}_perf
    [[ -x $exe ]] || { echo "missing $exe" | tee -a "$OUT/ncclt-$impl.log"; return; }
    echo "=== $impl np=$np $t $*" >>"$OUT/ncclt-$impl.log"
    timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
      -x LD_LIBRARY_PATH="$NB/homes/$dir/lib:${LD_LIBRARY_PATH:-}" -x NCCL_NVLS_ENABLE=0 \
      "$exe" -g 1 "$@" >>"$OUT/ncclt-$impl.log" 2>&1 || echo "exit $? ($impl $t np=$np)" >>"$OUT/ncclt-$impl.log"
  }
  COLLS="all_reduce all_gather reduce_scatter broadcast reduce sendrecv"
  # Correctness: every data type and op (-d all -o all), checked (-c 1), small to 1 MiB.
  for np in ${TCCL_NCCLT_NP:-2 3 4}; do
    for t in $COLLS; do run_ncclt tccl "$np" "$t" -b 8 -e 1M -f 32 -d all -o all -c 1 -w 1 -n 1; done
  done
  # Performance: float sum, 8 B to TCCL_NCCLT_MAX, tccl and NCCL side by side in this call.
  for np in ${TCCL_NCCLT_PERF_NP:-2 4}; do
    tests=${TCCL_NCCLT_PERF:-"all_reduce all_gather reduce_scatter broadcast sendrecv"}
    [[ $np == 2 ]] && tests=${TCCL_NCCLT_PERF2:-$tests}
    for t in $tests; do
      for impl in nccl tccl; do
        run_ncclt "$impl" "$np" "$t" -b 8 -e "${TCCL_NCCLT_MAX:-128M}" -f 8 -c 1 -w 2 -n 5
      done
    done
  done
  echo "tccl nccl-tests: lines with #wrong != 0 (must be none):"
  # (#wrong is "N/A" where a test has no in-place variant, e.g. sendrecv, for NCCL too.)
  awk '/^===/{h=$0} /^ +[0-9]+ +[0-9]+ /{ a = $(NF-4); b = $(NF);
       if ((a != "0" && a != "N/A") || (b != "0" && b != "N/A")) print h": "$0 }' \
    "$OUT/ncclt-tccl.log" | head -20
  grep -E "Out of bounds|exit |missing" "$OUT/ncclt-tccl.log" | sort | uniq -c | head -20
fi

# The latest stage's benchmark.
PERF=$(ls "$BUILD"/stage*/bench/tccl_perf "$BUILD"/bench/tccl_perf 2>/dev/null | sort -V | tail -n 1)
if want bench; then
  for np in $NP_LIST; do
    perf=$PERF
    [[ -n $perf ]] || break
    log "tccl_perf device np=$np"
    for t in sendrecv allreduce allgather; do
      timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" \
        "$perf" -t "$t" -m device -b 1K -e 64M -f 8 -n 5 -w 2 2>&1 | tail -12 | tee -a "$OUT/bench.log"
    done
  done
fi
if want algos && [[ -n $PERF ]]; then
  log "algorithms on device buffers (compare_algos.sh, tune.sh)"
  TCCL_CMP_NPS=${TCCL_ALGOS_NP:-"2 3"} TCCL_CMP_REPS=${TCCL_ALGOS_REPS:-2} TCCL_CMP_MEM=device \
    TCCL_CMP_MAX=${TCCL_ALGOS_MAX:-16M} TCCL_PERF=$PERF TCCL_MPI_PERF=none \
    timeout 400 bash tools/bench/compare_algos.sh "$BUILD" "$OUT/algos" 2>&1 | tee "$OUT/algos.md" | tail -40
  bash tools/bench/tune.sh "$BUILD" "$OUT/algos" 2>&1 | tee "$OUT/tune.txt"
  tar czf "$OUT/algos.tgz" -C "$OUT" algos && rm -rf "$OUT/algos"
fi
if want trace; then
  # The step timeline on device buffers: the trace tests (tools/trace check: complete and
  # causal), then traces of a 2-rank send/recv and ring all-reduce kept in $OUT, with the GPU
  # clock calibration the INIT log reports.
  log "trace tests on device buffers"
  (cd "$BUILD" && TCCL_TEST_MEM=device ctest -L trace --timeout 120 --output-on-failure \
    >"$OUT/ctest-trace.log" 2>&1)
  tail -3 "$OUT/ctest-trace.log"
  grep -E "trace check:|Failed|Timeout" "$OUT/ctest-trace.log" | head -12
  perf=$PERF
  for t in sendrecv allreduce; do
    rm -rf "$OUT/trace-$t" && mkdir -p "$OUT/trace-$t"
    TCCL_TRACE_FILE=$OUT/trace-$t/trace.%h.%p TCCL_DEBUG=INFO TCCL_DEBUG_SUBSYS=INIT \
      timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
      -x TCCL_TRACE_FILE -x TCCL_DEBUG -x TCCL_DEBUG_SUBSYS \
      "$perf" -t "$t" -m device -b 4M -e 4M -n 2 -w 0 2>&1 | grep -E "trace:|^ +[0-9]" | head -8
    python3 tools/trace check --ranks 2 "$OUT"/trace-$t/trace.* | tail -4
    python3 tools/trace summary "$OUT"/trace-$t/trace.* 2>&1 | head -12
  done
  # One file back instead of four (the device tool returns at most 8).
  tar czf "$OUT/traces.tgz" -C "$OUT" trace-sendrecv trace-allreduce && rm -rf "$OUT"/trace-*/
fi
log "done"
