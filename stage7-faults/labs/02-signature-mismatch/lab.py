"""Lab 2, count, type or root mismatch: metadata, instance and grader for tools/lab.

schedule() below is lab.cc's schedule() (kinds and counts) and fields() its fields();
instance() makes the same seeded choices as the program (pick() is tools/lab's, the same function as lab::pick).
"""
import re

from labtools import RANKS, disagreement, frtrace, numbers, odd_rank_out

TITLE = "Count, type or root mismatch: corruption or a hang"
MIRRORS = ("NCCL silently corrupting or hanging on mismatched counts, types or roots; PyTorch's "
           "TORCH_DISTRIBUTED_DEBUG=DETAIL \"Detected mismatch between collectives on ranks\"")
CPU = True
ENV = {"TCCL_TIMEOUT": "2", "TCCL_BOOTSTRAP_TIMEOUT": "5"}
TIMEOUT = 30
ANSWER = "rank=R op=N field=count|type|root"
SYMPTOM = r"failed: |wrong result"

FIELDS = ("count", "type", "root")


def schedule():
    """(kind, count) per collective, in order (lab.cc: schedule())."""
    calls = [("broadcast", 2048)]
    for _ in range(2):
        calls += [("all_reduce", 4096), ("reduce", 256), ("all_gather", 64)]
    return calls + [("broadcast", 16)]


def fields(kind):
    return ["count", "type", "root"] if kind in ("broadcast", "reduce") else ["count", "type"]


def instance(seed):
    calls = schedule()
    n = RANKS(seed)
    at = pick(seed, 1, len(calls))
    choices = fields(calls[at][0])
    return {"ranks": n, "rank": pick(seed, 0, n), "op": at + 1,  # collectives count from 1
            "field": choices[pick(seed, 2, len(choices))], "kind": calls[at][0]}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "op"),
                       "answer with rank=R (the rank whose call differs), op=N (that collective's "
                       "sequence number, from 1) and field=count|type|root (what differs)",
                       also=("field",))
    if got is None:
        return False, why
    rank, op = got["rank"], got["op"]
    field = {"dtype": "type", "datatype": "type"}.get(answer["field"].lower(), answer["field"].lower())
    if field not in FIELDS:
        return False, "field is one of count, type, root"
    if rank != inst["rank"]:
        return False, "not that rank: whose call is the odd one out?"
    if op != inst["op"]:
        return False, "right rank, wrong collective: count the collectives from 1, as " \
                      "collective_seq_id does, and give the one where the calls differ"
    if field != inst["field"]:
        return False, "right rank and collective, but that detail is the same on every rank"
    return True, f"rank {rank} called collective {op} ({inst['kind']}) with the wrong {field}"


CALL = re.compile(r"(\S+) of (\d+) x (\S+)(?: \((?:(\w+), )?root (\d+)\)| \((\w+)\))?$")


def _details(words):
    """'broadcast of 2048 x Float (root 0)' -> (count, type, root)."""
    m = CALL.match(words.strip())
    return (m.group(2), m.group(3), m.group(5)) if m else (None, None, None)


def diagnose(run):
    """What tools/frtrace makes of the run's dumps, as an answer: the odd rank out at the
    collective where the ranks' calls disagree, and the detail in which they differ."""
    found = disagreement(frtrace(run))
    rank = odd_rank_out(found)
    if rank is None or len(found.calls) != 2:
        return None  # no single rank stands out against one usual call
    (_, odd_call), (_, usual_call) = found.calls
    mine, theirs = _details(odd_call), _details(usual_call)
    diff = [f for f, a, b in zip(FIELDS, mine, theirs) if a != b]
    return {"rank": str(rank), "op": found.op, "field": diff[0]} if len(diff) == 1 else None


def wrong(inst):
    other = next(f for f in fields(inst["kind"]) if f != inst["field"])
    return {"rank": str(inst["rank"]), "op": str(inst["op"]), "field": other}
