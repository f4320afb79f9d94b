"""Lab 8, a rank crashing mid-collective: metadata, instance and grader for tools/lab.

The crash is injected by the library (TCCL_FAULT=kill), in the environment of the chosen rank
only (rank_env): the program does not see it, and no survivor can inherit it (a survivor that
later held the dead rank's number in a shrunk communicator would otherwise be killed too).
The schedule below is lab.cc's schedule(); instance() makes the same seeded choices as
rank_env (pick() is tools/lab's, the same function as lab::pick).
"""
from labtools import RANKS, frtrace, incomplete, numbers

TITLE = "A rank crashing mid-collective"
MIRRORS = ("NCCL's \"remote process exited or there was a network error\" when a rank dies; "
           "PyTorch's ncclCommAbort and torchrun's elastic restart after a worker is killed")
CPU = True
ENV = {"TCCL_TIMEOUT": "3"}
TIMEOUT = 30
ANSWER = "rank=R op=N"
SYMPTOM = r"failed: remote process exited"


def ops():
    return ["all_reduce", "all_gather"] * 5


def instance(seed):
    # From operation 3 on: by then both collectives have set up their connections, so the
    # survivors are watching the victim's process (a rank that dies during a connection's
    # setup leaves its peers waiting in the bootstrap until their watchdog fires).
    n = RANKS(seed)
    return {"ranks": n, "rank": pick(seed, 0, n), "op": 3 + pick(seed, 1, len(ops()) - 2)}


def rank_env(seed, rank, fix):
    """The crash, for the chosen rank only -- with the reference fix too: the fix is how the
    survivors react, not that nobody dies."""
    inst = instance(seed)
    if rank != inst["rank"]:
        return {}
    return {"TCCL_FAULT": "kill", "TCCL_FAULT_RANK": str(rank), "TCCL_FAULT_OP": str(inst["op"])}


def EXPECT_DEAD(inst):
    """The ranks that end killed even with the reference fix (tools/lab: every other rank must
    exit 0)."""
    return [inst["rank"]]


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "op"),
                       "answer with rank=R (the rank that died) and op=N (the collective it "
                       "died in, counting from 1 as collective_seq_id does)")
    if got is None:
        return False, why
    rank, op = got["rank"], got["op"]
    if rank != inst["rank"]:
        return False, "not that rank: which rank left no dump, and which one do the survivors " \
                      "say has exited?"
    if op != inst["op"]:
        return False, "right rank, wrong collective: count the collectives from 1, as " \
                      "collective_seq_id does, and give the one the survivors were in"
    return True, f"rank {rank} was killed as it called collective {op}"


def diagnose(run):
    """What tools/frtrace makes of the run's dumps, as an answer: the collective the survivors
    did not complete, and the rank that left no dump."""
    m = incomplete(frtrace(run), r"rank\(s\) \[(\d+)\] left no dump")
    return {"rank": m.group(2), "op": m.group(1)} if m else None


def wrong(inst):
    return {"rank": str(inst["rank"]), "op": str(inst["op"] - 1)}
