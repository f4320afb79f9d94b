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
#   docs/images/ch3-timeline-tree.png       chapter 3: a 4-rank all-reduce of 1 MiB on the
#   docs/images/ch3-timeline-ring.png       double binary tree, and the same on the ring
#   docs/images/ch3-crossover.png           all-reduce time against size at 4 ranks: ring,
#   (and .svg, and docs/images/ch3-algos-*.txt)  tree, recursive doubling, the model's choice
#                                           and Open MPI (tools/bench/compare_algos.sh's
#                                           medians; TCCL_ALGOS_DATA=dir reuses a run's files)
# TCCL_PICTURES="ch1 ch2 ch3" (the default) picks which chapters' pictures to make.
# Each picture comes from one tools/trace or tools/plot command, printed as it runs, so a
# reader can make the same picture from their own run.
#
# Added in: stage 1 (observability); chapter 3's pictures in stage 3.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=${1:-build}
img=docs/images
mkdir -p "$img"
perf=$build/stage2-ring/bench/tccl_perf
mpiperf=$build/stage2-ring/bench/tccl_mpi_perf
perf3=$build/stage3-tree/bench/tccl_perf
want() { [[ " ${TCCL_PICTURES:-ch1 ch2 ch3} " == *" $1 "* ]]; }
for exe in "$perf" "$mpiperf"; do
  [[ -x $exe ]] || { echo "pictures.sh: $exe not found (build the tree first)" >&2; exit 2; }
done
mpirun=(mpirun --bind-to none --oversubscribe)
[[ $(id -u) -ne 0 ]] || mpirun+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { echo "+ $*"; "$@"; }

# traced NAME NP TEST SIZE [PERF]: one traced tccl_perf run (one warm-up, one timed iteration).
traced() {
  local name=$1 np=$2 t=$3 size=$4 exe=${5:-$perf}
  mkdir -p "$tmp/$name"
  TCCL_TRACE_FILE=$tmp/$name/trace.%h.%p run "${mpirun[@]}" -np "$np" -x TCCL_TRACE_FILE \
    ${TCCL_ALGO:+-x TCCL_ALGO} "$exe" -t "$t" -b "$size" -e "$size" -n 1 -w 1 -c 0 >/dev/null
  run python3 tools/trace check --ranks "$np" "$tmp/$name"/trace.*
}

if want ch1; then
# Chapter 1: the second exchange (seq 2: the warm-up was seq 0 and 1), connections warm.
traced sendrecv 2 sendrecv 8M
run python3 tools/trace png --op Send --seq 2 -o "$img/ch1-sendrecv-timeline.png" \
  --title "2 ranks exchange 8 MiB: 16 steps through an 8-slot FIFO (host buffers, sockets)" \
  "$tmp/sendrecv"/trace.*

fi
if want ch2; then
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
fi
if want ch3; then
  # Chapter 3: the same all-reduce on the double binary tree and on the ring (timed one, seq 1).
  for algo in tree ring; do
    TCCL_ALGO=$algo traced "allreduce-$algo" 4 allreduce 1M "$perf3"
    run python3 tools/trace png --op AllReduce --seq 1 -o "$img/ch3-timeline-$algo.png" \
      --title "All-reduce of 1 MiB on 4 ranks, TCCL_ALGO=$algo (host buffers, sockets)" \
      "$tmp/allreduce-$algo"/trace.*
  done
  # The crossover: medians of interleaved runs (compare_algos.sh), 4 ranks.
  data=${TCCL_ALGOS_DATA:-$tmp/algos}
  [[ -n ${TCCL_ALGOS_DATA:-} ]] || TCCL_CMP_NPS=4 run tools/bench/compare_algos.sh "$build" "$data"
  for v in ring tree recdoubling auto mpi; do cp "$data/4.$v.median.txt" "$img/ch3-algos-np4-$v.txt"; done
  for ext in png svg; do
    run python3 tools/plot --metric time -o "$img/ch3-crossover.$ext" \
      --title "All-reduce (float, sum) on 4 ranks, host buffers, $(nproc)-core machine" \
      "ring=$img/ch3-algos-np4-ring.txt" "tree=$img/ch3-algos-np4-tree.txt" \
      "recursive doubling=$img/ch3-algos-np4-recdoubling.txt" \
      "tccl auto (cost model)=$img/ch3-algos-np4-auto.txt" \
      "Open MPI tcp=$img/ch3-algos-np4-mpi.txt"
  done
fi
echo "pictures.sh: done (${TCCL_PICTURES:-ch1 ch2 ch3})"
