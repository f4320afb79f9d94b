#!/usr/bin/env python3
"""tools/drawings/concepts.py: the concept drawings of the chapter pages.

What it is: one function per drawing, each made of matplotlib boxes, arrows and text, writing
docs/images/concept-*.svg:

  concept-fifo.svg          chapter 1: a connection's FIFO, its head/tail counters, the fences
  concept-ring.svg          chapter 2: a ring channel's connections, the all-reduce steps
  concept-dtree.svg         chapter 3: the double binary tree on 8 ranks
  concept-torch-work.svg    chapter 4: dist.all_reduce -> ProcessGroupTccl -> tccl -> WorkTccl
  concept-ib-qp.svg         chapter 6: PD, MR, CQ, QP of a verbs connection; RESET..RTS
  concept-comm-states.svg   chapter 7: a communicator's states and the calls between them

  tools/drawings/concepts.py                  write all six into docs/images/
  tools/drawings/concepts.py --check          draw into a scratch folder (build/drawings-check,
                                              or --work DIR) and compare: exit 1 naming each
                                              checked-in file that differs or is missing
  tools/drawings/concepts.py --png DIR        also write a PNG of each, to look at

Labels are the code's names (fifo.h's ConnFifo, plan_ring.cc's connectors, trees.cc's
doubleTree, csrc/work_tccl.h, net_ib_connect.cc, comm_context.h): change a name there, change
it here, regenerate, and commit both; tests/docs (docs_drawings) fails until then.

Invariants: deterministic output: two runs with the same matplotlib give byte-identical SVGs
(no date in the metadata, a fixed svg.hashsalt, text kept as text, no randomness); the trees
are computed by the same rules as stage3-tree/src/trees.cc, not typed in. Never writes outside
docs/images/ and the scratch folder.
NCCL counterpart: none (NCCL's docs have no generated drawings). Added in: curriculum (docs).
"""

import argparse
import filecmp
import os
import sys

sys.dont_write_bytecode = True

REPO = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
IMAGES = os.path.join(REPO, "docs", "images")
DEBIAN_PYTHON = "/usr/bin/python3"


def pyplot():
    """matplotlib.pyplot on Agg; re-runs once under Debian's python3 when this interpreter has
    no matplotlib (as tools/tracetool/mpl.py does: `python3` on PATH may be pyenv's)."""
    try:
        import matplotlib
    except ImportError:
        here = os.path.realpath(sys.executable)
        if (os.environ.get("TCCL_TOOLS_REEXEC") != "1" and os.access(DEBIAN_PYTHON, os.X_OK)
                and os.path.realpath(DEBIAN_PYTHON) != here):
            os.environ["TCCL_TOOLS_REEXEC"] = "1"
            sys.stdout.flush()
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.realpath(sys.argv[0])] + sys.argv[1:])
        sys.exit("concepts.py: matplotlib is not installed for %s: install Debian's "
                 "python3-matplotlib" % sys.executable)
    matplotlib.use("Agg")
    matplotlib.rcParams.update({
        "svg.hashsalt": "tccl-concepts",  # fixed ids: the same file on every run
        "svg.fonttype": "none",           # text stays text: greppable, smaller, no glyph paths
        "font.family": "DejaVu Sans",
        "font.size": 10,
    })
    import matplotlib.pyplot as plt
    return plt


plt = None  # set in main()

# ---- Drawing helpers ------------------------------------------------------------------------
# Every drawing works in data units on an axis of its own size, one unit = half an inch, so
# coordinates read like a sketch on squared paper.

BLUE, GREEN, ORANGE, GREY = "#dbe8f6", "#dcefd9", "#fbe3c8", "#eeeeee"
RED, PURPLE = "#f6d3d3", "#e6ddf2"
EDGE = "#333333"
MONO = "DejaVu Sans Mono"


def canvas(w, h):
    fig = plt.figure(figsize=(w / 2, h / 2))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, w)
    ax.set_ylim(0, h)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def box(ax, x, y, w, h, text="", fc=BLUE, mono=False, size=10, weight="normal", ec=EDGE,
        ls="-", align="center"):
    from matplotlib.patches import FancyBboxPatch
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=0.15",
                                fc=fc, ec=ec, lw=1.0, ls=ls))
    if text:
        tx = x + w / 2 if align == "center" else x + 0.2
        ax.text(tx, y + h / 2, text, ha=align, va="center", size=size, weight=weight,
                family=MONO if mono else None, linespacing=1.35)


def label(ax, x, y, text, size=9, mono=False, ha="center", va="center", color=EDGE, **kw):
    ax.text(x, y, text, ha=ha, va=va, size=size, family=MONO if mono else None, color=color,
            linespacing=1.3, **kw)


def arrow(ax, a, b, text=None, ls="-", color=EDGE, rad=0.0, size=8.5, mono=True, toff=(0, 0.22),
          both=False):
    from matplotlib.patches import FancyArrowPatch
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="<|-|>" if both else "-|>", mutation_scale=11,
                                 lw=1.1, ls=ls, color=color, shrinkA=2, shrinkB=2,
                                 connectionstyle="arc3,rad=%g" % rad))
    if text:
        label(ax, (a[0] + b[0]) / 2 + toff[0], (a[1] + b[1]) / 2 + toff[1], text, size=size,
              mono=mono)


def title(ax, x, y, text):
    ax.text(x, y, text, ha="left", va="center", size=12, weight="bold")


# ---- 1. The FIFO (chapter 1; stage1-p2p/src/device/fifo.h) ---------------------------------

def draw_fifo():
    fig, ax = canvas(24, 12)
    title(ax, 0.3, 11.4, "One connection: ConnInfo::buff (kNSteps = 8 slots) and its ConnFifo")
    # The slots: head = 10, tail = 13, so steps 10, 11, 12 are published and not yet consumed.
    head, tail, n = 10, 13, 8
    x0, sw, y = 5.0, 1.75, 8.2
    for s in range(n):
        full = any(st % n == s for st in range(head, tail))
        step = next((st for st in range(head, tail) if st % n == s), None)
        box(ax, x0 + s * sw, y, sw, 1.5, "slot %d\n%s" % (s, "step %d" % step if full else "free"),
            fc=ORANGE if full else "white", size=9)
    label(ax, x0 + n * sw / 2, y + 2.0, "buff: slot = step % kNSteps, stepBytes each "
          "(TCCL_BUFFSIZE / 8)", size=9.5)
    # Where head and tail point.
    arrow(ax, (x0 + (head % n) * sw + 0.3, y - 1.0), (x0 + (head % n) * sw + 0.3, y - 0.05))
    label(ax, x0 + (head % n) * sw + 0.3, y - 1.3, "head = %d: next to consume" % head, size=9,
          mono=True)
    arrow(ax, (x0 + (tail % n) * sw + 0.3, y - 1.0), (x0 + (tail % n) * sw + 0.3, y - 0.05))
    label(ax, x0 + (tail % n) * sw + 1.2, y - 1.3, "tail = %d: next to write" % tail, size=9,
          mono=True)

    # The counters, each on its own 64-byte line.
    fx, fw = 8.7, 6.6
    label(ax, fx + fw / 2, 5.75, "ConnFifo (host memory; mapped for a GPU)", size=9.5)
    rows = [("tail", "steps published: written by the producer only", 4.6),
            ("head", "steps consumed: written by the consumer only", 3.5),
            ("sizes[kNSteps]", "bytes in each slot, set before tail", 2.4),
            ("closed", "set by the proxy when the peer closed", 1.3)]
    for name, what, ry in rows:
        box(ax, fx, ry, fw, 0.95, "", fc=GREY if name in ("sizes[kNSteps]", "closed") else GREEN)
        label(ax, fx + 0.2, ry + 0.62, name, size=9.5, mono=True, ha="left", weight="bold")
        label(ax, fx + 0.2, ry + 0.27, what, size=8, ha="left")
    label(ax, fx + fw / 2, 0.8, "alignas(64): one cache line each", size=8)

    # Producer and consumer.
    box(ax, 0.3, 1.3, 5.0, 5.2, "producer (step s)\n\n"
        "wait  head + kNSteps > s\n"
        "write slot s % kNSteps\n"
        "sizes[slot] = bytes\n"
        "fence: storeRelease(\n"
        "        &tail, s + 1)", fc=BLUE, mono=True, size=9)
    box(ax, 18.7, 1.3, 5.0, 5.2, "consumer (step s)\n\n"
        "wait  loadAcquire(&tail) > s\n"
        "read  slot s % kNSteps\n"
        "check sizes[slot]\n"
        "storeRelease(\n"
        "        &head, s + 1)", fc=BLUE, mono=True, size=9)
    arrow(ax, (5.3, 5.1), (fx, 5.1), "release:\nslot, then tail", toff=(0, 0.45))
    arrow(ax, (fx, 4.0), (5.3, 4.0), "waits on head", ls="--", toff=(0, -0.3))
    arrow(ax, (fx + fw, 5.1), (18.7, 5.1), "acquire:\ntail, then slot", ls="--", toff=(0, 0.45))
    arrow(ax, (18.7, 4.0), (fx + fw, 4.0), "frees slot:\nhead", toff=(0, -0.45))
    label(ax, 12, 0.25, "invariant: head <= tail <= head + kNSteps; both only grow", size=9.5,
          mono=True)
    return fig


# ---- 2. A ring channel (chapter 2; stage2-ring/src/plan_ring.cc, device/ring.h) --------------

def draw_ring():
    fig, ax = canvas(26, 13)
    title(ax, 0.3, 12.4, "Channel c: rank r receives from prev = r-1, sends to next = r+1")
    pos = {0: (2.0, 8.3), 1: (8.0, 8.3), 2: (8.0, 2.8), 3: (2.0, 2.8)}
    for r, (x, y) in pos.items():
        box(ax, x, y, 2.6, 1.6, "rank %d" % r, fc=BLUE if r != 1 else GREEN, size=10.5,
            weight="bold")
    # Connections: one direction each, a FIFO each.
    arrow(ax, (4.6, 9.1), (8.0, 9.1), "FIFO", mono=False)
    arrow(ax, (9.3, 8.3), (9.3, 4.4), "FIFO", mono=False, toff=(-0.55, 0))
    arrow(ax, (8.0, 3.6), (4.6, 3.6), "FIFO", mono=False)
    arrow(ax, (3.3, 4.4), (3.3, 8.3), "FIFO", mono=False, toff=(0.55, 0))
    label(ax, 6.3, 11.1, "recv = connectors.get(prev, c, false)", mono=True, size=8.5)
    label(ax, 9.9, 6.35, "send =\nconnectors.get(\n  next, c, true)", mono=True, size=8.5,
          ha="left")
    label(ax, 6.3, 1.6, "rank 1 on channel c: one recv connector (from rank 0)\n"
          "and one send connector (to rank 2)", size=9)

    # The worked example of ringAllReduce on 4 ranks (docs/chapters/stage2-ring.md).
    k = 4
    chunk_fc = {0: BLUE, 1: GREEN, 2: ORANGE, 3: PURPLE}
    names = "ABCD"
    steps = [("send", -1)] + [("recvReduceSend", -j) for j in range(2, k)] + \
        [("recvReduceCopySend", 0)] + [("recvCopySend", -j) for j in range(1, k - 1)] + \
        [("recv", 1)]
    tx, ty, cw, ch, pw = 12.8, 10.4, 2.15, 0.95, 3.9
    label(ax, tx + (pw + k * cw) / 2, 11.6, "ringAllReduce, 4 ranks, chunks A B C D", size=10,
          weight="bold")
    label(ax, tx + pw / 2, ty + 0.45, "step: primitive", size=8.5)
    for r in range(k):
        label(ax, tx + pw + r * cw + cw / 2, ty + 0.45, "rank %d" % r, size=9, weight="bold")
    for i, (prim, off) in enumerate(steps):
        yy = ty - (i + 1) * ch
        label(ax, tx + 0.1, yy + ch / 2, "%d %s" % (i, prim), size=8.5, mono=True, ha="left")
        for r in range(k):
            c = (r + off) % k
            if i < k - 1:  # partial sums: the pieces of ranks c+1 .. r (mod k)
                held = [(c + 1 + m) % k for m in range(i + 1)]
                text = "%s: %s" % (names[c], "+".join(str(h) for h in held))
            else:
                text = "%s: all" % names[c]
            box(ax, tx + pw + r * cw + 0.05, yy + 0.05, cw - 0.1, ch - 0.1, text,
                fc=chunk_fc[c], size=8.5, ec=EDGE if i >= k - 1 else "#888888",
                weight="bold" if i == k - 1 else "normal")
    yb = ty - (len(steps) + 1) * ch + 0.3
    label(ax, tx + pw + k * cw / 2, yb, "steps 0..3: reduce-scatter (rank r ends with chunk r "
          "reduced)\nsteps 3..6: all-gather (each final chunk is copied, never re-reduced)",
          size=8.5)
    return fig


# ---- 3. The double binary tree (chapter 3; stage3-tree/src/trees.cc) --------------------------

def binary_tree(rank, n):
    """trees.cc's binaryTree: (parent, [children]) of rank in NCCL's binary tree."""
    bit = 1
    while bit < n and (rank & bit) == 0:
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if n > 1 else [])
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    kids = []
    low = bit >> 1
    if low > 0:
        kids.append(rank - low)
    while low > 0 and rank + low >= n:
        low >>= 1
    if low > 0:
        kids.append(rank + low)
    return up, kids


def double_tree(rank, n, t):
    """trees.cc's doubleTree: tree 0 is binaryTree; tree 1 mirrors (n even) or shifts (n odd)."""
    if t == 0:
        return binary_tree(rank, n)
    if n % 2 == 0:
        to_node = to_rank = (lambda r: n - 1 - r)
    else:
        to_node, to_rank = (lambda r: (r - 1 + n) % n), (lambda v: (v + 1) % n)
    p, kids = binary_tree(to_node(rank), n)
    return (-1 if p < 0 else to_rank(p)), [to_rank(c) for c in kids]


def draw_dtree():
    n = 8
    fig, ax = canvas(24, 11.2)
    title(ax, 0.3, 10.7, "doubleTree(rank, 8, t): each tree carries half the data")
    for t, (x0, name) in enumerate([(0.6, "tree 0 = binaryTree"),
                                    (12.6, "tree 1: mirrored, rank r where 7-r is")]):
        nodes = {r: double_tree(r, n, t) for r in range(n)}
        # Place a rank where its node is: x = node index (in order), y = its level.
        node_of = (lambda r: r) if t == 0 else (lambda r: n - 1 - r)
        root = next(r for r in range(n) if nodes[r][0] < 0)

        def level(r):
            d, p = 0, nodes[r][0]
            while p >= 0:
                d, p = d + 1, nodes[p][0]
            return d

        depth = max(level(r) for r in range(n))
        xy = {}
        for r in range(n):
            v = node_of(r)
            x = x0 + 1.0 + 1.4 * (v if r != root else node_of(nodes[r][1][0]))
            xy[r] = (x, 2.3 + (depth - level(r)) * 2.0)
        label(ax, x0 + 5.9, 9.9, name, size=10, weight="bold", mono=False)
        for r, (p, kids) in nodes.items():
            for c in kids:
                ax.plot([xy[r][0], xy[c][0]], [xy[r][1], xy[c][1]], color=EDGE, lw=1.1, zorder=1)
        from matplotlib.patches import Circle
        for r in range(n):
            leaf = not nodes[r][1]
            ax.add_patch(Circle(xy[r], 0.5, fc="white" if leaf else GREEN, ec=EDGE, lw=1.1,
                                zorder=2))
            label(ax, xy[r][0], xy[r][1], str(r), size=11, weight="bold", zorder=3)
        leaves = [r for r in range(n) if not nodes[r][1]]
        inner = [r for r in range(n) if nodes[r][1]]
        label(ax, x0 + 5.9, 1.25, "inner: %s     leaves: %s" % (
            " ".join(map(str, inner)), " ".join(map(str, leaves))), size=9.5, mono=True)
    from matplotlib.patches import Circle
    ax.add_patch(Circle((17.6, 10.7), 0.3, fc=GREEN, ec=EDGE))
    label(ax, 18.05, 10.7, "inner node", size=9, ha="left")
    ax.add_patch(Circle((20.6, 10.7), 0.3, fc="white", ec=EDGE))
    label(ax, 21.05, 10.7, "leaf", size=9, ha="left")
    label(ax, 12.0, 0.4, "every rank is a leaf in one tree and an inner node in the other "
          "(n odd: shifted, not mirrored)", size=9.5)
    return fig


# ---- 4. Work and Future (chapter 4; stage4-torch/torch/csrc/) -------------------------------

def draw_torch_work():
    fig, ax = canvas(26, 15)
    title(ax, 0.3, 14.4, "One dist.all_reduce(t): from torch to tccl and back")
    lanes = [(0.3, "caller's Python thread"), (9.6, "worker thread (OpQueue)"),
             (18.0, "tccl")]
    for x, name in lanes:
        label(ax, x + 3.8, 13.5, name, size=10.5, weight="bold")
        ax.plot([x + 3.8, x + 3.8], [0.4, 13.0], color="#bbbbbb", lw=1, ls=":", zorder=0)
    L, W, H = 0.3, 7.6, 1.15
    box(ax, L, 11.6, W, H, "dist.all_reduce(t)", mono=True, size=9.5)
    box(ax, L, 9.9, W, H + 0.25, "c10d::ProcessGroup\n(2.x: -> Backend by device type)",
        mono=True, size=9, fc=GREY)
    box(ax, L, 7.6, W, 1.65, "ProcessGroupTccl::allreduce\ncheckTensor, reduction()\n"
        "makeWork: WorkTccl #N", mono=True, size=9)
    box(ax, L, 5.8, W, H, "OpQueue::push(job); return Work", mono=True, size=9)
    box(ax, L, 3.2, W, 1.6, "work.wait()\n(or DDP: work.getFuture()\n.then(...))", mono=True,
        size=9, fc=ORANGE)
    box(ax, L, 0.7, W, H, "wait() returns / Future value", mono=True, size=9, fc=ORANGE)
    arrow(ax, (L + 3.8, 11.6), (L + 3.8, 11.15))
    arrow(ax, (L + 3.8, 9.9), (L + 3.8, 9.25))
    arrow(ax, (L + 3.8, 7.6), (L + 3.8, 6.95))
    arrow(ax, (L + 3.8, 5.8), (L + 3.8, 4.8))

    M = 9.6
    box(ax, M, 5.8, W, H, "pop #N: running_ = #N", mono=True, size=9, fc=GREEN)
    box(ax, M, 3.6, W, 1.5, "tcclAllReduce(..., stream)\nhost tensor: stream = null\n"
        "CUDA: the group stream", mono=True, size=9, fc=GREEN)
    box(ax, M, 0.4, W, 2.4, "WorkTccl::complete()\n  Future::markCompleted(\n    outputs)"
        "\n  Work::finish()", mono=True, size=9, fc=GREEN, align="left")
    arrow(ax, (L + W, 6.35), (M, 6.35), "job", mono=False)
    arrow(ax, (M + 3.8, 5.8), (M + 3.8, 5.1))

    R = 18.0
    box(ax, R, 3.2, W, 2.3, "plan, executor, proxy, transport\nhost buffers: returns when\n"
        "the data has moved\nGPU: kernel queued, returns", size=9, fc=BLUE)
    arrow(ax, (M + W, 4.6), (R, 4.6), "call")
    arrow(ax, (R, 3.5), (M + 5.5, 2.85), "returns", rad=-0.1, toff=(1.6, -0.45))
    arrow(ax, (L + 3.8, 3.2), (L + 3.8, 1.85), "blocks until\nWork::finish()", ls="--",
          mono=False, toff=(1.4, 0))
    arrow(ax, (M, 1.3), (L + W, 1.3), "wakes wait()", mono=False, toff=(0, 0.25))
    label(ax, R + 3.8, 1.5, "an error or the watchdog:\nWorkTccl::fail(error) instead;\n"
          "wait() and the Future raise it", size=8.5)
    return fig


# ---- 5. A verbs connection (chapter 6; stage6-transport-ib/src/transport/net/ib/) -------------

def draw_ib_qp():
    fig, ax = canvas(26, 15)
    title(ax, 0.3, 14.4, "A verbs connection: IbSendComm and IbRecvComm, one RC QP each")
    # Sender: [MR | QP], receiver: [QP | MR], so that both RDMA writes cross the gap QP to QP.
    for x, name, mx, qx, mr in [
            (0.3, "sender: IbSendComm", 0.4, 5.3,
             "MR fifoMr\nfifo[32]: IbFifoEntry\n{addr, rkey, size, seq}"),
            (15.7, "receiver: IbRecvComm", 5.3, 0.4,
             "MR\nbuf: the FIFO slots\n(the transport's regMr)")]:
        box(ax, x, 4.6, 10.0, 8.6, "", fc="#f7f7f7", ls="--")
        label(ax, x + 5.0, 12.75, name + "   (in its device's PD)", size=10, weight="bold")
        box(ax, x + mx, 9.6, 4.3, 2.4, mr, size=8.5, fc=ORANGE)
        box(ax, x + qx, 9.6, 4.3, 2.4, "", fc=BLUE)
        label(ax, x + qx + 2.15, 11.6, "QP (RC)", size=9.5, weight="bold")
        box(ax, x + qx + 0.3, 10.6, 3.7, 0.7, "send queue", size=8.5, fc="white")
        box(ax, x + qx + 0.3, 9.8, 3.7, 0.7, "receive queue", size=8.5, fc="white")
        box(ax, x + qx, 5.1, 4.3, 1.6, "CQ\n128 entries: ibv_wc", size=8.5, fc=GREEN)
        arrow(ax, (x + qx + 2.15, 9.6), (x + qx + 2.15, 6.7), "completions", mono=False,
              toff=(1.1 if qx < 1 else -1.1, 0))
        label(ax, x + qx + 2.15, 4.85, "test: ibv_poll_cq", size=8.5, mono=True, va="top")
    # Verbs calls on each side.
    label(ax, 0.3 + 2.55, 7.6, "isend(k):\nwaits for fifo[k % 32],\nibv_post_send:\n"
          "RDMA_WRITE_WITH_IMM\n(imm = size)", size=8.5, mono=True)
    label(ax, 15.7 + 7.45, 7.6, "irecv(k):\nibv_post_recv\n(a WR, no buffer),\nthen "
          "RDMA_WRITE\nof entry k", size=8.5, mono=True)
    # The two RDMA writes, QP to QP; the NIC puts the bytes in the MR the rkey names.
    arrow(ax, (15.7 + 0.4, 11.0), (0.3 + 9.6, 11.0), "1. RDMA_WRITE:\nentry k -> fifo[k % 32]",
          toff=(0, 0.55))
    arrow(ax, (0.3 + 9.6, 10.1), (15.7 + 0.4, 10.1), "2. RDMA_WRITE_WITH_IMM:\ndata -> buf "
          "(rkey),\nconsumes the posted recv", toff=(0, -0.85))
    arrow(ax, (0.3 + 5.3, 11.0), (0.3 + 4.7, 11.0))
    arrow(ax, (15.7 + 4.7, 10.1), (15.7 + 5.3, 10.1))
    # The QP state machine, each side, in net_ib_connect.cc.
    label(ax, 13.0, 3.75, "each QP, in createQp / connectQp (net_ib_connect.cc); the receiver's "
          "reaches RTS first", size=9.5, weight="bold")
    states = [("RESET", "ibv_create_qp", GREY), ("INIT", "port_num,\nqp_access_flags", BLUE),
              ("RTR", "dest_qp_num, ah_attr\n(LID or GID), path_mtu", BLUE),
              ("RTS", "timeout, retry_cnt,\nrnr_retry, sq_psn", GREEN)]
    sx, sw, gap = 0.8, 4.2, 2.5
    for i, (s, what, fc) in enumerate(states):
        x = sx + i * (sw + gap)
        box(ax, x, 1.7, sw, 1.1, "IBV_QPS_" + s, mono=True, size=9.5, fc=fc, weight="bold")
        label(ax, x + sw / 2, 0.85, what, size=8, mono=True)
        if i:
            arrow(ax, (x - gap, 2.25), (x, 2.25))
    return fig


# ---- 6. A communicator's states (chapter 7; stage7-faults/src/comm.h, comm_context.h) ---------

def draw_comm_states():
    fig, ax = canvas(26, 13)
    title(ax, 0.3, 12.4, "A communicator's states (commCheckReady refuses calls outside [ready])")
    S = {"init": (0.3, 8.5, 5.2, 1.2, "tcclCommInitRankConfig", GREY, True),
         "prog": (8.6, 10.3, 5.0, 1.2, "[in progress]\nan async job runs", ORANGE, False),
         "ready": (8.6, 6.3, 5.0, 1.4, "[ready]", GREEN, False),
         "fin": (17.6, 8.9, 4.6, 1.2, "[finalized]\ncomm->finalized", PURPLE, False),
         "rev": (17.6, 3.9, 4.6, 1.2, "[revoked]\nctx->revoked", RED, False),
         "freed": (22.9, 6.4, 2.8, 1.2, "freed", GREY, False),
         "new": (8.6, 1.2, 5.0, 1.2, "a new [ready]\ncommunicator", GREEN, False)}
    for x, y, w, h, text, fc, mono in S.values():
        box(ax, x, y, w, h, text, fc=fc, mono=mono, size=9.5,
            weight="bold" if text.startswith("[ready]") else "normal")

    def side(k, where):
        x, y, w, h = S[k][:4]
        return {"l": (x, y + h / 2), "r": (x + w, y + h / 2), "t": (x + w / 2, y + h),
                "b": (x + w / 2, y)}[where]

    arrow(ax, (5.5, 9.1), (8.6, 7.3), "blocking = 1", rad=0.0, toff=(-0.2, -0.55))
    arrow(ax, (5.5, 9.3), (8.6, 10.7), "blocking = 0", toff=(-0.3, 0.3))
    arrow(ax, (12.0, 10.3), (12.0, 7.7), "the job ends", toff=(1.1, 0))
    arrow(ax, (10.0, 7.7), (10.0, 10.3), "a call that may wait,\nblocking = 0", toff=(-1.9, 0))
    arrow(ax, side("ready", "r"), side("fin", "l"), "tcclCommFinalize", toff=(0.1, 0.45))
    arrow(ax, (13.6, 6.7), side("rev", "l"), None)
    label(ax, 14.6, 4.3, "tcclCommRevoke\n(from [in progress]\ntoo: stops the call)", size=8.5,
          mono=True)
    arrow(ax, side("fin", "r"), (24.3, 7.6))
    label(ax, 24.2, 9.0, "tcclCommDestroy", size=8.5, mono=True)
    arrow(ax, side("rev", "r"), (24.3, 6.4))
    label(ax, 24.2, 4.9, "tcclCommDestroy", size=8.5, mono=True)
    arrow(ax, side("rev", "b"), (13.6, 1.8), "tcclCommShrink", rad=-0.15, toff=(1.5, -0.9))
    arrow(ax, side("ready", "b"), side("new", "t"), "tcclCommSplit,\ntcclCommShrink",
          toff=(-1.7, 0))
    label(ax, 13.0, 0.45, "(this one stays [ready])", size=8.5)
    box(ax, 0.3, 1.2, 7.2, 4.2, "any state, from any thread:\n\ntcclCommAbort\n-> stop, then "
        "free\n\na dead peer or the watchdog:\nstill [ready], but every call\nreturns the error",
        fc="white", size=9, ls="--")
    return fig


DRAWINGS = [("concept-fifo.svg", draw_fifo), ("concept-ring.svg", draw_ring),
            ("concept-dtree.svg", draw_dtree), ("concept-torch-work.svg", draw_torch_work),
            ("concept-ib-qp.svg", draw_ib_qp), ("concept-comm-states.svg", draw_comm_states)]


def write_all(outdir, pngdir=None):
    os.makedirs(outdir, exist_ok=True)
    for name, draw in DRAWINGS:
        fig = draw()
        fig.savefig(os.path.join(outdir, name), format="svg", metadata={"Date": None})
        if pngdir:
            os.makedirs(pngdir, exist_ok=True)
            fig.savefig(os.path.join(pngdir, name[:-4] + ".png"), dpi=100)
        plt.close(fig)


def main():
    global plt
    ap = argparse.ArgumentParser(description="Draw the chapter pages' concept drawings "
                                 "(docs/images/concept-*.svg).")
    ap.add_argument("--check", action="store_true",
                    help="draw into a scratch folder and fail if a checked-in file differs")
    ap.add_argument("--work", default=os.path.join(REPO, "build", "drawings-check"),
                    help="the scratch folder of --check (default: build/drawings-check)")
    ap.add_argument("--png", metavar="DIR", help="also write a PNG of each drawing into DIR")
    args = ap.parse_args()
    plt = pyplot()
    if not args.check:
        write_all(IMAGES, args.png)
        print("concepts.py: wrote %d drawings into %s" % (len(DRAWINGS), IMAGES))
        return 0
    write_all(args.work, args.png)
    stale = []
    for name, _ in DRAWINGS:
        mine = os.path.join(IMAGES, name)
        if not os.path.exists(mine):
            stale.append("docs/images/%s: missing" % name)
        elif not filecmp.cmp(mine, os.path.join(args.work, name), shallow=False):
            stale.append("docs/images/%s: differs from what its source draws" % name)
    for s in stale:
        print("concepts.py: " + s, file=sys.stderr)
    if stale:
        print("concepts.py: run tools/drawings/concepts.py and commit the SVGs", file=sys.stderr)
        return 1
    print("concepts.py: %d drawings up to date" % len(DRAWINGS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
