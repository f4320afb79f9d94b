#!/usr/bin/env python3
"""tests/tools/test_plot.py: the tests of tools/plot and of its table reader.

What it is: unittest cases run by CTest one class per test (tests/tools/CMakeLists.txt).
ReaderTest reads the checked-in outputs of data/bench/ (an excerpt of the project's nccl-tests
baseline on 4 x H200, tccl_perf and tccl_mpi_perf runs on the 2-core development VM, a
compare_mpi.sh table, and a tccl_perf run that died before its first row) and checks the
numbers it gets against the files; PlotTest draws them as a user does (PNG and SVG) and checks
the exit status and messages of the mistakes a user makes.

Invariants: outputs go to a temporary directory that is removed (MPLCONFIGDIR included);
PlotTest exits 77 (CTest: skipped) when no matplotlib is installed.
NCCL counterpart: none. Added in: stage 1 (observability).
"""

import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, TOOLS)
sys.path.insert(0, HERE)

from test_trace import PNG_SIGNATURE, ToolCase, have_matplotlib  # noqa: E402
from tracetool import ToolError  # noqa: E402
from tracetool.bench import parse_file, parse_size, pick_section, series  # noqa: E402
from tracetool.mpl import size_label, size_ticks  # noqa: E402

PLOT = os.path.join(TOOLS, "plot")
BENCH = os.path.join(HERE, "data", "bench")
NCCL = os.path.join(BENCH, "nccl-tests-h200x4.log")
TCCL_AR = os.path.join(BENCH, "tccl_perf-allreduce-np4.txt")
TCCL_SR = os.path.join(BENCH, "tccl_perf-sendrecv-np2.txt")
MPI_AR = os.path.join(BENCH, "tccl_mpi_perf-allreduce-np4.txt")
COMPARE = os.path.join(BENCH, "compare_mpi-sendrecv.txt")
NO_ROWS = os.path.join(BENCH, "no-rows-tccl_perf.txt")


class ReaderTest(unittest.TestCase):
    def test_nccl_tests_sections(self):
        secs = parse_file(NCCL)
        self.assertEqual([s.name for s in secs], ["np=2 sendrecv", "np=4 all_reduce",
                                                  "np=4 sendrecv"])
        ar = secs[1]
        self.assertEqual((ar.kind, ar.op, ar.nranks, len(ar.rows)), ("nccl-tests", "all_reduce",
                                                                     4, 15))
        last = ar.rows[-1]  # the last row of "np=4 all_reduce": 2 GiB at 360.2 GB/s
        self.assertEqual(last["size"], 2147483648)
        self.assertEqual(last["oop"]["busbw"], 360.2)
        self.assertIsNotNone(last["ip"])

    def test_tccl_perf_and_mpi_perf(self):
        (sec,) = parse_file(TCCL_AR)
        self.assertEqual((sec.kind, sec.op, sec.nranks, len(sec.rows)),
                         ("tccl_perf", "allreduce", 4, 12))
        self.assertEqual(sec.rows[-1]["oop"], {"time": 85825.68, "algbw": 0.39, "busbw": 0.59})
        (sec,) = parse_file(TCCL_SR)
        self.assertIsNone(sec.rows[0]["ip"])  # N/A: sendrecv has no in-place form
        (sec,) = parse_file(MPI_AR)
        self.assertEqual((sec.kind, sec.op, sec.nranks), ("tccl_mpi_perf", "allreduce", 4))

    def test_compare_table(self):
        (sec,) = parse_file(COMPARE)
        self.assertEqual((sec.kind, sec.op, sec.nranks), ("compare_mpi", "sendrecv", 2))
        self.assertEqual([r["size"] for r in sec.rows], [64 << 10, 1 << 20, 4 << 20])
        lines = series(sec, "cmp", "busbw")
        self.assertEqual([name for name, _ in lines], ["cmp: tccl", "cmp: MPI"])
        self.assertEqual(lines[1][1][0], (65536, 0.81))
        self.assertRaises(ToolError, series, sec, "cmp", "algbw")

    def test_nccl_tests_own_header(self):
        # nccl-tests as it prints itself (no "===" lines), twice in one file, with an mpirun
        # warning in between: two sections, ranks counted from the "# Rank" lines.
        with open(NCCL) as f:
            rows = [line for line in f if line.startswith("   ")][15:18]  # np=4 all_reduce
        text = ""
        for name in ("all_reduce_perf", "all_gather_perf"):
            text += ("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 4(factor) "
                     "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n"
                     "# Using devices\n")
            text += "".join(f"#  Rank {r:2d} Group  0 Pid  {4000 + r} on  gpu1 device {r:2d} "
                            f"[0x{r}8] NVIDIA H200\n" for r in range(4))
            text += "--------------------------------------------------------------------\n"
            text += "".join(rows)
            text += f"# Avg bus bandwidth    : 1.0\n#\n# Collective test concluded: {name}\n"
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write(text)
        try:
            secs = parse_file(f.name)
        finally:
            os.unlink(f.name)
        self.assertEqual([(s.op, s.nranks, len(s.rows)) for s in secs],
                         [("all_reduce_perf", 4, 3), ("all_gather_perf", 4, 3)])

    def test_no_rows(self):
        self.assertEqual(parse_file(NO_ROWS), [])
        with self.assertRaises(ToolError) as e:
            pick_section(NO_ROWS, [], None)
        self.assertIn("no data rows", str(e.exception))

    def test_pick_section(self):
        secs = parse_file(NCCL)
        self.assertEqual(pick_section(NCCL, secs, "all_reduce").name, "np=4 all_reduce")
        self.assertEqual(pick_section(NCCL, secs, "np=2").name, "np=2 sendrecv")
        for pattern, why in ((None, "holds 3 runs"), ("sendrecv", "matches 2 runs"),
                             ("broadcast", "no run matches"), ("(", "not a regular")):
            with self.assertRaises(ToolError) as e:
                pick_section(NCCL, secs, pattern)
            self.assertIn(why, str(e.exception))
        # A file with one run ignores a --section meant for the others.
        self.assertEqual(pick_section(TCCL_AR, parse_file(TCCL_AR), "np=4 all_reduce").op,
                         "allreduce")

    def test_series_leave_out_what_a_log_axis_cannot_show(self):
        (sec,) = parse_file(TCCL_AR)
        (name, pts), = series(sec, "tccl", "busbw")
        self.assertEqual(len(pts), 8)  # the four smallest sizes print 0.00 GB/s
        (name, pts), = series(sec, "tccl", "time")
        self.assertEqual(len(pts), 12)
        (sec,) = parse_file(TCCL_SR)
        with self.assertRaises(ToolError) as e:
            series(sec, "tccl", "busbw", inplace=True)
        self.assertIn("N/A", str(e.exception))

    def test_sizes(self):
        self.assertEqual([size_label(v) for v in (8, 1536, 4096, 3 << 20, 2 << 30)],
                         ["8 B", "1.5 KiB", "4 KiB", "3 MiB", "2 GiB"])
        self.assertEqual(parse_size("64K"), 65536)
        self.assertEqual(parse_size("2G"), 2 << 30)
        self.assertIsNone(parse_size("big"))
        self.assertEqual(size_ticks([8, 32, 128]), [8, 32, 128])
        self.assertLessEqual(len(size_ticks([2 ** e for e in range(0, 33)])), 16)


class PlotTest(ToolCase):
    @classmethod
    def setUpClass(cls):
        if not have_matplotlib():
            raise unittest.SkipTest("matplotlib is not installed (Debian: python3-matplotlib)")
        super().setUpClass()

    def plot(self, *args):
        return subprocess.run([sys.executable, "-B", PLOT] + [str(a) for a in args],
                              capture_output=True, text=True, env=self.env, timeout=50)

    def drawn(self, name, *args):
        out = self.path(name)
        r = self.plot("-o", out, *args)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out, "rb") as f:
            return r.stdout, f.read()

    def test_nccl_against_tccl_png_and_svg(self):
        inputs = [f"NCCL H200={NCCL}#np=4 all_reduce", f"tccl={TCCL_AR}", f"MPI={MPI_AR}"]
        out, data = self.drawn("allreduce.png", "--time", *inputs)
        self.assertTrue(data.startswith(PNG_SIGNATURE))
        self.assertGreater(len(data), 20000)
        self.assertIn("busbw and time of NCCL H200 (14 sizes), tccl (8 sizes), MPI (9 sizes)",
                      out)
        out, data = self.drawn("allreduce.svg", *inputs)
        self.assertIn(b"<svg", data[:2000])
        self.assertIn(b"allreduce, 4 ranks: bus bandwidth", data)

    def test_section_option_metrics_and_compare_table(self):
        out, data = self.drawn("sendrecv.png", "--section", "np=2 sendrecv", "--metric", "time",
                               NCCL, TCCL_SR, f"cmp={COMPARE}")
        self.assertTrue(data.startswith(PNG_SIGNATURE))
        self.assertIn("nccl-tests-h200x4.log: np=2 sendrecv (15 sizes)", out)
        self.assertIn("cmp: tccl (3 sizes), cmp: MPI (3 sizes)", out)
        out, data = self.drawn("inplace.svg", "--inplace", "--metric", "algbw",
                               f"{NCCL}#np=4 all_reduce", TCCL_AR)
        self.assertIn(b"<svg", data[:2000])

    def test_list(self):
        r = self.plot("--list", NCCL, COMPARE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("'np=4 all_reduce' (nccl-tests, op all_reduce, 4 ranks; 15 sizes)", r.stdout)
        self.assertIn("'compare_mpi sendrecv np=2' (compare_mpi", r.stdout)

    def test_user_errors(self):
        out = self.path("x.png")
        self.assertUserError(self.plot("-o", out, NO_ROWS), "no data rows found")
        self.assertFalse(os.path.exists(out))
        self.assertUserError(self.plot("-o", out, NCCL), "holds 3 runs")
        self.assertUserError(self.plot("-o", out, "--section", "sendrecv", NCCL),
                             "matches 2 runs")
        self.assertUserError(self.plot("-o", out, "--inplace", TCCL_SR), "N/A")
        self.assertUserError(self.plot("-o", out, "--metric", "algbw", COMPARE), "no algbw")
        self.assertUserError(self.plot("-o", out, self.path("missing.txt")), "no such file")
        self.assertUserError(self.plot("-o", self.path("x.jpeg"), TCCL_AR), "picture format")
        r = self.plot(TCCL_AR)
        self.assertEqual(r.returncode, 2)
        self.assertIn("-o/--output is required", r.stderr)

    def test_help(self):
        r = self.plot("--help")
        self.assertEqual(r.returncode, 0)
        for word in ("LABEL", "SECTION", "busbw", "nccl-tests", "compare_mpi.sh", "Exit status"):
            self.assertIn(word, r.stdout)


if __name__ == "__main__":
    if sys.argv[1:] == ["PlotTest"] and not have_matplotlib():
        print("SKIP: matplotlib is not installed (Debian: python3-matplotlib)")
        sys.exit(77)
    unittest.main(verbosity=2)
