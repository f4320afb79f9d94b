#!/usr/bin/env bash
# tools/gpu/torch.sh: stage 4's torch backend on a GPU machine (torch 2.x with CUDA): build,
# test, benchmark.
#
# What it is: the device-machine half of stage 4's tests (CI has torch 1.13 without CUDA). It
# builds stage4-torch on its own (library with sm_90 code, the backend against the machine's
# torch, the C++ benchmark), then runs, with MPS so the ranks sharing one GPU run concurrently:
#   test    tests/torch on CUDA tensors (collectives, DDP vs its single-process reference,
#           stream semantics) at 2 ranks on one GPU, the CPU-tensor tests once more on torch
#           2.x, and the examples through torchrun with --device cuda;
#   bench   the backend's per-call cost against tcclAllReduce from C++ (tccl_perf), host and
#           device, at 1 rank; DDP step time, tccl against gloo on CPU tensors (2 and 4 ranks),
#           and on CUDA tensors against NCCL at 1 rank (NCCL refuses two ranks on one GPU).
# Usage: tools/gpu/torch.sh [build] [test] [bench]   (default: all three)
# Environment: OUT (logs; default ./gpu-out), TCCL_TORCH_STAGE (the stage whose backend is
# built and tested, default stage4-torch; stage 5 re-runs it on its transports),
# TCCL_TORCH_GPU_BUILD (default build-torch-gpu, or build-torch-gpu-<stage> for another stage).
# Added in: stage 4; TCCL_TORCH_STAGE in stage 5.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-out}
STAGE=${TCCL_TORCH_STAGE:-stage4-torch}
N=${STAGE//[!0-9]/}
DEFAULT_B=$ROOT/build-torch-gpu
[[ $STAGE == stage4-torch ]] || DEFAULT_B=$ROOT/build-torch-gpu-$STAGE
B=${TCCL_TORCH_GPU_BUILD:-$DEFAULT_B}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export PYTHONDONTWRITEBYTECODE=1
STEPS=("$@")
((${#STEPS[@]})) || STEPS=(build test bench)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
log() { echo "== $(date +%T) $*"; }
PY=$(command -v python3)
export PYTHONPATH=$B/python:$ROOT/tests/torch
T=$ROOT/tests/torch
launch() { "$PY" "$T/launch.py" "$@"; }

if want build; then
  log "build $STAGE (sm_90, torch $("$PY" -c 'import torch; print(torch.__version__)'))"
  cmake -S "$STAGE" -B "$B" -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release -DTCCL_BUILD_TESTS=OFF -DTCCL_WITH_TORCH=ON \
    >"$OUT/torch-cmake.log" 2>&1 || { tail -30 "$OUT/torch-cmake.log"; exit 1; }
  cmake --build "$B" -j"$(nproc)" --target "s${N}_tccl_torch_ext" "s${N}_tccl_perf" \
    >"$OUT/torch-build.log" 2>&1 ||
    { grep -E "error" -A3 "$OUT/torch-build.log" | head -40; exit 1; }
  log "build done"
fi

mps_on() { nvidia-cuda-mps-control -d 2>/dev/null && log "MPS on"; }
mps_off() { echo quit | nvidia-cuda-mps-control 2>/dev/null; }

if want test; then
  mps_on
  for t in "test_collectives.py --device cuda" "test_ddp.py --device cuda" \
           "test_streams.py --device cuda" "test_collectives.py --init tcp --quick" \
           "test_ddp.py" "test_errors.py --case usage --device cuda"; do
    log "np=2 $t"
    read -r -a words <<<"$t"
    launch --np 2 --timeout 240 "$T/${words[0]}" "${words[@]:1}" 2>&1 |
      grep -vE "Warning|warn\(" | tail -4
    echo "exit ${PIPESTATUS[0]}"
  done
  log "np=3 test_collectives.py --device cuda --quick"
  launch --np 3 --timeout 240 "$T/test_collectives.py" --device cuda --quick 2>&1 | tail -3
  for ex in ddp_one_param ddp_mlp; do
    log "torchrun example $ex --device cuda"
    timeout 200 "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 \
      "$STAGE/torch/examples/$ex.py" --device cuda 2>&1 |
      grep -E "verified|WRONG|Error" | head -4
  done
  mps_off
fi

if want bench; then
  BN=$STAGE/torch/bench
  log "per-call cost at 1 rank: the backend, then tcclAllReduce from C++ (8 bytes)"
  for dev in cpu cuda; do
    launch --np 1 --timeout 120 $BN/call_overhead.py --device $dev --iters 3000 | tail -1
    m=$([[ $dev == cpu ]] && echo host || echo device)
    mpirun --allow-run-as-root -np 1 "$B/bench/tccl_perf" -t allreduce -b 8 -e 8 -n 3000 -w 100 \
      -m $m 2>&1 | grep -E "^ +8 " | head -2
  done
  log "DDP step, CPU tensors, tccl vs gloo"
  for np in 2 4; do
    launch --np $np --timeout 200 $BN/ddp_step.py --steps 300 | grep -v "^\[[1-9]" | tail -4
  done
  mps_on
  log "DDP step, CUDA tensors, tccl vs NCCL at 1 rank; tccl at 2 ranks sharing the GPU"
  launch --np 1 --timeout 200 $BN/ddp_step.py --device cuda --steps 300 --compare-nccl | tail -4
  launch --np 2 --timeout 200 $BN/ddp_step.py --device cuda --steps 300 | grep -v "^\[1" | tail -3
  mps_off
fi
log "done"
