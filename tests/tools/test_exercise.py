#!/usr/bin/env python3
"""tests/tools/test_exercise.py: the tests of tools/exercise's table and listing (no build).

What it is: unittest cases on the real tree, which they only read, and on small made-up
tables and stage folders in a temporary directory: the catalog keeps its invariants
(catalog.problems() finds nothing; it does find an unknown kind, a level that drops, a
piece whose stub does not return and a piece whose region is not a function's whole body);
`tools/exercise list` shows each exercise's kind after its level, its id first (tools/test
reads it with awk's $1); docs/exercises/index.md's table and mkdocs.yml's nav have every
exercise, with the catalog's level, kind and title; every piece's stub, applied to its file,
leaves a body that returns at once, and 7.4's dump on the stub is not JSON.
What it does not do: build or grade (tools/exercise verify, the tools/test exercises step).

Invariants: writes only to a temporary directory that is removed; needs no build.
NCCL counterpart: none. Added in: curriculum (exercises).
"""

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = Path(HERE).parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from exercisetool import catalog, markers  # noqa: E402


def stage_file(e):
    return catalog.stage_dir(e.chapter, ROOT) / e.file


def fake(**kw):
    args = dict(id="9.1", title="a thing", level="easy", file="src/a.cc",
                stubs=["return tcclInternalError;"], tests=["{p}t"], targets=["{p}t"])
    args.update(kw)
    return catalog.Exercise(**args)


class ExerciseTest(unittest.TestCase):
    def test_the_table_keeps_its_invariants(self):
        self.assertEqual(catalog.problems(), [])
        for e in catalog.EXERCISES:
            self.assertIn(e.kind, catalog.KINDS, e.id)

    def test_problems_finds_a_bad_kind_and_a_dropping_level(self):
        out = catalog.problems([fake(kind="whole"), fake(id="9.2", level="hard"),
                                fake(id="9.3", level="medium")], root=None)
        self.assertTrue(any("9.1: kind 'whole'" in p for p in out), out)
        self.assertTrue(any(p.startswith("9.3 (medium) comes after 9.2 (hard)") for p in out),
                        out)

    def test_a_piece_must_return_from_its_stub(self):
        self.assertEqual(catalog.problems([fake(kind="piece")], root=None), [])
        for stub in ["", "(void)x;  // remove once you use it", "// return tcclInternalError;x",
                     "return;"]:
            out = catalog.problems([fake(kind="piece", stubs=[stub])], root=None)
            self.assertTrue(any("a piece's stub must return" in p for p in out), (stub, out))
        # A fill-in stub may fall through (3.1's leaves the node as it is).
        self.assertEqual(catalog.problems([fake(stubs=["(void)bit;"])], root=None), [])

    def test_a_piece_is_a_whole_function_body(self):
        whole = ("#include <cstdio>\nint f(int a,\n      int b) {\n"
                 "  // >>> exercise 9.1: a thing\n  return a + b;\n  // <<< exercise 9.1\n}\n")
        part = ("#include <cstdio>\nint f(int a) {\n  if (a < 0) return 0;\n"
                "  // >>> exercise 9.1: a thing\n  return a;\n  // <<< exercise 9.1\n}\n")
        with tempfile.TemporaryDirectory() as tmp:
            stage = Path(tmp) / "stage9-test"
            (stage / "src").mkdir(parents=True)
            (stage / "CMakeLists.txt").write_text("")
            for text, bad in ((whole, False), (part, True)):
                (stage / "src" / "a.cc").write_text(text)
                out = catalog.problems([fake(kind="piece")], root=Path(tmp))
                self.assertEqual(any("whole body" in p for p in out), bad, out)
                # A fill-in may sit anywhere.
                self.assertEqual(catalog.problems([fake()], root=Path(tmp)), [])
            (stage / "src" / "a.cc").unlink()
            out = catalog.problems([fake(kind="piece")], root=Path(tmp))
            self.assertTrue(any("does not exist" in p for p in out), out)

    def test_list_shows_the_kind(self):
        out = subprocess.run([sys.executable, "-B", str(ROOT / "tools" / "exercise"), "list"],
                             check=True, capture_output=True, text=True).stdout
        rows = {}
        for line in out.splitlines():
            m = re.match(r"^  (\d+\.\d+)  (easy|medium|hard)\s+(fill in|piece)\s+(.+?)\s+(\S+)$",
                         line)
            if m:
                rows[m[1]] = m.groups()[1:]
        self.assertEqual(sorted(rows), sorted(e.id for e in catalog.EXERCISES))
        for e in catalog.EXERCISES:
            self.assertEqual(rows[e.id], (e.level, e.kind, e.title, e.file), e.id)
            self.assertEqual(next(l for l in out.splitlines() if l.startswith(f"  {e.id} "))
                             .split()[0], e.id)

    def test_index_and_nav_list_every_exercise(self):
        index = (ROOT / "docs" / "exercises" / "index.md").read_text()
        rows = {}
        for m in re.finditer(r"^\| \[(\d+\.\d+)\]\(\1\.md\) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|",
                             index, re.M):
            rows[m[1]] = tuple(x.strip() for x in m.groups()[1:])
        nav = (ROOT / "mkdocs.yml").read_text()
        self.assertEqual(sorted(rows), sorted(e.id for e in catalog.EXERCISES))
        for e in catalog.EXERCISES:
            level, kind, title = rows[e.id]
            self.assertEqual((level, kind), (e.level, e.kind), e.id)
            self.assertEqual(title.lower(), e.title.lower(), e.id)
            self.assertTrue((ROOT / e.page_path()).is_file(), e.page_path())
            self.assertIn(f"exercises/{e.id}.md", nav, e.id)

    def test_every_piece_stubs_to_a_body_that_returns(self):
        pieces = [e for e in catalog.EXERCISES if e.kind == "piece"]
        self.assertIn("7.4", [e.id for e in pieces])
        for e in pieces:
            text = stage_file(e).read_text()
            stubbed = markers.stub(text, e, str(stage_file(e)))
            self.assertEqual(markers.stub(stubbed, e), stubbed, e.id)  # idempotent
            self.assertEqual(catalog.whole_bodies(stubbed, e.id), [], e.id)
            lines = stubbed.split("\n")
            for _id, _t, _i, b, end in (r for r in markers.regions(stubbed) if r[0] == e.id):
                body = "\n".join(lines[b + 1:end])
                self.assertIn(f"not implemented: exercise {e.id} (", body)
                self.assertRegex(lines[end - 1].split("//")[0].strip(), r"^return \S.*;$", e.id)

    def test_the_dump_stub_is_not_json(self):
        e = catalog.find("7.4")
        self.assertEqual(e.file, "src/flight_recorder.cc")
        text = stage_file(e).read_text()
        start = text.index("std::string FlightRecorder::toJson(")
        self.assertEqual([r[0] for r in markers.regions(text[start:])], ["7.4"])
        stubbed = markers.stub(text, e)
        literal = re.search(r'^\s*return ("(?:[^"\\]|\\.)*");', stubbed[stubbed.index(
            "std::string FlightRecorder::toJson("):], re.M)[1]
        dump = ast.literal_eval(literal)  # the C literal's escapes are Python's here
        self.assertIn("not implemented: exercise 7.4", dump)
        with self.assertRaises(ValueError):
            json.loads(dump)
        # Non-empty: FlightRecorder.SignalDumps polls until the file is not empty.
        self.assertTrue(dump.strip())


if __name__ == "__main__":
    unittest.main()
