"""tools/tracetool/gantt.py: the Gantt picture of one operation (`tools/trace png`).

What it is: one operation (one tccl call, all its ranks) drawn over the window from its first
rank's start to its last rank's end. One row per (rank, lane) with events in the window, ranks
grouped and shaded alternately; on each row the step events as bars coloured by kind, with the
step number written in when the bar is wide enough, and the primitive calls as an outlined band
above them, named when wide enough. The api lane shows the op itself. --arrows adds a line from
each step's publish (producer) to the end of the consumer's wait for it: a step that arrives
late shows up as a long wait bar with a long arrow into its end.

What to look for: in a large send/recv (chapter 1) the sender runs up to 8 steps (the FIFO's
slots) ahead of the receiver, then each "wait send" ends when the proxy has sent a slot; in a
ring all-reduce (chapter 2) every rank does n-1 reduce steps (reduce-scatter) then n-1
forwarding steps (all-gather), each step's wait ending just after the previous rank's publish.

Invariants: reads a loaded Run only; x is in us from the op's start on the common clock;
events that straddle the window are clipped, not dropped; colours are fixed per event name
(STYLE), so pictures of different runs compare at a glance.
NCCL counterpart: none (NCCL traces are read in Perfetto; this is the picture a chapter needs).
Added in: stage 1 (observability).
"""

from collections import defaultdict

from . import ToolError
from .check import ranges
from .model import MOVES, STEP_NAMES, arg, end, int_arg
from .mpl import output_format, pyplot, size_label

# Waits are light (time spent not moving data), moves saturated, the proxy's work purple/pink.
STYLE = {
    "wait recv": "#f5b971",
    "wait send": "#f6e08f",
    "copy": "#4e79a7",
    "reduce": "#2f8f46",
    "direct": "#6fb7c9",
    "proxy send": "#9b6bb3",
    "proxy recv": "#e389b5",
}
OTHER = "#b8b0ac"  # a step name this tool does not know
OP_COLOUR, PRIM_FACE, PRIM_EDGE = "#c9c9c9", "#efefef", "#555555"
P2P_OPS = {"send", "recv"}
DPI = 110
WIDTH_IN = 15.0
LEFT, RIGHT = 0.19, 0.985  # axes extent as figure fractions: the lane labels need the left


def _group_key(ev):
    """Ops of one call across ranks share seq; a Send on one rank matches a Recv on another."""
    name = str(ev.get("name"))
    return "send/recv" if name.lower() in P2P_OPS else name


def select_op(run, name=None, seq=None, ranks=None):
    """(key, ops): the chosen call's key (comm, name or "send/recv", seq) and its op events,
    one or more per rank.

    Chosen: the op of the given name and seq; without seq the first (lowest seq, then earliest)
    of that name; without a name the first op of the trace. Ops match across ranks by seq; a
    Send and a Recv (which a group launch gives one span) are drawn together."""
    groups = defaultdict(list)
    ordinal = defaultdict(int)
    for e in sorted(run.x_events("op"), key=lambda e: (e["pid"], e["ts"])):
        info = run.ranks.get(e["pid"])
        if info is None or (ranks is not None and info.rank not in ranks):
            continue
        s = int_arg(e, "seq")
        if s is None:  # no seq recorded: the op's position among its rank's ops
            s = ordinal[e["pid"]]
        ordinal[e["pid"]] += 1
        groups[(info.comm, _group_key(e), s)].append(e)
    if not groups:
        raise ToolError("no op events in the trace" + (" for the ranks asked for" if ranks else ""))
    cands = [k for k, evs in groups.items() if
             (name is None or any(str(e.get("name")).lower() == name.lower() for e in evs)) and
             (seq is None or k[2] == seq)]
    if not cands:
        have = sorted({(str(e.get("name")), k[2]) for k, evs in groups.items() for e in evs},
                      key=lambda x: (x[1], x[0]))
        listed = ", ".join(f"{n} seq {s}" for n, s in have[:20])
        listed += " ..." if len(have) > 20 else ""
        want = " ".join(x for x in (name, None if seq is None else f"seq {seq}") if x)
        raise ToolError(f"no op {want} in the trace; ops found: {listed}")
    key = min(cands, key=lambda k: (k[2], min(e["ts"] for e in groups[k]), k[0]))
    ops = list(groups[key])
    if key[1] == "send/recv":
        # The Send and Recv of one group launch have their own seqs but one span per rank:
        # they are one picture (an exchange), so they go together.
        spans = {(e["pid"], e["ts"], e["dur"]) for e in ops}
        ops += [e for k, evs in groups.items() if k[:2] == key[:2] and k != key for e in evs
                if (e["pid"], e["ts"], e["dur"]) in spans]
    return key, ops


def _step_number(ev):
    for k in ("step", "sendStep", "recvStep"):
        s = int_arg(ev, k)
        if s is not None:
            return s
    return None


def _title(key, ops, run):
    comm = key[0]
    names = " + ".join(dict.fromkeys(str(e.get("name")) for e in
                                     sorted(ops, key=lambda e: (e["pid"], e["ts"]))))
    seqs = sorted({int_arg(e, "seq") for e in ops} - {None}) or [key[2]]
    parts = [f"{names} (seq {ranges(seqs)})"]
    nr = {i.nranks for i in run.ranks.values() if i.comm == comm} - {None}
    parts.append(f"{max(nr)} ranks" if nr else f"{len(ops)} rank(s)")
    nbytes = {int_arg(e, "bytes") for e in ops} - {None}
    if nbytes:
        parts.append(size_label(max(nbytes)))
    algo = {arg(e, "algo") for e in ops} - {None}
    if algo:
        parts.append("/".join(sorted(map(str, algo))))
    if comm:
        parts.append(f"communicator {comm}")
    return " · ".join(parts)


def op_window(run, key, ops, window=None):
    """The window to draw, (lo, hi) on the run's clock, and a note when it may be incomplete.

    Host ops: first rank's start to last rank's end (a host call returns when its data moved).
    A GPU op's api span runs from the call until its stream has passed the group's kernels, so
    it covers the GPU lanes' events too; prim events tagged with the op's seq, where a trace
    has them, widen the window further."""
    lo, hi = min(e["ts"] for e in ops), max(end(e) for e in ops)
    note = ""
    if window is not None:
        return lo + window[0], lo + window[1], note
    comm, _, seq = key
    prims = [e for e in run.x_events("prim") if run.ranks[e["pid"]].comm == comm]
    tagged = [e for e in prims if int_arg(e, "seq") == seq]
    if tagged:
        lo, hi = min(lo, min(e["ts"] for e in tagged)), max(hi, max(end(e) for e in tagged))
    return lo, hi, note


def draw(run, out, name=None, seq=None, ranks=None, title=None, arrows=False, window=None,
         reexec=False):
    """Draws the chosen op's Gantt picture into `out` (.png, .svg or .pdf); window: (a, b) in us
    from the op's start, instead of the op's own span. Returns a one-line description of what
    was drawn (and a note when the window may miss part of the op)."""
    fmt = output_format(out)
    key, ops = select_op(run, name, seq, ranks)
    comm = key[0]
    lo, hi, note = op_window(run, key, ops, window)
    origin = min(e["ts"] for e in ops)  # x = 0: the op's start on its first rank
    span = max(hi - lo, 1e-3)
    pad = span * 0.01

    # ---- Rows: every (rank, lane) of the communicator with events in the window -------------
    lanes = defaultdict(list)
    for e in run.x_events():
        info = run.ranks.get(e["pid"])
        if info is None or info.comm != comm or (ranks is not None and info.rank not in ranks):
            continue
        if end(e) >= lo and e["ts"] <= hi:
            lanes[(info.rank, e["pid"], e.get("tid", 0))].append(e)
    rows = sorted(lanes)

    plt = pyplot(reexec)
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D

    height = 1.3 + 0.34 * len(rows) + 0.9  # title, rows, axis label and legend (inches)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, height))
    fig.subplots_adjust(left=LEFT, right=RIGHT, top=1 - 0.75 / height, bottom=1.25 / height)
    px_per_us = (RIGHT - LEFT) * WIDTH_IN * DPI / (span + 2 * pad)

    def clip(e):
        a, b = max(e["ts"], lo - pad), min(end(e), hi + pad)
        return a - origin, max(b - a, 0.0)

    bars = defaultdict(list)  # (y0, h, colour, edge) -> [(x, w)]
    texts = []  # (x, y, text, size)
    seen_names = set()
    wait_end = {}  # (comm, producer, consumer, ch, step) -> (t, y) of the consumer's wait end
    publish = {}  # ... -> (t, y) of the producer's publish
    shade = False
    last_rank = None
    for y, (rank, pid, tid) in enumerate(rows):
        if rank != last_rank:
            if last_rank is not None:
                ax.axhline(y - 0.5, color="#888888", lw=0.6)
            shade, last_rank = not shade, rank
        if shade:
            ax.axhspan(y - 0.5, y + 0.5, color="#f4f4f4", zorder=0)
        evs = lanes[(rank, pid, tid)]
        has_prims = any(e.get("cat") == "prim" for e in evs)
        op_names = defaultdict(list)  # ops of one group launch share a span: one bar, one label
        for e in evs:
            if e.get("cat") == "op":
                op_names[(e["ts"], e["dur"])].append(str(e.get("name")))
        for (ts, dur), nms in op_names.items():
            x, w = clip({"ts": ts, "dur": dur})
            nm = " + ".join(dict.fromkeys(nms))
            bars[(y - 0.3, 0.6, OP_COLOUR, "#777777")].append((x, w))
            if w * px_per_us > 7 * len(nm) + 6:
                texts.append((x + w / 2, y, nm, 8))
        for e in evs:
            x, w = clip(e)
            cat, nm = e.get("cat"), str(e.get("name"))
            wide = w * px_per_us
            if cat == "op":
                continue
            elif cat == "prim":
                bars[(y - 0.44, 0.26, PRIM_FACE, PRIM_EDGE)].append((x, w))
                if wide > 5.5 * len(nm) + 6:
                    texts.append((x + w / 2, y - 0.31, nm, 6.5))
            else:  # step, proxy, or something newer: a coloured bar
                y0, h = (y - 0.14, 0.56) if has_prims else (y - 0.3, 0.6)
                # At least a pixel wide, and no white edge to eat it: a 0.2 us "direct" step in
                # a 5 ms picture still shows.
                edge = "white" if wide > 3 else "none"
                bars[(y0, h, STYLE.get(nm, OTHER), edge)].append((x, max(w, 1.0 / px_per_us)))
                seen_names.add(nm)
                s = _step_number(e)
                if s is not None and wide > 6 * len(str(s)) + 4:
                    texts.append((x + w / 2, y0 + h / 2, str(s), 6))
            if arrows and cat == "step":
                ch = int_arg(e, "channel") or 0
                if nm == "wait recv" and int_arg(e, "step") is not None:
                    key = (int_arg(e, "peer"), rank, ch, int_arg(e, "step"))
                    wait_end[key] = (end(e), y + 0.14)
                if int_arg(e, "sendStep") is not None:
                    publish[(rank, int_arg(e, "sendPeer"), ch, int_arg(e, "sendStep"))] = (
                        end(e), y + 0.14)

    for (y0, h, colour, edge), spans in bars.items():
        # A white edge keeps back-to-back steps (the proxy's) apart; outlines for op and prim.
        ax.broken_barh(spans, (y0, h), facecolors=colour, edgecolors=edge,
                       linewidth=0.4 if edge == "white" else 0.6, zorder=2)
    for x, y, text, size in texts:
        ax.text(x, y, text, ha="center", va="center", fontsize=size, zorder=4, clip_on=True)
    n_arrows = 0
    for k, (tp, yp) in publish.items():
        if k in wait_end:
            tw, yw = wait_end[k]
            if lo - pad <= tp <= hi + pad and lo - pad <= tw <= hi + pad:
                ax.annotate("", xy=(tw - origin, yw), xytext=(tp - origin, yp), zorder=3,
                            arrowprops=dict(arrowstyle="->", lw=0.5, color="#333333", alpha=0.55,
                                            shrinkA=0, shrinkB=0))
                n_arrows += 1

    labels = []
    for rank, pid, tid in rows:
        info = run.ranks.get(pid)
        labels.append(f"{info.label() if info else f'pid {pid}'} · {run.lane_name(pid, tid)}")
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first rank on top
    ax.set_xlim(lo - origin - pad, hi - origin + pad)
    ax.set_xlabel("µs from the start of the op (its first rank)")
    ax.grid(axis="x", color="#dddddd", lw=0.5, zorder=1)
    ax.set_axisbelow(True)
    ax.set_title(title or _title(key, ops, run), fontsize=11)

    order = [n for n in STEP_NAMES if n in seen_names] + sorted(seen_names - set(STEP_NAMES))
    handles = [Patch(facecolor=OP_COLOUR, edgecolor="#777777", label="op (the tccl call)"),
               Patch(facecolor=PRIM_FACE, edgecolor=PRIM_EDGE, label="primitive call")]
    handles += [Patch(facecolor=STYLE.get(n, OTHER), label=n) for n in order]
    if n_arrows:
        handles.append(Line2D([], [], color="#333333", lw=0.8, label="publish → seen"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 10), fontsize=8,
               frameon=False, bbox_to_anchor=(0.5, 0.05 / height))
    try:
        fig.savefig(out, format=fmt, dpi=DPI)
    except OSError as e:
        raise ToolError(f"{out}: cannot write: {e.strerror}") from None
    finally:
        plt.close(fig)
    moves = sum(1 for evs in lanes.values() for e in evs if e.get("name") in MOVES)
    return (f"{out}: {_title(key, ops, run)}; {span:.3f} us, {len(rows)} lanes "
            f"({len({r for r, _, _ in rows})} ranks), {moves} data moves"
            + (f", {n_arrows} arrows" if arrows else "") + (f"\nnote: {note}" if note else ""))

