"""Lab 11, the wrong network interface for the bootstrap: metadata, instance and grader for
tools/lab.

The fault is one rank's "node profile": rank_env gives that rank LAB_NODE_IFNAME, and WRAP (a
shell line every rank runs under) exports it as TCCL_SOCKET_IFNAME unless the job already sets
TCCL_SOCKET_IFNAME itself -- so a fix the learner tries (`tools/lab run --env`, or the
grader's rerun with the answer's value on every rank) wins over the node's setting, as a job's
NCCL_SOCKET_IFNAME wins over a node's /etc/nccl.conf. (rank_env cannot set TCCL_SOCKET_IFNAME
directly: tools/lab applies rank_env after --env, so no fix could replace it.)
"""
import re

from labtools import RANKS, fix_knob, knob_env, numbers

TITLE = "The wrong network interface for the bootstrap"
MIRRORS = ("NCCL's \"Bootstrap : no socket interface found\" and bootstrap timeouts from a wrong "
           "NCCL_SOCKET_IFNAME; GLOO_SOCKET_IFNAME in PyTorch")
CPU = True
ENV = {"TCCL_BOOTSTRAP_TIMEOUT": "5"}
TIMEOUT = 30
ANSWER = "rank=R fix=TCCL_SOCKET_IFNAME=<value>"
SYMPTOM = r"tcclCommInitFromEnv failed"
WRAP = ["/bin/sh", "-c",
        'export TCCL_SOCKET_IFNAME="${TCCL_SOCKET_IFNAME:-$LAB_NODE_IFNAME}"; exec "$0"']
FIX_KEYS = ["fix"]

# Interface names copied from other clusters' job scripts, chosen so that none exists on a
# machine that runs the labs (not docker0 or ib0: many hosts have them, and a rank listening
# there is still reachable from the others on the same host). Prefix match, as NCCL's: "eth9"
# matches eth9, eth9.100, ...; "=" asks for the exact name.
BAD_NAMES = ["eth9", "=ib9", "bond9", "hsn9", "=enp199s0f1", "=ens9f9"]


def instance(seed):
    n = RANKS(seed)
    return {"ranks": n, "rank": pick(seed, 0, n),
            "ifname": BAD_NAMES[pick(seed, 1, len(BAD_NAMES))]}


def rank_env(seed, rank, fix):
    inst = instance(seed)
    if fix or rank != inst["rank"]:
        return {}
    return {"LAB_NODE_IFNAME": inst["ifname"]}


def grade(inst, answer):
    got, why = numbers(answer, ("rank",),
                       "answer with rank=R (the rank whose setting is wrong) and "
                       "fix=TCCL_SOCKET_IFNAME=<value> (a value that works for every rank)",
                       also=("fix",))
    if got is None:
        return False, why
    rank = got["rank"]
    if rank != inst["rank"]:
        return False, "not that rank: most ranks only say who never joined -- read that rank's log"
    _, value = fix_knob(answer, "TCCL_SOCKET_IFNAME")
    if value is None:
        return False, "the fix is TCCL_SOCKET_IFNAME=<value>: an interface (or NCCL-style list) " \
                      "that exists on this host"
    if value == inst["ifname"]:
        return False, "that is the setting that fails: which interfaces does this host have?"
    return True, f"rank {rank}'s TCCL_SOCKET_IFNAME={inst['ifname']} names no interface here"


def fix_env(inst, answer):
    return knob_env(answer, "TCCL_SOCKET_IFNAME", "TCCL_SOCKET_IFNAME=<value>")


def diagnose(run):
    """What the logs say, as an answer: the rank that found no usable interface (the others
    name it too: "rank R of N never joined"); the fix, the interface that carries MASTER_ADDR
    (127.0.0.1: the ranks share this host), the loopback."""
    bad = [r for r, log in enumerate(run.logs) if "no usable network interface" in log]
    if len(bad) != 1:
        return None
    named = {int(x) for x in re.findall(r"rank (\d+) of \d+ never joined", run.text())}
    if named and named != set(bad):
        return None
    return {"rank": str(bad[0]), "fix": "TCCL_SOCKET_IFNAME=lo"}


def wrong(inst):
    return {"rank": str(inst["rank"]), "fix": f"TCCL_SOCKET_IFNAME={inst['ifname']}"}
