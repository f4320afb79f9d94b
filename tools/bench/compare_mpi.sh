#!/usr/bin/env bash
# tools/bench/compare_mpi.sh: tccl's sendrecv against Open MPI's MPI_Sendrecv over TCP.
#
#   tools/bench/compare_mpi.sh [build-dir] [iters]
#
# Runs, at 2 ranks on this machine, for 1, 16 and 64 MiB:
#   tccl_perf     -t sendrecv   (tccl's socket transport)
#   tccl_mpi_perf -t sendrecv   with `--mca btl tcp,self` (Open MPI moving the bytes over TCP)
# and prints one table: time and bus bandwidth of each, and the ratio tccl/MPI of the bus
# bandwidths (> 1: tccl is faster). Both programs check their data (-c 1); a failed check or a
# failed run stops the script with a non-zero exit.
#
# Finds the binaries under build-dir (default: build), e.g. build/stage1-p2p/bench/tccl_perf;
# set TCCL_PERF / TCCL_MPI_PERF to pick others (a later stage's). mpirun flags for running as
# root in a container are added when needed.
#
# Added in: stage 1.
set -euo pipefail

build=${1:-build}
iters=${2:-20}
find_bin() {  # first executable named $1 under the build dir, stage 1's first
  find "$build" -type f -name "$1" -perm -u+x 2>/dev/null | sort | head -n 1
}
tccl=${TCCL_PERF:-$(find_bin tccl_perf)}
mpi=${TCCL_MPI_PERF:-$(find_bin tccl_mpi_perf)}
if [[ -z "$tccl" || -z "$mpi" ]]; then
  echo "compare_mpi.sh: tccl_perf / tccl_mpi_perf not found under '$build' (build them first)" >&2
  exit 2
fi

mpirun_cmd=(mpirun -np 2 --bind-to none)
if [[ $(id -u) -eq 0 ]]; then mpirun_cmd+=(--allow-run-as-root); fi
# No CMA single-copy in containers without ptrace rights (it only matters for MPI's own runs).
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# Prints "time_us busbw_GBps" of the data line of a perf run; fails on #wrong != 0.
measure() {
  local out line
  out=$("$@") || { echo "compare_mpi.sh: failed: $*" >&2; echo "$out" >&2; return 1; }
  line=$(grep -v '^#' <<<"$out" | awk 'NF >= 9' | tail -n 1)
  if [[ -z "$line" ]]; then echo "compare_mpi.sh: no result from: $*" >&2; return 1; fi
  read -r _size _count _type _op _root time _algbw busbw wrong _rest <<<"$line"
  if [[ "$wrong" != "0" ]]; then echo "compare_mpi.sh: $wrong wrong elements: $*" >&2; return 1; fi
  echo "$time $busbw"
}

printf '# sendrecv, 2 ranks, %s iterations per size; busbw in GB/s, time in us\n' "$iters"
printf '# tccl: %s\n# MPI:  %s (--mca btl tcp,self)\n' "$tccl" "$mpi"
printf '%10s  %12s  %10s  %12s  %10s  %12s\n' size tccl_time tccl_busbw mpi_time mpi_busbw \
  tccl/mpi
for size in 1M 16M 64M; do
  # (Assignments, not `read < <(...)`: set -e must see a failed run.)
  t=$(measure "${mpirun_cmd[@]}" --mca btl tcp,self "$tccl" -t sendrecv \
    -b "$size" -e "$size" -n "$iters" -w 5 -c 1 -d uint8)
  m=$(measure "${mpirun_cmd[@]}" --mca btl tcp,self "$mpi" -t sendrecv \
    -b "$size" -e "$size" -n "$iters" -w 5 -c 1 -d uint8)
  read -r ttime tbus <<<"$t"
  read -r mtime mbus <<<"$m"
  ratio=$(awk -v a="$tbus" -v b="$mbus" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }')
  printf '%10s  %12s  %10s  %12s  %10s  %12s\n' "$size" "$ttime" "$tbus" "$mtime" "$mbus" "$ratio"
done
