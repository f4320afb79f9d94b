#!/usr/bin/env python3
"""tools/gpu/results.py: the results page's section for one machine kind, from the raw logs.

What it is: the second half of the multi-GPU suite. tools/gpu/suite.sh leaves its raw logs in
one directory per machine kind (checked in under docs/results/<kind>/); this script reads them
and writes docs/results.md, one section per kind:

  - the machine (GPUs, topology, commit, NCCL version);
  - the device tests, one row per program and variant (tests.txt), and any runs with more
    ranks than GPUs, under MPS (mps-tests.txt: one line per run);
  - nccl-tests' correctness sweep through the shim (check/summary.txt);
  - against NCCL (compare/<impl>.<collective>.<round>.log): per collective the worst ratio
    tccl time / NCCL time over every size from 8 B (> 1 is slower; a 0-byte row, where
    nccl-tests' count per rank rounds down to nothing, moves nothing in either library), how
    many sizes are at or below NCCL's time, a table per collective (median of
    the rounds, out of place), and a bus-bandwidth plot of both with the peer copy rate
    (peer-copy.txt) as the physical line (docs/images/results-<kind>-<collective>.png);
  - the same with both libraries captured in CUDA graphs (graphs/<impl>.<collective>.G10.log,
    nccl-tests -G 10), where the suite's graphs step ran;
  - the torch backend's tests (torch.txt) and the DDP step against NCCL (ddp.txt).

Usage: tools/gpu/results.py [--docs DIR] [LOGDIR...]   (default: docs/, and every
       DIR/results/<kind>/; a section is named after its directory)
Invariants: only what the logs hold is reported; a part whose logs are missing says so.
Added in: stage 5 (with tools/gpu/suite.sh).
"""
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from tracetool import ToolError, bench, mpl  # noqa: E402  (tools/plot's table reader)

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "sendrecv",
         "alltoall"]


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def nccl_rows(path):
    """{size: (time_us, busbw_GBs)} of one nccl-tests log, out of place ({} without rows)."""
    try:
        sections = bench.parse_file(path)
    except ToolError:
        return {}
    if not sections:
        return {}
    return {r["size"]: (r["oop"]["time"], r["oop"]["busbw"]) for r in sections[0].rows}


def compare(logdir):
    """{coll: {size: (nccl_us, tccl_us, nccl_bw, tccl_bw)}}, medians over the rounds."""
    out = {}
    cdir = os.path.join(logdir, "compare")
    if not os.path.isdir(cdir):
        return out
    for coll in COLLS:
        runs = {"nccl": [], "tccl": []}
        for name in sorted(os.listdir(cdir)):
            parts = name.split(".")
            if len(parts) == 4 and parts[1] == coll and parts[0] in runs:
                runs[parts[0]].append(nccl_rows(os.path.join(cdir, name)))
        if not runs["nccl"] or not runs["tccl"] or not all(runs["nccl"] + runs["tccl"]):
            continue
        sizes = sorted(set.intersection(*(set(r) for r in runs["nccl"] + runs["tccl"])))
        table = {}
        for s in sizes:
            med = {k: (statistics.median(r[s][0] for r in v), statistics.median(r[s][1] for r in v))
                   for k, v in runs.items()}
            table[s] = (med["nccl"][0], med["tccl"][0], med["nccl"][1], med["tccl"][1])
        out[coll] = table
    return out


def graphs_section(logdir):
    """Markdown lines for the CUDA-graph runs (graphs/<impl>.<collective>.G10.log), if any."""
    gdir = os.path.join(logdir, "graphs")
    if not os.path.isdir(gdir):
        return []
    lines = ["### Against NCCL, both captured in CUDA graphs (`-G 10`)", "",
             "One round, out of place: each timed launch replays a graph of 10 captured calls, "
             "so the host's per-call cost leaves the time.", ""]
    for coll in COLLS:
        n = nccl_rows(os.path.join(gdir, f"nccl.{coll}.G10.log"))
        t = nccl_rows(os.path.join(gdir, f"tccl.{coll}.G10.log"))
        sizes = sorted(s for s in set(n) & set(t) if s > 0 and n[s][0] > 0)
        if not sizes:
            continue
        lines += [f"#### {coll}, CUDA graphs", "",
                  "| size | NCCL (us) | tccl (us) | ratio |", "|---|---|---|---|"]
        lines += [f"| {mpl.size_label(s)} | {n[s][0]:.1f} | {t[s][0]:.1f} | {t[s][0] / n[s][0]:.2f} |"
                  for s in sizes]
        lines.append("")
    return lines


def plot(docs, kind, coll, table, peer_gbs):
    """The busbw plot of one collective; returns its path relative to docs/, or None."""
    try:
        plt = mpl.pyplot()
    except ToolError:
        return None
    sizes = sorted(table)
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    ax.plot(sizes, [table[s][2] for s in sizes], "o-", ms=3, label="NCCL")
    ax.plot(sizes, [table[s][3] for s in sizes], "s-", ms=3, label="tccl")
    if peer_gbs:
        ax.axhline(peer_gbs, color="gray", ls="--", lw=1, label=f"peer copy {peer_gbs:.0f} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{coll}, {kind}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    rel = f"images/results-{kind}-{coll}.png"
    fig.tight_layout()
    os.makedirs(os.path.join(docs, "images"), exist_ok=True)
    fig.savefig(os.path.join(docs, rel), metadata={"Software": None})
    plt.close(fig)
    return rel


def section(docs, logdir, kind):
    lines = [f"## {kind}", ""]
    machine = read(os.path.join(logdir, "machine.txt"))
    lines += ["```text", (machine or "machine.txt missing").rstrip(), "```", ""]

    lines += ["### Device tests", ""]
    tests = read(os.path.join(logdir, "tests.txt"))
    if tests:
        lines += ["| result | variant | program |", "|---|---|---|"]
        for t in tests.splitlines():
            f = t.split()
            if len(f) == 3:
                lines.append(f"| {f[0]} | {f[1]} | {f[2]} |")
    else:
        lines.append("Not run (no tests.txt).")
    lines.append("")
    mps = read(os.path.join(logdir, "mps-tests.txt"))
    if mps:
        lines += ["More ranks than GPUs, ranks sharing the GPUs under MPS:", "",
                  "```text", mps.rstrip(), "```", ""]

    lines += ["### nccl-tests through the shim, every type and op (`-d all -o all -c 1`)", ""]
    check = read(os.path.join(logdir, "check", "summary.txt"))
    lines += ["```text", check.rstrip(), "```"] if check else ["Not run."]
    lines.append("")

    lines += ["### Against NCCL", ""]
    table = compare(logdir)
    peer = read(os.path.join(logdir, "peer-copy.txt"))
    peer_gbs = None
    if peer:
        m = re.search(r"([\d.]+) GB/s", peer)
        peer_gbs = float(m.group(1)) if m else None
    if not table:
        why = read(os.path.join(logdir, "compare", "NOT-RUN.txt"))
        lines += [(why or "No comparison logs.").strip(), ""]
    else:
        lines += ["tccl time / NCCL time, out of place, median of the rounds (> 1: tccl is "
                  "slower); the worst and best over every size from 8 B, and how many sizes "
                  "took at most NCCL's time (a 0-byte row, where nccl-tests' count per rank "
                  "rounds down to nothing, moves nothing in either library and is left out).",
                  ""]
        lines += ["| collective | worst ratio | at | best ratio | at | sizes at most NCCL's time |",
                  "|---|---|---|---|---|---|"]
        for coll, t in table.items():
            ratios = {s: v[1] / v[0] for s, v in t.items() if v[0] > 0 and s > 0}
            if not ratios:
                continue
            worst = max(ratios, key=ratios.get)
            best = min(ratios, key=ratios.get)
            level = sum(1 for r in ratios.values() if r <= 1.0)
            lines.append(f"| {coll} | {ratios[worst]:.2f} | {mpl.size_label(worst)} | "
                         f"{ratios[best]:.2f} | {mpl.size_label(best)} | "
                         f"{level} of {len(ratios)} |")
        lines.append("")
        if peer_gbs:
            lines += [f"Peer copy rate (GPU 0 to 1, 1 GiB): {peer_gbs:.1f} GB/s.", ""]
        for coll, t in table.items():
            lines += [f"#### {coll}", ""]
            rel = plot(docs, kind, coll, t, peer_gbs)
            if rel:
                lines += [f"![{coll} bus bandwidth, {kind}]({rel})", ""]
            lines += ["| size | NCCL (us) | tccl (us) | ratio | NCCL busbw (GB/s) | tccl busbw (GB/s) |",
                      "|---|---|---|---|---|---|"]
            for s, v in t.items():
                lines.append(f"| {mpl.size_label(s)} | {v[0]:.1f} | {v[1]:.1f} | {v[1] / v[0]:.2f} | "
                             f"{v[2]:.1f} | {v[3]:.1f} |")
            lines.append("")

    lines += graphs_section(logdir)

    lines += ["### Torch backend on CUDA tensors (tools/gpu/torch.sh)", ""]
    torch = read(os.path.join(logdir, "torch.txt"))
    lines += ["```text", torch.rstrip(), "```"] if torch else ["Not run."]
    lines.append("")

    lines += ["### DDP step against NCCL", ""]
    ddp = read(os.path.join(logdir, "ddp.txt"))
    lines += ["```text", ddp.rstrip(), "```"] if ddp else ["Not run."]
    lines.append("")
    return "\n".join(lines)


INTRO = """# Results on GPUs

tccl against NCCL on the GPU machines, one rank per GPU, as NCCL runs. Each section is made
by `tools/gpu/results.py` from the raw logs of one `tools/gpu/suite.sh` run, which are checked
in beside this page (`docs/results/<kind>/`); the suite's header says what each part runs and
with which flags. To add or refresh a machine kind: run the suite there
(`OUT=gpu-out/suite tools/gpu/suite.sh`), copy its `OUT` to `docs/results/<kind>/`, then run
`tools/gpu/results.py`.
"""


def main(argv):
    """Writes DOCS/results.md from every DOCS/results/<kind>/ (or the directories given)."""
    args = argv[1:]
    docs = os.path.join(ROOT, "docs")
    if args[:1] == ["--docs"] and len(args) >= 2:
        docs, args = args[1], args[2:]
    base = os.path.join(docs, "results")
    dirs = args or sorted(os.path.join(base, d) for d in os.listdir(base)
                          if os.path.isdir(os.path.join(base, d)))
    parts = [INTRO]
    for d in dirs:
        parts.append(section(docs, d, os.path.basename(os.path.normpath(d))))
    out = os.path.join(docs, "results.md")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    print(f"wrote {out} ({len(dirs)} machine kind(s))")
    return 0


if __name__ == "__main__":
    try:
        mpl.pyplot(reexec=True)  # runs again under Debian's python3 when this one cannot draw
    except ToolError as e:
        print(f"results.py: {e}; the page gets no plots", file=sys.stderr)
    sys.exit(main(sys.argv))
