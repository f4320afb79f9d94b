"""tools/tracetool/model.py: reading tccl step-timeline traces and putting them on one clock.

What it is: what every `tools/trace` command shares. A trace file is Chrome trace-event JSON as
the library writes it (TCCL_TRACE_FILE=path.%h.%p: one file per process). load_run() reads one
or more of them, or files `tools/trace merge` wrote, into a Run: the events of every rank on
its rank 0's clock, the lane names, and what the files say about each rank. merged_json() turns
a Run back into one trace file.

The format, in brief (the library's trace writer is the reference):
  - trace pid = 1000*k + rank, k = the communicator's index in its process; tid 0 is the "api"
    lane (ops), tids 1.. the executor lanes (fibers, workers or GPU blocks), tids >= 1000 the
    proxy lanes; lane names come from "thread_name" metadata events;
  - "X" events: cat "op" (one tccl call), "prim" (one primitive call), "step" (wait recv, wait
    send, and the data move of one step: copy, reduce or direct), "proxy" (proxy send/recv);
  - ts and dur are microseconds of CLOCK_MONOTONIC on the writer's host;
  - otherData.tccl.ranks[]: per rank its nranks, hostHash and clockOffsetUs (its clock minus its
    rank 0's clock, measured over the bootstrap, within +- clockErrUs after clockPings ping-pongs);
    droppedEvents > 0 when the writer's buffer filled up.

Invariants:
  - A trace pid comes from exactly one file: the same pid in two files means files of two runs
    (or of two communicators created in a different order) were mixed, and is an error.
  - Clock alignment: a rank on another host than its communicator's rank 0 is moved by
    -clockOffsetUs; a rank on rank 0's host reads the same CLOCK_MONOTONIC and is never moved
    (its measured offset is only measurement noise). A file written by `merge` is marked aligned
    and is never moved again, so merging a merged file changes nothing.
  - Reading never changes the input: events are copied, then shifted. Malformed events are
    skipped and listed in Run.problems (`check` counts them as violations; the pictures only
    warn). Unknown keys and event kinds are kept and passed through by merge.
  - User errors (missing file, not JSON, not a trace) raise ToolError with a one-line message.

NCCL counterpart: NCCL's profiler plugin example (ext-profiler/example), which also dumps one
Chrome trace JSON file per process; tccl's trace is flatter (one event per FIFO step).
Added in: stage 1 (observability).
"""

import json
import math
import os

from . import ToolError, read_input

PID_STRIDE = 1000  # trace pid = PID_STRIDE * k + rank
PROXY_TID = 1000  # lanes with tid >= this are proxy lanes (one per connection)
FORMAT_VERSION = 1

# Step-event names (cat "step" and "proxy"), in the order legends list them.
WAIT_RECV, WAIT_SEND = "wait recv", "wait send"
MOVES = ("copy", "reduce", "direct")
PROXY_SEND, PROXY_RECV = "proxy send", "proxy recv"
STEP_NAMES = (WAIT_RECV, WAIT_SEND) + MOVES + (PROXY_SEND, PROXY_RECV)


def arg(ev, key, default=None):
    """ev["args"][key], tolerant of events without args."""
    a = ev.get("args")
    return a.get(key, default) if isinstance(a, dict) else default


def int_arg(ev, key):
    """An integer argument, or None when it is absent or not an integer (JSON may spell 5 as
    5.0; a bool is not a number here)."""
    v = arg(ev, key)
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def end(ev):
    return ev["ts"] + ev["dur"]


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class RankInfo:
    """What the files say about one rank (one trace pid)."""

    def __init__(self, pid, file):
        self.pid = pid
        self.rank = pid % PID_STRIDE
        self.comm = pid // PID_STRIDE  # k: the communicator's index in its process
        self.nranks = None
        self.comm_id = None
        self.host_hash = None
        self.offset_us = 0.0  # clockOffsetUs: this rank's clock minus its rank 0's
        self.host = None
        self.os_pid = None
        self.file = file
        self.dropped = 0  # droppedEvents of the file this rank came from
        self.shift_us = 0.0  # what load_run added to this rank's timestamps
        self.aligned = False  # came from a merged (already aligned) file

    def label(self):
        return f"rank {self.rank}" if self.comm == 0 else f"comm {self.comm} rank {self.rank}"


class Run:
    """The events of one run, every rank on its rank 0's clock."""

    def __init__(self):
        self.files = []  # [{"file", "host", "pid", "events", "droppedEvents"}]
        self.events = []  # every non-metadata event, shifted copies
        self.meta = []  # metadata ("M") events, deduplicated
        self.ranks = {}  # trace pid -> RankInfo
        self.lanes = {}  # (pid, tid) -> lane name
        self.problems = []  # malformed input: one line each
        self.warnings = []

    def x_events(self, cat=None):
        """Complete ("X") events, optionally of one category, in file order."""
        return [e for e in self.events
                if e.get("ph") == "X" and (cat is None or e.get("cat") == cat)]

    def lane_name(self, pid, tid):
        name = self.lanes.get((pid, tid))
        if name:
            return name
        if tid == 0:
            return "api"
        return f"proxy lane {tid}" if tid >= PROXY_TID else f"lane {tid}"

    def pid_of(self, comm, rank):
        return comm * PID_STRIDE + rank

    def dropped_total(self):
        return sum(f.get("droppedEvents", 0) for f in self.files)


def _read_json(path):
    data = read_input(path, "a trace file", binary=True)
    if not data.strip():
        raise ToolError(f"{path}: empty file (did the process exit before writing its trace?)")
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        where = (f" (line {e.lineno} column {e.colno})" if isinstance(e, json.JSONDecodeError)
                 else "")
        raise ToolError(f"{path}: not valid JSON{where}: {getattr(e, 'msg', e)}; a process "
                        f"that died before writing its trace leaves a cut-off file") from None


def _comm_key(info, path):
    """What names a communicator across files: its hash (the same on every rank), or, in a
    file without one, its index k in the process (the same in every process that created its
    communicators in the same order)."""
    if isinstance(info.comm_id, str) and info.comm_id:
        return info.comm_id
    return f"#{info.comm}"


def _read_file(path, run):
    """Reads one trace file: (its ranks by the pid it uses, its events, its metadata), with
    timestamps as written (load_run renumbers and shifts)."""
    doc = _read_json(path)
    if isinstance(doc, list):  # Chrome's "JSON Array Format": events only
        events, other = doc, {}
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        events, other = doc["traceEvents"], doc.get("otherData") or {}
    else:
        raise ToolError(f"{path}: not a trace file (expected an object with a \"traceEvents\" "
                        f"list, as TCCL_TRACE_FILE writes)")
    tccl = other.get("tccl") if isinstance(other, dict) else None
    tccl = tccl if isinstance(tccl, dict) else {}
    version = tccl.get("version", FORMAT_VERSION)
    if is_number(version) and version > FORMAT_VERSION:
        run.warnings.append(f"{path}: trace format version {version} (these tools know "
                            f"{FORMAT_VERSION}); reading it as version {FORMAT_VERSION}")
    merged = bool(tccl.get("merged"))
    dropped = tccl.get("droppedEvents", 0)
    dropped = int(dropped) if is_number(dropped) else 0
    name = os.path.basename(path)
    if merged:
        run.files.extend(f for f in tccl.get("files", []) if isinstance(f, dict))
    else:
        run.files.append({"file": name, "host": tccl.get("host"), "pid": tccl.get("pid"),
                          "events": tccl.get("events", len(events)), "droppedEvents": dropped})

    ranks = {}
    for entry in tccl.get("ranks", []) or []:
        pid = int_arg({"args": entry}, "pid") if isinstance(entry, dict) else None
        if pid is None:
            run.problems.append(f"{path}: otherData.tccl.ranks entry without an integer pid: "
                                f"{json.dumps(entry)[:80]}")
            continue
        info = RankInfo(pid, entry.get("file", name) if merged else name)
        r = int_arg({"args": entry}, "rank")
        if r is not None:
            info.rank = r
        info.nranks = int_arg({"args": entry}, "nranks")
        info.comm_id = entry.get("comm")
        info.host_hash = entry.get("hostHash")
        off = entry.get("clockOffsetUs", 0.0)
        info.offset_us = float(off) if is_number(off) else 0.0
        info.host = entry.get("host", tccl.get("host"))
        info.os_pid = entry.get("osPid", tccl.get("pid"))
        d = entry.get("droppedEvents", dropped) if merged else dropped
        info.dropped = int(d) if is_number(d) else 0
        if merged:
            info.aligned = bool(tccl.get("aligned", True))
            sh = entry.get("shiftUs", 0.0)
            info.shift_us = float(sh) if is_number(sh) else 0.0
        ranks[pid] = info

    kept, meta = [], []
    zero = tccl.get("zeroUs") if merged and is_number(tccl.get("zeroUs")) else 0.0
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or not isinstance(ev.get("ph"), str):
            run.problems.append(f"{path}: event {i} is not an object with a \"ph\" string")
            continue
        pid = ev.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            if ev["ph"] != "M":
                run.problems.append(f"{path}: event {i} ({ev.get('name')!r}) has no integer pid")
            continue
        if ev["ph"] == "M":
            meta.append(ev)
            continue
        if not is_number(ev.get("ts")) or not isinstance(ev.get("tid"), int) or (
                ev["ph"] == "X" and not (is_number(ev.get("dur")) and ev["dur"] >= 0)):
            run.problems.append(f"{path}: event {i} ({ev.get('name')!r}, ph {ev['ph']}) lacks a "
                                f"number ts, a non-negative dur or an integer tid")
            continue
        if pid not in ranks:  # no ranks entry (an older or hand-made file): from the pid
            ranks[pid] = RankInfo(pid, name)
            ranks[pid].dropped = dropped
        kept.append(dict(ev, ts=ev["ts"] + zero))  # zero: back on the clock it was written on
    return ranks, kept, meta

def _align(run):
    """Sets each rank's shift: -clockOffsetUs for a rank on another host than its rank 0."""
    by_comm = {}
    for info in run.ranks.values():
        by_comm.setdefault(info.comm, {})[info.rank] = info
    for comm, ranks in sorted(by_comm.items()):
        root = ranks.get(0)
        todo = [i for i in ranks.values() if not i.aligned]
        if root is None:
            if any(i.offset_us for i in todo):
                run.warnings.append(
                    f"communicator {comm}: rank 0's trace is missing, so which ranks share its "
                    f"clock is unknown: timestamps are left as written (not aligned)")
            continue
        for info in todo:
            other_host = (info.host_hash is not None and root.host_hash is not None and
                          info.host_hash != root.host_hash)
            info.shift_us = -info.offset_us if other_host else 0.0


def load_run(paths, align=True):
    """Reads trace files (one per process, or merged ones) into one Run on one clock.

    Communicators are renumbered across files (k = 0, 1, ... in order of their index in the
    processes, then of their hash), so trace pids are 1000*k + rank in the Run whatever order
    each process created them in. align=False leaves every timestamp as written (the tests use
    it to show that alignment matters)."""
    if not paths:
        raise ToolError("no trace files given")
    run = Run()
    parts = [(p,) + _read_file(p, run) for p in paths]
    # One number per communicator, the same for all its ranks.
    first_k = {}
    for path, ranks, _, _ in parts:
        for info in ranks.values():
            key = _comm_key(info, path)
            first_k[key] = min(first_k.get(key, info.comm), info.comm)
    number = {key: k for k, key in enumerate(sorted(first_k, key=lambda c: (first_k[c], c)))}
    where = {}  # new pid -> file
    for path, ranks, events, meta in parts:
        new_pid = {}
        for pid, info in ranks.items():
            info.comm = number[_comm_key(info, path)]
            info.pid = run.pid_of(info.comm, info.rank)
            if info.pid in where:
                raise ToolError(f"{path}: {info.label()} (communicator {info.comm_id or '?'}) is "
                                f"also in {where[info.pid]}: the same file twice, or files of "
                                f"two runs?")
            where[info.pid] = path
            new_pid[pid] = info.pid
            run.ranks[info.pid] = info
        for ev in meta:
            ev = dict(ev, pid=new_pid.get(ev["pid"], ev["pid"]))
            if ev not in run.meta:
                run.meta.append(ev)
            nm = arg(ev, "name")
            if ev.get("name") == "thread_name" and isinstance(ev.get("tid"), int) and \
                    isinstance(nm, str):
                run.lanes[(ev["pid"], ev["tid"])] = nm
        for ev in events:
            ev["pid"] = new_pid[ev["pid"]]
            run.events.append(ev)
    if align:
        _align(run)
    else:
        for info in run.ranks.values():
            if not info.aligned:
                info.shift_us = 0.0
    # Ranks of a merged (aligned) file were moved when it was written: nothing moves twice.
    for ev in run.events:
        info = run.ranks[ev["pid"]]
        if not info.aligned and info.shift_us:
            ev["ts"] = ev["ts"] + info.shift_us
    return run


def _rounded(ev, zero):
    ev = dict(ev)
    if is_number(ev.get("ts")):
        ev["ts"] = round(ev["ts"] - zero, 3)  # ns precision, as written; no float noise
    if is_number(ev.get("dur")):
        ev["dur"] = round(ev["dur"], 3)
    return ev


def merged_json(run, zero=False):
    """The Run as one trace document (a dict ready for json.dump)."""
    timed = [e["ts"] for e in run.events if is_number(e.get("ts"))]
    t0 = min(timed) if (zero and timed) else 0.0
    meta = sorted(run.meta, key=lambda e: (e["pid"], e.get("tid", -1), str(e.get("name"))))
    events = sorted((_rounded(e, t0) for e in run.events),
                    key=lambda e: (e["ts"], e["pid"], e.get("tid", 0)))
    ranks = []
    for pid in sorted(run.ranks):
        i = run.ranks[pid]
        ranks.append({"pid": pid, "rank": i.rank, "nranks": i.nranks, "comm": i.comm_id,
                      "hostHash": i.host_hash, "clockOffsetUs": i.offset_us, "host": i.host,
                      "osPid": i.os_pid, "file": i.file, "shiftUs": round(i.shift_us, 3),
                      "droppedEvents": i.dropped})
    tccl = {"version": FORMAT_VERSION, "merged": True, "aligned": True,
            "zeroUs": round(t0, 3), "files": run.files,
            "events": sum(int(f.get("events") or 0) for f in run.files),
            "droppedEvents": run.dropped_total(), "ranks": ranks}
    return {"traceEvents": meta + events, "displayTimeUnit": "ns", "otherData": {"tccl": tccl}}


def write_json(doc, path):
    try:
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
    except OSError as e:
        raise ToolError(f"{path}: cannot write: {e.strerror}") from None
