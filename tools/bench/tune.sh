#!/usr/bin/env bash
# tools/bench/tune.sh: measures the cost model's constants (stage3-tree/src/tuning.cc).
#
#   tools/bench/tune.sh [build-dir] [data-dir]
#
# Fits, for each algorithm, time = base + hops(n) * hop + wire(n) * bytes / bw (tuning.cc's
# formula and its hops/wire table, repeated below) to tccl_perf all-reduce times with that
# algorithm forced, by least squares over every rank count and size of the data. The data are
# tools/bench/compare_algos.sh's files in data-dir (default build/compare_algos); when there
# are none, that script runs first. Prints the rows to paste into kCost, with the date and
# this machine's name, and how well each fit explains the data. Files of the LL protocol
# (<np>.ring.ll.median.txt, <np>.recdoubling.ll.median.txt: tools/gpu/stage5.sh tune) add
# kCostLL's row (stage 5), and <np>.ring.ll128.median.txt kCostLL128's. LL128 runs only
# with one rank per GPU over NVLink, so its data may hold a single rank count, where base and
# hop cannot be told apart (every point has the same hops): base is then LL's, and the fit
# finds hop and bandwidth.
#
# Added in: stage 3; the LL and LL128 rows in stage 5.
set -euo pipefail

build=${1:-build}
data=${2:-$build/compare_algos}
if ! ls "$data"/*.ring.median.txt >/dev/null 2>&1; then
  "$(dirname "$0")/compare_algos.sh" "$build" "$data" >/dev/null
fi
python3 - "$data" "$(uname -n)" "$(nproc)" <<'PY'
import datetime, glob, math, os, re, sys
data, host, cores = sys.argv[1], sys.argv[2], sys.argv[3]

def log2floor(n):
    k = 0
    while (2 << k) <= n:
        k += 1
    return k

def model(algo, n):  # (hops, wire): tuning.cc's table for AllReduce
    depth = 0
    while (1 << depth) < n:
        depth += 1
    if algo == "ring":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    if algo == "tree":
        return 2.0 * depth, (1.0 if n == 2 else 2.0)
    p = 1 << log2floor(n)
    h = log2floor(n) + (2.0 if n != p else 0.0)
    return h, h

def solve3(a, b):  # normal equations, 3x3, Gaussian elimination
    m = [row[:] + [v] for row, v in zip(a, b)]
    for i in range(3):
        piv = max(range(i, 3), key=lambda r: abs(m[r][i]))
        m[i], m[piv] = m[piv], m[i]
        for r in range(3):
            if r != i and m[i][i] != 0:
                f = m[r][i] / m[i][i]
                m[r] = [x - f * y for x, y in zip(m[r], m[i])]
    return [m[i][3] / m[i][i] if m[i][i] else 0.0 for i in range(3)]

rows = {}
# Stage 5: files named <np>.<algo>.ll.median.txt hold the LL protocol's times (the GPU's
# tools/gpu/stage5.sh tune writes them); they fit kCostLL's row with the same model.
algos = ["ring", "tree", "recdoubling"]
algos += [a for a in ("ring.ll", "recdoubling.ll", "ring.ll128")
          if glob.glob(f"{data}/*.{a}.median.txt")]
for algo in algos:
    pts = []
    for path in glob.glob(f"{data}/*.{algo}.median.txt"):
        n = int(os.path.basename(path).split(".")[0])
        for line in open(path):
            f = line.split()
            if line.startswith("#") or len(f) < 6:
                continue
            pts.append((n, float(f[0]), float(f[5])))
    if not pts:
        sys.exit(f"tune.sh: no data for {algo} in {data}")
    # Weighted by 1/t: relative errors, so 8 B and 16 MiB count alike.
    ata = [[0.0] * 3 for _ in range(3)]
    atb = [0.0] * 3
    for n, size, t in pts:
        hops, wire = model(algo.split(".")[0], n)
        x = [1.0, hops, wire * size]
        w = 1.0 / (t * t)
        for i in range(3):
            atb[i] += w * x[i] * t
            for j in range(3):
                ata[i][j] += w * x[i] * x[j]
    if len({n for n, _, _ in pts}) > 1 or algo not in ("ring.ll128",) or "ring.ll" not in rows:
        base, hop, inv_bw = solve3(ata, atb)
    else:  # one rank count: base from LL, then (hop, 1/bw) from the 2x2 normal equations
        base = rows["ring.ll"][0]
        a2 = [[ata[1][1], ata[1][2]], [ata[2][1], ata[2][2]]]
        b2 = [atb[1] - base * ata[1][0], atb[2] - base * ata[2][0]]
        det = a2[0][0] * a2[1][1] - a2[0][1] * a2[1][0]
        hop = (b2[0] * a2[1][1] - a2[0][1] * b2[1]) / det
        inv_bw = (a2[0][0] * b2[1] - a2[1][0] * b2[0]) / det
    base, hop = max(base, 0.0), max(hop, 0.1)
    gbps = 1.0 / (inv_bw * 1e3) if inv_bw > 0 else 100.0
    m = lambda n: model(algo.split(".")[0], n)
    err = [abs(base + m(n)[0] * hop + m(n)[1] * s / (gbps * 1e3) - t) / t for n, s, t in pts]
    rows[algo] = (base, hop, gbps, sorted(err)[len(err) // 2])

today = datetime.date.today().isoformat()
# compare_algos.sh's files say which buffers they measured (TCCL_CMP_MEM): host or device.
mem = "host"
for path in glob.glob(f"{data}/*.ring.median.txt"):
    m = re.search(r"memory: (\w+)", open(path).read())
    mem = m.group(1) if m else mem
print(f"// {today}, {host} ({cores} cores), {mem} buffers; fit of {data}")
fmt = lambda r: f"{{{r[0]:.1f}, {r[1]:.1f}, {r[2]:.3f}}}"
print("    {" + ", ".join(fmt(rows[a]) for a in ("ring", "tree", "recdoubling")) + "},")
if "ring.ll" in rows:  # kCostLL: the trees have no LL (gbps 0)
    print("kCostLL = {" + ", ".join(fmt(rows[a]) if a in rows else "{0.0, 0.0, 0.0}"
                                    for a in ("ring.ll", "tree.ll", "recdoubling.ll")) + "};")
if "ring.ll128" in rows:  # kCostLL128: the ring only
    print("kCostLL128 = {" + fmt(rows["ring.ll128"]) + ", {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};")
for algo, (b, h, g, e) in rows.items():
    print(f"//   {algo:12} base {b:6.1f} us  hop {h:6.1f} us  bw {g:7.3f} GB/s  "
          f"median error {100 * e:.0f}%")
PY
