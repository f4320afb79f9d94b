"""tools/tracetool/bench.py: reading benchmark tables for tools/plot.

What it is: one reader for the three kinds of output tools/plot draws, told apart line by line:

  nccl-tests   rows `size count type redop root  time algbw busbw #wrong  time algbw busbw
               #wrong` (out-of-place, then in-place), "#" lines around them; several runs in
               one file are separated by "=== name" lines (as in shared/baselines/) or start
               with nccl-tests' own header ("# nThread ..." / "# nccl-tests version ...");
  tccl_perf, tccl_mpi_perf
               the same rows (they mimic nccl-tests), after a "# tccl_perf OP: nranks N ..." or
               "# tccl_mpi_perf OP (MPI): nranks N ..." header; in-place columns may say N/A;
  compare_mpi.sh
               its table `size tccl_time tccl_busbw mpi_time mpi_busbw tccl/mpi` after a
               "# OP, N ranks, ..." line: two series, tccl and MPI (time and busbw only).

A file becomes a list of Sections (one per run); a Section gives Series (one line on the
plot: sizes in bytes and one metric per size).

Invariants: nothing but whole data rows is read as data (a row whose columns do not parse is
skipped, so mpirun's warnings in the middle of a table do no harm); N/A and non-positive values
are left out of a series (a log axis cannot show them); sizes are bytes, times us, bandwidths
GB/s (1e9 bytes/s, as nccl-tests).
NCCL counterpart: nccl-tests prints the tables (src/common.cu); it has no plotting tool.
Added in: stage 1 (observability).
"""

import os
import re

from . import ToolError, read_input

METRICS = {"busbw": "bus bandwidth (GB/s)", "algbw": "algorithm bandwidth (GB/s)",
           "time": "time per call (µs)"}
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class Section:
    """One benchmark run: its name, what produced it, and its rows."""

    def __init__(self, name, kind="nccl-tests"):
        self.name = name
        self.kind = kind  # nccl-tests, tccl_perf, tccl_mpi_perf, compare_mpi
        self.op = None
        self.nranks = None
        self.rows = []  # dicts: size, and per column group "oop"/"ip" (or "tccl"/"mpi")
        self.explicit = False  # opened by a header or "===" line (not by a first data row)
        self.banner = False  # named by a "=== name" line: that name stays
        self.rank_lines = 0  # "#  Rank  0 Group 0 Pid ..." lines: nccl-tests' rank count


def _num(text):
    """A float, or None for N/A and anything else that is not a number."""
    try:
        return float(text)
    except ValueError:
        return None


def _int(text):
    try:
        return int(text)
    except ValueError:
        return None


def parse_size(text):
    """"64K", "1M", "2G", "4096" -> bytes (powers of 1024, as tccl_perf -b / -e)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMG]?)i?B?", text.strip(), re.IGNORECASE)
    if not m:
        return None
    return int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])


def normalize_op(name):
    """all_reduce_perf, all_reduce, allreduce -> allreduce (so titles can compare them)."""
    if not name:
        return None
    name = name.lower()
    name = re.sub(r"_perf$", "", name)
    return name.replace("_", "")


def _group(fields, at):
    """One column group (time algbw busbw #wrong) of an nccl-tests row, or None if N/A."""
    t, alg, bus = (_num(f) for f in fields[at:at + 3])
    if t is None or alg is None or bus is None:
        return None
    return {"time": t, "algbw": alg, "busbw": bus}


def _nccl_row(fields):
    """An nccl-tests / tccl_perf data row, or None when the line is something else."""
    if len(fields) < 9:
        return None
    size, count, root = _int(fields[0]), _int(fields[1]), _int(fields[4])
    if size is None or count is None or root is None or _num(fields[2]) is not None:
        return None
    oop = _group(fields, 5)
    if oop is None:
        return None
    ip = _group(fields, 9) if len(fields) >= 12 else None
    return {"size": size, "type": fields[2], "oop": oop, "ip": ip}


def _compare_row(fields):
    if len(fields) < 5:
        return None
    size = parse_size(fields[0])
    vals = [_num(f) for f in fields[1:5]]
    if size is None or any(v is None for v in vals):
        return None
    return {"size": size, "tccl": {"time": vals[0], "busbw": vals[1]},
            "mpi": {"time": vals[2], "busbw": vals[3]}}


def parse_file(path):
    """The sections of one benchmark output file."""
    lines = read_input(path, "a benchmark output").splitlines()
    sections = []
    cur = None

    def start(name, kind="nccl-tests"):
        nonlocal cur
        # A header right after "=== name" belongs to that section; otherwise a new one.
        if cur is not None and cur.banner and not cur.rows and cur.kind == "nccl-tests":
            cur.kind = kind
            return cur
        cur = Section(name, kind)
        cur.explicit = True
        sections.append(cur)
        return cur

    for line in lines:
        s = line.strip()
        if not s:
            continue
        m = re.match(r"^=+\s*(.*?)\s*=*$", s)
        if m and s.startswith("==="):
            cur = None  # a banner always opens a new section
            sec = start(m.group(1) or f"section {len(sections) + 1}")
            sec.banner = True
            np_ = re.search(r"\bnp\s*=?\s*(\d+)", sec.name)
            sec.nranks = int(np_.group(1)) if np_ else None
            words = [w for w in re.split(r"[\s,]+", sec.name) if not re.match(r"np\s*=?\d+", w)]
            sec.op = words[-1] if words else None
            continue
        m = re.match(r"^#\s*(tccl_perf|tccl_mpi_perf)\s+(\S+?)(?:\s+\(MPI\))?:\s*nranks\s+(\d+)",
                     s)
        if m:
            sec = start(f"{m.group(1)} {m.group(2)} np={m.group(3)}", m.group(1))
            sec.op, sec.nranks = m.group(2), int(m.group(3))
            continue
        if re.match(r"^#\s*(nThread\b|nccl-tests version)", s):
            # nccl-tests prints "version" then "nThread": one header, one section.
            if not (cur is not None and not cur.rows and (cur.banner or cur.explicit)):
                start(f"section {len(sections) + 1}")
            continue
        if re.match(r"^#\s*Rank\s+\d+\s", s) and cur is not None:
            cur.rank_lines += 1
            continue
        m = re.match(r"^#\s*Collective test concluded:\s*(\S+)", s)
        if m and cur is not None:
            cur.op = cur.op or m.group(1)
            continue
        m = re.match(r"^#\s*([A-Za-z_]+),\s*(\d+)\s+ranks?,", s)
        if m:  # compare_mpi.sh's first line
            sec = start(f"compare_mpi {m.group(1)} np={m.group(2)}", "compare_mpi")
            sec.op, sec.nranks = m.group(1), int(m.group(2))
            continue
        if s.startswith("#"):
            continue
        fields = s.split()
        if fields[0] == "size" and "tccl_time" in fields:
            if cur is None or cur.kind != "compare_mpi":
                start(f"compare_mpi section {len(sections) + 1}", "compare_mpi")
            continue
        row = _compare_row(fields) if cur is not None and cur.kind == "compare_mpi" else \
            _nccl_row(fields)
        if row is None:
            continue
        if cur is None:
            cur = Section(os.path.basename(path))
            sections.append(cur)
        cur.rows.append(row)
    for sec in sections:
        if sec.nranks is None and sec.rank_lines:
            sec.nranks = sec.rank_lines
    return [sec for sec in sections if sec.rows]


def pick_section(path, sections, pattern):
    """The one section of a file to draw: the only one, or the one `pattern` (a regular
    expression, searched in the section names) selects."""
    if not sections:
        raise ToolError(f"{path}: no data rows found (expected an nccl-tests or tccl_perf table, "
                        f"or compare_mpi.sh's)")
    names = "; ".join(f"'{s.name}'" for s in sections)
    if pattern is None:
        if len(sections) == 1:
            return sections[0]
        raise ToolError(f"{path} holds {len(sections)} runs: pick one with --section REGEX or "
                        f"FILE#REGEX: {names}")
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise ToolError(f"--section '{pattern}': not a regular expression: {e}") from None
    hits = [s for s in sections if rx.search(s.name)]
    if len(hits) == 1:
        return hits[0]
    exact = [s for s in hits if s.name == pattern]
    if len(exact) == 1:
        return exact[0]
    if not hits:
        if len(sections) == 1:
            return sections[0]  # --section is meant for the files that hold several runs
        raise ToolError(f"{path}: no run matches '{pattern}'; runs: {names}")
    raise ToolError(f"{path}: '{pattern}' matches {len(hits)} runs: "
                    + "; ".join(f"'{s.name}'" for s in hits) + " (make it more precise)")


def series(section, label, metric, inplace=False):
    """[(label, [(size, value)])] of one section: one series, two for a compare_mpi table."""
    out = []
    if section.kind == "compare_mpi":
        if metric == "algbw":
            raise ToolError(f"{label}: compare_mpi.sh's table has no algbw column (use --metric "
                            f"busbw or time)")
        groups = [("tccl", f"{label}: tccl"), ("mpi", f"{label}: MPI")]
    else:
        groups = [("ip" if inplace else "oop", label)]
    for key, name in groups:
        pts = [(r["size"], r[key][metric]) for r in section.rows if r.get(key) is not None]
        pts = [(x, y) for x, y in pts if x > 0 and y > 0]  # a log axis shows neither 0 nor N/A
        if not pts:
            why = ("its in-place columns say N/A (the operation has no in-place form)"
                   if inplace and section.kind != "compare_mpi" else
                   f"no positive {metric} values")
            raise ToolError(f"{label} ('{section.name}'): nothing to draw: {why}")
        out.append((name, sorted(pts)))
    return out
