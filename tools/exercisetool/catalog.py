"""tools/exercisetool/catalog.py: the exercises, one entry each.

What it is: the table `tools/exercise` works from. Each entry names the chapter, the file that
holds the solution region(s), the stub that replaces each region in a learner's copy, the
grading tests and the targets they need. The solution itself lives only in the stage sources,
between the markers (markers.py):

    // >>> exercise 1.1: <title>
    ... the solution ...
    // <<< exercise 1.1

Two kinds (issue #41, "learners write the library"): a "fill in" exercise completes part of a
function whose frame is given (its setup, its loop, its other half); a "piece" builds a whole
unit the chapter teaches, every region being the whole body of a function (the signature and
its header comment stay), from a stub that returns at once with an error: an error status, or,
where the function returns data rather than a status, data that every reader rejects (7.4's
dump is a line of text that is not JSON).

Invariants: ids are "<chapter>.<n>", n counting from 1 in order of difficulty; an exercise has
as many stubs as regions in its file, in file order; every stub prints "not implemented:
exercise X.Y (<title>); see docs/exercises/X.Y.md" and makes the operation fail (an error
status, never a hang or a crash); each stub of a piece returns, and each region of a piece is
a function's whole body (problems() checks both); an exercise's grading tests need no later
exercise of its chapter (the earlier ones they run are listed in `needs`), so a chapter can be
solved in order; grading tests are CTest names in the stage's standalone build, written with
"{p}" for the stage prefix ("s1_"), so an exercise of chapter 1 can also be graded in a later
stage. `tools/exercise verify` proves both directions for every entry.
Adding a chapter's exercises: markers in the stage's sources, entries here (kind="piece" only
where the region is a function's whole body and that function is a unit the chapter teaches),
a page each in docs/exercises/ (and a line in docs/exercises/index.md's table, with its kind,
and in mkdocs.yml's nav).

NCCL counterpart: none. Added in: curriculum (exercises).
"""
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]


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
    kind: str = "fill in"    # fill in | piece (KINDS; the module docstring says which is which)

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
KINDS = ("fill in", "piece")

EXERCISES = [
    # ---- chapter 1: grouped send/recv over sockets ----------------------------------------
    Exercise(
        id="1.1", title="the consumer's wait and size check", level="easy",
        file="src/device/primitives.h", device=True,
        stubs=["return fail(WorkStatus::kAborted);"],
        # The unit test: no sockets, so it does not need 1.3. Fail-fast: on the stub a
        # producer with more than 8 steps would wait for a slot forever (until CTest's 60 s);
        # the first failing case, one element, ends the run instead.
        tests=["{p}test_primitives"],
        targets=["{p}test_primitives"], env={"GTEST_FAIL_FAST": "1"}),
    Exercise(
        id="1.2", title="a group's operations become per-peer lists", level="medium",
        file="src/plan_p2p.cc",
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
        stubs=["(void)r, (void)n;  // remove once the loop uses them\nreturn WorkStatus::kAborted;"],
        tests=["{p}ring_sweep.np2", "{p}ring_sweep.np3"],
        targets=["{p}test_ring_sweep"], gtest_filter="*allgather*"),
    Exercise(
        id="2.2", title="the ring all-reduce steps", level="medium",
        file="src/device/ring.h", device=True,
        stubs=["(void)r, (void)l;  // remove once the steps use them\nreturn WorkStatus::kAborted;"],
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
               "return WorkStatus::kAborted;"],
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
               "st = WorkStatus::kAborted;"],
        # 3 ranks fold (n - p = 1), 4 exchange twice without folding; on the stub every rank's
        # item fails at once, so nobody waits on a peer.
        # (rd_sweep sets TCCL_ALGO=recdoubling itself: a test's ENVIRONMENT wins over ours.)
        tests=["{p}rd_sweep.np3", "{p}rd_sweep.np4"],
        targets=["{p}test_ring_sweep"], gtest_filter="*allreduce*"),
    # ---- chapter 4: the torch.distributed backend -------------------------------------------
    # The backend's tests are CTests of the stage's own build only where a python3 with torch
    # is found (TCCL_WITH_TORCH=AUTO, as tools/exercise configures; CI installs python3-torch):
    # the grading tests launch the ranks as Python processes (tests/torch/launch.py), CPU
    # tensors. On every stub below each rank's first affected call raises RuntimeError at
    # once, so the scripts end and the launcher reports the failed ranks; nothing waits.
    Exercise(
        id="4.1", title="the unique id through the Store", level="easy",
        file="torch/csrc/process_group_tccl.cc",
        stubs=["(void)kUniqueIdKey;  // remove once you use it\n"
               "TCCL_TORCH_CHECK(false, \"tccl: no unique id, so no communicator (exercise "
               "4.1)\");"],
        # Every group's constructor: the default group (env://, file://) and a sub-group,
        # whose Store is the same one under another prefix.
        tests=["{p}torch_errors_usage.np3", "{p}torch_collectives_file.np2"],
        targets=["{p}tccl_torch_ext"]),
    Exercise(
        id="4.2", title="all-to-all with uneven splits", level="medium",
        file="torch/csrc/collectives_tccl.cc",
        stubs=["TCCL_TORCH_CHECK(false, \"tccl: uneven all-to-all is not written yet (exercise "
               "4.2)\");"],
        # test_collectives' uneven case: rank r sends (r + p) % 3 rows to rank p, so some pairs
        # exchange nothing; at 3 ranks and on the sub-group of ranks 0 and 2. The usage test
        # wants the splits' own errors (the stub's message does not name them).
        tests=["{p}torch_collectives_file.np2", "{p}torch_collectives.np3",
               "{p}torch_errors_usage.np2"],
        targets=["{p}tccl_torch_ext"],
        needs=["4.1"]),
    Exercise(
        id="4.3", title="the worker runs a job and settles its Work", level="hard",
        file="torch/csrc/op_queue.cc",
        stubs=["(void)logJob;  // remove once you use it\n"
               "{\n"
               "  std::lock_guard<std::mutex> lock(mutex_);\n"
               "  running_.reset();\n"
               "}\n"
               "e.work->fail(std::make_exception_ptr(std::runtime_error(\n"
               "    \"tccl: the worker does not run jobs yet (exercise 4.3)\")));"],
        # The stub fails every job (outside the lock, as the rule says) without running it.
        # Async Works, futures and then() (collectives), DDP's bucket futures, a dead peer
        # (its error fails what was queued and the group refuses new work) and a silent one
        # (the watchdog times the running job).
        tests=["{p}torch_collectives_file.np2", "{p}torch_ddp.np2",
               "{p}torch_errors_rank_dies.np3", "{p}torch_errors_timeout.np2"],
        targets=["{p}tccl_torch_ext"],
        needs=["4.1", "4.2"]),
    # ---- chapter 5: SHM, the cost model's protocol, the kept plan ---------------------------
    Exercise(
        id="5.1", title="the cheapest algorithm and protocol", level="easy",
        file="src/tuning.cc",
        stubs=["(void)allowed, (void)allowedProto;  // remove once you use them\n"
               "return -1;"],
        # A unit test compiled from the stage's tuning.cc: no MPI, no communication. The stub
        # chooses nothing (as TCCL_ALGO/TCCL_PROTO leaving nothing would): every collective of
        # the stage fails with tcclInvalidUsage, so 5.2's and 5.3's tests need this one.
        tests=["{p}proto_choice"],
        targets=["{p}test_proto_choice"],
        gtest_filter="CostModel.*"),
    Exercise(
        id="5.2", title="reusing the kept plan", level="medium",
        file="src/plan_cache.cc",
        stubs=["(void)cache, (void)t;  // remove once you use them\nreturn false;",
               "(void)sameShape;  // remove once you use it\n"
               "*result = tcclInternalError;\n"
               "return true;"],
        # On the stub the first call of each run plans and keeps its plan, the next one fails
        # on every rank (allRanksOk agrees before the next call). SHM is disabled so that the
        # ranks connect over sockets, without 5.3's descriptor passing.
        tests=["{p}plan_cache.np1", "{p}plan_cache.np2", "{p}plan_cache.np3"],
        targets=["{p}test_plan_cache"],
        env={"TCCL_SHM_DISABLE": "1"},
        needs=["5.1"]),
    Exercise(
        id="5.3", title="a descriptor travels over a Unix socket", level="hard",
        file="src/transport/shm/shm_segment.cc", kind="piece",  # fdSend and fdAccept, whole
        stubs=["(void)socketPeerPid;  // remove once you use it\n"
               "*peerPid = 0;\n"
               "return tcclInternalError;",
               "*fdOut = -1;\n"
               "*peerPid = 0;\n"
               "return tcclInternalError;"],
        # The segment tests (one process: a descriptor to ourselves, one without a descriptor,
        # a peer that never sends) and a communicator over SHM at 2 and 3 ranks. On the stub
        # every rank's send connect fails in phase 3, before any receive side would wait.
        tests=["{p}shm.np2", "{p}shm.np3"],
        targets=["{p}test_shm"],
        needs=["5.1"]),  # the communicator's all-reduce chooses its algorithm
    # ---- chapter 6: the net interface and the verbs Net -------------------------------------
    Exercise(
        id="6.1", title="TCCL_IB_HCA picks the ports", level="easy",
        file="src/transport/net/ib/ib_device.cc",
        stubs=["(void)name, (void)port;  // remove once you use them\n"
               "return false;  // no port selected: the IB Net finds no device"],
        # The syntax's unit test (prefix, "=" exact, ":port", "^" exclusion), no device. The
        # region follows the empty-spec case, so 6.2's tests (TCCL_IB_HCA unset) never reach it.
        tests=["{p}net_ib"],
        targets=["{p}test_net_ib"],
        gtest_filter="NetIbMetadata.HcaSelection"),
    Exercise(
        id="6.2", title="the sender reads its ready-to-receive entry", level="medium",
        file="src/transport/net/ib/net_ib.cc",
        stubs=["(void)e, (void)k, (void)size, (void)ready, (void)bytes;  // remove once used\n"
               "return tcclInternalError;"],
        # The verbs Net against the fake verbs device (tests/net): no MPI, no RDMA hardware.
        # On the stub every isend fails at once; the flow-control, size and 32-in-flight tests
        # fail, and nothing waits.
        tests=["{p}net_ib"],
        targets=["{p}test_net_ib"],
        gtest_filter="NetIbData.*:NetIbQp.*"),
    Exercise(
        id="6.3", title="the receive side posts and publishes steps", level="hard",
        file="src/transport/net/net_transport.cc",
        stubs=["__atomic_store_n(&fifo->closed, 1u, __ATOMIC_RELEASE);  // once per connection\n"
               "(void)comm, (void)r, (void)didWork, (void)receiveDestination;  // remove once "
               "used\n"
               "return tcclInternalError;"],
        # The network transport over NET/Socket (SHM disabled, direct mode on host buffers):
        # ring and tree collectives at 3 ranks (many FIFO wraps), large P2P messages at 2.
        # Every rank receives in the first collective, so on the stub every rank's
        # communicator fails there, and every later call is refused at once (the stub closes
        # the FIFO: the consumer fails at once, the proxy reports once per connection).
        # Not p2p_patterns_socket: a pattern that leaves a rank out (pairs at 3 ranks) fails
        # the others' communicators only, and the next pattern's lazy connection setup then
        # waits on that rank for good. Not net_fake_ib: the IB Net and the socket Net both
        # define tccl::NetSendComm and its siblings (an ODR violation); at verify's -Og the
        # linker keeps one std::make_unique<NetSendComm> for both, and the IB connect crashes.
        # TCCL_IB_DISABLE=1: NET/Socket on a machine with an HCA too (not 6.2's code).
        tests=["{p}ring_sweep_socket.np3", "{p}tree_sweep_socket.np3", "{p}p2p_large_socket.np2"],
        targets=["{p}test_ring_sweep", "{p}test_p2p_large"],
        env={"TCCL_IB_DISABLE": "1"}),
    # ---- chapter 7: failing well ------------------------------------------------------------
    Exercise(
        id="7.1", title="the first collective that differs, in words", level="easy",
        file="src/check_mode.cc",
        stubs=["(void)firstSeq, (void)describe;  // remove once you use them\n"
               "return tcclInternalError;"],
        # TCCL_CHECK_MODE=1 comes with the CTests. Every rank reaches its verdict from the same
        # gathered lists, so on the stub every rank's mismatched call fails (nobody waits);
        # matching calls never reach the region and still run.
        tests=["{p}check_mode.np2", "{p}check_mode.np3"],
        targets=["{p}test_check_mode"]),
    Exercise(
        id="7.2", title="a shrink talks to the survivors only", level="medium",
        file="src/comm_split.cc", kind="piece",  # shrinkWork, whole
        stubs=["(void)parent, (void)survivors, (void)abortFirst, (void)child, "
               "(void)kShrinkTagBase;  // remove once you use them\n"
               "return tcclInternalError;"],
        # Revoke: every rank shrinks the revoked communicator, excluding nobody; FaultInject's
        # kill: rank 1 of 3 dies (a forked process), ranks 0 and 2 shrink with
        # TCCL_SHRINK_ABORT into ranks 0 and 1 and all-reduce. Every caller fails on the stub.
        # Not Lifecycle.Shrink: its excluded rank waits at an MPI barrier that the others,
        # leaving at a failed assertion, never reach.
        tests=["{p}lifecycle.np2", "{p}lifecycle.np3", "{p}fault_inject"],
        targets=["{p}test_lifecycle", "{p}test_fault_inject"],
        gtest_filter="Lifecycle.Revoke:FaultInject.KillOneRankSurvivorsShrinkAndGoOn"),
    Exercise(
        id="7.3", title="the non-blocking job's thread", level="hard",
        file="src/async_job.cc",
        stubs=["releaseAll(comms);  // the uses acquireAll took\n"
               "return tcclInternalError;"],
        # Only the non-blocking half of jobRun: blocking calls (every other exercise's tests)
        # run on the caller's thread, above the region. On the stub a non-blocking init
        # fails at once on every rank.
        tests=["{p}lifecycle.np2", "{p}lifecycle.np3"],
        targets=["{p}test_lifecycle"],
        gtest_filter="Lifecycle.NonBlocking:Lifecycle.RevokeStuckJob"),
    Exercise(
        # "hard", not "medium": levels never drop within a chapter, and 7.3 is hard. (A JSON
        # writer is no protocol, but some twenty keys whose names, order and spacing the tests
        # and both analyzers read to the character make it an hour's work.)
        id="7.4", title="the flight recorder's dump", level="hard",
        file="src/flight_recorder.cc", kind="piece",  # FlightRecorder::toJson, whole
        stubs=["(void)torchDtypeName, (void)redopName, (void)quoted;  // remove once you use them\n"
               "return \"not implemented: exercise 7.4 (the flight recorder's dump)\\n\";"
               "  // not JSON"],
        # toJson returns the text, not a status: frDump writes whatever it gets, and
        # tcclCommDumpFlightRecorder still returns tcclSuccess. So the stub's dump is a line that
        # is no JSON at all, and every reader fails at once: the tests' counts of PyTorch's keys
        # (flight_recorder.np1-3, the SIGUSR1 dump, the watchdog's), and tools/frtrace, which
        # exits 2 on it ("not a flight-recorder dump"): in frtrace.np2/3 (CTest runs them only
        # once the watchdog test that leaves their dumps passes: on the stub it reports them
        # "Not Run") and in FaultInject.StallIsNamedTheStraggler, the one test that reads
        # time_created_ns. Not an empty string: SignalDumps would wait 5 s for a non-empty file.
        # No earlier exercise is needed: blocking communicators, no check mode, no shrink. The
        # filter reaches fault_inject only: the other programs get theirs on the command line.
        tests=["{p}flight_recorder.np1", "{p}flight_recorder.np2", "{p}flight_recorder.np3",
               "{p}flight_recorder_signal.np2", "{p}watchdog.np2", "{p}watchdog.np3",
               "{p}frtrace.np2", "{p}frtrace.np3", "{p}fault_inject"],
        targets=["{p}test_flight_recorder", "{p}test_fault_inject"],
        gtest_filter="FaultInject.StallIsNamedTheStraggler"),
]


def find(ex_id: str) -> Exercise:
    for e in EXERCISES:
        if e.id == ex_id:
            return e
    raise KeyError(ex_id)


# A stub that returns: a return statement with a value (an error status, or data that fails),
# outside comments.
RETURNS = re.compile(r"(^|[;{}\s])return\s+[^;\s][^;]*;")


def code_of(stub: str) -> str:
    """The stub without its // comments (a "//" inside a string literal stays)."""
    out = []
    for line in stub.split("\n"):
        quote, i = None, 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif line.startswith("//", i):
                line = line[:i]
                break
            i += 1
        out.append(line)
    return "\n".join(out)


def whole_bodies(text: str, ex_id: str) -> List[int]:
    """The 1-based lines of exercise ex_id's begin markers whose region is not a function's
    whole body: the line before the begin marker must open the body (end with "{") and the
    line after the end marker close it ("}")."""
    from . import markers  # (markers needs nothing of the catalog's module)
    lines = text.split("\n")
    bad = []
    for rid, _title, _indent, b, e in markers.regions(text):
        if rid != ex_id:
            continue
        before = lines[b - 1].split("//")[0].rstrip() if b > 0 else ""
        after = lines[e + 1].strip() if e + 1 < len(lines) else ""
        if not before.endswith("{") or after != "}":
            bad.append(b + 1)
    return bad


def stage_dir(chapter: int, root: Path) -> Optional[Path]:
    """The stage directory of a chapter in root (stage3-tree for 3), or None."""
    found = sorted(d for d in root.glob(f"stage{chapter}-*") if (d / "CMakeLists.txt").is_file())
    return found[0] if found else None


def problems(exercises: Optional[List[Exercise]] = None, root: Optional[Path] = ROOT) -> List[str]:
    """What breaks the table's invariants (module docstring): ids per chapter counting 1, 2,
    ... in table order, levels that never drop (easy before medium before hard), known levels
    and kinds, and pieces whose every stub returns and whose every region is a function's
    whole body (read from root's stage sources: a stage that root lacks, as a learner's copy
    lacks all but one, is not read; root None reads no source)."""
    exercises = EXERCISES if exercises is None else exercises
    out = []
    by: Dict[int, List[Exercise]] = {}
    for e in exercises:
        by.setdefault(e.chapter, []).append(e)
        if e.level not in LEVELS:
            out.append(f"{e.id}: level {e.level!r} is not one of {', '.join(LEVELS)}")
        if e.kind not in KINDS:
            out.append(f"{e.id}: kind {e.kind!r} is not one of {', '.join(KINDS)}")
        if e.kind != "piece":
            continue
        for i, s in enumerate(e.stubs, start=1):
            if not RETURNS.search(code_of(s)):
                out.append(f"{e.id}: a piece's stub must return (an error, or data that "
                           f"fails), and stub {i} does not: {s!r}")
        sdir = stage_dir(e.chapter, root) if root is not None else None
        if sdir is None:
            continue
        path = sdir / e.file
        if not path.is_file():
            out.append(f"{e.id}: {path.relative_to(root)} does not exist")
            continue
        for line in whole_bodies(path.read_text(), e.id):
            out.append(f"{e.id}: {path.relative_to(root)}:{line}: a piece's region must be a "
                       f"function's whole body (the line before it ending in '{{', the line "
                       f"after it '}}')")
    for ch, exs in sorted(by.items()):
        for n, e in enumerate(exs, start=1):
            if e.id != f"{ch}.{n}":
                out.append(f"{e.id}: expected id {ch}.{n} (ids count from 1 in table order)")
        for a, b in zip(exs, exs[1:]):
            ranks = [LEVELS.index(x.level) if x.level in LEVELS else -1 for x in (a, b)]
            if -1 not in ranks and ranks[1] < ranks[0]:
                out.append(f"{b.id} ({b.level}) comes after {a.id} ({a.level}): "
                           "exercises go in order of difficulty")
    return out

