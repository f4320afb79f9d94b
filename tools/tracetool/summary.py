"""tools/tracetool/summary.py: where the time of each operation went (`tools/trace summary`).

What it is: one table line per rank and operation: the op's duration (its event on the api
lane) and the time its rank's step events spent inside that window, by kind: waiting for data
(wait recv), waiting for a free slot (wait send), moving data (copy + reduce + direct), and
the proxy lanes' sends and receives. Waits that dominate the moves mean the rank was starved by
its neighbours or the network, not limited by its own copies.

Invariants: times are sums over the rank's lanes, clipped to the op's window, so with several
channels (lanes) a column may exceed the op's duration; an op is matched to events by time only
(the trace does not tie a step to an op).
NCCL counterpart: none (NCCL's profiler plugin leaves the analysis to the reader).
Added in: stage 1 (observability).
"""

from collections import defaultdict

from .model import MOVES, PROXY_RECV, PROXY_SEND, WAIT_RECV, WAIT_SEND, end, int_arg

COLUMNS = [("wait recv", (WAIT_RECV,)), ("wait send", (WAIT_SEND,)), ("move", MOVES),
           ("proxy send", (PROXY_SEND,)), ("proxy recv", (PROXY_RECV,))]


def summarize(run):
    """Rows (dicts) of rank, op, seq, bytes, dur and one sum per COLUMNS entry."""
    steps = defaultdict(list)  # pid -> step and proxy events
    for e in run.x_events():
        if e.get("cat") in ("step", "proxy"):
            steps[e["pid"]].append(e)
    rows = []
    for op in sorted(run.x_events("op"), key=lambda e: (e["pid"], e["ts"])):
        info = run.ranks.get(op["pid"])
        lo, hi = op["ts"], end(op)
        row = {"rank": info.label() if info else f"pid {op['pid']}", "op": str(op.get("name")),
               "seq": int_arg(op, "seq"), "bytes": int_arg(op, "bytes"), "dur": op["dur"]}
        for col, names in COLUMNS:
            row[col] = sum(max(0.0, min(end(e), hi) - max(e["ts"], lo))
                           for e in steps[op["pid"]] if e.get("name") in names)
        rows.append(row)
    return rows


def summary_text(run):
    rows = summarize(run)
    if not rows:
        return "no op events in the trace (is it a tccl trace of at least one call?)"
    head = f"{'rank':>8} {'op':>14} {'seq':>5} {'bytes':>12} {'dur us':>10}"
    head += "".join(f" {c:>11}" for c, _ in COLUMNS)
    lines = ["time per rank and op, in us (step times summed over the rank's lanes, inside "
             "the op's window)", head]
    for r in rows:
        seq = "-" if r["seq"] is None else str(r["seq"])
        nbytes = "-" if r["bytes"] is None else str(r["bytes"])
        line = f"{r['rank']:>8} {r['op']:>14} {seq:>5} {nbytes:>12} {r['dur']:>10.3f}"
        line += "".join(f" {r[c]:>11.3f}" for c, _ in COLUMNS)
        lines.append(line)
    return "\n".join(lines)
