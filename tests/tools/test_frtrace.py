#!/usr/bin/env python3
"""tests/tools/test_frtrace.py: the tests of tools/frtrace (analyze, show, to-torch).

What it is: unittest cases that run the tool as a user does (a subprocess: exit status and
report) on flight-recorder dumps built here, one per rule, each from both sides: a run where
every rank made the same calls is reported clean (exit 0), and each planted fault is named --
a rank that never joined collective N, two ranks that called different things at N (op, size,
type, reduction, root), a collective some ranks did not complete and its straggler, a send
without its receive and one received with another size, a rank that left no dump. The real
dumps of a hang are analysed by CTest's s7_frtrace tests (tests/faults).

Invariants: dumps are written in tccl's layout (stage7-faults/src/flight_recorder.cc) to a
temporary directory that is removed. NCCL counterpart: none; PyTorch's
test/distributed/flight_recorder/test_fr_analysis.py, in spirit. Added in: stage 7.
"""

import copy
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
FRTRACE = os.path.join(HERE, "..", "..", "tools", "frtrace")


def entry(rank, rid, coll, p2p, name, n=1000, dtype="Float", out=None, redop="sum", root=-1,
          state="completed", t=0, peer=-1):
    prof = f"nccl:{name}"
    if name in ("send", "recv"):
        prof += f" {rank}->{peer}" if name == "send" else f" {rank}<-{peer}"
    return {"record_id": rid, "pg_id": 0, "process_group": ["0", "tccl"],
            "collective_seq_id": coll, "p2p_seq_id": p2p, "op_id": rid + 1,
            "profiling_name": prof, "is_p2p": peer >= 0, "input_sizes": [[n]],
            "input_dtypes": [dtype], "output_sizes": [[out if out is not None else n]],
            "output_dtypes": [dtype], "state": state, "time_created_ns": t,
            "time_discovered_started_ns": t, "time_discovered_completed_ns": 0,
            "retired": state == "completed", "timeout_ms": 3000, "frames": [],
            "tccl": {"op_count": rid, "root": root, "peer": peer,
                     "redop": redop if peer < 0 and name not in ("broadcast", "all_gather")
                     else None, "on_device": False}}


def dump(rank, nranks, entries):
    ranks = "[" + ", ".join(str(r) for r in range(nranks)) + "]"
    return {"version": "2.10", "rank": rank,
            "pg_config": {"0": {"name": "0", "desc": "tccl", "ranks": ranks}},
            "pg_status": {}, "entries": entries}


def clean_run(nranks=3):
    """Every rank: all-reduce, broadcast from 0, a ring of send/recv, all completed."""
    dumps = {}
    for r in range(nranks):
        dumps[r] = dump(r, nranks, [
            entry(r, 0, 1, 0, "all_reduce", t=100),
            entry(r, 1, 2, 0, "broadcast", n=10, dtype="Int", redop=None, root=0, t=200),
            entry(r, 2, 2, 1, "send", n=24, dtype="Byte", peer=(r + 1) % nranks),
            entry(r, 3, 2, 2, "recv", n=24, dtype="Byte", peer=(r + nranks - 1) % nranks)])
    return dumps


class FrtraceTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_tool(self, dumps, *args, cmd="analyze"):
        for r, d in dumps.items():
            with open(os.path.join(self.tmp.name, f"fr_{r}"), "w") as f:
                json.dump(d, f)
        p = subprocess.run([sys.executable, FRTRACE, cmd, self.tmp.name, *args],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stdout + p.stderr

    def test_clean_run_lines_up(self):
        rc, out = self.run_tool(clean_run())
        self.assertEqual(rc, 0, out)
        self.assertIn("every operation lines up", out)

    def test_rank_that_never_joined(self):
        d = clean_run()
        d[1]["entries"] = d[1]["entries"][:1]  # rank 1 stopped after collective 1
        d[0]["entries"][1]["state"] = "started"
        rc, out = self.run_tool(d)
        self.assertEqual(rc, 1, out)
        self.assertIn("collective 2 (broadcast of 10 x Int (root 0)): rank 1 never joined it "
                      "(its last collective is 1)", out)

    def test_mismatches_name_both_calls(self):
        cases = {  # what rank 2 did differently at collective 1, and how it reads
            "op": (dict(name="all_gather", redop=None), "called all_gather of 1000 x Float"),
            "count": (dict(n=999), "called all_reduce of 999 x Float (sum)"),
            "type": (dict(dtype="Half"), "called all_reduce of 1000 x Half (sum)"),
            "redop": (dict(redop="max"), "called all_reduce of 1000 x Float (max)"),
        }
        for what, (change, words) in cases.items():
            with self.subTest(what=what):
                d = clean_run()
                d[2]["entries"][0] = entry(2, 0, 1, 0, **{"name": "all_reduce", "t": 100,
                                                          **change})
                rc, out = self.run_tool(d)
                self.assertEqual(rc, 1, out)
                self.assertIn("collective 1: the ranks disagree: rank(s) [0, 1] called "
                              "all_reduce of 1000 x Float (sum); rank(s) [2] " + words, out)
        d = clean_run()
        d[1]["entries"][1]["tccl"]["root"] = 1
        rc, out = self.run_tool(d)
        self.assertIn("rank(s) [1] called broadcast of 10 x Int (root 1)", out)

    def test_straggler(self):
        d = clean_run()
        for r in (0, 1):
            d[r]["entries"][0]["state"] = "started"
        d[2]["entries"][0]["time_created_ns"] = 5_000_000_100  # joined 5 s late
        d[2]["entries"][0]["state"] = "started"
        rc, out = self.run_tool(d)
        self.assertEqual(rc, 1, out)
        self.assertIn("collective 1 (all_reduce of 1000 x Float (sum)) did not complete on "
                      "rank(s) [0, 1, 2]; straggler: rank 2, 5000.0 ms after the first", out)

    def test_p2p_unmatched_and_resized(self):
        d = clean_run()
        del d[1]["entries"][3]  # rank 1 never posted its receive from rank 0
        rc, out = self.run_tool(d)
        self.assertEqual(rc, 1, out)
        self.assertIn("rank 0 -> rank 1: message 1 has no matching receive (send 0->1 of 24 bytes)",
                      out)
        d = clean_run()
        d[2]["entries"][3]["output_sizes"] = [[16]]
        rc, out = self.run_tool(d)
        self.assertIn("rank 1 -> rank 2: message 1 sent send 1->2 of 24 bytes, received as recv 2<-1 of",
                      out)

    def test_missing_dump(self):
        d = clean_run()
        del d[2]
        rc, out = self.run_tool(d)
        self.assertEqual(rc, 1, out)
        self.assertIn("no dump from rank(s) [2]", out)

    def test_show_and_to_torch(self):
        rc, out = self.run_tool(clean_run(2), cmd="show")
        self.assertEqual(rc, 0, out)
        self.assertIn("rank 1 record    3 coll    2 p2p    2 completed recv 1<-0 of 24 bytes", out)
        outdir = os.path.join(self.tmp.name, "pkl")
        rc, out = self.run_tool(clean_run(2), outdir, cmd="to-torch")
        self.assertEqual(rc, 0, out)
        with open(os.path.join(outdir, "fr_1"), "rb") as f:
            self.assertEqual(pickle.load(f)["entries"][0]["profiling_name"], "nccl:all_reduce")

    def test_bad_input(self):
        rc, out = self.run_tool({})
        self.assertEqual(rc, 2, out)
        with open(os.path.join(self.tmp.name, "fr_0"), "w") as f:
            f.write("{not json")
        p = subprocess.run([sys.executable, FRTRACE, "analyze", self.tmp.name],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a flight-recorder dump", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
