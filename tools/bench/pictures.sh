#!/usr/bin/env bash
# tools/bench/pictures.sh: regenerates the docs' timelines and benchmark plots from real runs.
#
#   tools/bench/pictures.sh [build-dir]      (default: build; run it after building the tree)
#
# What it makes, on this machine, host buffers, socket transport (the chapters explain them):
#   docs/images/ch1-sendrecv-timeline.png   chapter 1: 2 ranks exchange 8 MiB (16 steps of
#                                           512 KiB through the 8-slot FIFO), traced
#   docs/images/ch2-allreduce-timeline.png  chapter 2: a 4-rank ring all-reduce of 4 MiB,
#                                           traced (reduce-scatter, then all-gather)
#   docs/images/stage2-allreduce-vs-mpi.png all-reduce bus bandwidth, tccl against Open MPI
#   (and .svg, and the raw outputs *.txt)   over TCP (`--mca btl tcp,self`), 2 and 4 ranks,
#                                           measured in the same run
# Each picture comes from one tools/trace or tools/plot command, printed as it runs, so a
# reader can make the same picture from their own run.
#
# Added in: stage 1 (observability).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build}
img=docs/images
mkdir -p "$img"
perf=$build/stage2-ring/bench/tccl_perf
mpiperf=$build/stage2-ring/bench/tccl_mpi_perf
for exe in "$perf" "$mpiperf"; do
  [[ -x $exe ]] || { echo "pictures.sh: $exe not found (build the tree first)" >&2; exit 2; }
done
mpirun=(mpirun --bind-to none --oversubscribe)
[[ $(id -u) -ne 0 ]] || mpirun+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { echo "+ $*"; "$@"; }

# traced NAME NP TEST SIZE: one traced tccl_perf run (one warm-up, one timed iteration).
traced() {
  local name=$1 np=$2 t=$3 size=$4
  mkdir -p "$tmp/$name"
  TCCL_TRACE_FILE=$tmp/$name/trace.%h.%p run "${mpirun[@]}" -np "$np" -x TCCL_TRACE_FILE \
    "$perf" -t "$t" -b "$size" -e "$size" -n 1 -w 1 -c 0 >/dev/null
  run python3 tools/trace check --ranks "$np" "$tmp/$name"/trace.*
}

# Chapter 1: the second exchange (seq 2: the warm-up was seq 0 and 1), connections warm.
traced sendrecv 2 sendrecv 8M
run python3 tools/trace png --op Send --seq 2 -o "$img/ch1-sendrecv-timeline.png" \
  --title "2 ranks exchange 8 MiB: 16 steps through an 8-slot FIFO (host buffers, sockets)" \
  "$tmp/sendrecv"/trace.*

# Chapter 2: the timed all-reduce (seq 1).
traced allreduce 4 allreduce 4M
run python3 tools/trace png --op AllReduce --seq 1 -o "$img/ch2-allreduce-timeline.png" \
  --title "Ring all-reduce of 4 MiB on 4 ranks (host buffers, sockets)" \
  "$tmp/allreduce"/trace.*

# The stage-2 README: tccl against Open MPI over TCP, same run, same sizes.
for np in 2 4; do
  run "${mpirun[@]}" -np "$np" "$perf" -t allreduce -b 8 -e 64M -f 4 -n 10 -w 2 \
    >"$img/stage2-allreduce-tccl-np$np.txt"
  run "${mpirun[@]}" -np "$np" --mca btl tcp,self "$mpiperf" -t allreduce -b 8 -e 64M -f 4 \
    -n 10 -w 2 >"$img/stage2-allreduce-mpi-np$np.txt"
done
for ext in png svg; do
  run python3 tools/plot --time -o "$img/stage2-allreduce-vs-mpi.$ext" \
    --title "All-reduce (float, sum), host buffers, $(nproc)-core machine" \
    "tccl 2 ranks=$img/stage2-allreduce-tccl-np2.txt" \
    "Open MPI tcp 2 ranks=$img/stage2-allreduce-mpi-np2.txt" \
    "tccl 4 ranks=$img/stage2-allreduce-tccl-np4.txt" \
    "Open MPI tcp 4 ranks=$img/stage2-allreduce-mpi-np4.txt"
done
echo "pictures.sh: wrote $img/ch1-sendrecv-timeline.png, ch2-allreduce-timeline.png," \
  "stage2-allreduce-vs-mpi.{png,svg}"
