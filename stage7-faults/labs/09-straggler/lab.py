"""Lab 9, a straggler: metadata, instance and grader for tools/lab.

The delay is injected by the library (TCCL_FAULT=stall), in the environment of the chosen rank
only (rank_env), so the program does not show it; the reference fix (LAB_FIX=1) runs without
it. The schedule below is lab.cc's schedule(); instance() makes the same seeded choices as
rank_env (pick() is tools/lab's, the same function as lab::pick).
"""
from labtools import RANKS, frtrace, incomplete, numbers

TITLE = "A straggler: a timeout with no visible cause"
MIRRORS = ("PyTorch's \"Watchdog caught collective operation timeout\" caused by one slow rank "
           "(data loader, checkpoint); NCCL jobs that hang behind a straggler")
CPU = True
ENV = {"TCCL_TIMEOUT": "1"}
DELAY_MS = 2500  # the straggler's lateness: well past TCCL_TIMEOUT plus the others' second
TIMEOUT = 30
ANSWER = "rank=R op=N"
SYMPTOM = r"has not completed after 1 s"


def ops():
    return ["all_reduce", "all_gather"] * 6


def instance(seed):
    # The gradient all-reduce of step 2..6 (collectives 3, 5, ..., 11): the first step sets up
    # the connections, and a late rank still completes an all-gather from what its peers left
    # in its FIFOs -- the all-reduce needs its peers to go on.
    n = RANKS(seed)
    return {"ranks": n, "rank": pick(seed, 0, n), "op": 2 * (1 + pick(seed, 1, 5)) + 1}


def rank_env(seed, rank, fix):
    inst = instance(seed)
    if fix or rank != inst["rank"]:
        return {}
    return {"TCCL_FAULT": "stall", "TCCL_FAULT_RANK": str(rank),
            "TCCL_FAULT_OP": str(inst["op"]), "TCCL_FAULT_DELAY_MS": str(DELAY_MS)}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "op"),
                       "answer with rank=R (the rank that came late) and op=N (the collective it "
                       "came late to, counting from 1 as collective_seq_id does)")
    if got is None:
        return False, why
    rank, op = got["rank"], got["op"]
    if rank != inst["rank"]:
        return False, "not that rank: the first error a rank reports is not always the cause -- " \
                      "which rank joined the collective last?"
    if op != inst["op"]:
        return False, "right rank, wrong collective: count from 1, as collective_seq_id does"
    return True, f"rank {rank} called collective {op} {DELAY_MS} ms late"


def diagnose(run):
    """What tools/frtrace makes of the run's dumps, as an answer: the straggler it names."""
    m = incomplete(frtrace(run), r"straggler: rank (\d+)")
    return {"rank": m.group(2), "op": m.group(1)} if m else None


def wrong(inst):
    return {"rank": str((inst["rank"] + 1) % inst["ranks"]), "op": str(inst["op"])}
