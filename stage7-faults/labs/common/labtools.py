"""labs/common/labtools.py: what the labs' lab.py files share -- the usual rank count, the
reading of a learner's answer, and the lab's tools run on a run directory and read back.

What it is: the Python side of labs/common/lab.h. tools/lab puts this directory on sys.path
before it loads a lab.py, and hands this module its pick() (the same function as lab::pick),
as it does each lab.py; a lab.py then says `from labtools import numbers, frtrace`.

Invariants: nothing here knows a lab's instance or its story: the grader's words (usage, hints,
verdicts) stay in each lab.py, and a helper only says what every lab would say the same way
("rank and op are numbers"). Every helper is a pure function of its arguments (frtrace only
reads the run's dumps), so a lab's diagnose() gives the same answer on the same run.

NCCL counterpart: none (a teaching device). Added in: stage 7.
"""
import collections
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# tools/lab's pick() (lab::pick), handed over when tools/lab loads the labs.
pick = None


# ---- the instance --------------------------------------------------------------------------

def RANKS(seed):
    """The usual rank count: 3 or 4, the seed's choice 9. lab.cc never picks it: it reads
    WORLD_SIZE, which tools/lab sets from this."""
    return 3 + pick(seed, 9, 2)


# ---- the answer ----------------------------------------------------------------------------

def numbers(answer, keys, usage, also=()):
    """The answer's `keys` as numbers: ({key: int}, None), or (None, why not) -- `usage` (the
    lab's own words for the whole answer) where a key of `keys` or `also` is missing, "rank
    and op are numbers" where one is not a number. `also` are keys that must be there but
    are not numbers (field=, fix=, side=): the lab reads those itself."""
    if not all(k in answer for k in tuple(keys) + tuple(also)):
        return None, usage
    try:
        return {k: int(answer[k]) for k in keys}, None
    except ValueError:
        return None, " and ".join(keys) + (" are numbers" if len(keys) > 1 else " is a number")


def fix_knob(answer, knob=r"TCCL_[A-Z0-9_]+"):
    """The answer's fix=KNOB=VALUE as (KNOB, VALUE), KNOB matching the pattern `knob` in full;
    (None, None) where there is no fix= of that form."""
    m = re.fullmatch(f"({knob})=(\\S+)", answer.get("fix", ""))
    return (m.group(1), m.group(2)) if m else (None, None)


def knob_env(answer, knob=r"TCCL_[A-Z0-9_]+", form="KNOB=VALUE"):
    """fix_env() for a lab fixed by one knob on every rank: ({KNOB: VALUE}, what the grader
    tried), or (None, why not) where the answer has no fix=`form`."""
    key, value = fix_knob(answer, knob)
    if key is None:
        return None, f"no {form} in the answer"
    return {key: value}, f"{key}={value} on every rank"


# ---- the tools, on a run -------------------------------------------------------------------

def frtrace(run, prefix="fr_"):
    """What `tools/frtrace analyze` says of the run's dumps <run.dir>/<prefix><rank>: one
    problem a line, each line starting with what it is about ("collective N ...")."""
    tool = os.path.join(ROOT, "tools", "frtrace")
    return subprocess.run([tool, "analyze", run.dir, "--prefix", prefix], capture_output=True,
                          text=True).stdout


Disagreement = collections.namedtuple("Disagreement", "op calls")


def disagreement(out):
    """frtrace's first "collective N: the ranks disagree: rank(s) [0, 2] called X; rank(s) [1]
    called Y" as Disagreement(op="N", calls=[([1], "Y"), ([0, 2], "X")]): the callers and what
    they called, the smallest group first (stable: frtrace's order among equals); None where
    the ranks agree."""
    m = re.search(r"collective (\d+): the ranks disagree: (.*)", out)
    if not m:
        return None
    calls = [([int(r) for r in ranks.split(",")], call)
             for ranks, call in re.findall(r"rank\(s\) \[([\d, ]+)\] called ([^;]*)", m.group(2))]
    return Disagreement(m.group(1), sorted(calls, key=lambda c: len(c[0])))


def odd_rank_out(found):
    """The rank that stands alone in a disagreement(): the one rank of its smallest group;
    None where nothing disagrees or the smallest group has more than one rank."""
    if found is None or not found.calls or len(found.calls[0][0]) != 1:
        return None
    return found.calls[0][0][0]


def incomplete(out, then=""):
    """frtrace's first "collective N (...) did not complete on rank(s) [...]; <then>" line,
    matched: group 1 is N, the groups of the pattern `then` follow (frtrace goes on with
    "straggler: rank R, ..." or "rank(s) [R] left no dump ..."); None where there is none."""
    return re.search(r"collective (\d+) \(.*\) did not complete on rank\(s\) \[[\d, ]+\]; " + then,
                     out)


def each_rank(run, pattern):
    """The first match of `pattern` in each rank's log, in rank order; None where a rank's log
    has none (the run is not the one the lab expects)."""
    found = [re.search(pattern, log) for log in run.logs]
    return None if None in found else found
