"""Lab 1, collective order mismatch: metadata, instance and grader for tools/lab.

The schedule below is lab.cc's schedule(); instance() makes the same seeded choices as the
program (pick() is tools/lab's, the same function as lab::pick).
"""
from labtools import RANKS, disagreement, frtrace, numbers, odd_rank_out

TITLE = "Collective order mismatch: a hang"
MIRRORS = ("NCCL hangs where ranks call collectives in different orders; PyTorch's "
           "\"Watchdog caught collective operation timeout\" with mismatched sequence numbers")
CPU = True
ENV = {"TCCL_TIMEOUT": "3"}
TIMEOUT = 40
ANSWER = "rank=R op=N"
SYMPTOM = r"failed: |wrong result"


def ops():
    out = []
    for step in range(4):
        out += ["all_reduce", "all_gather"] + (["broadcast"] if step % 3 == 2 else [])
    return out


def instance(seed):
    o = ops()
    places = [i for i in range(len(o) - 1) if o[i] != o[i + 1]]
    n = RANKS(seed)
    at = places[pick(seed, 1, len(places))]
    return {"ranks": n, "rank": pick(seed, 0, n), "op": at + 1}  # collectives count from 1


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "op"),
                       "answer with rank=R (the rank that called them in another order) and op=N "
                       "(the collective sequence number where the ranks first disagree)")
    if got is None:
        return False, why
    rank, op = got["rank"], got["op"]
    if rank != inst["rank"]:
        return False, "not that rank: which rank's calls differ from everyone else's?"
    if op != inst["op"]:
        return False, "right rank, wrong collective: count the collectives from 1, as " \
                      "collective_seq_id does, and give the first where the calls differ"
    return True, f"rank {rank} issued collectives {op} and {op + 1} in the other order"


def diagnose(run):
    """What tools/frtrace makes of the run's dumps, as an answer: the odd rank out at the
    first collective where the ranks disagree."""
    found = disagreement(frtrace(run))
    rank = odd_rank_out(found)
    return {"rank": str(rank), "op": found.op} if rank is not None else None


def wrong(inst):
    return {"rank": str((inst["rank"] + 1) % inst["ranks"]), "op": str(inst["op"])}
