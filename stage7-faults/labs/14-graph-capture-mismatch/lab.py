"""Lab 14, a CUDA graph capture mismatch: metadata, instance and grader for tools/lab.

GPU only (CPU = False): tools/lab list shows it as GPU and CTest does not run its selftest.
instance() makes the same seeded choices as lab.cc (pick() is tools/lab's, the same function
as lab::pick): the rank whose capture differs, whether it captures one all-reduce more (an
overflow flag) or one fewer (a skipped bucket), and where.
"""
from labtools import RANKS, disagreement, frtrace, numbers, odd_rank_out

TITLE = "A CUDA graph capture mismatch (GPU only)"
MIRRORS = ("torch.cuda.graph / CUDA-graphed training steps where one rank captures different "
           "NCCL collectives: replays hang or corrupt, and no watchdog sees captured work")
CPU = False
# The ring and the Simple protocol for every all-reduce, so that every bucket uses the same
# connections, which the eager step makes (the bug does not depend on it).
ENV = {"TCCL_TIMEOUT": "3", "TCCL_ALGO": "ring", "TCCL_PROTO": "Simple"}
TIMEOUT = 40
ANSWER = "rank=R op=N"
SYMPTOM = r"graph replay did not finish|its kernels failed|the graph failed|wrong result"

K_BUCKETS = 4  # lab.cc: kBuckets (the eager step issues collectives 1..K_BUCKETS)


def instance(seed):
    n = RANKS(seed)
    extra = pick(seed, 2, 2) == 0
    at = pick(seed, 1, K_BUCKETS + 1 if extra else K_BUCKETS)
    # The first collective where the ranks' calls differ: the eager step's K_BUCKETS
    # collectives come first, then the captured ones (counted from 1, as collective_seq_id).
    return {"ranks": n, "rank": pick(seed, 0, n), "kind": "extra" if extra else "fewer",
            "at": at, "op": K_BUCKETS + at + 1}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "op"),
                       "answer with rank=R (the rank whose graph differs) and op=N (the "
                       "collective sequence number where the ranks' calls first differ)")
    if got is None:
        return False, why
    rank, op = got["rank"], got["op"]
    if rank != inst["rank"]:
        return False, "not that rank: which rank's recorded calls differ from everyone else's?"
    if op != inst["op"]:
        return False, "right rank, wrong collective: count the collectives from 1 on the " \
                      "communicator, the eager step's included, as collective_seq_id does"
    what = "one all-reduce more" if inst["kind"] == "extra" else "one all-reduce fewer"
    return True, f"rank {rank} captured {what}: the calls differ from collective {op} onwards"


def diagnose(run):
    """What tools/frtrace makes of the run's dumps, as an answer: the odd rank out at the
    first collective where the ranks' recorded calls differ (captured calls are recorded,
    as completed, when they are captured)."""
    found = disagreement(frtrace(run))
    rank = odd_rank_out(found)
    return {"rank": str(rank), "op": found.op} if rank is not None else None


def wrong(inst):
    return {"rank": str((inst["rank"] + 1) % inst["ranks"]), "op": str(inst["op"])}
