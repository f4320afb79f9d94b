"""Lab 7, a buffer reused before the operation completed: metadata, instance and grader for
tools/lab.

instance() makes the same seeded choices as lab.cc (pick() is tools/lab's, the same function
as lab::pick).
"""
import re

from labtools import RANKS, numbers

TITLE = "A buffer reused before its all-reduce completed"
MIRRORS = ("CUDA stream races where a buffer is reused before ncclAllReduce completed; "
           "PyTorch's async_op=True without work.wait(), record_stream")
CPU = True  # the graded lab is the host one; the README describes the GPU variant
ENV = {"TCCL_TIMEOUT": "3"}
TIMEOUT = 30
ANSWER = "rank=R step=S"
SYMPTOM = r"wrong gradient sum"


def instance(seed):
    n = RANKS(seed)
    return {"ranks": n, "rank": pick(seed, 0, n), "step": 2 + pick(seed, 1, 4)}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "step"),
                       "answer with rank=R (the rank whose buffer changed under the all-reduce) "
                       "and step=S (the training step, counted from 1)")
    if got is None:
        return False, why
    rank, step = got["rank"], got["step"]
    if step != inst["step"]:
        return False, "not that step: at which step are the sums wrong?"
    if rank != inst["rank"]:
        return False, "right step, wrong rank: every rank gets the same wrong sum; whose " \
                      "contribution is missing from it?"
    return True, f"at step {step} rank {rank} cleared its buffer before the all-reduce that " \
                 f"was reading it had completed"


def diagnose(run):
    """What the wrong sums say, as an answer: each rank contributes 1 << rank, so the bit
    missing from a wrong sum names the rank whose data changed; the step is where the sums
    went wrong (every rank reports the same)."""
    found = set()
    for m in re.finditer(r"step (\d+): wrong gradient sum: element \d+ is (\d+) "
                         r"\(expected (\d+)\)", run.text()):
        missing = int(m.group(3)) - int(m.group(2))
        if missing <= 0 or missing & (missing - 1):
            return None  # not one rank's bit: something else went wrong
        found.add((m.group(1), str(missing.bit_length() - 1)))
    if len(found) != 1:
        return None
    step, rank = found.pop()
    return {"rank": rank, "step": step}


def wrong(inst):
    return {"rank": str((inst["rank"] + 1) % inst["ranks"]), "step": str(inst["step"])}
