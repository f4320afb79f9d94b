"""tools/exercisetool/catalog.py: the exercises, one entry each.

What it is: the table `tools/exercise` works from. Each entry names the chapter, the file that
holds the solution region(s), the stub that replaces each region in a learner's copy, the
grading tests and the targets they need. The solution itself lives only in the stage sources,
between the markers (markers.py):

    // >>> exercise 1.1: <title>
    ... the solution ...
    // <<< exercise 1.1

Invariants: ids are "<chapter>.<n>", n counting from 1 in order of difficulty; an exercise has
as many stubs as regions in its file, in file order; every stub prints "not implemented:
exercise X.Y (<title>); see docs/exercises/X.Y.md" and makes the operation fail (an error
status, never a hang or a crash); an exercise's grading tests need no later exercise of its
chapter (the earlier ones they run are listed in `needs`), so a chapter can be solved in
order; grading tests are CTest names in the stage's standalone build, written with "{p}" for
the stage prefix ("s1_"), so an exercise of chapter 1 can also be graded in a later stage.
`tools/exercise verify` proves both directions for every entry.
Adding a chapter's exercises: markers in the stage's sources, entries here, a page each in
docs/exercises/ (and a line in docs/exercises/index.md and mkdocs.yml's nav).

NCCL counterpart: none. Added in: curriculum (exercises).
"""
from dataclasses import dataclass, field
from typing import Dict, List


@dataclass
class Exercise:
    id: str                  # "1.2": chapter 1, exercise 2
    title: str               # as in the begin marker
    level: str               # easy | medium | hard
    file: str                # relative to the stage directory
    stubs: List[str]         # one per region: the failing statement(s), after the message
    tests: List[str]         # CTest names, "{p}" = stage prefix ("s1_")
    targets: List[str]       # build targets grading needs, "{p}" = stage prefix
    device: bool = False     # region is __host__ __device__ code: message with printf
    gtest_filter: str = ""   # GTEST_FILTER for the grading tests (GoogleTest reads it)
    env: Dict[str, str] = field(default_factory=dict)  # more environment for the tests
    needs: List[str] = field(default_factory=list)  # exercises the grading tests also run
    page: str = field(default="")

    @property
    def chapter(self) -> int:
        return int(self.id.split(".")[0])

    def test_env(self) -> Dict[str, str]:
        """What grading adds to the tests' environment (CTest passes it on to mpirun's ranks;
        a test's own ENVIRONMENT property would win, and none sets these)."""
        env = dict(self.env)
        if self.gtest_filter:
            env["GTEST_FILTER"] = self.gtest_filter
        return env

    def page_path(self) -> str:
        return self.page or f"docs/exercises/{self.id}.md"

    def message(self) -> str:
        return f"not implemented: exercise {self.id} ({self.title}); see {self.page_path()}"


LEVELS = ("easy", "medium", "hard")

EXERCISES = [
    # ---- chapter 1: grouped send/recv over sockets ----------------------------------------
    Exercise(
        id="1.1", title="the consumer's wait and size check", level="easy",
        file="src/device/primitives.h", device=True,
        stubs=["return fail(kWorkAborted);"],
        # The unit test: no sockets, so it does not need 1.3. Fail-fast: on the stub a
        # producer with more than 8 steps would wait for a slot forever (until CTest's 60 s);
        # the first failing case, one element, ends the run instead.
        tests=["{p}test_primitives"],
        targets=["{p}test_primitives"], env={"GTEST_FAIL_FAST": "1"}),
    Exercise(
        id="1.2", title="a group's operations become per-peer lists", level="medium",
        file="src/group_launch.cc",
        stubs=["return tcclInternalError;"],
        # One rank: every operation is with oneself, so no byte crosses a socket and 1.1 and
        # 1.3 are not needed. The lists for other peers are graded again by 1.3's tests.
        tests=["{p}p2p_patterns.np1", "{p}p2p_group.np1"],
        targets=["{p}test_p2p_patterns", "{p}test_p2p_group"]),
    Exercise(
        id="1.3", title="the socket proxy receives a step", level="hard",
        file="src/transport/socket/socket_transport.cc",
        stubs=["__atomic_store_n(&fifo->closed, 1u, __ATOMIC_RELEASE);  // once per connection\n"
               "return tcclInternalError;"],
        # Three sockets per connection and small socket buffers (as p2p_patterns_multisock):
        # steps split over sockets and arrive in many partial reads.
        tests=["{p}p2p_patterns.np2", "{p}p2p_group.np2"],
        targets=["{p}test_p2p_patterns", "{p}test_p2p_group"],
        env={"TCCL_NSOCKS_PERCONN": "3", "TCCL_SOCKET_BUFFER": "4096"},
        needs=["1.1", "1.2"]),
    # ---- chapter 2: ring collectives ------------------------------------------------------
    Exercise(
        id="2.1", title="the ring all-gather loop", level="easy",
        file="src/device/ring.h", device=True,
        stubs=["(void)r, (void)n;  // remove once the loop uses them\nreturn kWorkAborted;"],
        tests=["{p}ring_sweep.np2", "{p}ring_sweep.np3"],
        targets=["{p}test_ring_sweep"], gtest_filter="*allgather*"),
    Exercise(
        id="2.2", title="the ring all-reduce steps", level="medium",
        file="src/device/ring.h", device=True,
        stubs=["(void)r, (void)l;  // remove once the steps use them\nreturn kWorkAborted;"],
        tests=["{p}ring_sweep.np2", "{p}ring_sweep.np3", "{p}ring_sweep_smallfifo.np3"],
        targets=["{p}test_ring_sweep"], gtest_filter="*allreduce*"),
    Exercise(
        id="2.3", title="tcclAvg and premulsum as device ops", level="hard",
        file="src/red_op.cc",
        stubs=["(void)isFloatType, (void)valueBits;  // remove once you use them\n"
               "return tcclInternalError;",
               "return tcclInternalError;"],
        tests=["{p}ring_redop.np1", "{p}ring_redop.np2", "{p}ring_redop.np3"],
        targets=["{p}test_ring_redop"],
        needs=["2.2"]),  # its tests reduce with tcclAllReduce
    # ---- chapter 3: trees, recursive doubling and algorithm selection ---------------------
    Exercise(
        id="3.1", title="a node's parent and children", level="easy",
        file="src/trees.cc",
        stubs=["(void)bit;  // remove once you use it"],
        # The stub leaves every rank but 0 a lone root. The grading test is a unit test of the
        # shapes (no MPI, no collective): it checks every tree for n = 1..64 and fails at once.
        tests=["{p}tree_shapes"],
        targets=["{p}test_tree_shapes"]),
    Exercise(
        id="3.2", title="the tree's up half", level="medium",
        file="src/device/tree.h", device=True,
        stubs=["(void)leaf, (void)root, (void)s, (void)in, (void)out;  // remove once you use them\n"
               "return kWorkAborted;"],
        # Reduce on the tree runs the up half alone, so the stub fails without hanging
        # (all-reduce's down half would wait for results that never come). 3 and 5 ranks:
        # inner nodes with one child and with two, every root.
        # tree_rooted_sweep runs Broadcast and Reduce with TCCL_ALGO=tree (its own command line
        # and environment, which win over a grading filter): Broadcast passes, Reduce fails.
        tests=["{p}tree_rooted_sweep.np3", "{p}tree_rooted_sweep.np5"],
        targets=["{p}test_ring_sweep"],
        needs=["3.1"]),  # the rooted trees are binaryTree relabelled
    Exercise(
        id="3.3", title="recursive doubling", level="hard",
        file="src/device/rec_doubling.h", device=True,
        stubs=["(void)c, (void)r, (void)p, (void)extra, (void)steps, (void)be, (void)in, (void)out,"
               " (void)fn;  // remove once you use them\n"
               "st = kWorkAborted;"],
        # 3 ranks fold (n - p = 1), 4 exchange twice without folding; on the stub every rank's
        # item fails at once, so nobody waits on a peer.
        # (rd_sweep sets TCCL_ALGO=recdoubling itself: a test's ENVIRONMENT wins over ours.)
        tests=["{p}rd_sweep.np3", "{p}rd_sweep.np4"],
        targets=["{p}test_ring_sweep"], gtest_filter="*allreduce*"),
    # ---- chapter 6: the net interface and the verbs Net -------------------------------------
    Exercise(
        id="6.1", title="the sender reads its ready-to-receive entry", level="medium",
        file="src/transport/net/ib/net_ib.cc",
        stubs=["(void)e, (void)k, (void)size, (void)ready, (void)bytes;  // remove once used\n"
               "return tcclInternalError;"],
        # The verbs Net against the fake verbs device (tests/net): no MPI, no RDMA hardware.
        # On the stub every isend fails at once; the flow-control, size and 32-in-flight tests
        # fail, and nothing waits.
        tests=["{p}net_ib"],
        targets=["{p}test_net_ib"],
        gtest_filter="NetIbData.*:NetIbQp.*"),
]


def find(ex_id: str) -> Exercise:
    for e in EXERCISES:
        if e.id == ex_id:
            return e
    raise KeyError(ex_id)
