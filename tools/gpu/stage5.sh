#!/usr/bin/env bash
# tools/gpu/stage5.sh: chapter 5 on a GPU machine -- every transport at 2 and 3 ranks sharing
# the GPU (with MPS and without), then the performance table against cudaMemcpy and NCCL.
#
# What it is: the device-machine half of stage 5's tests and benchmarks (CI has no GPU). It
# builds stage5-transport-shm on its own (tools/gpu/run.sh with TCCL_GPU_STAGE; no torch
# backend), and nccl-tests against the real NCCL and against the stage's nccl.h shim when
# .nccl-tests/ holds its source (fetched separately, never committed). Then:
#   test   on device buffers (TCCL_TEST_MEM=device): the ring sweep and the P2P patterns with
#          each transport -- P2P (the default), SHM (TCCL_P2P_DISABLE=1), the network
#          (TCCL_P2P_DISABLE=1 TCCL_SHM_DISABLE=1) -- at 2 and 3 ranks under MPS (the sweep at
#          3, and at 2 over P2P), and the P2P
#          patterns at 2 ranks without MPS (time-sliced: slow, but must be right); CUDA graph
#          capture and replay at 1 to 3 ranks (P2P), 2 (SHM), and 2 without MPS; the same
#          with the LL protocol forced; the INIT log's transport lines; /dev/shm afterwards;
#   bench  cudaMemcpy's device-to-device rate (bench/memcpy_perf), then tccl_perf at 1 rank
#          beside nccl-tests on the real NCCL and on tccl's shim at 1 rank (NCCL refuses two
#          ranks on one GPU), then send/recv and all-reduce at 2 and 4 ranks under MPS.
#          and, in a build of their own with TCCL_LL_TEST_CLEANUP (the LL flag wrapping at 256
#          steps), the LL sweep and patterns again (also alone: llwrap);
#   tune   the cost model's device constants, Simple and LL (tools/bench/tune.sh's fit);
#   gdr    stage 6 on: collectives over NET/IB with the fake verbs device as libibverbs.so.1
#          (tests/net/fake_verbs_lib.cc), ranks as threads of one process, on host and device
#          buffers: with GPUDirect RDMA (TCCL_NET_GDR_ENABLE=1: kernels' receive slots in GPU
#          memory, exported as a dma-buf, written by the fake "NIC") and without; the INIT
#          lines say which connectors used it, or why not. (No RDMA NIC exists here: where
#          verbs.h is missing, CMAKE_INCLUDE_PATH may name a directory holding infiniband/.)
#   faults stage 7 on: the flight recorder's tests (device operations included), the watchdog
#          at 2 ranks (TCCL_TIMEOUT=3; a waiting kernel stopped), tools/frtrace on its dumps,
#          and PyTorch's own analyzer (torchfrtrace, from the torch install) on the same dumps
#          turned into its pickles; the lifecycle tests on device buffers (2 and 3 ranks, MPS
#          and not), the check mode, fault injection.
# Usage: tools/gpu/stage5.sh [build] [test] [llwrap] [bench] [tune] [gdr] [faults]
#        (default: build test bench)
# Environment: OUT (logs; default ./gpu-out), TCCL_GPU_STAGE (a later stage, e.g.
# stage6-transport-ib, to run the same suite on; default stage5-transport-shm).
# Added in: stage 5.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
# TCCL_GPU_STAGE picks a later chapter, which runs the same suite (stage 6: the network
# variants then go through its network transport and socket Net).
STAGE=${TCCL_GPU_STAGE:-stage5-transport-shm}
P=s${STAGE:5:1}_  # the stage's test prefix: s5_, s6_
B=$ROOT/build-gpu-$STAGE
T=$B  # test programs: at the top of a stage's own build tree
# nccl-tests builds, $NB-real and $NB-tccl (two trees: they build at once); under build-*
# (git-ignored), so they survive between calls on a warm device machine.
NB=$ROOT/build-ncclt
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
STEPS=("$@")
((${#STEPS[@]})) || STEPS=(build test bench)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
log() { echo "== $(date +%T) $*"; }
mpi() { timeout "${TMO:-240}" mpirun --allow-run-as-root --oversubscribe --bind-to none "$@"; }
mps_on() { nvidia-cuda-mps-control -d 2>/dev/null && log "MPS on"; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; sleep 1; }
NCCL_HOME=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)}

if want build; then
  # nccl-tests on the real NCCL needs nothing of ours: it builds while tccl does.
  if [[ -d .nccl-tests ]]; then
    bash tools/nccl-tests.sh --only real --out "$NB-real" --nccl-home "$NCCL_HOME" \
      .nccl-tests >"$OUT/ncclt-real-build.log" 2>&1 &
  fi
  OUT=$OUT TCCL_GPU_STAGE=$STAGE bash tools/gpu/run.sh build
  if [[ -d .nccl-tests ]]; then
    log "nccl-tests on the shim (real NCCL at $NCCL_HOME)"
    bash tools/nccl-tests.sh --only tccl --out "$NB-tccl" --tccl-build "$B" --stage $STAGE \
      .nccl-tests >"$OUT/ncclt-tccl-build.log" 2>&1 || tail -20 "$OUT/ncclt-tccl-build.log"
    wait || tail -20 "$OUT/ncclt-real-build.log"
  fi
  ls "$NB"-*/*/all_reduce_perf 2>/dev/null
  log "build done"
fi

# One test program at np ranks with one transport: the last lines, and the device cases run.
# More arguments: "-x NAME=VALUE" pairs go to mpirun (environment), the rest to the program.
run_case() {  # transport np exe [args...]
  local tr=$1 np=$2 exe=$3; shift 3
  local env=() args=() tag=""
  case $tr in
    p2p) ;;
    shm) env=(-x TCCL_P2P_DISABLE=1) ;;
    net) env=(-x TCCL_P2P_DISABLE=1 -x TCCL_SHM_DISABLE=1) ;;
  esac
  while (($#)); do
    if [[ $1 == -x ]]; then env+=(-x "$2") tag+=" $2"; shift 2; else args+=("$1"); shift; fi
  done
  local log=$OUT/test${LOGTAG:-}-$tr-np$np-$(basename "$exe")$(echo "$tag" | tr -c 'A-Za-z0-9\n' _).log
  # (No --gtest_brief: the count below reads the OK lines it would hide.)
  mpi -np "$np" -x TCCL_TEST_MEM=device "${env[@]}" "$T/$exe" "${args[@]}" >"$log" 2>&1
  local rc=$?
  echo "${LOGTAG:+${LOGTAG#-} }$tr np=$np $exe$tag: exit $rc," \
    "$(grep -cE '\[ +OK +\] ' "$log") cases passed" \
    "(all ranks) $(grep -E 'FAILED|Failure' "$log" | head -2 | tr '\n' ' ')"
}

# The LL flag-wrap cleanup (src/device/fifo.h): a build with TCCL_LL_TEST_CLEANUP wraps the
# flag at 256 steps instead of 2^32, so the sweep's thousands of steps per connection pass
# through the wrap and the cleanup many times; a stale line taken for a fresh one would show
# as a wrong result. Its own build tree, the sweep and the P2P patterns only, LL forced.
ll_wrap_tests() {
  local W=$ROOT/build-gpu-$STAGE-llwrap
  log "LL flag wrap at 256 steps (TCCL_LL_TEST_CLEANUP build)"
  cmake -S "$STAGE" -B "$W" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
    -DTCCL_WITH_TORCH=OFF -DCMAKE_CUDA_FLAGS=-DTCCL_LL_TEST_CLEANUP \
    -DCMAKE_CXX_FLAGS=-DTCCL_LL_TEST_CLEANUP >"$OUT/llwrap-cmake.log" 2>&1 &&
    cmake --build "$W" -j"$(nproc)" --target ${P}test_ring_sweep ${P}test_p2p_patterns \
      >"$OUT/llwrap-build.log" 2>&1 || { tail -20 "$OUT/llwrap-build.log"; return; }
  T=$W LOGTAG=-llwrap run_case p2p 2 ${P}test_ring_sweep -x TCCL_PROTO=LL
  T=$W LOGTAG=-llwrap run_case p2p 3 ${P}test_ring_sweep -x TCCL_PROTO=LL -x TCCL_ALGO=ring
  T=$W LOGTAG=-llwrap run_case shm 2 ${P}test_ring_sweep -x TCCL_PROTO=LL
  T=$W LOGTAG=-llwrap run_case p2p 2 ${P}test_p2p_patterns -x TCCL_P2P_LL_THRESHOLD=100000
}

if want llwrap; then
  mps_on
  ll_wrap_tests
  mps_off
fi

if want test; then
  mps_on
  ll_wrap_tests
  for tr in p2p shm net; do
    run_case $tr 3 ${P}test_ring_sweep
    run_case $tr 2 ${P}test_p2p_patterns
    run_case $tr 3 ${P}test_p2p_patterns
  done
  run_case p2p 2 ${P}test_ring_sweep
  run_case p2p 2 ${P}test_p2p_large
  run_case p2p 3 ${P}test_ring_group
  # CUDA graphs: capture, 100 replays, each checked (tests/gpu/cuda_graph_test.cc).
  for np in 1 2 3; do run_case p2p $np ${P}test_cuda_graph; done
  run_case shm 2 ${P}test_cuda_graph
  # The LL protocol forced (TCCL_PROTO=LL for collectives; send/recv below a raised
  # TCCL_P2P_LL_THRESHOLD): the sweep on the ring and on recursive doubling (3 and 5 ranks:
  # with folding), over P2P and SHM; the P2P patterns; large messages; graphs (not the case
  # that captures host buffers, which TCCL_PROTO=LL refuses).
  LL=(-x TCCL_PROTO=LL)
  LLP=(-x TCCL_P2P_LL_THRESHOLD=100000)
  run_case p2p 2 ${P}test_ring_sweep "${LL[@]}"
  run_case p2p 3 ${P}test_ring_sweep "${LL[@]}" -x TCCL_ALGO=ring
  run_case p2p 3 ${P}test_ring_sweep "${LL[@]}" -x TCCL_ALGO=recdoubling --gtest_filter=*allreduce*
  run_case p2p 5 ${P}test_ring_sweep "${LL[@]}" -x TCCL_ALGO=recdoubling --gtest_filter=*allreduce*
  run_case shm 2 ${P}test_ring_sweep "${LL[@]}"
  run_case p2p 2 ${P}test_p2p_patterns -x TCCL_P2P_LL_THRESHOLD=1000000000
  run_case p2p 3 ${P}test_p2p_patterns "${LLP[@]}"
  run_case shm 2 ${P}test_p2p_patterns "${LLP[@]}"
  run_case p2p 2 ${P}test_p2p_large -x TCCL_P2P_LL_THRESHOLD=100000000
  run_case p2p 2 ${P}test_cuda_graph "${LL[@]}" "${LLP[@]}" --gtest_filter=-*HostBuffers*
  run_case p2p 3 ${P}test_cuda_graph "${LL[@]}" "${LLP[@]}" --gtest_filter=-*HostBuffers*
  log "transport lines (TCCL_DEBUG_SUBSYS=INIT), 2 ranks"
  # (The network too: stage 6 says there which Net it took, and why not verbs.)
  for tr in "" "-x TCCL_P2P_DISABLE=1" "-x TCCL_P2P_DISABLE=1 -x TCCL_SHM_DISABLE=1"; do
    # shellcheck disable=SC2086
    TMO=60 mpi -np 2 -x TCCL_DEBUG=INFO -x TCCL_DEBUG_SUBSYS=INIT $tr "$B/bench/tccl_perf" \
      -t allreduce -m device -b 1M -e 1M -n 1 -w 0 2>&1 | grep -E " via |NET/IB:" |
      sort -t: -k4 | uniq | head -6
  done
  mps_off
  log "without MPS (time-sliced), 2 ranks"
  run_case p2p 2 ${P}test_p2p_patterns
  run_case p2p 2 ${P}test_cuda_graph
  log "/dev/shm after the runs: $(ls /dev/shm | grep -c tccl) entries named tccl"
fi

if want gdr; then
  fake=$(find "$B" -path "*fake_ibverbs/libibverbs.so.1" | head -1)
  if [[ -z $fake || ! -x $T/${P}test_net_fake_ib ]]; then
    log "gdr: the fake libibverbs or ${P}test_net_fake_ib was not built (no infiniband/verbs.h?)"
  else
    for gdr in 1 0; do
      log "NET/IB over the fake verbs device, TCCL_NET_GDR_ENABLE=$gdr, host and device buffers"
      glog=$OUT/gdr$gdr.log
      TMO=150 mpi -np 1 -x LD_LIBRARY_PATH="$(dirname "$fake"):${LD_LIBRARY_PATH:-}" \
        -x TCCL_SHM_DISABLE=1 -x TCCL_P2P_DISABLE=1 -x TCCL_IB_GID_INDEX=3 \
        -x TCCL_NET_GDR_ENABLE=$gdr -x FAKE_VERBS_DMABUF=1 -x TCCL_TEST_MEM=all \
        -x TCCL_DEBUG=INFO -x TCCL_DEBUG_SUBSYS=INIT,NET "$T/${P}test_net_fake_ib" >"$glog" 2>&1
      echo "gdr=$gdr: exit $?, $(grep -cE '\[ +OK +\] ' "$glog") cases passed;" \
        "$(grep -E 'FAILED|Failure|WARN' "$glog" | head -3 | tr '\n' ' ')"
      # Which connectors took GPUDirect RDMA (NCCL's "/GDRDMA"), or why not; the probe's line.
      grep -oE "via NET/IB[^ ]*( \(GPUDirect RDMA not used: [^)]*\))?|dma-buf (yes|no)" "$glog" |
        sort | uniq -c
    done
  fi
fi

if want faults; then
  log "stage 7: flight recorder and watchdog"
  run_case p2p 1 ${P}test_flight_recorder --gtest_filter=FlightRecorder.*
  run_case p2p 2 ${P}test_flight_recorder --gtest_filter=FlightRecorder.*
  d=$OUT/fr
  rm -rf "$d"
  mkdir -p "$d"
  TMO=60 mpi -np 2 -x TCCL_TIMEOUT=3 -x TCCL_FR_DUMP="$d/fr_" "$T/${P}test_flight_recorder" \
    --gtest_filter=Watchdog.* >"$OUT/watchdog.log" 2>&1
  echo "watchdog np=2: exit $?, $(grep -cE '\[ +OK +\] ' "$OUT/watchdog.log") cases passed"
  # A communicator's life on device buffers (non-blocking, split, shrink, revoke, abort of a
  # waiting kernel), under MPS and without; the check mode; fault injection (forked ranks).
  mps_on
  run_case p2p 2 ${P}test_lifecycle
  run_case p2p 3 ${P}test_lifecycle
  run_case shm 2 ${P}test_lifecycle
  run_case p2p 2 ${P}test_check_mode -x TCCL_CHECK_MODE=1
  mps_off
  run_case p2p 2 ${P}test_lifecycle --gtest_filter=*Abort*
  timeout 120 "$T/${P}test_fault_inject" >"$OUT/fault_inject.log" 2>&1
  echo "fault_inject: exit $?, $(grep -cE '\[ +OK +\] ' "$OUT/fault_inject.log") cases passed"
  python3 tools/frtrace analyze "$d" --prefix fr_
  python3 tools/frtrace to-torch "$d" "$d/pkl" --prefix fr_
  TF=$(command -v torchfrtrace || echo /opt/torch/.venv/bin/torchfrtrace)
  if [[ -x $TF ]]; then
    log "PyTorch's analyzer: $TF"
    "$TF" --prefix fr_ "$d/pkl" 2>&1 | tail -20
    echo "torchfrtrace: exit ${PIPESTATUS[0]}"
    "$TF" -j --prefix fr_ "$d/pkl" 2>&1 | tail -20
  else
    echo "no torchfrtrace found"
  fi
fi

if want tune; then
  # The cost model's device constants (stage5-transport-shm/src/tuning.cc): all-reduce with
  # each algorithm and protocol forced, 2 to 4 ranks under MPS, 8 B to 16 MiB; then
  # tools/bench/tune.sh fits kCost's device row and kCostLL to them.
  mps_on
  d=$OUT/tune
  mkdir -p "$d"
  for np in 2 3 4; do
    for v in ring tree recdoubling ring.ll recdoubling.ll; do
      proto=simple
      [[ $v != *.ll ]] || proto=ll
      { echo "# memory: device"  # (tune.sh reads it)
        mpi -np $np -x TCCL_ALGO="${v%%.*}" -x TCCL_PROTO=$proto "$B/bench/tccl_perf" \
          -t allreduce -m device -b 8 -e 16M -f 2 -n 50 -w 5 2>&1; } >"$d/$np.$v.median.txt"
    done
  done
  mps_off
  bash tools/bench/tune.sh "$B" "$d"
fi

if want bench; then
  log "cudaMemcpy device to device"
  "$B/bench/memcpy_perf" -b 8 -e 256M -f 16 -n 20 | tee "$OUT/memcpy.log"
  log "1 rank: tccl_perf, then nccl-tests on NCCL and on the tccl shim"
  for t in allreduce allgather sendrecv; do
    mpi -np 1 "$B/bench/tccl_perf" -t $t -m device -b 8 -e 256M -f 16 -n 20 -w 3 2>&1 |
      grep -E "^ +[0-9]+ " | sed "s/^/tccl_perf $t /" | tee -a "$OUT/bench-np1.log"
  done
  for impl in real tccl; do
    for t in all_reduce all_gather reduce_scatter broadcast reduce sendrecv; do
      exe=$NB-$impl/$impl/${t}_perf
      [[ -x $exe ]] || { echo "missing $exe"; continue; }
      echo "=== $impl $t" >>"$OUT/ncclt-np1.log"
      mpi -np 1 -x LD_LIBRARY_PATH="$NB-$impl/homes/$impl/lib:${LD_LIBRARY_PATH:-}" "$exe" -g 1 \
        -b 8 -e 256M -f 16 -c 1 -w 3 -n 20 >>"$OUT/ncclt-np1.log" 2>&1 || echo "exit $? $impl $t"
    done
  done
  # size, out-of-place time (us) and busbw, for a few sizes: the rest is in ncclt-np1.log.
  awk '/^===/{h=$2" "$3} /^ +[0-9]+ +[0-9]+ /{ if ($1 == 8 || $1 == 65536 || $1 == 1048576 ||
       $1 == 268435456) print h, $1, $6, $8 }' "$OUT/ncclt-np1.log"
  # Small sizes through the shim again, with more iterations, and what one call plans.
  exe=$NB-tccl/tccl/all_reduce_perf
  if [[ -x $exe ]]; then
    for rep in 1 2; do
      mpi -np 1 -x LD_LIBRARY_PATH="$NB-tccl/homes/tccl/lib:${LD_LIBRARY_PATH:-}" "$exe" -g 1 \
        -b 8 -e 64K -f 8 -c 0 -w 20 -n 200 2>&1 | grep -E "^ +[0-9]+ " | sed "s/^/shim rep$rep /"
    done
    mpi -np 1 -x TCCL_DEBUG=INFO -x TCCL_DEBUG_SUBSYS=COLL,TUNING \
      -x LD_LIBRARY_PATH="$NB-tccl/homes/tccl/lib:${LD_LIBRARY_PATH:-}" "$exe" -g 1 \
      -b 8 -e 8 -c 0 -w 0 -n 1 2>&1 | grep -iE "tccl|plan" | head -12
  fi
  mps_on
  for np in 2 4; do
    log "np=$np under MPS: send/recv and all-reduce (the model's choice, then each algorithm)"
    for t in sendrecv allreduce allreduce:ring allreduce:tree; do
      algo=()
      [[ $t != *:* ]] || algo=(-x TCCL_ALGO="${t#*:}")
      mpi -np $np "${algo[@]}" "$B/bench/tccl_perf" -t "${t%%:*}" -m device \
        -b 8 -e 256M -f 32 -n 10 -w 2 2>&1 |
        grep -E "^ +[0-9]+ " | sed "s/^/np$np $t /" | tee -a "$OUT/bench-mps.log"
    done
  done
  mps_off
fi
log "done"
