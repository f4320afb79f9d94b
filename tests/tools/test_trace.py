#!/usr/bin/env python3
"""tests/tools/test_trace.py: the tests of tools/trace (check, merge, png, summary).

What it is: unittest cases, grouped in classes that CTest runs as separate tests
(tests/tools/CMakeLists.txt: `python3 test_trace.py CheckTest` ...). They run the tool as a
user does (a subprocess: exit status, messages, files) on the sample traces of data/ (written
by make_trace_samples.py: a 3-rank ring all-reduce with one rank on another host, a 2-rank
8 MiB send/recv, and the ring with two injected bugs), and call its functions on small traces
built here for the rules a sample cannot isolate (clock alignment, dropped events, tolerance).

Invariants: the oracle tests must be able to fail: the broken trace is rejected with exactly
its two bugs, and every rule is tested from both sides (accepted / rejected). Outputs go to a
temporary directory that is removed, matplotlib's cache included (MPLCONFIGDIR), so a run
leaves nothing behind. Picture tests exit 77 (CTest: skipped) when no matplotlib is installed.
NCCL counterpart: none. Added in: stage 1 (observability).
"""

import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, TOOLS)

from tracetool import ToolError  # noqa: E402
from tracetool.check import check_run, ranges  # noqa: E402
from tracetool.model import load_run, merged_json  # noqa: E402

TRACE = os.path.join(TOOLS, "trace")
DATA = os.path.join(HERE, "data")
RING3 = sorted(glob.glob(os.path.join(DATA, "ring3", "*.json")))
BROKEN = sorted(glob.glob(os.path.join(DATA, "ring3_broken", "*.json")))
SENDRECV2 = sorted(glob.glob(os.path.join(DATA, "sendrecv2", "*.json")))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RING3_SHIFT = -2871.412  # rank 2's clockOffsetUs, undone by alignment


def have_matplotlib():
    """Can the tool draw? (It runs itself again under Debian's python3 if this one cannot.)"""
    for py in (sys.executable, "/usr/bin/python3"):
        if os.access(py, os.X_OK) and subprocess.run(
                [py, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return True
    return False


class ToolCase(unittest.TestCase):
    """A temporary directory per test class, and the tool as a subprocess."""

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="tccl-tools-test-")
        cls.tmp = cls._tmp.name
        cls.env = dict(os.environ, MPLCONFIGDIR=os.path.join(cls.tmp, "mpl"))

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def tool(self, *args):
        return subprocess.run([sys.executable, "-B", TRACE] + [str(a) for a in args],
                              capture_output=True, text=True, env=self.env, timeout=50)

    def assertUserError(self, r, text):
        """Exit 2, one clear line naming the problem, never a traceback."""
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(text, r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def path(self, name):
        return os.path.join(self.tmp, name)


def trace_file(path, rank, events, nranks=2, host_hash="0xaaaa", offset=0.0, dropped=0,
               comm="0xc0ffee"):
    """Writes a one-rank trace file the way the library does."""
    meta = [{"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}},
            {"ph": "M", "name": "thread_name", "pid": rank, "tid": 1,
             "args": {"name": "fiber 0"}}]
    doc = {"traceEvents": meta + events, "displayTimeUnit": "ns",
           "otherData": {"tccl": {"version": 1, "host": f"h{rank}", "pid": 100 + rank,
                                  "clock": "CLOCK_MONOTONIC", "events": len(events),
                                  "droppedEvents": dropped,
                                  "ranks": [{"pid": rank, "rank": rank, "nranks": nranks,
                                             "comm": comm, "hostHash": host_hash,
                                             "clockOffsetUs": offset}]}}}
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def x(rank, cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": rank, "tid": 1, "ts": ts, "dur": dur,
            "args": args}


def pair(tmp, publish_end, wait_end, rank1_host="0xaaaa", rank1_offset=0.0, steps=(0,),
         waits=None, dropped=0, extra0=()):
    """A 2-rank trace: rank 0 publishes `steps` to rank 1 (ending at publish_end + step), rank
    1 waits for `waits` (default: the same steps; ending at wait_end + step, its clock)."""
    ev0 = [x(0, "prim", "send", 0.0, 500.0, bytes=8, channel=0, sendPeer=1)]
    ev1 = [x(1, "prim", "recv", 0.0, 500.0, bytes=8, channel=0, recvPeer=0)]
    for s in steps:
        ev0.append(x(0, "step", "copy", publish_end + s - 1.0, 1.0, sendStep=s, sendPeer=1,
                     channel=0, bytes=8))
    for s in (steps if waits is None else waits):
        ev1.append(x(1, "step", "wait recv", 0.5, wait_end + s - 0.5, step=s, peer=0, channel=0))
        ev1.append(x(1, "step", "copy", wait_end + s, 1.0, recvStep=s, recvPeer=0, channel=0,
                     bytes=8))
    ev0 += list(extra0)
    a = trace_file(os.path.join(tmp, "t.h0.100"), 0, ev0, dropped=dropped)
    b = trace_file(os.path.join(tmp, "t.h1.101"), 1, ev1, host_hash=rank1_host,
                   offset=rank1_offset)
    return [a, b]


class CheckTest(ToolCase):
    """`check`, the oracle the library's trace tests rely on."""

    def test_ring3_is_complete_and_causal(self):
        r = self.tool("check", "--op", "AllReduce", "--ranks", 3, *RING3)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("3 connection(s) checked, 48 step(s) matched", r.stdout)
        self.assertIn("1 rank(s) moved onto rank 0's clock", r.stdout)
        self.assertIn("0 violation(s): OK", r.stdout)

    def test_sendrecv2_is_complete_and_causal(self):
        r = self.tool("check", "--op", "Send", "--ranks", 2, *SENDRECV2)
        # Rank 1 only receives: --op Send must fail there, and only there.
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("rank 1: no Send op (its ops: Recv)", r.stdout)
        self.assertIn("1 violation(s)", r.stdout)
        r = self.tool("check", "--ranks", 2, *SENDRECV2)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("1 connection(s) checked, 16 step(s) matched", r.stdout)

    def test_broken_trace_is_rejected_with_both_bugs(self):
        r = self.tool("check", "--op", "AllReduce", "--ranks", 3, *BROKEN)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("2 violation(s): FAILED", r.stdout)
        self.assertIn("causality: rank 0 -> rank 1 channel 0 step 5: rank 1's wait recv ended "
                      "at 35.200, 2.500 us before rank 0 published the step at 37.700",
                      " ".join(r.stdout.split()))
        self.assertIn("rank 1 -> rank 2 channel 0: step(s) 11 published by rank 1 but never "
                      "waited for by rank 2", r.stdout)

    def test_alignment_is_what_makes_ring3_causal(self):
        self.assertTrue(check_run(load_run(RING3)).ok)
        rep = check_run(load_run(RING3, align=False))
        self.assertFalse(rep.ok)
        # Rank 2's clock is 2871 us ahead: unaligned, rank 0 sees rank 2's steps "before" them.
        self.assertTrue(all(v.startswith("causality: rank 2 -> rank 0") for v in rep.violations),
                        rep.violations)
        self.assertEqual(len(rep.violations), 16)

    def test_same_host_offset_is_never_applied(self):
        # Rank 1 on rank 0's host with a (noisy) offset of 5 us: applying it would move its
        # wait end (101) to 96, before the publish (100).
        files = pair(self.tmp, publish_end=100.0, wait_end=101.0, rank1_offset=5.0)
        self.assertTrue(check_run(load_run(files)).ok)
        self.assertEqual(self.tool("check", "--ranks", 2, *files).returncode, 0)

    def test_other_host_offset_is_applied(self):
        # Rank 1 on another host, clock 5 us ahead: its 104 is rank 0's 99, before 100.
        files = pair(self.tmp, publish_end=100.0, wait_end=104.0, rank1_host="0xbbbb",
                     rank1_offset=5.0)
        rep = check_run(load_run(files))
        self.assertEqual(len(rep.violations), 1, rep.violations)
        self.assertIn("1.000 us before rank 0 published", rep.violations[0])
        files = pair(self.tmp, publish_end=100.0, wait_end=106.0, rank1_host="0xbbbb",
                     rank1_offset=5.0)
        self.assertTrue(check_run(load_run(files)).ok)

    def test_tolerance_is_a_nanosecond(self):
        ok = pair(self.tmp, publish_end=100.0, wait_end=99.9995)
        self.assertTrue(check_run(load_run(ok)).ok)
        late = pair(self.tmp, publish_end=100.0, wait_end=99.998)
        self.assertEqual(self.tool("check", *late).returncode, 1)

    def test_missing_and_extra_steps(self):
        files = pair(self.tmp, 100.0, 101.0, steps=(0, 1, 2, 3), waits=(0, 1, 3, 4))
        rep = check_run(load_run(files))
        self.assertEqual(sorted(rep.violations), [
            "rank 0 -> rank 1 channel 0: step(s) 2 published by rank 0 but never waited for "
            "by rank 1",
            "rank 0 -> rank 1 channel 0: step(s) 4 waited for by rank 1 but never published "
            "by rank 0"])

    def test_dropped_events_skip_completeness_only(self):
        files = pair(self.tmp, 100.0, 101.0, steps=(0, 1, 2), waits=(1, 2), dropped=3)
        rep = check_run(load_run(files))
        self.assertTrue(rep.ok, rep.violations)
        self.assertTrue(any("dropped events" in n for n in rep.notes), rep.notes)
        # ... but causality is still checked on the steps both ends kept.
        files = pair(self.tmp, 100.0, 98.0, steps=(0, 1, 2), waits=(1, 2), dropped=3)
        self.assertEqual(len(check_run(load_run(files)).violations), 2)

    def test_a_step_published_twice(self):
        dup = [x(0, "step", "copy", 150.0, 1.0, sendStep=0, sendPeer=1, channel=0)]
        files = pair(self.tmp, 100.0, 200.0, extra0=dup)
        rep = check_run(load_run(files))
        self.assertEqual(rep.violations,
                         ["rank 0 -> rank 1 channel 0 step 0: published 2 times by rank 0"])

    def test_missing_rank_and_missing_op(self):
        r = self.tool("check", "--ranks", 3, *RING3[:2])
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank(s) 2 missing", r.stdout)
        r = self.tool("check", "--ranks", 3, "--op", "Broadcast", *RING3)
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 0: no Broadcast op (its ops: AllReduce)", r.stdout)
        # Without --ranks, one file alone is checked as far as it goes, and says so.
        r = self.tool("check", RING3[0])
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("no trace of rank(s) 1-2", " ".join(r.stdout.split()))

    def test_rank_without_prims_or_steps(self):
        a = trace_file(self.path("lonely.0"), 0, [x(0, "op", "AllReduce", 0.0, 5.0, seq=0)],
                       nranks=1)
        r = self.tool("check", "--ranks", 1, a)
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 0: no prim events", r.stdout)
        self.assertIn("rank 0: no step events", r.stdout)

    def test_malformed_event_is_a_violation(self):
        files = pair(self.tmp, 100.0, 101.0,
                     extra0=[{"ph": "X", "cat": "step", "name": "copy", "pid": 0, "tid": 1,
                              "ts": 3.0}])
        r = self.tool("check", *files)
        self.assertEqual(r.returncode, 1)
        self.assertIn("lacks a number ts, a non-negative dur", " ".join(r.stdout.split()))

    def test_bad_input_is_exit_2_without_traceback(self):
        self.assertUserError(self.tool("check", self.path("nope.json")), "no such file")
        with open(RING3[0]) as f:
            text = f.read()
        with open(self.path("cut.json"), "w") as f:
            f.write(text[: len(text) // 2])  # a process that died while writing
        self.assertUserError(self.tool("check", self.path("cut.json")), "not valid JSON")
        with open(self.path("other.json"), "w") as f:
            json.dump({"hello": 1}, f)
        self.assertUserError(self.tool("check", self.path("other.json")), "not a trace file")
        self.assertUserError(self.tool("check", RING3[0], RING3[0]), "the same file twice")
        self.assertUserError(self.tool("check", "--ranks", "0", RING3[0]), "at least 1")
        self.assertUserError(self.tool("check", self.tmp), "is a directory")

    def test_ranges(self):
        self.assertEqual(ranges([5, 0, 1, 2, 7, 8]), "0-2, 5, 7-8")
        self.assertEqual(ranges([]), "")


class MergeTest(ToolCase):
    """`merge`: one file for the whole run, on one clock, accepted by every command."""

    def merged(self, *args):
        out = self.path("merged.json")
        r = self.tool("merge", "-o", out, *args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out) as f:
            return out, json.load(f)

    def test_merged_file_has_every_rank_on_one_clock(self):
        out, doc = self.merged(*RING3)
        tccl = doc["otherData"]["tccl"]
        self.assertTrue(tccl["merged"])
        self.assertEqual([r["rank"] for r in tccl["ranks"]], [0, 1, 2])
        self.assertEqual([r["shiftUs"] for r in tccl["ranks"]], [0.0, 0.0, RING3_SHIFT])
        self.assertEqual(len(tccl["files"]), 3)
        with open(RING3[2]) as f:  # rank 2's own file (nodeB)
            raw = json.load(f)
        first = next(e for e in raw["traceEvents"] if e["ph"] == "X")
        moved = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == 2 and
                 e["name"] == first["name"] and e["args"] == first["args"]]
        self.assertEqual(len(moved), 1)
        self.assertAlmostEqual(moved[0]["ts"], first["ts"] + RING3_SHIFT, places=6)
        names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        self.assertEqual(names[(2, 1)], "fiber 0")
        r = self.tool("check", "--ranks", 3, "--op", "AllReduce", out)
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_merging_a_merged_file_changes_nothing(self):
        out, doc = self.merged(*RING3)
        again = load_run([out])
        self.assertEqual(merged_json(again)["traceEvents"], doc["traceEvents"])

    def test_zero(self):
        out, doc = self.merged("--zero", *RING3)
        ts = [e["ts"] for e in doc["traceEvents"] if e["ph"] != "M"]
        self.assertEqual(min(ts), 0.0)
        # A zeroed file goes back onto the run's clock when read: it mixes with raw files.
        self.assertTrue(check_run(load_run([out])).ok)

    def test_communicators_are_told_apart_by_hash(self):
        # Two processes, each with its first communicator (k = 0) but different ones: the
        # merge numbers them 0 and 1 instead of calling it a clash.
        a = trace_file(self.path("c.a"), 0, [x(0, "op", "AllReduce", 1.0, 2.0, seq=0)],
                       nranks=1, comm="0x1111")
        b = trace_file(self.path("c.b"), 0, [x(0, "op", "Broadcast", 1.0, 2.0, seq=0)],
                       nranks=1, comm="0x2222")
        run = load_run([a, b])
        self.assertEqual(sorted(run.ranks), [0, 1000])
        self.assertEqual({i.comm_id for i in run.ranks.values()}, {"0x1111", "0x2222"})

    def test_bad_output_path(self):
        r = self.tool("merge", "-o", os.path.join(self.tmp, "no", "such", "dir.json"), *RING3)
        self.assertUserError(r, "cannot write")


class PngTest(ToolCase):
    """`png`: the Gantt picture of one operation."""

    @classmethod
    def setUpClass(cls):
        if not have_matplotlib():
            raise unittest.SkipTest("matplotlib is not installed (Debian: python3-matplotlib)")
        super().setUpClass()

    def png(self, name, *args):
        out = self.path(name)
        r = self.tool("png", "-o", out, *args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out, "rb") as f:
            data = f.read()
        return r.stdout, data

    def test_ring_allreduce(self):
        out, data = self.png("ring.png", *RING3)
        self.assertTrue(data.startswith(PNG_SIGNATURE))
        self.assertGreater(len(data), 20000)
        self.assertIn("AllReduce (seq 0) · 3 ranks · 48 KiB · ring", out)
        self.assertIn("12 lanes (3 ranks), 30 data moves", out)

    def test_second_op_with_arrows_and_a_subset_of_ranks(self):
        out, data = self.png("ring1.png", "--op", "AllReduce", "--seq", 1, "--arrows",
                             "--ranks", "0,1", *RING3)
        self.assertTrue(data.startswith(PNG_SIGNATURE))
        self.assertIn("AllReduce (seq 1)", out)
        self.assertIn("8 lanes (2 ranks)", out)
        self.assertIn("8 arrows", out)  # rank 0 -> rank 1: steps 8-15

    def test_sendrecv_pipeline_as_svg(self):
        out, data = self.png("sendrecv.svg", "--title", "8 MiB through 8 slots", *SENDRECV2)
        self.assertIn(b"<svg", data[:2000])
        self.assertIn(b"8 MiB through 8 slots", data)
        self.assertIn("Send + Recv (seq 0) · 2 ranks · 8 MiB", out)
        self.assertIn("32 data moves", out)

    def test_window(self):
        out, data = self.png("window.png", "--window=-10:600", *RING3)
        self.assertIn("610.000 us", out)
        self.assertIn("60 data moves", out)  # both ops fall inside the window

    def test_user_errors(self):
        self.assertUserError(self.tool("png", "-o", self.path("x.png"), "--op", "Broadcast",
                                       *RING3), "ops found: AllReduce seq 0, AllReduce seq 1")
        self.assertUserError(self.tool("png", "-o", self.path("x.txt"), *RING3),
                             "unknown picture format")
        r = self.tool("png", "-o", self.path("x.png"), "--ranks", "zero", *RING3)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a list of ranks", r.stderr)


class SummaryTest(ToolCase):
    def test_summary(self):
        r = self.tool("summary", *RING3)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [line.split() for line in r.stdout.splitlines()[2:]]
        self.assertEqual(len(rows), 6)  # 3 ranks x 2 ops
        self.assertEqual([row[:5] for row in rows[:2]],
                         [["rank", "0", "AllReduce", "0", "49152"],
                          ["rank", "0", "AllReduce", "1", "49152"]])

    def test_help_reads_like_a_manual(self):
        r = self.tool("--help")
        self.assertEqual(r.returncode, 0)
        for word in ("merge", "png", "check", "summary", "wait recv", "Exit status"):
            self.assertIn(word, r.stdout)
        for cmd in ("merge", "png", "check", "summary"):
            self.assertEqual(self.tool(cmd, "--help").returncode, 0)
        self.assertEqual(self.tool().returncode, 2)

    def test_no_files(self):
        self.assertRaises(ToolError, load_run, [])


if __name__ == "__main__":
    # CTest runs one class per test; a picture test without matplotlib is reported as skipped
    # (exit 77, SKIP_RETURN_CODE) rather than as a pass that drew nothing.
    if sys.argv[1:] == ["PngTest"] and not have_matplotlib():
        print("SKIP: matplotlib is not installed (Debian: python3-matplotlib)")
        sys.exit(77)
    unittest.main(verbosity=2)
