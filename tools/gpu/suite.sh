#!/usr/bin/env bash
# tools/gpu/suite.sh: the multi-GPU suite -- one rank per GPU, on however many GPUs the
# machine has, in one call per machine kind.
#
# What it is: the device-machine run that the results page (docs/results.md, made from its
# logs by tools/gpu/results.py) is built from. It builds the latest stage on its own (tests
# included, no torch backend: tools/gpu/torch.sh builds that) and nccl-tests against the real
# NCCL and against tccl's nccl.h shim (.nccl-tests/ holds its source, fetched separately and
# never committed), then runs, as NCCL runs, one rank per GPU (np = the GPU count):
#   test     the device tests (ring sweep, P2P patterns, large P2P, CUDA graphs, ring group)
#            on device buffers as planned; the ring sweep (every collective, type, op, count,
#            in and out of place) again with each protocol (TCCL_PROTO=Simple, LL, LL128), each
#            transport (SHM: TCCL_P2P_DISABLE=1; the network: and TCCL_SHM_DISABLE=1) and each
#            algorithm (TCCL_ALGO=tree, recdoubling) forced, the P2P patterns over each
#            transport; one line per run in tests.txt: PASS or FAIL, the variant, the program;
#            on 2 GPUs or more, P2P patterns, large P2P, the ring sweep and CUDA graphs again
#            with more ranks than GPUs, odd counts included, under MPS (mps-tests.txt);
#   check    nccl-tests through the shim, every type and op, checked (-d all -o all -c 1);
#   compare  NCCL and tccl in the same call, every collective, 8 B to 1 GiB, two interleaved
#            rounds (compare/<impl>.<collective>.<round>.log), and the peer copy rate between
#            GPUs 0 and 1 (the physical line of the plots; peer-copy.txt);
#   graphs   all-reduce and all-gather again, 8 B to 64 MiB, both libraries captured in CUDA
#            graphs (nccl-tests -G 10: each timed launch replays 10 captured calls), one round
#            (graphs/<impl>.<collective>.G10.log);
#   tune     the cost model's device constants (src/tuning.cc): tccl_perf all-reduce with each
#            algorithm and protocol forced, 8 B to 16 MiB, at np ranks one per GPU and at np+1
#            and 2 np sharing the GPUs under MPS (tune/<np>.<variant>.median.txt, and the
#            model's own choice, tune/<np>.auto.txt), fitted by tools/bench/tune.sh
#            (tune/fit.txt: the rows to paste into kCost, kCostLL and kCostLL128);
#   torch    tools/gpu/torch.sh's build and test for the latest stage (torch.txt), and the DDP
#            step at np against NCCL, widths 128, 2048 and 8192 (ddp.txt).
# What results.py reads: machine.txt, tests.txt, mps-tests.txt, check/summary.txt,
# peer-copy.txt, compare/, graphs/, torch.txt, ddp.txt; everything else (builds, each run's
# output) is in logs/.
# On a machine with one GPU, test runs 2 ranks under MPS (sharing the GPU, as tccl allows and
# NCCL refuses), check runs nccl-tests at 1 rank (nccl-tests gives each rank a GPU of its own),
# and compare says why it has nothing to compare.
# Usage: tools/gpu/suite.sh [build] [test] [check] [compare] [graphs] [tune] [torch]
#        (default: the first four, about 5 minutes on one H200; torch is a call of its own:
#        its cold build, the library again with the backend beside it, took more than the
#        device tool's 10 minutes on one H200's 16 cores, and about 11 minutes on 4 H200's
#        64 cores: its CUDA kernels compile one file at a time)
# Environment: OUT (raw logs; default ./gpu-out/suite), TCCL_SUITE_STAGE (default: the latest
#              stage), TCCL_SUITE_MAX (compare's largest size, default 1G), TCCL_SUITE_ITERS
#              (compare's -n, default 20), TCCL_SUITE_COMMIT (the commit to name, where the
#              tree was copied without its history), NCCL_HOME (the real NCCL; default the
#              torch wheel's).
# Added in: stage 5 (the NVLink chapter's yardstick; runs the latest stage).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out/suite}
mkdir -p "$OUT/logs"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
STEPS=("$@")
((${#STEPS[@]})) || STEPS=(build test check compare)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
log() { echo "== $(date +%T) $*"; }
STAGE=${TCCL_SUITE_STAGE:-$(ls -d stage*/ | sort -V | tail -n 1)}
STAGE=${STAGE%/}
SN=${STAGE#stage} SN=${SN%%-*}
B=$ROOT/build-gpu-$STAGE   # git-ignored: kept between calls on a warm machine
NB=$ROOT/build-ncclt-suite
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
((NGPU > 0)) || { echo "tools/gpu/suite.sh: no GPU on this machine" >&2; exit 1; }
NP=$NGPU MPS=0 NCCLT_NP=$NGPU
if ((NGPU == 1)); then NP=2 MPS=1; fi
NCCL_HOME=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)}
mps() {  # on | off
  if [[ $1 == on ]]; then nvidia-cuda-mps-control -d 2>/dev/null; else echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; fi
}
mpi() { timeout "${TMO:-300}" mpirun --allow-run-as-root --oversubscribe --bind-to none "$@"; }
{
  echo "machine: $NGPU x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
  echo "stage: $STAGE; ranks: $NP$( ((MPS)) && echo ' (sharing one GPU under MPS)')"
  echo "commit: ${TCCL_SUITE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "nccl: $(python3 -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))' 2>/dev/null)"
  echo "date: $(date -u +%F)"
  nvidia-smi topo -m 2>/dev/null | head -n $((NGPU + 1)) | sed 's/\x1b\[[0-9;]*m//g'  # no colours
} >"$OUT/machine.txt"
cat "$OUT/machine.txt"

if want build; then
  log "build $STAGE (sm_90, tests, no torch) and nccl-tests"
  cmake -S "$STAGE" -B "$B" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DTCCL_WITH_TORCH=OFF >"$OUT/logs/cmake.log" 2>&1 || { tail -30 "$OUT/logs/cmake.log"; exit 1; }
  cmake --build "$B" -j"$(nproc)" >"$OUT/logs/build.log" 2>&1 || { grep -E "error" "$OUT/logs/build.log" | head -20; exit 1; }
  if [[ -d .nccl-tests ]]; then
    bash tools/nccl-tests.sh --out "$NB" --nccl-home "$NCCL_HOME" --tccl-build "$B" \
      --stage "$STAGE" .nccl-tests >"$OUT/logs/ncclt-build.log" 2>&1 || tail -20 "$OUT/logs/ncclt-build.log"
  else
    echo "no .nccl-tests/ (fetch NVIDIA/nccl-tests there): check and compare cannot run" | tee "$OUT/logs/ncclt-build.log"
  fi
  log "build done"
fi

if want test; then
  log "device tests, $NP ranks"
  ((MPS)) && mps on
  : >"$OUT/tests.txt"
  # Every program as planned; the collective sweep with each protocol, transport and
  # algorithm forced, the P2P patterns over each transport. prog@filter: a GoogleTest filter
  # (a forced algorithm runs the collectives it implements, as tests/tree's sweeps do).
  RUNS=("planned: ring_sweep p2p_patterns p2p_large cuda_graph ring_group"
        "Simple:TCCL_PROTO=Simple ring_sweep" "LL:TCCL_PROTO=LL ring_sweep"
        "LL128:TCCL_PROTO=LL128 ring_sweep"
        "SHM:TCCL_P2P_DISABLE=1 ring_sweep p2p_patterns"
        "net:TCCL_P2P_DISABLE=1,TCCL_SHM_DISABLE=1 ring_sweep p2p_patterns"
        "tree:TCCL_ALGO=tree ring_sweep@*allreduce*:*broadcast*:*/reduce_*"
        "recdoubling:TCCL_ALGO=recdoubling ring_sweep@*allreduce*")
  for run in "${RUNS[@]}"; do
    read -r head progs <<<"$run"
    name=${head%%:*} envs=${head#*:}
    for spec in $progs; do
      prog=${spec%%@*} filter=
      [[ $spec == *@* ]] && filter=--gtest_filter=${spec#*@}
      exe=$B/s${SN}_test_$prog
      [[ -x $exe ]] || { printf '%-8s %-12s %s\n' MISSING "$name" "$prog" | tee -a "$OUT/tests.txt"; continue; }
      xs=(-x TCCL_TEST_MEM=device)
      for e in ${envs//,/ }; do xs+=(-x "$e"); done
      if (for e in ${envs//,/ }; do export "$e"; done; TCCL_TEST_MEM=device \
          mpi -np "$NP" "${xs[@]}" "$exe" $filter >"$OUT/logs/test.$prog.$name.log" 2>&1); then
        r=PASS
      else
        r=FAIL
      fi
      printf '%-8s %-12s %s\n' "$r" "$name" "$prog" | tee -a "$OUT/tests.txt"
    done
  done
  ((MPS)) && mps off
  # More ranks than GPUs, odd counts included: ranks share the GPUs under MPS (rank r on GPU
  # r % NGPU, the harness's mapping). One line per run in mps-tests.txt.
  if ((NGPU >= 2)); then
    mps on
    : >"$OUT/mps-tests.txt"
    for spec in "$((NGPU + 1)) p2p_patterns" "$((2 * NGPU)) p2p_patterns" \
                "$((2 * NGPU + 1)) p2p_patterns" "$((NGPU + 1)) p2p_large" \
                "$((NGPU + 1)) ring_sweep" "$((2 * NGPU)) cuda_graph"; do
      read -r np prog <<<"$spec"
      if TCCL_TEST_MEM=device mpi -np "$np" -x TCCL_TEST_MEM=device "$B/s${SN}_test_$prog" \
          >"$OUT/logs/mps.$prog.np$np.log" 2>&1; then r=PASS; else r=FAIL; fi
      echo "$r np$np $prog (MPS, $NGPU GPUs)" | tee -a "$OUT/mps-tests.txt"
    done
    mps off
  fi
fi

# One nccl-tests run: impl (nccl|tccl), collective, log file, then its arguments.
ncclt() {
  local impl=$1 t=$2 logf=$3; shift 3
  local dir; dir=$([[ $impl == nccl ]] && echo real || echo tccl)
  [[ -x $NB/$dir/${t}_perf ]] || { echo "missing $NB/$dir/${t}_perf" >"$logf"; return 1; }
  mpi -np "$NCCLT_NP" -x LD_LIBRARY_PATH="$NB/homes/$dir/lib:${LD_LIBRARY_PATH:-}" -x NCCL_NVLS_ENABLE=0 \
    "$NB/$dir/${t}_perf" -g 1 "$@" >"$logf" 2>&1
}
COLLS="all_reduce all_gather reduce_scatter broadcast reduce sendrecv alltoall"

if want check; then
  log "nccl-tests through the shim, -d all -o all -c 1, $NCCLT_NP rank(s)"
  mkdir -p "$OUT/check"
  : >"$OUT/check/summary.txt"
  for t in $COLLS; do
    ncclt tccl "$t" "$OUT/logs/check.$t.log" -b 8 -e 1M -f 32 -d all -o all -c 1 -w 1 -n 1
    # #wrong is the 5th field from the end of each half of a row ("N/A" without in place).
    bad=$(awk '/^ +[0-9]+ +[0-9]+ /{ if (($(NF-4) != "0" && $(NF-4) != "N/A") || ($NF != "0" && $NF != "N/A")) n++ }
               END { print n + 0 }' "$OUT/logs/check.$t.log")
    rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$OUT/logs/check.$t.log")
    echo "$t, $NCCLT_NP rank(s): $rows rows, $bad with #wrong != 0" | tee -a "$OUT/check/summary.txt"
  done
fi

if want compare; then
  mkdir -p "$OUT/compare"
  if ((NGPU < 2)); then
    echo "one GPU: NCCL refuses two ranks on one GPU, so there is nothing to compare here" |
      tee "$OUT/compare/NOT-RUN.txt"
  else
    log "peer copy rate, GPU 0 -> 1"
    python3 - >"$OUT/peer-copy.txt" 2>&1 <<'EOF'
import torch
a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0")
b = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:1")
for _ in range(3): b.copy_(a)
torch.cuda.synchronize(0); torch.cuda.synchronize(1)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record(); n = 10
for _ in range(n): b.copy_(a)
e.record(); e.synchronize()
print(f"peer copy 0->1, 1 GiB: {n * (1 << 30) / (s.elapsed_time(e) / 1e3) / 1e9:.1f} GB/s")
EOF
    cat "$OUT/peer-copy.txt"
    log "NCCL and tccl, $NP ranks, 8 B to ${TCCL_SUITE_MAX:-1G}"
    for r in 1 2; do
      for t in $COLLS; do
        for impl in nccl tccl; do
          ncclt "$impl" "$t" "$OUT/compare/$impl.$t.$r.log" -b 8 -e "${TCCL_SUITE_MAX:-1G}" -f 2 \
            -w 5 -n "${TCCL_SUITE_ITERS:-20}" -c 0 || echo "exit $? ($impl $t round $r)"
        done
      done
    done
  fi
fi

if want graphs && ((NGPU >= 2)); then
  log "NCCL and tccl captured in CUDA graphs, $NP ranks, 8 B to 64 MiB"
  mkdir -p "$OUT/graphs"
  for t in all_reduce all_gather; do
    for impl in nccl tccl; do
      ncclt "$impl" "$t" "$OUT/graphs/$impl.$t.G10.log" -b 8 -e 64M -f 4 -w 5 -n 20 -G 10 -c 0 ||
        echo "exit $? ($impl $t, graphs)"
    done
  done
fi

if want tune && ((NGPU >= 2)); then
  log "cost model: all-reduce with each algorithm and protocol forced"
  d=$OUT/tune
  mkdir -p "$d"
  for np in "$NGPU" $((NGPU + 1)) $((2 * NGPU)); do
    ((np > NGPU)) && mps on
    # (LL128 needs a GPU per rank: at np = NGPU only.)
    vs=(ring tree recdoubling ring.ll recdoubling.ll auto)
    ((np == NGPU)) && vs+=(ring.ll128)
    for v in "${vs[@]}"; do
      proto=simple algo=${v%%.*}
      [[ $v != *.ll* ]] || proto=${v#*.}
      [[ $v != auto ]] || proto= algo=
      f=$d/$np.$v.median.txt
      [[ $v != auto ]] || f=$d/$np.auto.txt  # (not a fit input)
      { echo "# memory: device"  # (tune.sh reads it)
        mpi -np "$np" -x TCCL_ALGO="$algo" -x TCCL_PROTO="$proto" "$B/bench/tccl_perf" \
          -t allreduce -m device -b 8 -e 16M -f 2 -n 50 -w 5 2>&1; } >"$f"
    done
    ((np > NGPU)) && mps off
  done
  { echo "# tools/bench/tune.sh on $NGPU x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
    bash tools/bench/tune.sh "$B" "$d"; } | tee "$d/fit.txt"
fi

if want torch; then
  log "torch backend ($STAGE) on CUDA tensors"
  OUT=$OUT/logs/torch TCCL_TORCH_STAGE=$STAGE bash tools/gpu/torch.sh build test >"$OUT/logs/torch.log" 2>&1
  grep -E "^== |exit |checks passed|verified|WRONG|Error" "$OUT/logs/torch.log" | tee "$OUT/torch.txt" | head -40
  if ((NGPU >= 2)); then
    TB=$ROOT/build-torch-gpu-$STAGE
    [[ $STAGE == stage4-torch ]] && TB=$ROOT/build-torch-gpu
    : >"$OUT/ddp.txt"
    for w in 128 2048 8192; do
      PYTHONPATH=$TB/python:$ROOT/tests/torch python3 tests/torch/launch.py --np "$NP" --timeout 300 \
        "$STAGE/torch/bench/ddp_step.py" --device cuda --steps 200 --width "$w" --compare-nccl 2>&1 |
        grep -v "^\[[1-9]" | tail -3 | sed "s/^/width $w: /" | tee -a "$OUT/ddp.txt"
    done
  fi
fi
log done
