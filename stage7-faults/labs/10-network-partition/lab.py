"""Lab 10, a network partition: metadata, instance and grader for tools/lab.

The ranks run on two "nodes" -- two network namespaces joined by one veth pair, built per run
by netns-wrap.sh (WRAP) -- and lab.cc takes the link down before one operation. instance()
makes the same seeded choices as the program (pick() is tools/lab's, the same function as
lab::pick); rank_env() places the ranks on the nodes.
"""
import os
import re

from labtools import each_rank, frtrace, incomplete, numbers

HERE = os.path.dirname(os.path.abspath(__file__))

TITLE = "A network partition: the link between two nodes goes down"
MIRRORS = ("NCCL jobs that hang after a switch failure or a link flap (\"NET/Socket : ... "
           "Connection timed out\"); PyTorch watchdog timeouts on every rank of a multi-node job")
CPU = True  # but root: netns-wrap.sh builds network namespaces (it says so when it cannot)
RANKS = 4
STEPS = 6  # lab.cc's kSteps: two operations per step
ENV = {
    "TCCL_TIMEOUT": "3",
    # Two nodes: every byte between ranks goes over NET/Socket, also inside a node.
    "TCCL_SHM_DISABLE": "1",
    "TCCL_P2P_DISABLE": "1",
    # What a user turns on first: who is where, and who talks to whom.
    "TCCL_DEBUG": "INFO",
    "TCCL_DEBUG_SUBSYS": "INIT,NET",
}
WRAP = ["bash", os.path.join(HERE, "netns-wrap.sh")]
TIMEOUT = 30
ANSWER = "op=N side=0,R"
SYMPTOM = r"watchdog: .* has not completed after"


def subnet(seed):
    return 10 + pick(seed, 3, 200)


def instance(seed):
    partner = 1 + pick(seed, 0, RANKS - 1)  # the rank on rank 0's node
    return {"op": 3 + pick(seed, 2, 2 * STEPS - 2), "side": [0, partner],
            "cutter": pick(seed, 1, RANKS)}


def node(seed, rank):
    return 0 if rank in instance(seed)["side"] else 1


def rank_env(seed, rank, fix):
    """Each rank's node (netns-wrap.sh's LAB_NODE), the seed's subnet, and rank 0's node's
    address as MASTER_ADDR: the bootstrap root lives there."""
    n, s = node(seed, rank), subnet(seed)
    return {"LAB_NODE": str(n), "LAB_SUBNET": str(s), "MASTER_ADDR": f"10.77.{s}.1",
            "TCCL_HOSTID": f"lab10-node{n}"}


def ranks_of(text):
    """'0,3' (or '[0, 3]', '0 3') as a set of ranks."""
    return {int(x) for x in re.findall(r"\d+", text)}


def grade(inst, answer):
    got, why = numbers(answer, ("op",),
                       "answer with op=N (the operation the partition stopped, counted from 1 as "
                       "collective_seq_id does) and side=R,R (the ranks on rank 0's side)",
                       also=("side",))
    if got is None:
        return False, why
    op = got["op"]
    side = ranks_of(answer["side"]) | {0}  # rank 0 is on its own side; naming it is optional
    if op != inst["op"]:
        return False, "not that operation: which is the first one that not every rank completed?"
    if side != set(inst["side"]):
        return False, "right operation, wrong sides: which ranks share rank 0's address, and " \
                      "which talk to it across the link?"
    return True, f"the link between the nodes went down before operation {op}; ranks " \
                 f"{sorted(inst['side'])} were on one side, the others on the other"


def diagnose(run):
    """What the lab's tools say, as an answer: tools/frtrace names the first collective that
    no rank completed; each rank's INIT line ("using interface ... address A") names its
    node's address, and the ranks with rank 0's address are its side."""
    m = incomplete(frtrace(run))
    found = each_rank(run, r"using interface \S+ address ([\d.]+)")
    if not m or found is None:
        return None
    addrs = [a.group(1) for a in found]
    side = [r for r, a in enumerate(addrs) if a == addrs[0]]
    return {"op": m.group(1), "side": ",".join(map(str, side))}


def wrong(inst):
    other = next(r for r in range(1, RANKS) if r not in inst["side"])
    return {"op": str(inst["op"]), "side": f"0,{other}"}
