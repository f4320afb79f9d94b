#!/usr/bin/env python3
"""tests/tools/make_trace_samples.py: writes the sample traces under tests/tools/data/.

What it is: a small simulation of the host executor and the socket transport's proxy, which
writes traces the way the library does (one file per process, TCCL_TRACE_FILE=trace.%h.%p.json)
for the tests of tools/trace:

  data/sendrecv2/   chapter 1's picture: rank 0 sends 8 MiB to rank 1 in 16 steps of 512 KiB
                    (the default TCCL_BUFFSIZE of 4 MiB over 8 slots); the sender runs 8 steps
                    ahead, then waits for a free slot each time the proxy has sent one;
  data/ring3/       chapter 2's: two ring all-reduces (seq 0 and 1) of 48 KiB on 3 ranks with
                    8 KiB steps (TCCL_BUFFSIZE=64K), 2 steps per chunk, so each connection
                    carries steps 0-7 in the first op and 8-15 in the second; rank 2 runs on
                    another host whose clock is 2871.412 us ahead (clockOffsetUs), ranks 0 and 1
                    share a host (and so a clock: offset 0);
  data/ring3_broken/  ring3 with two injected bugs that `tools/trace check` must report:
                    rank 1 sees step 5 from rank 0 before rank 0 published it (causality), and
                    rank 2's wait for step 11 from rank 1 is missing (completeness).

The model, per step: the executor waits for the data (wait recv; ends a poll after the proxy
published it), for a free slot when 8 steps ahead (wait send; ends a poll after the proxy sent
step s-8), moves the data (copy / reduce / direct) and publishes; the proxy sends published
steps one after another, the peer's proxy receives each after the link latency, into a free
slot. Every publish therefore precedes the consumer's wait end, as in the library.

Invariants: deterministic (no randomness, no clock): running it again rewrites the same bytes.
It is not run by the tests; rerun it only to change the samples (and then the tests' numbers).
NCCL counterpart: none. Added in: stage 1 (observability).
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
DATA = os.path.join(HERE, "data")
NSTEPS = 8
POLL = 0.2  # us between a counter's store and the spinning side seeing it


class Sim:
    """One run: ranks with an executor lane and proxy lanes, connections between them."""

    def __init__(self, nranks, step_bytes, send_us, recv_us, latency_us):
        self.n = nranks
        self.step_bytes = step_bytes
        self.send_us, self.recv_us, self.latency_us = send_us, recv_us, latency_us
        self.events = {r: [] for r in range(nranks)}
        self.pub = {}  # (p, c) -> step -> publish time (producer's move end)
        self.consumed = {}  # (p, c) -> step -> the consumer's move end (frees the slot)
        self.psend, self.precv = {}, {}  # memo: (p, c, s) -> (start, end)
        self.proxy_tid = {}  # (rank, kind, peer) -> tid

    def ev(self, rank, cat, name, tid, ts, dur, **args):
        self.events[rank].append({"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": tid,
                                  "ts": round(ts, 3), "dur": round(dur, 3), "args": args})

    def lane(self, rank, kind, peer, channel=0):
        """A proxy lane's tid, as src/trace.cc numbers them: 1000 + 2*(peer*256+ch) + isSend."""
        key = (rank, kind, peer)
        self.proxy_tid[key] = 1000 + 2 * (peer * 256 + channel) + (kind == "send")
        return self.proxy_tid[key]

    def proxy_send(self, p, c, s):
        """The producer's proxy sends step s once published, after step s-1."""
        if (p, c, s) in self.psend:
            return self.psend[(p, c, s)]
        pub = self.pub.get((p, c), {}).get(s)
        prev = self.proxy_send(p, c, s - 1) if s > 0 else (0.0, 0.0)
        if pub is None or prev is None:
            return None
        start = max(pub + POLL, prev[1])
        self.psend[(p, c, s)] = (start, start + self.send_us)
        self.ev(p, "proxy", "proxy send", self.lane(p, "send", c), start, self.send_us, step=s,
                peer=c, channel=0, bytes=self.step_bytes)
        return self.psend[(p, c, s)]

    def proxy_recv(self, p, c, s):
        """The consumer's proxy receives step s into a free slot (step s-8 consumed)."""
        if (p, c, s) in self.precv:
            return self.precv[(p, c, s)]
        sent = self.proxy_send(p, c, s)
        prev = self.proxy_recv(p, c, s - 1) if s > 0 else (0.0, 0.0)
        free = self.consumed.get((p, c), {}).get(s - NSTEPS, 0.0) if s >= NSTEPS else 0.0
        if sent is None or prev is None or free is None:
            return None
        start = max(sent[0] + self.latency_us, prev[1], free)
        stop = max(start + self.recv_us, sent[1] + self.latency_us)
        self.precv[(p, c, s)] = (start, stop)
        self.ev(c, "proxy", "proxy recv", self.lane(c, "recv", p), start, stop - start, step=s,
                peer=p, channel=0, bytes=self.step_bytes)
        return self.precv[(p, c, s)]


class Executor:
    """One rank's fiber: runs a list of ops, each a list of prims, each a list of steps."""

    def __init__(self, sim, rank, ops, move_us, start):
        self.sim, self.rank, self.ops, self.move_us = sim, rank, ops, move_us
        self.t = start
        self.send_step = {}  # peer -> next step
        self.recv_step = {}
        self.pos = [0, 0, 0]  # op, prim, step
        self.prim_start = self.op_start = None

    def advance(self):
        """Runs as far as the known times allow; True when done."""
        sim, r = self.sim, self.rank
        while self.pos[0] < len(self.ops):
            op = self.ops[self.pos[0]]
            if self.op_start is None:
                self.op_start = max(self.t, op["start"][r])
                self.t = self.op_start + 1.0  # enqueue, plan, wake the fiber
            if self.pos[1] == len(op["prims"]):
                self.t += 0.8
                self.sim.ev(r, "op", op["name"], 0, self.op_start, self.t - self.op_start,
                            **op["args"])
                self.pos, self.op_start = [self.pos[0] + 1, 0, 0], None
                self.t += op.get("gap", 5.0)
                continue
            prim = op["prims"][self.pos[1]]
            if self.pos[2] == len(prim["steps"]):
                if prim.get("lends"):  # lent user memory: return once the proxy sent it all
                    peer = prim["peers"]["sendPeer"]
                    last = sim.proxy_send(r, peer, self.send_step[peer] - 1)
                    if last is None:
                        return False
                    self.t = max(self.t, last[1] + POLL)
                self.t += 0.1
                self.sim.ev(r, "prim", prim["name"], 1, self.prim_start, self.t - self.prim_start,
                            chunk=prim["chunk"], bytes=prim["bytes"], channel=0,
                            **prim["peers"])
                self.pos[1] += 1
                self.pos[2] = 0
                self.t += 0.1
                continue
            move, recv_peer, send_peer = prim["steps"][self.pos[2]]
            if not self.step(move, recv_peer, send_peer):
                return False
            self.pos[2] += 1
        return True

    def step(self, move, recv_peer, send_peer):
        sim, r = self.sim, self.rank
        rs = self.recv_step.get(recv_peer, 0) if recv_peer is not None else None
        ss = self.send_step.get(send_peer, 0) if send_peer is not None else None
        arrived = sim.proxy_recv(recv_peer, r, rs) if rs is not None else (0.0, 0.0)
        freed = (sim.proxy_send(r, send_peer, ss - NSTEPS) if ss is not None and ss >= NSTEPS
                 else (0.0, 0.0))
        if arrived is None or freed is None:
            return False  # another rank must run first
        if self.pos[2] == 0:
            self.prim_start = self.t
        t = self.t
        if rs is not None:  # wait recv: ends when the proxy's tail store is seen
            stop = max(t, arrived[1]) + POLL
            sim.ev(r, "step", "wait recv", 1, t, stop - t, step=rs, peer=recv_peer, channel=0)
            t = stop
        if ss is not None and ss >= NSTEPS:  # wait send: the slot of step ss-8 is free again
            stop = max(t, freed[1]) + POLL
            sim.ev(r, "step", "wait send", 1, t, stop - t, step=ss, peer=send_peer, channel=0)
            t = stop
        dur = self.move_us[move]
        args = {}
        if rs is not None:
            args.update(recvStep=rs, recvPeer=recv_peer)
        if ss is not None:
            args.update(sendStep=ss, sendPeer=send_peer)
        sim.ev(r, "step", move, 1, t, dur, channel=0, bytes=sim.step_bytes, **args)
        t += dur
        if ss is not None:
            sim.pub.setdefault((r, send_peer), {})[ss] = t
            self.send_step[send_peer] = ss + 1
        if rs is not None:
            sim.consumed.setdefault((recv_peer, r), {})[rs] = t
            self.recv_step[recv_peer] = rs + 1
        self.t = t + 0.05
        return True


def run(sim, executors):
    for _ in range(100000):
        if all([e.advance() for e in executors]):
            return
    sys.exit("make_trace_samples: the simulation deadlocked")


def write(sim, outdir, hosts, clock, comm):
    """One file per rank (each rank its own process), as TCCL_TRACE_FILE=trace.%h.%p.json."""
    os.makedirs(outdir, exist_ok=True)
    for r in range(sim.n):
        host, os_pid, host_hash, offset = hosts[r]
        meta = [{"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}},
                {"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}}]
        lanes = {0: "api", 1: "fiber 0"}
        for (rank, kind, peer), tid in sim.proxy_tid.items():
            if rank == r:
                lanes[tid] = f"proxy {kind} {'to' if kind == 'send' else 'from'} {peer} ch 0"
        for tid, name in sorted(lanes.items()):
            meta.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid,
                         "args": {"name": name}})
            meta.append({"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid,
                         "args": {"sort_index": tid}})
        # The writer keeps events in the order they were recorded: when each span ended.
        events = sorted(sim.events[r], key=lambda e: (e["ts"] + e["dur"], e["tid"]))
        for e in events:  # this rank's own clock
            e["ts"] = round(e["ts"] + clock + offset, 3)
        other = {"tccl": {"version": 1, "host": host, "pid": os_pid, "clock": "CLOCK_MONOTONIC",
                          "events": len(events), "droppedEvents": 0,
                          "ranks": [{"pid": r, "rank": r, "nranks": sim.n, "comm": comm,
                                     "hostHash": host_hash, "clockOffsetUs": offset}]}}
        path = os.path.join(outdir, f"trace.{host}.{os_pid}.json")
        with open(path, "w") as f:
            f.write('{"traceEvents": [\n')
            f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in meta + events))
            f.write('\n],\n"displayTimeUnit":"ns",\n"otherData":')
            f.write(json.dumps(other, separators=(",", ":")))
            f.write("}\n")
        print(f"{path}: {len(events)} events")


def sendrecv2():
    step = 512 << 10
    sim = Sim(2, step, send_us=410.0, recv_us=395.0, latency_us=28.0)
    n = 16
    send = {"name": "send", "chunk": 0, "bytes": n * step, "peers": {"sendPeer": 1},
            "steps": [("direct", None, 1)] * n, "lends": True}
    # The first two steps arrive before the receive is posted: staged in the slot and copied.
    recv = {"name": "recv", "chunk": 0, "bytes": n * step, "peers": {"recvPeer": 0},
            "steps": [("copy", 0, None)] * 2 + [("direct", 0, None)] * (n - 2)}
    common = {"seq": 0, "count": n * step, "bytes": n * step, "type": "uint8"}
    ops0 = [{"name": "Send", "start": {0: 0.0}, "prims": [send],
             "args": dict(common, peer=1, algo="p2p")}]
    ops1 = [{"name": "Recv", "start": {1: 180.0}, "prims": [recv],
             "args": dict(common, peer=0, algo="p2p")}]
    moves = {"direct": 0.3, "copy": 61.0}
    run(sim, [Executor(sim, 0, ops0, moves, 0.0), Executor(sim, 1, ops1, moves, 180.0)])
    hosts = {0: ("nodeA", 40101, "0x9e3779b97f4a7c15", 0.0),
             1: ("nodeA", 40102, "0x9e3779b97f4a7c15", 0.0)}
    out = os.path.join(DATA, "sendrecv2")
    shutil.rmtree(out, ignore_errors=True)
    write(sim, out, hosts, clock=5123456.789, comm="0xa54ff53a5f1d36f1")


def ring_program(r, n, steps_per_chunk, op_bytes, nops):
    """The ring all-reduce of device/ring.h for rank r, one loop, as a list of prims."""
    nxt, prv = (r + 1) % n, (r - 1) % n
    chunk_bytes = steps_per_chunk * (8 << 10)

    def prim(name, chunk, move, recv, send, lends=False):
        peers = {}
        if recv:
            peers["recvPeer"] = prv
        if send:
            peers["sendPeer"] = nxt
        return {"name": name, "chunk": chunk % n, "bytes": chunk_bytes, "peers": peers,
                "steps": [(move, prv if recv else None, nxt if send else None)] *
                steps_per_chunk, "lends": lends}

    # As primitives.h on the host: a plain send lends src, a send with a dst lends dst (and
    # waits for the proxy at the end); recvReduceSend reduces into the send slot.
    prims = [prim("send", r - 1, "direct", False, True, lends=True)]
    prims += [prim("recvReduceSend", r - j, "reduce", True, True) for j in range(2, n)]
    prims += [prim("recvReduceCopySend", r, "reduce", True, True, lends=True)]
    prims += [prim("recvCopySend", r - j, "direct", True, True, lends=True)
              for j in range(1, n - 1)]
    prims += [prim("recv", r + 1, "direct", True, False)]
    ops = []
    for k in range(nops):
        ops.append({"name": "AllReduce", "start": {0: 0.0 + 400 * k, 1: 2.6 + 400 * k,
                                                    2: 5.3 + 400 * k},
                    "prims": prims,
                    "args": {"seq": k, "count": op_bytes // 4, "bytes": op_bytes,
                             "type": "float32", "op": "sum", "algo": "ring"}})
    return ops


def ring3():
    n = 3
    sim = Sim(n, 8 << 10, send_us=3.1, recv_us=2.6, latency_us=9.5)
    moves = {"direct": 0.2, "copy": 1.1, "reduce": 2.4}
    execs = [Executor(sim, r, ring_program(r, n, 2, 48 << 10, 2), moves, 0.0) for r in range(n)]
    run(sim, execs)
    hosts = {0: ("nodeA", 31001, "0x6a09e667f3bcc908", 0.0),
             1: ("nodeA", 31002, "0x6a09e667f3bcc908", 0.0),
             2: ("nodeB", 27017, "0xbb67ae8584caa73b", 2871.412)}
    out = os.path.join(DATA, "ring3")
    shutil.rmtree(out, ignore_errors=True)
    write(sim, out, hosts, clock=7700123.456, comm="0x3c6ef372fe94f82b")
    broken(out, os.path.join(DATA, "ring3_broken"))


def broken(src, dst):
    """ring3 with a causality violation (rank 1, step 5 from rank 0) and a missing wait (rank
    2, step 11 from rank 1)."""
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    docs = {}
    for name in sorted(os.listdir(src)):
        with open(os.path.join(src, name)) as f:
            docs[name] = json.load(f)
    by_rank = {d["otherData"]["tccl"]["ranks"][0]["rank"]: (n, d) for n, d in docs.items()}
    publish = next(e["ts"] + e["dur"] for e in by_rank[0][1]["traceEvents"]
                   if e.get("cat") == "step" and e["args"].get("sendStep") == 5)
    for e in by_rank[1][1]["traceEvents"]:  # rank 1 shares rank 0's clock (same host)
        if e.get("name") == "wait recv" and e["args"]["step"] == 5 and e["args"]["peer"] == 0:
            stop = round(publish - 2.5, 3)  # "saw" the step 2.5 us before it was published
            e["ts"] = min(e["ts"], round(stop - 0.2, 3))
            e["dur"] = round(stop - e["ts"], 3)
    evs = by_rank[2][1]["traceEvents"]
    evs[:] = [e for e in evs if not (e.get("name") == "wait recv" and
                                     e["args"]["step"] == 11 and e["args"]["peer"] == 1)]
    by_rank[2][1]["otherData"]["tccl"]["events"] -= 1
    for name, doc in docs.items():
        with open(os.path.join(dst, name), "w") as f:
            f.write('{"traceEvents": [\n')
            f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in doc["traceEvents"]))
            f.write('\n],\n"displayTimeUnit":"ns",\n"otherData":')
            f.write(json.dumps(doc["otherData"], separators=(",", ":")))
            f.write("}\n")
        print(f"{os.path.join(dst, name)}: broken copy")


if __name__ == "__main__":
    sendrecv2()
    ring3()
