"""Lab 3, wrong group membership: metadata, instance and grader for tools/lab.

group_of() is lab.cc's groupOf(); instance() makes the same seeded choices as the program
(pick() is tools/lab's, the same function as lab::pick).
"""
import re

from labtools import each_rank, numbers

TITLE = "Wrong group membership: a rank in another group"
MIRRORS = ("NCCL ncclCommSplit with a wrong color; PyTorch new_group / device-mesh membership bugs "
           "(a rank in the wrong process group)")
CPU = True
# INFO for the INIT subsystem: tcclCommSplit says, on every rank, the color it was given.
# (Nothing here waits on a peer; the timeout only bounds a run that would.)
ENV = {"TCCL_TIMEOUT": "3", "TCCL_DEBUG": "INFO", "TCCL_DEBUG_SUBSYS": "INIT"}
TIMEOUT = 30
ANSWER = "rank=R group=G"
SYMPTOM = r"my group has \d+ rank\(s\), expected"


def RANKS(seed):
    return 4 + pick(seed, 9, 2)


def group_of(rank, nranks, layout):
    """The layout: neighbours (pairs, rank 4 of 5 alone) or strided (rank % groups)."""
    return rank % ((nranks + 1) // 2) if layout == "strided" else rank // 2


def instance(seed):
    n = RANKS(seed)
    layout = "strided" if pick(seed, 2, 2) == 1 else "neighbours"
    bad = pick(seed, 0, n)
    mine = group_of(bad, n, layout)
    groups = [g for g in (mine - 1, mine + 1) if 0 <= g < (n + 1) // 2]
    return {"ranks": n, "layout": layout, "rank": bad, "group": groups[pick(seed, 1, len(groups))],
            "belongs": mine}


def grade(inst, answer):
    got, why = numbers(answer, ("rank", "group"),
                       "answer with rank=R (the world rank in the wrong group) and group=G (the "
                       "group -- the split color -- it joined)")
    if got is None:
        return False, why
    rank, group = got["rank"], got["group"]
    if rank != inst["rank"]:
        return False, "not that rank: which rank's split color is not the one the layout gives it?"
    if group != inst["group"]:
        return False, "right rank, but not that group: the group is the color it passed to " \
                      "tcclCommSplit (the one it joined, not the one it belongs to)"
    return True, f"rank {rank} joined group {group} instead of group {inst['belongs']}"


def diagnose(run):
    """What the logs say, as an answer: the layout rank 0 prints, against each rank's split
    color in the INIT lines."""
    plan = re.search(r"layout: \w+, \d+ groups: (.*)", run.logs[0])
    if not plan:
        return None
    belongs = {int(r): g for g, members in enumerate(re.findall(r"\{([\d,]+)\}", plan.group(1)))
               for r in members.split(",")}
    splits = each_rank(run, r"split: color (\d+) key (\d+) -> rank \d+ of \d+")
    if splits is None:
        return None
    found = None
    for rank, m in enumerate(splits):
        color = int(m.group(1))
        if color != belongs.get(rank):
            if found is not None:
                return None  # more than one rank off: not this lab's bug
            found = {"rank": str(rank), "group": str(color)}
    return found


def wrong(inst):
    return {"rank": str(inst["rank"]), "group": str(inst["belongs"])}
