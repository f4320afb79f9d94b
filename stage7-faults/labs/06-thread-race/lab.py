"""Lab 6, threads racing on one communicator: metadata, instance and grader for tools/lab.

instance() makes the same seeded choices as lab.cc (pick() is tools/lab's, the same function
as lab::pick).
"""
import re

from labtools import RANKS, frtrace, numbers

TITLE = "Two threads racing on one communicator"
MIRRORS = ("NCCL's rule that a communicator is used by one thread at a time; PyTorch hangs "
           "from collectives issued on several threads")
CPU = True
ENV = {"TCCL_TIMEOUT": "2"}
TIMEOUT = 30
ANSWER = "rank=R step=S"
SYMPTOM = r"already running a call of another thread"
COLLS_PER_STEP = 2  # gradients, then loss


def instance(seed):
    n = RANKS(seed)
    return {"ranks": n, "rank": pick(seed, 0, n), "step": 2 + pick(seed, 1, 4)}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "step"),
                       "answer with rank=R (the rank whose threads raced) and step=S (the "
                       "training step, counted from 1, where they raced)")
    if got is None:
        return False, why
    rank, step = got["rank"], got["step"]
    if rank != inst["rank"]:
        return False, "not that rank: which rank had two threads in the communicator at once?"
    if step != inst["step"]:
        return False, "right rank, wrong step: count the steps from 1; each step is two " \
                      "collectives, gradients then loss"
    return True, f"at step {step} rank {rank}'s metrics thread all-reduced the loss while its " \
                 f"main thread was still in the gradients' all-reduce"


def diagnose(run):
    """What the tools say, as an answer: the racing rank from tccl's refusal (the message names
    the rank); the step from tools/frtrace -- the first collective where that rank is the odd
    one out, two collectives a step."""
    m = re.search(r"rank (\d+): communicator \S+ is already running a call of another thread",
                  run.text())
    c = re.search(r"^collective (\d+)", frtrace(run), re.M)
    if not m or not c:
        return None
    return {"rank": m.group(1), "step": str((int(c.group(1)) + 1) // COLLS_PER_STEP)}


def wrong(inst):
    return {"rank": str((inst["rank"] + 1) % inst["ranks"]), "step": str(inst["step"])}
