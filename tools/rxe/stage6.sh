#!/usr/bin/env bash
# tools/rxe/stage6.sh: stage 6's verbs Net on a real verbs device -- Soft-RoCE in a QEMU guest.
#
# What it is: the part of chapter 6's tests that needs real verbs (the rest runs against the
# fake device, tests/net). Run on the host, it boots the guest (tools/rxe/run.sh) once and runs
# there, on host buffers, with SHM disabled so that ranks of the one guest talk over the
# network, which is then NET/IB over rxe0:
#   check  every connector says "via NET/IB" (INIT lines), not NET/Socket;
#   sweep  the ring sweep at 2 ranks (every collective, type, op, in and out of place, root at
#          small counts; the medium counts in int8 and float32), its small counts at 3 ranks,
#          and the P2P patterns at 2 and 3 ranks;
#   gid    a wrong TCCL_IB_GID_INDEX (0, the link-local GID rxe refuses to route by) fails
#          with an error naming the QP and the step, never a hang (bounded by `timeout`);
#   bench  all-reduce and send/recv, NET/IB against NET/Socket (TCCL_IB_DISABLE=1), in the same
#          guest: a report (TCG emulates the CPU, so times say little about hardware).
#
# Usage: tools/rxe/stage6.sh [build-dir] [check] [sweep] [gid] [bench]   (default: all but bench)
#        (inside the guest it is started as `stage6.sh --guest ...`)
# Exit status: 0 when every step passed; otherwise the number of failed steps (run.sh's 124 /
# 125 when the guest timed out or did not start).
#
# Invariants: nothing is built here (build first: the whole tree, or stage 6 with
# TCCL_WITH_IB=ON); every command in the guest has its own timeout; the guest's time is
# bounded by run.sh --timeout (RXE_TIMEOUT, default 600 s).
# Added in: stage 6.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD

if [[ "${1:-}" != "--guest" ]]; then
  build=${1:-build}
  shift || true
  for need in "$build/tests/s6_test_ring_sweep" "$build/tests/s6_test_p2p_patterns" \
              "$build/stage6-transport-ib/bench/tccl_perf"; do
    if [[ ! -x "$need" ]]; then
      echo "stage6.sh: $need not found: build the tree first (cmake --build $build)" >&2
      exit 2
    fi
  done
  exec env RXE_SHARE=none tools/rxe/run.sh --timeout "${RXE_TIMEOUT:-600}" -- \
    bash "$ROOT/tools/rxe/stage6.sh" --guest "$(cd "$build" && pwd)" "$@"
fi

# ---- in the guest ------------------------------------------------------------------------------
shift
B=$1
shift
STEPS=("$@")
((${#STEPS[@]})) || STEPS=(check sweep gid)
want() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }
export TCCL_SHM_DISABLE=1 TCCL_TEST_MEM=host
failed=0
log() { echo "== rxe $(date +%T) $*"; }
mpi() { timeout "${TMO:-240}" mpirun --oversubscribe --bind-to none "$@"; }
step() {  # step NAME CMD...: runs CMD, reports PASS/FAIL
  local name=$1
  shift
  local t0=$SECONDS
  if "$@"; then
    log "PASS $name ($((SECONDS - t0)) s)"
  else
    log "FAIL $name (exit $?, $((SECONDS - t0)) s)"
    failed=$((failed + 1))
  fi
}
perf=$B/stage6-transport-ib/bench/tccl_perf

log "device: $(ibv_devices 2>/dev/null | awk 'NR > 2 {print $1}' | tr '\n' ' ')"

if want check; then
  check_nets() {
    local out
    out=$(TCCL_DEBUG=INFO TCCL_DEBUG_SUBSYS=INIT,NET mpi -np 2 "$perf" -t allreduce -b 8 -e 8 \
      -n 2 -w 1 2>&1) || { echo "$out" | tail -20; return 1; }
    echo "$out" | grep -E "NET/IB: using|QP .* connected" | head -3
    local ib sock
    ib=$(grep -c "via NET/IB" <<<"$out")
    sock=$(grep -c "via NET/Socket" <<<"$out")
    echo "connectors: $ib via NET/IB, $sock via NET/Socket"
    [[ $ib -gt 0 && $sock -eq 0 ]]
  }
  step "every connector via NET/IB" check_nets
fi

if want sweep; then
  sweep() {  # sweep NP PROGRAM [gtest filter]
    local out
    out=$(mpi -np "$1" "$B/tests/$2" ${3:+--gtest_filter="$3"} 2>&1)
    local rc=$?
    echo "$out" | grep -E "PASSED|FAILED|Failure" | head -5
    return $rc
  }
  # The medium counts (many chunks, every FIFO slot reused) in one 1-byte and one 4-byte type
  # per collective: what they add over the small counts is bytes through the verbs path, which
  # the other types would repeat at TCG's emulated speed (every type: 42 s; these two: 20 s).
  step "ring sweep (small counts; medium in int8, float32), 2 ranks" sweep 2 s6_test_ring_sweep \
    "*Small*:*Medium/*_int8_*:*Medium/*_float32_*:RingReferences.*"
  step "ring sweep (small counts), 3 ranks" sweep 3 s6_test_ring_sweep "*Small*"
  step "P2P patterns, 2 ranks" sweep 2 s6_test_p2p_patterns
  step "P2P patterns, 3 ranks" sweep 3 s6_test_p2p_patterns
fi

if want gid; then
  wrong_gid() {
    local out
    out=$(TCCL_IB_GID_INDEX=0 TCCL_DEBUG=WARN TMO=60 mpi -np 2 "$perf" -t allreduce \
      -b 8 -e 8 -n 2 -w 0 2>&1)
    local rc=$?
    echo "$out" | grep -E "NET/IB" | head -3
    if [[ $rc -eq 124 ]]; then echo "hung (timeout)"; return 1; fi
    if [[ $rc -eq 0 ]]; then echo "a wrong GID index went through"; return 1; fi
    grep -qE "NET/IB: QP [0-9]+ to RTR .* failed|transport retry counter exceeded \(12\)" <<<"$out"
  }
  step "wrong GID index: a clear error, no hang" wrong_gid
fi

if want bench; then
  for net in IB Socket; do
    for t in allreduce sendrecv; do
      log "NET/$net $t (time in us, 2 ranks)"
      if [[ $net == Socket ]]; then export TCCL_IB_DISABLE=1; else unset TCCL_IB_DISABLE; fi
      dtype=float
      [[ $t == sendrecv ]] && dtype=uint8
      TMO=300 mpi -np 2 "$perf" -t "$t" -d "$dtype" -b 8 -e 4M -f 8 -n 20 -w 2 2>&1 |
        grep -v '^#' | awk 'NF >= 9 {printf "  %10s  %10s\n", $1, $6}'
    done
  done
  unset TCCL_IB_DISABLE
fi

log "$failed step(s) failed"
exit "$failed"
