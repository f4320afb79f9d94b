#!/usr/bin/env bash
# tools/bench/compare_algos.sh: ring, tree, recursive doubling, the cost model's choice and
# Open MPI, all-reduce on host buffers, measured in the same run.
#
#   tools/bench/compare_algos.sh [build-dir] [out-dir]
#
# For each rank count in TCCL_CMP_NPS (default "2 4 5") and each of TCCL_CMP_REPS repetitions
# (default 3), runs in turn (interleaved, so a slow minute of a shared VM hits all alike):
#   tccl_perf -t allreduce   with TCCL_ALGO=ring, =tree, =recdoubling, and unset (auto)
#   tccl_mpi_perf -t allreduce   with `--mca btl tcp,self` (Open MPI over TCP)
# over 8 B .. TCCL_CMP_MAX (default 16M), float sum, data checked (-c 1): 8 B .. 64 KiB with
# TCCL_CMP_ITERS_SMALL iterations (default 100: a few microseconds of noise per call would
# otherwise decide the latency columns), 128 KiB and up with TCCL_CMP_ITERS (default 20).
# Raw outputs go to
# out-dir (default build/compare_algos): <np>.<variant>.<rep>.txt; then it prints one
# markdown table per rank count (median time per size of each variant, and auto/best and
# auto/MPI ratios) and writes <np>.<variant>.median.txt (tccl_perf's table with median times,
# for tools/plot). tools/bench/tune.sh fits the cost model's constants to the same files.
#
# Added in: stage 3.
set -euo pipefail

build=${1:-build}
out=${2:-$build/compare_algos}
nps=${TCCL_CMP_NPS:-"2 4 5"}
reps=${TCCL_CMP_REPS:-3}
max=${TCCL_CMP_MAX:-16M}
mem=${TCCL_CMP_MEM:-host}  # device: GPU buffers (the GPU machine); then no MPI column
iters=${TCCL_CMP_ITERS:-20}
iters_small=${TCCL_CMP_ITERS_SMALL:-100}
perf=${TCCL_PERF:-$(find "$build" -path '*stage3-tree/bench/tccl_perf' -perm -u+x | head -n 1)}
mpi=${TCCL_MPI_PERF:-$(find "$build" -path '*stage3-tree/bench/tccl_mpi_perf' -perm -u+x | head -n 1)}
if [[ -z "$perf" || -z "$mpi" ]]; then  # (TCCL_MPI_PERF=none with TCCL_CMP_MEM=device)
  echo "compare_algos.sh: stage 3's tccl_perf / tccl_mpi_perf not found under '$build'" >&2
  exit 2
fi
mkdir -p "$out"
mpirun_cmd=(mpirun --bind-to none --oversubscribe)
if [[ $(id -u) -eq 0 ]]; then mpirun_cmd+=(--allow-run-as-root); fi
export OMPI_MCA_btl_vader_single_copy_mechanism=none
common=(-t allreduce -d float -f 4 -w 3 -c 1)
# The two size ranges of one variant, one after the other into the same file.
maxb=$(numfmt --from=iec "$max")
ranges=("-b 8 -e $((maxb < 65536 ? maxb : 65536)) -n $iters_small")
if ((maxb >= 131072)); then ranges+=("-b 128K -e $max -n $iters"); fi
variants=(ring tree recdoubling auto)
[[ $mem == device ]] || variants+=(mpi)

for np in $nps; do
  for rep in $(seq 1 "$reps"); do
    for v in "${variants[@]}"; do
      f=$out/$np.$v.$rep.txt
      : >"$f"
      for range in "${ranges[@]}"; do
        # shellcheck disable=SC2206  # the range's words are the arguments
        args=("${common[@]}" $range)
        if [[ $v == mpi ]]; then
          "${mpirun_cmd[@]}" -np "$np" --mca btl tcp,self "$mpi" "${args[@]}" >>"$f" 2>&1
        elif [[ $v == auto ]]; then
          env -u TCCL_ALGO "${mpirun_cmd[@]}" -np "$np" "$perf" "${args[@]}" -m "$mem" >>"$f" 2>&1
        else
          TCCL_ALGO=$v "${mpirun_cmd[@]}" -np "$np" -x TCCL_ALGO "$perf" "${args[@]}" -m "$mem" \
            >>"$f" 2>&1
        fi || { echo "compare_algos.sh: failed: np=$np $v (see $f)" >&2; exit 1; }
      done
    done
  done
done

python3 - "$out" "$nps" "$reps" "${variants[*]}" "$mem" <<'PY'
import statistics, sys
out, nps, reps = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
variants, mem = sys.argv[4].split(), sys.argv[5]

def rows(path):
    res = []
    for line in open(path):
        f = line.split()
        if line.startswith("#") or len(f) < 9 or not f[0].isdigit():
            continue
        if f[8] != "0":
            sys.exit(f"compare_algos.sh: wrong results in {path}: {line.strip()}")
        res.append(f)
    return res

def human(b):
    b = int(b)
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k} {unit}"
    return f"{b} B"

for np in nps:
    med = {}
    for v in variants:
        runs = [rows(f"{out}/{np}.{v}.{r}.txt") for r in range(1, reps + 1)]
        template = runs[0]
        lines = []
        for i, row in enumerate(template):
            t = statistics.median(float(run[i][5]) for run in runs)
            med[(v, row[0])] = t
            size = float(row[0])
            algbw = size / t / 1e3
            busbw = algbw * 2 * (int(np) - 1) / int(np)
            lines.append("  ".join(row[:5] + [f"{t:.2f}", f"{algbw:.3f}", f"{busbw:.3f}"] + row[8:]))
        # The first run's text with median rows: tools/plot reads it as tccl_perf output.
        with open(f"{out}/{np}.{v}.median.txt", "w") as fh:
            fh.write(f"# median of {reps} runs (tools/bench/compare_algos.sh)\n")
            it = iter(lines)
            rows_seen = False  # one header: the second size range's is dropped
            for line in open(f"{out}/{np}.{v}.1.txt"):
                f = line.split()
                if not line.startswith("#") and len(f) >= 9 and f[0].isdigit():
                    line = next(it) + "\n"
                    rows_seen = True
                elif rows_seen:
                    continue
                fh.write(line)
    sizes = [row[0] for row in rows(f"{out}/{np}.ring.1.txt")]
    mpi = "mpi" in variants
    print(f"\n{np} ranks, all-reduce float sum, {mem} buffers, time in us (median of {reps}):\n")
    print("| size | ring | tree | recdoubling | auto |" + (" Open MPI |" if mpi else "") +
          " auto / best |" + (" auto / MPI |" if mpi else ""))
    print("|---:" * (len(variants) + 2 + mpi) + "|")
    for s in sizes:
        t = {v: med[(v, s)] for v in variants}
        best = min(t["ring"], t["tree"], t["recdoubling"])
        print(f"| {human(s)} | " + " | ".join(f"{t[v]:.1f}" for v in variants) +
              f" | {t['auto'] / best:.2f} |" + (f" {t['auto'] / t['mpi']:.2f} |" if mpi else ""))
PY
