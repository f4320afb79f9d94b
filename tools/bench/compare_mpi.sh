#!/usr/bin/env bash
# tools/bench/compare_mpi.sh: tccl against Open MPI over TCP, measured in the same run.
#
#   tools/bench/compare_mpi.sh [build-dir] [iters]
#
# Runs, on this machine, for 1, 16 and 64 MiB:
#   tccl_perf     -t TEST   (tccl's socket transport)
#   tccl_mpi_perf -t TEST   with `--mca btl tcp,self` (Open MPI moving the bytes over TCP)
# and prints one table: time and bus bandwidth of each, and the ratio tccl/MPI of the bus
# bandwidths (> 1: tccl is faster). Both programs check their data (-c 1); a failed check or a
# failed run stops the script with a non-zero exit.
#
# Environment (defaults are stage 1's performance target):
#   TCCL_CMP_TEST   sendrecv (uint8) | allreduce, allgather, ... (float, sum)   [sendrecv]
#   TCCL_CMP_NP     ranks                                                        [2]
#   TCCL_CMP_REPS   runs per size and program, interleaved (tccl, MPI, tccl, ...); the table
#                   shows each one's median. On a shared 2-core VM one run can be 2x off.  [1]
#   TCCL_CMP_SIZES  sizes                                                        ["1M 16M 64M"]
#   TCCL_CMP_BTL    Open MPI's transports: tcp,self (stage 1's yardstick, the sockets); from
#                   stage 5, where tccl's ranks on one host use shared memory, vader,self
#                   (Open MPI's shared memory)                                   [tcp,self]
# Stage 2's target: TCCL_CMP_TEST=allreduce TCCL_CMP_NP=4 TCCL_CMP_REPS=7 compare_mpi.sh build
# Stage 5's: TCCL_CMP_BTL=vader,self TCCL_CMP_TEST=allreduce TCCL_CMP_SIZES="8 1M 16M 64M" ...
#
# Finds the binaries under build-dir (default: build): stage 1's for sendrecv and alltoall, the
# last stage's for the collectives; set TCCL_PERF / TCCL_MPI_PERF to pick others. mpirun flags
# for running as root in a container are added when needed.
#
# Added in: stage 1 (collectives, ranks and repetitions: stage 2).
set -euo pipefail

build=${1:-build}
iters=${2:-20}
test=${TCCL_CMP_TEST:-sendrecv}
np=${TCCL_CMP_NP:-2}
reps=${TCCL_CMP_REPS:-1}
sizes=${TCCL_CMP_SIZES:-"1M 16M 64M"}
btl=${TCCL_CMP_BTL:-tcp,self}
case $test in
  sendrecv | alltoall) dtype=uint8; pick=(head -n 1) ;;  # stage 1 has them
  *) dtype=float; pick=(tail -n 1) ;;                     # a later stage's collectives
esac
find_bin() {  # the stage's executable named $1 under the build dir
  find "$build" -type f -name "$1" -perm -u+x 2>/dev/null | sort | "${pick[@]}"
}
tccl=${TCCL_PERF:-$(find_bin tccl_perf)}
mpi=${TCCL_MPI_PERF:-$(find_bin tccl_mpi_perf)}
if [[ -z "$tccl" || -z "$mpi" ]]; then
  echo "compare_mpi.sh: tccl_perf / tccl_mpi_perf not found under '$build' (build them first)" >&2
  exit 2
fi

mpirun_cmd=(mpirun -np "$np" --bind-to none --oversubscribe)
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

median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

printf '# %s, %s ranks, %s iterations per run, median of %s run(s); busbw in GB/s, time in us\n' \
  "$test" "$np" "$iters" "$reps"
printf '# tccl: %s\n# MPI:  %s (--mca btl %s)\n' "$tccl" "$mpi" "$btl"
printf '%10s  %12s  %10s  %12s  %10s  %12s\n' size tccl_time tccl_busbw mpi_time mpi_busbw \
  tccl/mpi
for size in $sizes; do
  tt="" tb="" mt="" mb=""
  for ((i = 0; i < reps; i++)); do
    # (Assignments, not `read < <(...)`: set -e must see a failed run.)
    t=$(measure "${mpirun_cmd[@]}" --mca btl "$btl" "$tccl" -t "$test" \
      -b "$size" -e "$size" -n "$iters" -w 5 -c 1 -d "$dtype")
    m=$(measure "${mpirun_cmd[@]}" --mca btl "$btl" "$mpi" -t "$test" \
      -b "$size" -e "$size" -n "$iters" -w 5 -c 1 -d "$dtype")
    tt+="${t% *} " tb+="${t#* } " mt+="${m% *} " mb+="${m#* } "
  done
  ttime=$(median <<<"$tt") tbus=$(median <<<"$tb") mtime=$(median <<<"$mt") mbus=$(median <<<"$mb")
  ratio=$(awk -v a="$tbus" -v b="$mbus" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }')
  printf '%10s  %12s  %10s  %12s  %10s  %12s\n' "$size" "$ttime" "$tbus" "$mtime" "$mbus" "$ratio"
done
