#!/usr/bin/env python3
"""tests/tools/test_stage.py: the tests of tools/stage's guided diffs (`guide`, `gen-guides`,
and the part of `check` that compares the generated pages).

What it is: unittest cases run by CTest (tests/tools/CMakeLists.txt, tools_stage_guide) on
the real tree, which the guide only reads: the order of a chapter page's sections (core
library in reading order, then tests, then shim, build files and docs), a new file's sentence
taken from its header comment, chapter 1's steps each followed by the tests that check them,
the CTest regexes matching the names the fragments register, and `check` reporting a missing,
an out-of-date and a stale page (in a temporary folder, not docs/chapters/guided/).

Invariants: writes only to a temporary directory that is removed; needs no build.
NCCL counterpart: none. Added in: foundation (tools/), with tools/stagetool/guide.py.
"""

import contextlib
import io
import os
import re
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))

from stagetool import check, guide  # noqa: E402
from stagetool import guide_tests as gt  # noqa: E402
from stagetool.chain import resolve_stage  # noqa: E402


class GuideTest(unittest.TestCase):
    def test_sections_in_order(self):
        page = guide.guide_text(resolve_stage(3))
        heads = [line for line in page.splitlines() if line.startswith("## ")]
        self.assertEqual(heads[:2], ["## The core library, in reading order",
                                     "## The tests of this chapter"])
        self.assertLess(heads.index("## The shim (shim/)"), heads.index("## Build files and docs"))
        items = re.findall(r"^\d+\. `([^`]+)`", page.split("## The tests")[0], re.M)
        self.assertEqual(items[0], "include/tccl.h")  # the public header first
        # Planning before the algorithms, the algorithms before the transports.
        self.assertLess(items.index("src/plan_tree.cc"), items.index("src/device/tree.h"))
        self.assertLess(items.index("src/device/tree.h"), items.index("src/proxy.cc"))
        self.assertLess(items.index("src/trees.h"), items.index("src/trees.cc"))  # .h first
        self.assertIn("`tests/tree/tree_tests.cmake`", page)
        self.assertIn("`diff -u stage2-ring/F stage3-tree/F`", page)

    def test_new_file_sentence_from_header(self):
        page = guide.guide_text(resolve_stage(3))
        first = (guide.ROOT / "stage3-tree" / "src" / "trees.h").read_text()
        self.assertIn("trees.h: the shapes of the trees a collective runs on.", first)
        self.assertRegex(page, r"`src/trees\.h` \(new, \d+ lines\): The shapes of the trees a "
                               r"collective runs on\.\n")
        self.assertRegex(page, r"`src/comm\.cc` \(changed, \+\d+ −\d+ lines\): ")

    def test_first_sentence(self):
        lines = guide.comment_lines("/*\n * src/x.h: the thing (e.g. a FIFO. Really) it is. "
                                    "More.\n *\n * What it is: no.\n */\n")
        self.assertEqual(guide.first_sentence(lines), "The thing (e.g. a FIFO. Really) it is.")
        lines = guide.comment_lines("# stage9: chapter 9 -- a list:\n#  - one\n")
        self.assertEqual(guide.first_sentence(lines), "Chapter 9 -- a list.")
        self.assertEqual(guide.first_sentence(guide.comment_lines("/* a.cc: tcclSend. */")),
                         "tcclSend.")  # an identifier keeps its case

    def test_chapter1_steps_name_their_tests(self):
        page = guide.guide_text(resolve_stage(1))
        steps = re.split(r"^## ", page, flags=re.M)
        prims = next(s for s in steps if s.startswith("Step 6: Primitives and executors"))
        self.assertIn("`src/device/fifo.h`", prims)
        self.assertIn("`tests/primitives/test_primitives.cc`", prims)
        self.assertIn("Tests that check this step: `ctest --test-dir build-1 -R ", prims)
        transports = next(s for s in steps if s.startswith("Step 7: Transports"))
        self.assertIn("p2p_peer_death", transports)
        self.assertNotIn("test_primitives", transports)
        # Every step with a file of the table ends with tests; the page opens with its use.
        self.assertEqual(page.count("Tests that check this step"), 8)
        self.assertIn("In a workshop sitting", page.split("## Step 1")[0])

    def test_ctest_regexes_select_registered_names(self):
        for num in range(1, 8):
            for frag in gt.fragments_of(num):
                progs, _rest = gt.fragment_programs(frag, num)
                for rel, names, regex in progs:
                    if regex is None:
                        continue
                    self.assertTrue(names, rel)
                    rx = re.compile(regex.replace("\\.", r"\."))
                    for n in names:
                        self.assertTrue(rx.search(f"s{num}_{n}.np2") or rx.search(f"s{num}_{n}"),
                                        f"{regex} misses {n}")

    def test_check_reports_missing_stale_and_out_of_date(self):
        with tempfile.TemporaryDirectory() as tmp:
            saved = check.GUIDES_DIR
            check.GUIDES_DIR = tmp  # ROOT / an absolute path is that path
            try:
                for name, stage in guide.guide_targets().items():
                    with open(os.path.join(tmp, name), "w") as f:
                        f.write(guide.guide_text(stage))
                os.remove(os.path.join(tmp, "stage2.md"))
                with open(os.path.join(tmp, "stage3.md"), "a") as f:
                    f.write("edited by hand\n")
                with open(os.path.join(tmp, "stage9.md"), "w") as f:
                    f.write("# no such chapter\n")
                rep, out = check.Report(), io.StringIO()
                with contextlib.redirect_stdout(out):
                    check.check_guides(rep)
            finally:
                check.GUIDES_DIR = saved
        text = out.getvalue()
        self.assertEqual(rep.problems, 3, text)
        self.assertIn("stage2.md: missing (run tools/stage gen-guides)", text)
        self.assertIn("stage3.md: out of date (run tools/stage gen-guides)", text)
        self.assertIn("stage9.md: stale, no such chapter with code", text)


if __name__ == "__main__":
    unittest.main()
