"""Lab 12, shared memory too small for the SHM transport: metadata, instance and grader for
tools/lab.

NCCL keeps its SHM FIFOs in files under /dev/shm, and a container's small /dev/shm (docker's
default is 64 MB) refuses them. tccl keeps them in memfd files (stage 5), which /dev/shm's
size does not limit -- so the lab limits them another way the kernel applies to a memfd: WRAP
starts each rank under a file-size limit (RLIMIT_FSIZE, `ulimit -f`; SIGXFSZ ignored, so the
reservation fails with EFBIG rather than killing the rank). The limit is per segment, where
/dev/shm's is a total: the failure point is the same (the reservation of a segment), the
arithmetic of a fitting TCCL_BUFFSIZE a little simpler.
"""
import re
import sys

from labtools import RANKS, fix_knob, knob_env

TITLE = "Shared memory too small for the SHM transport"
MIRRORS = ("NCCL's \"Error while creating shared memory segment\" in containers with a small "
           "/dev/shm (docker's 64 MB default; --shm-size)")
CPU = True
# The team's launcher logs warnings (NCCL_DEBUG=WARN in many job templates); the watchdog's
# timeout bounds a rank that would wait for a peer that failed.
ENV = {"TCCL_DEBUG": "WARN", "TCCL_TIMEOUT": "5"}
TIMEOUT = 30
ANSWER = "fix=TCCL_BUFFSIZE=<bytes> (or another knob=value)"
SYMPTOM = r"cannot reserve \d+ bytes of shared memory"
FIX_KEYS = ["fix"]
WRAP = [sys.executable, "-c",
        "import os, resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "cap = int(os.environ['LAB_SHM_LIMIT'])\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))\n"
        "os.execv(sys.argv[1], sys.argv[1:])\n"]

HEADER = 4096  # a FIFO segment: a 4 KiB header (head, tail, sizes), then TCCL_BUFFSIZE of slots
LIMITS_KIB = [640, 768, 1024, 1536, 2048, 3072]


def instance(seed):
    return {"ranks": RANKS(seed), "limit": 1024 * LIMITS_KIB[pick(seed, 0, len(LIMITS_KIB))]}


def fits(inst, buffsize):
    return buffsize + HEADER <= inst["limit"]


def reference_buffsize(inst):
    """The reference fix: the largest power of two that fits."""
    b = 1024
    while fits(inst, 2 * b):
        b *= 2
    return b


def rank_env(seed, rank, fix):
    inst = instance(seed)
    env = {"LAB_SHM_LIMIT": str(inst["limit"])}
    if fix:
        env["TCCL_BUFFSIZE"] = str(reference_buffsize(inst))
    return env


def grade(inst, answer):
    key, value = fix_knob(answer)
    if key is None:
        return False, "answer with fix=KNOB=VALUE: a TCCL_ setting that lets the job run on " \
                      "this machine as it is"
    if key == "TCCL_SHM_DISABLE":
        if value != "1":
            return False, "TCCL_SHM_DISABLE=1 turns the SHM transport off"
        return True, "the SHM transport cannot have the segments it needs; without it the " \
                     "ranks talk over sockets (slower: the price of not fixing the limit)"
    if key == "TCCL_BUFFSIZE":
        try:
            b = int(value)
        except ValueError:
            return False, "TCCL_BUFFSIZE is a number of bytes"
        if b < 1024 or b % 128 != 0:
            return False, "TCCL_BUFFSIZE must be at least 1024 and a multiple of 128"
        if not fits(inst, b):
            return False, "that still does not fit: compare the size the warning could not " \
                          "reserve with the TCCL_BUFFSIZE that asked for it"
        return True, f"a segment of TCCL_BUFFSIZE={b} (plus its header) fits the limit of " \
                     f"{inst['limit'] // 1024} KiB; the SHM transport stays"
    return False, f"{key} does not change what the SHM transport reserves"


def fix_env(inst, answer):
    return knob_env(answer)


def diagnose(run):
    """What the warnings say, as an answer: the SHM transport could not reserve a segment (File
    too large), and the warning's own way out: turn the SHM transport off."""
    if re.search(r"cannot reserve \d+ bytes of shared memory for the SHM transport \(File too "
                 r"large\)", run.text()):
        return {"fix": "TCCL_SHM_DISABLE=1"}
    return None


def wrong(inst):
    """The limit itself as TCCL_BUFFSIZE: it forgets the header."""
    return {"fix": f"TCCL_BUFFSIZE={inst['limit']}"}
