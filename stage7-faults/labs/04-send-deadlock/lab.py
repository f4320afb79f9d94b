"""Lab 4, send/send deadlock without a group: metadata, instance and grader for tools/lab.

shards() below is lab.cc's shards() (the same integer arithmetic); instance() makes the same
seeded choices as the program (pick() is tools/lab's, the same function as lab::pick).
"""
import re

from labtools import numbers

TITLE = "Send/send deadlock without a group, above a size"
MIRRORS = ("NCCL's \"ncclSend/ncclRecv must be in a group to avoid deadlock\"; MPI's "
           "send/send deadlock past the eager threshold")
CPU = True
ENV = {"TCCL_TIMEOUT": "2"}
TIMEOUT = 30
ANSWER = "op=N fix=F"
SYMPTOM = r"watchdog: operation \d+ \(p2p \d+\), nccl:send"
FIX_KEYS = ["fix"]

FIFO_BYTES = 4194304  # TCCL_BUFFSIZE's default
STAGES = 7
HANDSHAKE_OPS = 2     # tcclSendRecv: a send and a receive


def RANKS(seed):
    return 2 + 2 * pick(seed, 9, 2)


def shards(first, percent):
    n = [0] * (STAGES + 1)
    n[first] = FIFO_BYTES // 4 * percent // 100
    for s in range(first - 1, 0, -1):
        n[s] = n[s + 1] * 2 // 3
    for s in range(first + 1, STAGES + 1):
        n[s] = n[s - 1] * 3 // 2
    return n


def instance(seed):
    first = 2 + pick(seed, 1, STAGES - 1)
    percent = 101 + pick(seed, 2, 49)
    # Operations count from 1 in issue order (record_id + 1): the handshake's two, then a send
    # and a receive per stage; the first stage too large hangs at its send.
    return {"ranks": RANKS(seed), "stage": first, "bytes": shards(first, percent)[first] * 4,
            "op": HANDSHAKE_OPS + 2 * (first - 1) + 1}


FIXES = {
    "group": "each swap in tcclGroupStart/tcclGroupEnd",
}
NOT_FIXES = {
    "buffsize": "a larger TCCL_BUFFSIZE only moves the threshold: the next larger message "
                "deadlocks again (and every connection pays for the memory)",
    "order": "sending on one partner and receiving first on the other would work, MPI-style, "
             "but it runs the two directions one after the other; name the fix NCCL documents",
    "timeout": "a longer TCCL_TIMEOUT waits longer for a send that can never finish",
}


def grade(inst, answer):
    got, why = numbers(answer, ("op",),
                       "answer with op=N (the operation that never completes, counted as the "
                       "flight recorder and the watchdog count them) and fix=F (how the program "
                       "must issue its swaps)", also=("fix",))
    if got is None:
        return False, why
    op = got["op"]
    if op == inst["op"] + 1:
        return False, "that is the receive: it was never even called. Which call is stuck?"
    if op != inst["op"]:
        return False, "not that operation: count every operation from 1, sends and receives " \
                      "alike (record_id + 1), and give the first that never completed"
    fix = answer["fix"].lower()
    if fix not in FIXES and fix not in NOT_FIXES:
        return False, f"'{fix}' is not a fix this lab knows: see the README's questions"
    return True, f"operation {op} is the send of stage {inst['stage']} ({inst['bytes']} bytes, " \
                 f"more than the {FIFO_BYTES}-byte FIFO): both partners wait in tcclSend"


def fix_env(inst, answer):
    fix = answer["fix"].lower()
    if fix in FIXES:
        return {"LAB_FIX": "1"}, FIXES[fix]
    return None, f"fix={fix} is not the fix: " + NOT_FIXES.get(fix, "unknown")


def diagnose(run):
    """What the watchdog says, as an answer: the first operation that never completed (every
    rank names its own stuck send; they agree), and the fix a send/send wait calls for."""
    ops = [int(m) for m in re.findall(r"watchdog: operation (\d+) \(p2p \d+\), nccl:send",
                                      run.text())]
    return {"op": str(min(ops)), "fix": "group"} if ops else None


def wrong(inst):
    return {"op": str(inst["op"] - 2), "fix": "group"}  # the last swap that worked
