"""Lab 13, flag stored before data: metadata, instance and grader for tools/lab.

instance() makes the same seeded choices as lab.cc (pick() is tools/lab's, the same function
as lab::pick): the rank whose producer publishes tail before copying, and the step of its
connection where it does.
"""
import re

from labtools import RANKS, numbers

TITLE = "Protocol data corruption (flag stored before data)"
MIRRORS = ("NCCL protocol bugs where a flag is visible before its data (why LL puts a flag in "
           "every 8 bytes and Simple fences before the tail store); "
           "\"silent data corruption\" reports")
CPU = True
ENV = {"TCCL_TIMEOUT": "3"}
TIMEOUT = 40
ANSWER = "rank=R step=S"
SYMPTOM = r"differs from tcclAllGather"

K_NSTEPS = 8  # lab.cc: kNSteps
K_ITERS = 8   # lab.cc: kIters


def instance(seed):
    n = RANKS(seed)
    total = K_ITERS * (n - 1)
    return {"ranks": n, "rank": pick(seed, 0, n),
            "step": K_NSTEPS + pick(seed, 1, total - K_NSTEPS)}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "step"),
                       "answer with rank=R (the producer that published a step too early) and "
                       "step=S (that step's number on its connection, as the trace lines count)")
    if got is None:
        return False, why
    rank, step = got["rank"], got["step"]
    if rank != inst["rank"]:
        if rank == (inst["rank"] + 1) % inst["ranks"]:
            return False, "that rank read a wrong block, but did it write one? Whose slot was it?"
        return False, "not that rank: on which connection do the two ends' checksums first differ?"
    if step != inst["step"]:
        return False, "right rank, wrong step: give the step number of its connection (the trace " \
                      "lines' step=), where what it sent and what its neighbour read differ"
    return True, f"rank {rank} published step {step} before its data was in the slot"


TRACE = re.compile(r"^\[rank (\d+)\] trace t=([\d.]+)us op=AllGatherFifo iter=\d+ \"(copy|recv)\" "
                   r"(sendPeer|recvPeer)=(\d+) ch=0 step=(\d+) .*crc=(0x[0-9a-f]+)", re.M)


def diagnose(run):
    """The step lines as tools/trace check reads a timeline: pair each connection's steps
    (producer's "copy", consumer's "recv", by producer, consumer and step), and name the
    first step whose two checksums differ."""
    sent, got = {}, {}
    for m in TRACE.finditer(run.text()):
        rank, what, peer, step, crc = int(m[1]), m[3], int(m[5]), int(m[6]), m[7]
        if what == "copy":
            sent[(rank, peer, step)] = crc
        else:
            got[(peer, rank, step)] = crc
    bad = sorted((step, prod) for (prod, cons, step), crc in sent.items()
                 if (prod, cons, step) in got and got[(prod, cons, step)] != crc)
    if not bad:
        return None
    step, prod = bad[0]
    return {"rank": str(prod), "step": str(step)}


def wrong(inst):
    # The consumer: the rank that saw the wrong block first.
    return {"rank": str((inst["rank"] + 1) % inst["ranks"]), "step": str(inst["step"])}
