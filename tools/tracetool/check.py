"""tools/tracetool/check.py: the trace oracle behind `tools/trace check`.

What it is: the FIFO protocol, checked from the outside. A connection is one direction between
two ranks on one channel (producer -> consumer); its steps are numbered 0, 1, 2, ... in lockstep
on both ends, across operations. The producer publishes step s (the data-move event carrying
sendStep = s, sendPeer = consumer; the event ends just before the tail store), the consumer
waits for it ("wait recv" with step = s, peer = producer; the wait ends when it saw the tail).
So, once every rank is on one clock (model.load_run):

  completeness  the steps the producer published = the steps the consumer waited for
                (skipped on a connection whose files dropped events: the writer's buffer was
                full, so an absent step proves nothing);
  uniqueness    no step is published or waited for twice;
  causality     the consumer's wait ends no earlier than the producer's publish (to within
                TOLERANCE_US: timestamps have ns precision);

plus the shape of a useful trace: the ranks asked for are there, each with prim and step events
(and the op asked for). A violation of any of these is a bug in the library or in its trace
writer, which is why CTest runs this on traces of real runs.

Invariants: read-only; every violation is one line naming rank, peer, channel and step, with the
times (us from the run's first event); the result lists all violations, the caller prints the
first few. Connections whose other end's trace is absent are not checked (and said so).
NCCL counterpart: none (NCCL has no trace oracle; its profiler plugin only records).
Added in: stage 1 (observability).
"""

import textwrap
from collections import defaultdict

from .model import WAIT_RECV, end, int_arg, is_number

TOLERANCE_US = 0.001  # the trace's precision (ns); alignment adds no error of its own


def ranges(steps):
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    out, steps = [], sorted(steps)
    i = 0
    while i < len(steps):
        j = i
        while j + 1 < len(steps) and steps[j + 1] == steps[j] + 1:
            j += 1
        out.append(str(steps[i]) if i == j else f"{steps[i]}-{steps[j]}")
        i = j + 1
    return ", ".join(out)


class Report:
    """What check_run found: a summary paragraph, violations and notes (one line each)."""

    def __init__(self):
        self.summary = ""
        self.violations = []
        self.notes = []

    @property
    def ok(self):
        return not self.violations

    def text(self, show=10):
        lines = textwrap.wrap(self.summary, 100, break_on_hyphens=False)
        if self.violations:
            n = len(self.violations)
            lines.append(f"violations ({'first %d of %d' % (show, n) if n > show else n}; "
                         f"times in us from the run's first event):")
            for v in self.violations[:show]:
                lines += textwrap.wrap(v, 100, initial_indent="  ", subsequent_indent="    ",
                                       break_on_hyphens=False)
            if n > show:
                lines.append(f"  ... and {n - show} more (--show N lists more)")
        for note in self.notes:
            lines += textwrap.wrap(note, 100, initial_indent="note: ", subsequent_indent="  ",
                                   break_on_hyphens=False)
        return "\n".join(lines)


def _conn_name(comm, producer, consumer, channel):
    prefix = f"comm {comm} " if comm else ""
    return f"{prefix}rank {producer} -> rank {consumer} channel {channel}"


def check_run(run, op=None, nranks=None):
    """Checks a loaded Run; op: an op name every rank must have; nranks: ranks 0..nranks-1
    must all be present."""
    rep = Report()
    v = rep.violations
    rep.notes += run.warnings
    v += [f"input: {p}" for p in run.problems]
    xs = run.x_events()
    t0 = min((e["ts"] for e in xs), default=0.0)

    def t(x):
        return f"{x - t0:.3f}"

    # ---- Ranks, and what each one has -----------------------------------------------------
    counts = defaultdict(lambda: defaultdict(int))  # pid -> cat -> events
    op_names = defaultdict(set)  # pid -> names of its ops
    for e in xs:
        counts[e["pid"]][e.get("cat")] += 1
        if e.get("cat") == "op":
            op_names[e["pid"]].add(str(e.get("name")))
    present = {(i.comm, i.rank) for i in run.ranks.values()}
    if nranks is not None:  # every communicator of the trace: ranks 0..nranks-1
        comms = sorted({i.comm for i in run.ranks.values()}) or [0]
        for comm in comms:
            missing = [r for r in range(nranks) if (comm, r) not in present]
            if missing:
                prefix = f"communicator {comm}: " if len(comms) > 1 else ""
                v.append(f"{prefix}rank(s) {ranges(missing)} missing (no file given holds "
                         f"{'it' if len(missing) == 1 else 'them'})")
        for i in sorted(run.ranks.values(), key=lambda i: i.pid):
            if i.rank >= nranks:
                v.append(f"{i.label()}: outside ranks 0..{nranks - 1} (--ranks {nranks})")
            elif i.nranks is not None and i.nranks != nranks:
                v.append(f"{i.label()}: the trace says nranks {i.nranks}, expected {nranks}")
    else:
        declared = defaultdict(int)
        for i in run.ranks.values():
            declared[i.comm] = max(declared[i.comm], i.nranks or 0)
        for comm, n in sorted(declared.items()):
            missing = [r for r in range(n) if (comm, r) not in present]
            if missing:
                rep.notes.append(f"communicator {comm} has {n} ranks but the files hold no "
                                 f"trace of rank(s) {ranges(missing)}: connections to them are "
                                 f"not checked (give all files, or --ranks N to require them)")
    for pid in sorted(run.ranks):
        i, c = run.ranks[pid], counts[pid]
        if op is not None and op.lower() not in {n.lower() for n in op_names[pid]}:
            have = ", ".join(sorted(op_names[pid])) or "none"
            v.append(f"{i.label()}: no {op} op (its ops: {have})")
        if not c["prim"]:
            v.append(f"{i.label()}: no prim events")
        if not c["step"]:
            v.append(f"{i.label()}: no step events")

    # ---- Connections: who published which step, who waited for it ----------------------------
    pub = defaultdict(lambda: defaultdict(list))  # (comm, producer, consumer, ch) -> step -> [t]
    wait = defaultdict(lambda: defaultdict(list))
    for e in xs:
        if e.get("cat") != "step" or e["pid"] not in run.ranks:
            continue
        i = run.ranks[e["pid"]]
        ch = int_arg(e, "channel")
        ch = 0 if ch is None else ch  # a single-channel writer may leave it out
        where = f"{i.label()}: {e.get('name')!r} at {t(e['ts'])}"
        s = int_arg(e, "sendStep")
        if s is not None:
            peer = int_arg(e, "sendPeer")
            if peer is None:
                v.append(f"{where} has sendStep {s} but no sendPeer")
            else:
                pub[(i.comm, i.rank, peer, ch)][s].append(end(e))
        if e.get("name") == WAIT_RECV:
            s, peer = int_arg(e, "step"), int_arg(e, "peer")
            if s is None or peer is None:
                v.append(f"{where} lacks its step or peer")
            else:
                wait[(i.comm, peer, i.rank, ch)][s].append(end(e))

    n_conn = n_matched = n_unchecked = n_incomplete = 0
    causality = []
    for key in sorted(set(pub) | set(wait)):
        comm, p, c, ch = key
        if (comm, p) not in present or (comm, c) not in present:
            n_unchecked += 1
            continue
        n_conn += 1
        name = _conn_name(*key)
        P, W = pub.get(key, {}), wait.get(key, {})
        for s in sorted(s for s in P if len(P[s]) > 1):
            v.append(f"{name} step {s}: published {len(P[s])} times by rank {p}")
        for s in sorted(s for s in W if len(W[s]) > 1):
            v.append(f"{name} step {s}: waited for {len(W[s])} times by rank {c}")
        pid_p, pid_c = run.pid_of(comm, p), run.pid_of(comm, c)
        if run.ranks[pid_p].dropped or run.ranks[pid_c].dropped:
            n_incomplete += 1
        else:
            lost = sorted(set(P) - set(W))
            if lost:
                v.append(f"{name}: step(s) {ranges(lost)} published by rank {p} but never "
                         f"waited for by rank {c}")
            ghost = sorted(set(W) - set(P))
            if ghost:
                v.append(f"{name}: step(s) {ranges(ghost)} waited for by rank {c} but never "
                         f"published by rank {p}")
        for s in sorted(set(P) & set(W)):
            n_matched += 1
            published, seen = max(P[s]), min(W[s])
            if seen < published - TOLERANCE_US:
                causality.append(
                    f"causality: {name} step {s}: rank {c}'s wait recv ended at {t(seen)}, "
                    f"{published - seen:.3f} us before rank {p} published the step at "
                    f"{t(published)}")
    v += causality
    if n_unchecked:
        rep.notes.append(f"{n_unchecked} connection(s) to ranks without a trace not checked")
    dropped = sum(i.dropped for i in run.ranks.values())
    if n_incomplete:
        rep.notes.append(f"the writers dropped events ({dropped} in all: their buffers filled "
                         f"up; TCCL_TRACE_* sizes them): completeness not checked on "
                         f"{n_incomplete} connection(s), causality still checked on the steps "
                         f"present")

    # ---- The paragraph ---------------------------------------------------------------------
    ops = defaultdict(int)
    for e in xs:
        if e.get("cat") == "op":
            ops[str(e.get("name"))] += 1
    op_text = ", ".join(f"{n} x{k}" for n, k in sorted(ops.items())) or "none"
    total = lambda cat: sum(c[cat] for c in counts.values())  # noqa: E731
    comms = sorted({i.comm for i in run.ranks.values()})
    rank_list = "; ".join(
        ("" if len(comms) == 1 else f"comm {c}: ") +
        ranges([i.rank for i in run.ranks.values() if i.comm == c]) for c in comms)
    shifted = [i for i in run.ranks.values() if is_number(i.shift_us) and i.shift_us]
    clock = (f"{len(shifted)} rank(s) moved onto rank 0's clock" if shifted
             else "all ranks on rank 0's clock as written")
    rep.summary = (
        f"trace check: {len(run.ranks)} rank(s) ({rank_list or 'none'}) from "
        f"{len(run.files)} file(s); "
        f"ops over all ranks: {op_text}; {total('prim')} prim, {total('step')} step and "
        f"{total('proxy')} proxy events; {n_conn} connection(s) checked, {n_matched} step(s) "
        f"matched publish to wait and checked for causality (tolerance {TOLERANCE_US} us, "
        f"{clock}); {'dropped events: %d; ' % dropped if dropped else ''}"
        f"{len(v)} violation(s): {'OK' if not v else 'FAILED'}.")
    return rep
