"""Lab 5, two communicators used in different orders: metadata, instance and grader for
tools/lab.

STEPS is lab.cc's kSteps; instance() makes the same seeded choices as the program (pick() is
tools/lab's, the same function as lab::pick).
"""
import re

from labtools import RANKS, frtrace, numbers

TITLE = "Two communicators in different orders: a deadlock"
MIRRORS = ("NCCL's deadlock when ranks issue two communicators' operations in different orders; "
           "PyTorch jobs hanging across process groups")
CPU = True
ENV = {"TCCL_TIMEOUT": "2", "TCCL_BOOTSTRAP_TIMEOUT": "5", "TCCL_DEBUG": "WARN"}
TIMEOUT = 30
ANSWER = "rank=R step=S"
SYMPTOM = r"failed: |wrong result"

STEPS = 5


def instance(seed):
    n = RANKS(seed)
    return {"ranks": n, "rank": pick(seed, 0, n), "step": 2 + pick(seed, 1, STEPS - 1)}  # never step 1


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "step"),
                       "answer with rank=R (the rank that used the communicators in the other "
                       "order) and step=S (the training step where it did, counting from 1)")
    if got is None:
        return False, why
    rank, step = got["rank"], got["step"]
    if rank != inst["rank"]:
        return False, "not that rank: which rank waited on another communicator than the rest?"
    if step != inst["step"]:
        return False, "right rank, wrong step: a step is one all-reduce on dp and one on tp, " \
                      "and dp's collectives start with the weights' broadcast"
    return True, f"rank {rank} all-reduced on tp before dp at step {step}"


NEVER_JOINED = r"collective (\d+) \(.*\): rank (\d+) never joined it"


def diagnose(run):
    """What tools/frtrace makes of each communicator's dumps, as an answer: on dp one rank
    never joined a collective the others are stuck in; on tp that rank alone is in one."""
    dp = re.findall(NEVER_JOINED, frtrace(run, "fr_dp_"))
    tp = re.findall(NEVER_JOINED, frtrace(run, "fr_tp_"))
    if len(dp) != 1 or not tp:
        return None
    (dp_coll, rank), tp_coll = dp[0], tp[0][0]
    if rank in (r for _, r in tp) or int(dp_coll) - 1 != int(tp_coll):
        return None  # the two communicators tell different stories
    # dp's collective 1 is the weights' broadcast, so step S is dp's S + 1 and tp's S.
    return {"rank": rank, "step": tp_coll}


def wrong(inst):
    return {"rank": str(inst["rank"]), "step": str(inst["step"] + 1)}
