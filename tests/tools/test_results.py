#!/usr/bin/env python3
"""tests/tools/test_results.py: the tests of tools/gpu/results.py (the GPU results page).

What it is: unittest cases run by CTest (tests/tools/CMakeLists.txt). A temporary docs tree
gets one machine kind's logs as tools/gpu/suite.sh leaves them -- machine.txt, tests.txt,
check/summary.txt, peer-copy.txt and nccl-tests logs of two rounds for NCCL and tccl, made
here with known times -- and the page must show exactly those numbers: the worst and best
ratio per collective and where, the per-size table (medians of the rounds), the tests, the
plot, the CUDA-graph runs where they exist. A kind whose comparison did not run (one GPU) says
why; a log without rows drops its collective instead of inventing one.

Invariants: outputs go to a temporary directory that is removed (MPLCONFIGDIR included).
NCCL counterpart: none. Added in: stage 5 (with tools/gpu/suite.sh).
"""

import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "gpu"))
sys.path.insert(0, HERE)

import results  # noqa: E402
from test_trace import PNG_SIGNATURE  # noqa: E402

HEADER = """# nccl-tests version 2.17.6 nccl-headers=22809 nccl-library=22809
# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 128(factor) warmup iters: 5 iters: 20
#
#  Rank  0 Group  0 Pid   1 on host device  0 [0000:00:00] NVIDIA H200
#  Rank  1 Group  0 Pid   2 on host device  1 [0000:00:00] NVIDIA H200
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""


def log_text(rows):
    """An nccl-tests log with rows (size, time_us, busbw)."""
    body = "".join(f"{s:>12} {s // 4:>13}     float     sum      -1 {t:>8.2f} {b:>7.2f} {b:>7.2f}"
                   f"      0 {t:>8.2f} {b:>7.2f} {b:>7.2f}      0\n" for s, t, b in rows)
    return HEADER + body + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.0\n"


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class ResultsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.environ["MPLCONFIGDIR"] = os.path.join(self.tmp.name, "mpl")
        self.docs = os.path.join(self.tmp.name, "docs")
        self.kind = os.path.join(self.docs, "results", "h200x2")
        write(os.path.join(self.kind, "machine.txt"), "machine: 2 x NVIDIA H200\n")
        write(os.path.join(self.kind, "tests.txt"), "PASS     planned      ring_sweep\n"
                                                    "FAIL     LL           ring_sweep\n")
        write(os.path.join(self.kind, "mps-tests.txt"), "PASS np3 p2p_patterns (MPS, 2 GPUs)\n")
        write(os.path.join(self.kind, "check", "summary.txt"), "all_reduce: 120 rows, 0 with #wrong != 0\n")
        write(os.path.join(self.kind, "peer-copy.txt"), "peer copy 0->1, 1 GiB: 393.0 GB/s\n")
        # all_reduce: NCCL 10 us at 8 B, 100 us at 1 MiB; tccl's rounds 12 and 14 us (median
        # 13: ratio 1.30) and 90 and 80 us (median 85: 0.85).
        for r, (t8, t1m) in enumerate([(12.0, 90.0), (14.0, 80.0)], start=1):
            write(os.path.join(self.kind, "compare", f"nccl.all_reduce.{r}.log"),
                  log_text([(0, 1.0, 0.0), (8, 10.0, 0.0), (1 << 20, 100.0, 20.0)]))
            write(os.path.join(self.kind, "compare", f"tccl.all_reduce.{r}.log"),
                  log_text([(0, 3.0, 0.0), (8, t8, 0.0), (1 << 20, t1m, 22.0)]))
        # sendrecv: tccl's log has no rows (the run died): no sendrecv section.
        write(os.path.join(self.kind, "compare", "nccl.sendrecv.1.log"), log_text([(8, 9.0, 0.0)]))
        write(os.path.join(self.kind, "compare", "tccl.sendrecv.1.log"), HEADER)

    def tearDown(self):
        self.tmp.cleanup()

    def page(self):
        self.assertEqual(results.main(["results.py", "--docs", self.docs]), 0)
        with open(os.path.join(self.docs, "results.md")) as f:
            return f.read()

    def test_ratios_tables_and_tests(self):
        text = self.page()
        self.assertIn("## h200x2", text)
        self.assertIn("machine: 2 x NVIDIA H200", text)
        self.assertIn("| all_reduce | 1.30 | 8 B | 0.85 | 1 MiB | 1 of 2 |", text)
        self.assertIn("| 0 B | 1.0 | 3.0 | 3.00 |", text)  # in the table, not in the ratios
        self.assertIn("| 8 B | 10.0 | 13.0 | 1.30 | 0.0 | 0.0 |", text)
        self.assertIn("| 1 MiB | 100.0 | 85.0 | 0.85 | 20.0 | 22.0 |", text)
        self.assertIn("| FAIL | LL | ring_sweep |", text)
        self.assertIn("PASS np3 p2p_patterns (MPS, 2 GPUs)", text)
        self.assertIn("all_reduce: 120 rows, 0 with #wrong != 0", text)
        self.assertIn("393.0 GB/s", text)
        self.assertNotIn("#### sendrecv", text)  # a log without rows is no comparison

    def test_plot(self):
        try:  # in this process (the page is made here, not by a re-run under Debian's python3)
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("no matplotlib for this python3")
        text = self.page()
        self.assertIn("![all_reduce bus bandwidth, h200x2](images/results-h200x2-all_reduce.png)",
                      text)
        with open(os.path.join(self.docs, "images", "results-h200x2-all_reduce.png"), "rb") as f:
            self.assertEqual(f.read(len(PNG_SIGNATURE)), PNG_SIGNATURE)

    def test_graphs(self):
        # nccl-tests -G 10 logs: NCCL 8 us, tccl 12 us at 8 B (1.50); a size only one log has
        # is left out.
        write(os.path.join(self.kind, "graphs", "nccl.all_reduce.G10.log"),
              log_text([(8, 8.0, 0.0), (64, 8.0, 0.0)]))
        write(os.path.join(self.kind, "graphs", "tccl.all_reduce.G10.log"), log_text([(8, 12.0, 0.0)]))
        text = self.page()
        self.assertIn("both captured in CUDA graphs", text)
        self.assertIn("| 8 B | 8.0 | 12.0 | 1.50 |", text)
        self.assertNotIn("| 64 B | 8.0 |", text)
        self.assertNotIn("all_gather, CUDA graphs", text)  # no logs, no section

    def test_no_graphs_no_section(self):
        self.assertNotIn("CUDA graphs", self.page())

    def test_one_gpu_says_why(self):
        one = os.path.join(self.docs, "results", "h200x1")
        write(os.path.join(one, "compare", "NOT-RUN.txt"),
              "one GPU: NCCL refuses two ranks on one GPU, so there is nothing to compare here\n")
        text = self.page()
        self.assertIn("## h200x1", text)
        self.assertIn("NCCL refuses two ranks on one GPU", text)
        self.assertIn("machine.txt missing", text)
        self.assertLess(text.index("## h200x1"), text.index("## h200x2"))  # sorted by kind


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1] + sys.argv[1:])
