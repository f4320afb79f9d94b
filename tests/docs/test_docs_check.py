#!/usr/bin/env python3
"""tests/docs/test_docs_check.py: the tests of tools/docs-check.

What it is: unittest cases that run tools/docs-check on the samples in tests/docs/sample/ and
check that it accepts the good page and rejects each bad one with a file:line message:
a broken link, a missing anchor, a wrongly slugged anchor, a missing image, a failing
runnable block, a hanging one, malformed markers, a block that writes into the repository,
a sentence that calls a chapter or stage planned or in progress (StatusTest); a chapter page
over 6,000 words or without prerequisites, objectives or exercises (ChapterTest); a shell block
that says nothing of what runs it, or names a tools/test step or a script that does not exist
(MarkerTest: sample/run-by.md passes, sample/run-by-bad.md fails line by line).
SlugTest also pins the slug rule against Python-Markdown's own toc.slugify when it is
installed (python3-markdown, what MkDocs uses). RepoTest runs the link check on the real
repository, so a broken link in the docs fails CTest.

Usage: python3 -B test_docs_check.py --work DIR [unittest args, e.g. LinkTest]
  DIR is a scratch folder (CTest gives the test's binary dir): the samples are copied there
  into a fresh git repository, since the run check compares `git status` before and after.
  Nothing is written outside DIR: TMPDIR points into it.
Added in: the curriculum (tests/docs/).
"""
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(REPO, "tools", "docs-check")
WORK = None


def load_tool():
    loader = importlib.machinery.SourceFileLoader("docs_check", TOOL)
    spec = importlib.util.spec_from_loader("docs_check", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


# A stand-in for tools/test in the sample tree: `run by: tools/test STEP` is checked against
# what --list prints.
FAKE_TOOLS_TEST = """#!/usr/bin/env bash
# the sample tree's tools/test: only --list, as the real one prints it
[[ ${1:-} == --list ]] && printf '%s\\n' configure build ctest exercises fresh-demo
"""


def make_root(name):
    """A copy of the samples in WORK/name, as a git repository, with a fake built tree and the
    two tools that markers name (tools/test, tools/gpu/suite.sh)."""
    root = os.path.join(WORK, name)
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(HERE, "sample"), root)
    subprocess.run(["git", "init", "-q", root], check=True)
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("/build/\n")
    os.makedirs(os.path.join(root, "tools", "gpu"))
    with open(os.path.join(root, "tools", "test"), "w") as f:
        f.write(FAKE_TOOLS_TEST)
    with open(os.path.join(root, "tools", "gpu", "suite.sh"), "w") as f:
        f.write("#!/usr/bin/env bash\n# the sample tree's GPU suite: only its path matters\n")
    os.makedirs(os.path.join(root, "build"))
    open(os.path.join(root, "build", "CMakeCache.txt"), "w").close()
    return root


def docs_check(root, *args):
    env = dict(os.environ, TMPDIR=WORK)
    p = subprocess.run([sys.executable, "-B", TOOL, "--root", root] + list(args),
                       capture_output=True, text=True, env=env, timeout=120)
    return p.returncode, p.stdout + p.stderr


class LinkTest(unittest.TestCase):
    def setUp(self):
        self.root = make_root("links")

    def test_good_page_passes(self):
        rc, out = docs_check(self.root, "links", "good.md")
        self.assertEqual(rc, 0, out)

    def test_external_links_are_listed(self):
        rc, out = docs_check(self.root, "links", "--list-external", "good.md")
        self.assertEqual(rc, 0, out)
        self.assertIn("good.md:11: https://github.com/NVIDIA/nccl", out)

    def test_broken_links_fail_with_file_and_line(self):
        rc, out = docs_check(self.root, "links", "broken-link.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("broken-link.md:3: broken link 'sub/gone.md'", out)
        self.assertIn("broken-link.md:5: link 'sub/other.md#no-such-heading': no heading", out)
        self.assertIn("broken-link.md:8: link 'sub/other.md#host-buffers-at-mpi-s-speed-"
                      "direct-steps': no heading", out)
        self.assertIn("broken-link.md:10: broken link 'sub/missing.png'", out)
        self.assertIn("docs-check: 4 problems", out)

    def test_bad_markers_fail(self):
        rc, out = docs_check(self.root, "links", "bad-marker.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("bad-marker.md:3: runnable marker not on the line right before", out)
        self.assertIn("bad-marker.md:10: a runnable block must be a sh/bash fence", out)
        self.assertIn("bad-marker.md:14: malformed marker", out)

    def test_missing_repo_paths_in_commands_fail(self):
        rc, out = docs_check(self.root, "links", "bad-paths.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("bad-paths.md:6: command names tools/no-such-tool, which does not exist",
                      out)
        self.assertIn("docs-check: 1 problem", out)   # build/ paths are checked by run

    def test_list_shows_only_marked_blocks(self):
        rc, out = docs_check(self.root, "list", "good.md")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.split("\n")[:2], ["good.md:23: test -f build/CMakeCache.txt",
                                               "good.md:30: grep -q hello /tmp/hello.txt"])


class MarkerTest(unittest.TestCase):
    """Every shell block says what runs it: runnable, `run by: tools/test STEP` (a step that
    tools/test --list prints), `run by: tools/PATH` (a file under tools/), or `not run: REASON`
    (counted in the summary)."""

    def setUp(self):
        self.root = make_root("markers")

    def test_marked_blocks_pass_and_are_counted(self):
        rc, out = docs_check(self.root, "links", "run-by.md")
        self.assertEqual(rc, 0, out)
        self.assertIn("docs-check: shell blocks: 1 runnable, 1 run by a tools/test step, "
                      "2 run by a script under tools/, 1 not run", out)

    def test_unmarked_and_wrong_markers_fail(self):
        rc, out = docs_check(self.root, "links", "run-by-bad.md")
        self.assertEqual(rc, 1, out)
        unrun = ("a shell block that no test runs: mark it runnable, or say what runs it "
                 "(<!-- run by: tools/test STEP -->, <!-- run by: tools/PATH -->), or "
                 "<!-- not run: REASON -->")
        for line in (3, 29, 34):
            self.assertIn("run-by-bad.md:%d: %s" % (line, unrun), out)
        self.assertIn("run-by-bad.md:8: run by: 'NOSUCHSTEP' is not a step of tools/test "
                      "(tools/test --list: build, configure, ctest, exercises, fresh-demo)", out)
        self.assertIn("run-by-bad.md:13: run by: tools/gpu/gone.sh is not a file under tools/",
                      out)
        self.assertIn("run-by-bad.md:18: run by: 'make check' is neither `tools/test STEP` nor "
                      "a script under tools/", out)
        self.assertIn("run-by-bad.md:23: not run: say why in a few words", out)
        self.assertIn("run-by-bad.md:27: run-by or not-run marker not on the line right before "
                      "a code fence", out)
        self.assertIn("run-by-bad.md:33: malformed marker (write `<!-- run by: WHAT -->`", out)
        self.assertIn("docs-check: 9 problems", out)

    def test_run_runs_only_the_runnable_block(self):
        build = os.path.join(self.root, "build")
        rc, out = docs_check(self.root, "run", "--build", build, "run-by.md")
        self.assertEqual(rc, 0, out)
        self.assertIn("ran 1 runnable blocks", out)

    def test_list_markers(self):
        rc, out = docs_check(self.root, "list", "--markers", "run-by.md", "run-by-bad.md")
        self.assertEqual(rc, 0, out)
        self.assertIn("run-by.md:4: [runnable] true", out)
        self.assertIn("run-by.md:24: [not run: needs a second host with an InfiniBand port] "
                      "$ mpirun -np 2 -H hostA,hostB ./a.out", out)
        self.assertIn("run-by-bad.md:3: [UNMARKED] echo nobody runs this", out)

    def test_without_tools_test_a_step_cannot_be_checked(self):
        os.remove(os.path.join(self.root, "tools", "test"))
        rc, out = docs_check(self.root, "links", "run-by.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("run-by.md:9: run by: cannot check step 'ctest': tools/test does not "
                      "exist", out)


class ChapterTest(unittest.TestCase):
    """Chapter pages of one or two sittings: a chapter's page or part over 6,000 words fails,
    its appendix (measured.md) does not count; a chapter's page without prerequisites,
    learning objectives or exercises fails."""

    def setUp(self):
        self.root = make_root("chapters")
        d = os.path.join(self.root, "docs", "chapters")
        os.makedirs(os.path.join(d, "stage8-good"))
        def write(rel, text):
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        write("stage8-good.md", '# Chapter 8\n\n!!! note "Prerequisites"\n    Chapter 7.\n\n'
                                "## Learning objectives\n\nYou can.\n\n## Exercises and labs\n\n"
                                "None.\n")
        write("stage8-good/2-long.md", "# Part 2\n\n" + "word " * 6001 + "\n")
        write("stage8-good/measured.md", "# Appendix\n\n" + "figure " * 7000 + "\n")
        write("stage9-bare.md", "# Chapter 9\n\nText.\n")
        self.files = ["docs/chapters/stage8-good.md", "docs/chapters/stage8-good/2-long.md",
                      "docs/chapters/stage8-good/measured.md", "docs/chapters/stage9-bare.md"]

    def test_long_pages_and_missing_sections_fail(self):
        rc, out = docs_check(self.root, "links", *self.files)
        self.assertEqual(rc, 1, out)
        self.assertIn("docs/chapters/stage8-good/2-long.md:1: 6004 words", out)
        for what in ("prerequisites", "learning objectives", "exercises"):
            self.assertIn("docs/chapters/stage9-bare.md:1: a chapter page needs its " + what, out)
        self.assertNotIn("stage8-good/measured.md:", out)
        self.assertNotIn("stage8-good.md:", out)
        self.assertIn("docs-check: 4 problems", out)


class FigureTest(unittest.TestCase):
    """A figure quoted in two places cannot disagree: every phrasing of a figure registered in
    docs/figures.txt must give its value, in the docs and in the files its globs name; an entry
    that no phrasing finds is stale."""

    def setUp(self):
        self.root = make_root("figures")
        def write(rel, text):
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        write("docs/a.md", "# A\n\nThe shim speaks NCCL 2.19.4's API.\n")
        write("docs/b.md", "# B\n\nIt is NCCL 2.18.3's API, says this page.\n")
        write("src/nccl.h", "/* nccl.h: as NCCL 2.19.4 declares it */\n")
        write("docs/figures.txt",
              "# name, value, regex, globs\n"
              "shim version\t2.19.4\tNCCL (\\d+\\.\\d+\\.\\d+)'s API\n"
              "shim version\t2.19.4\tas NCCL (\\d+\\.\\d+\\.\\d+) declares it\tsrc/*.h\n"
              "gone\t1\tnowhere (\\d) at all\n")
        self.files = ["docs/a.md", "docs/b.md"]

    def test_disagreement_and_stale_entry_fail(self):
        rc, out = docs_check(self.root, "links", *self.files)
        self.assertEqual(rc, 1, out)
        self.assertIn("docs/b.md:3: shim version is quoted as 2.18.3; docs/figures.txt gives "
                      "2.19.4", out)
        self.assertNotIn("docs/a.md:", out)
        self.assertNotIn("src/nccl.h:", out)  # found by the glob, and it agrees
        self.assertIn("docs/figures.txt:4: gone: no phrasing of it is found any more", out)
        self.assertIn("docs-check: 2 problems", out)

    def test_agreeing_quotes_pass(self):
        with open(os.path.join(self.root, "docs", "figures.txt"), "w") as f:
            f.write("shim version\t2.19.4\tNCCL (\\d+\\.\\d+\\.\\d+)'s API\n")
        rc, out = docs_check(self.root, "links", "docs/a.md")
        self.assertEqual(rc, 0, out)


class StatusTest(unittest.TestCase):
    """The stale-status check: sample/docs/status.md holds hits and look-alikes that must pass;
    sample/docs/exercises/stage9.md says "planned" about a chapter, but is out of scope."""

    def setUp(self):
        self.root = make_root("status")

    def test_stale_status_sentences_fail(self):
        rc, out = docs_check(self.root, "links", "docs/status.md")
        self.assertEqual(rc, 1, out)
        for line, word in ((3, "planned"), (5, "in progress"), (15, "in progress"),
                           (18, "not implemented yet")):
            self.assertIn("docs/status.md:%d: '%s' in a sentence about a chapter or stage"
                          % (line, word), out)
        # a group's operations "planned", a table row without the word stage, a code span,
        # a link target, the escape comment, a legend: none of them counts
        self.assertIn("docs-check: 4 problems", out)

    def test_out_of_scope_pages_are_not_checked(self):
        rc, out = docs_check(self.root, "links", "docs/exercises/stage9.md")
        self.assertEqual(rc, 0, out)

    def test_scope(self):
        dc = load_tool()
        for rel in ("README.md", "stage5-transport-shm/README.md", "docs/workshop.md",
                    "docs/chapters/stage7-faults.md"):
            self.assertTrue(dc.STATUS_SCOPE_RE.match(rel), rel)
        for rel in ("docs/exercises/1.1.md", "docs/labs/index.md", "stage7-faults/labs/README.md",
                    "tests/docs/sample/good.md"):
            self.assertFalse(dc.STATUS_SCOPE_RE.match(rel), rel)


class RunTest(unittest.TestCase):
    def setUp(self):
        self.root = make_root("run")
        self.build = os.path.join(self.root, "build")

    def test_good_blocks_run_in_order_in_scratch(self):
        rc, out = docs_check(self.root, "run", "--build", self.build, "good.md")
        self.assertEqual(rc, 0, out)
        self.assertIn("ran 2 runnable blocks", out)
        scratch = os.path.join(self.build, "docs-check", "0-good", "hello.txt")
        self.assertTrue(os.path.isfile(scratch), out)   # /tmp/hello.txt went to the scratch

    def test_failing_block_fails(self):
        rc, out = docs_check(self.root, "run", "--build", self.build, "failing-run.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("failing-run.md:4: runnable block exited 1: true", out)
        self.assertNotIn("never reached", out)

    def test_hanging_block_times_out(self):
        rc, out = docs_check(self.root, "run", "--build", self.build, "timeout-run.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("timeout-run.md:4: runnable block timed out after 2s: sleep 30", out)

    def test_block_writing_into_the_repo_fails(self):
        rc, out = docs_check(self.root, "run", "--build", self.build, "writes-repo.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("writes-repo.md:4: runnable block wrote into the repository: "
                      "stray-output.txt", out)

    def test_missing_build_paths_in_commands_fail(self):
        rc, out = docs_check(self.root, "run", "--build", self.build, "bad-paths.md")
        self.assertEqual(rc, 1, out)
        self.assertIn("bad-paths.md:7: command names build/no/such/program, which the built "
                      "tree", out)

    def test_run_needs_a_built_tree(self):
        rc, out = docs_check(self.root, "run", "--build", self.root, "good.md")
        self.assertEqual(rc, 2, out)
        self.assertIn("not a configured build tree", out)


class SlugTest(unittest.TestCase):
    CASES = {
        # headings of this repository, with the ids `mkdocs build` gave them (checked 2026-11-25)
        "Host buffers at MPI's speed: direct steps and the progress engine":
            "host-buffers-at-mpis-speed-direct-steps-and-the-progress-engine",
        "Chapter 2: ring collectives and the `nccl.h` shim":
            "chapter-2-ring-collectives-and-the-ncclh-shim",
        "Seeing it: step timelines and benchmark plots":
            "seeing-it-step-timelines-and-benchmark-plots",
        "float16 and bfloat16: the accuracy rule and what the tests accept":
            "float16-and-bfloat16-the-accuracy-rule-and-what-the-tests-accept",
        "Reductions: sum, prod, max, min, avg, premulsum":
            "reductions-sum-prod-max-min-avg-premulsum",
        "busbw / algbw": "busbw-algbw",
        "Simple, LL and LL128 (protocols)": "simple-ll-and-ll128-protocols",
    }

    def test_known_slugs(self):
        dc = load_tool()
        for heading, slug in self.CASES.items():
            self.assertEqual(dc.slugify(dc.heading_text(heading)), slug, heading)

    def test_same_as_python_markdown(self):
        try:
            import markdown
        except ImportError:
            self.skipTest("python3-markdown is not installed")
        dc = load_tool()
        for heading in self.CASES:
            html = markdown.markdown("# " + heading, extensions=["toc"])
            got = html.split('id="', 1)[1].split('"', 1)[0]
            self.assertEqual(dc.heading_ids(self._doc(heading))[0], got, heading)

    def _doc(self, heading):
        path = os.path.join(WORK, "slug.md")
        with open(path, "w") as f:
            f.write("# %s\n" % heading)
        return load_tool().Doc(path, "slug.md")


class RepoTest(unittest.TestCase):
    def test_repository_links(self):
        p = subprocess.run([sys.executable, "-B", TOOL, "links"], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)


def main():
    global WORK
    args = sys.argv[1:]
    if "--work" not in args:
        print("usage: test_docs_check.py --work DIR [unittest args]", file=sys.stderr)
        return 2
    i = args.index("--work")
    WORK = os.path.realpath(args[i + 1])
    del args[i:i + 2]
    os.makedirs(WORK, exist_ok=True)
    os.environ["TMPDIR"] = WORK
    prog = unittest.main(argv=[sys.argv[0]] + args, exit=False)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
