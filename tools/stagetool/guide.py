"""tools/stagetool/guide.py: the guided diff of a chapter (`guide N` and `gen-guides`).

What it is: a chapter's files in reading order, as a Markdown page (docs/chapters/guided/
stageN.md), each with one sentence and its size. For chapter N >= 2 the files are those the
chapter adds, changes or removes (diffs.file_sets, the chapter diff's lists), in sections:
the core library (src/, include/) in READING_ORDER, the torch backend (torch/, chapter 4),
the tests (guide_tests.py: the fragments the chapter adds, and the earlier tests that
exercise the files it changes), then the shim, benchmarks, examples, build files and docs,
labs. Chapter 1 has no predecessor: its page is all of stage 1 in READING_ORDER, one step
per group, each step followed by the tests that check it (guide_tests.STAGE1_EXERCISES).

The reading order, READING_ORDER: groups of fnmatch patterns (`*` also matches `/`), the
public header first, then the entry points, the communicator, groups and planning, the
algorithms, primitives and executors, transports, tracing and failure handling. A file takes
the first pattern it matches; files sort by (pattern, name without extension, header before
source), so foo.h is read before foo.cc. A core file no pattern matches goes last, with the
other unknown files, alphabetically.

The sentence: the first sentence of the file's header comment (the house style opens every
file with `path: what it is.`), without the `path:` prefix; a Markdown file gives its first
heading. A file without a header says so.

Invariants: deterministic (no dates; every list sorted or in READING_ORDER's order), so
`tools/stage check` can compare the pages byte for byte; reads the tree only, except
gen-guides, which writes docs/chapters/guided/. Pages link only inside docs/ and name in
shell blocks only paths that exist (tools/docs-check links).
Part of tools/stage (see its --help). NCCL counterpart: none. Added in: foundation (tools/).
"""

import difflib
import fnmatch
import re

from .chain import ROOT, code_stages, read_bytes, resolve_stage, stage_files
from .diffs import diff_targets, file_sets, write_generated
from . import guide_tests as gt

GUIDES_DIR = "docs/chapters/guided"
READING_ORDER = [
    ("The public API", ["include/*"]),
    ("Entry points", ["src/init.cc", "src/misc.cc", "src/enqueue.*", "src/collectives.cc",
                      "src/p2p_patterns.cc", "src/comm_split.cc", "src/comm_finalize.cc"]),
    ("The communicator", ["src/core.h", "src/comm.*", "src/comm_context.*",
                          "src/launch_state.h"]),
    ("Groups and planning", ["src/group.*", "src/group_launch.cc", "src/launch_hooks.cc",
                             "src/plan.h", "src/plan_*", "src/red_op.*", "src/algo_mask.h",
                             "src/trees.*", "src/tuning.*"]),
    ("The algorithms", ["src/device/work.h", "src/device/run_work.h",
                        "src/device/coll_dispatch.h", "src/device/p2p.h", "src/device/ring.h",
                        "src/device/tree.h", "src/device/rec_doubling.h", "src/algorithms/*"]),
    ("Primitives and executors", [
        "src/device/fifo.h", "src/device/primitives.h", "src/device/prims_ll.h",
        "src/device/prim_calls.h", "src/device/direct.h", "src/device/reduce_copy.h",
        "src/device/reduce_op.h", "src/device/float16.h", "src/executor.h",
        "src/executor_host.cc", "src/host_backend.h", "src/progress_signal.h", "src/fiber.*",
        "src/device/*", "src/executor_*", "src/cuda_wrap.*"]),
    ("Transports and the proxy", ["src/transport.*", "src/transport/*", "src/proxy.*",
                                  "src/cuda_ipc.*"]),
    ("Tracing and failure handling", ["src/trace.*", "src/async_job.*", "src/watchdog.*",
                                      "src/check_mode.*", "src/fault_inject.*",
                                      "src/flight_recorder.*"]),
]
OTHER_STEP = "Other files"
# Sections after the core library, in page order: (title, patterns).
SECTIONS = [
    ("The torch backend (torch/)", ["torch/csrc/*", "torch/tccl_torch/*", "torch/*.py",
                                    "torch/CMakeLists.txt"]),
    ("The shim (shim/)", ["shim/*"]),
    ("Benchmarks", ["bench/*", "torch/bench/*"]),
    ("Examples", ["examples/*", "torch/examples/*"]),
    ("Build files and docs", ["CMakeLists.txt", "*.md", "*.txt"]),
    ("Labs (labs/)", ["labs/*"]),
]
HEADER_EXTS = (".h", ".cuh", ".hpp")
SKIP_LINE = re.compile(r"^(What it is|What it checks|Invariants|NCCL counterpart|Added in|"
                       r"Learning objectives|Usage|Run)\b|^[-*]\s|^\s")


def is_core(rel):
    return rel.startswith(("src/", "include/"))


def order_key(rel):
    """(step, pattern, stem, header first, path) for a core file."""
    for step, (_title, pats) in enumerate(READING_ORDER):
        for k, pat in enumerate(pats):
            if fnmatch.fnmatchcase(rel, pat):
                stem, dot, ext = rel.rpartition(".")
                return (step, k, stem if dot else rel, 0 if rel.endswith(HEADER_EXTS) else 1, rel)
    return (len(READING_ORDER), 0, rel, 0, rel)


def step_title(key):
    return READING_ORDER[key[0]][0] if key[0] < len(READING_ORDER) else OTHER_STEP


def comment_lines(text):
    """The leading comment of a file (C, # lines, Python docstring), markers removed."""
    lines = text.splitlines()
    while lines and (lines[0].startswith("#!") or not lines[0].strip()):
        lines.pop(0)
    if not lines:
        return []
    first = lines[0].lstrip()
    if first.startswith("#"):  # CMake, shell, Python: a block of # lines
        n = next((k for k, line in enumerate(lines) if not line.startswith("#")), len(lines))
        return [line[1:].strip() for line in lines[:n]]
    if first.startswith(("/*", '"""')):
        closer = "*/" if first.startswith("/*") else '"""'
        body = []
        for k, line in enumerate(lines):
            s = line.strip()
            if k == 0:
                s = re.sub(r'^(/\*\*?|""")\s*(@file)?', "", s)
            end = closer in s
            s = s.split(closer, 1)[0].strip()
            body.append(s[1:].strip() if s.startswith("*") else s)
            if end:
                break
        return body
    return []


def first_sentence(lines):
    """The first sentence of the first paragraph of a header comment, `path:` dropped."""
    para = []
    for line in lines:
        if not line.strip():
            if para:
                break
            continue
        if para and SKIP_LINE.match(line):
            break
        para.append(line.strip())
    text = " ".join(para)
    m = re.match(r"^(\S+):\s+(.*)$", text)
    if m and ("/" in m.group(1) or "." in m.group(1) or m.group(1).startswith("stage")):
        text = m.group(2)
    depth, end = 0, len(text)
    for k, c in enumerate(text):
        depth += c in "([" and 1 or (c in ")]" and -1 or 0)
        if c == "." and depth <= 0 and (k + 1 == len(text) or text[k + 1] == " "):
            if not re.search(r"\b(e\.g|i\.e|etc|vs)$", text[max(0, k - 4):k]):
                end = k + 1
                break
    text = text[:end].rstrip(" :;,")
    word = text.split(" ", 1)[0].rstrip(",;:") if text else ""
    if word.replace("-", "").isalpha() and word.islower():  # not an identifier (tcclSend, libnccl.so.2)
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "?", "!")) else text + "." if text else ""


def describe(path):
    """(sentence, line count) of a file."""
    data = read_bytes(path)
    if data is None:
        return "", 0
    text = data.decode("utf-8", errors="replace")
    if str(path).endswith(".md"):  # a page: its first heading
        heads = [l.lstrip("#").strip() for l in text.splitlines() if l.startswith("# ")]
        sentence = (heads[0] + ".") if heads else ""
    else:
        sentence = first_sentence(comment_lines(text))
    sentence = sentence or "(No header comment.)"
    return sentence, text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def change_counts(old, new):
    a = (read_bytes(old) or b"").decode("utf-8", errors="replace").splitlines()
    b = (read_bytes(new) or b"").decode("utf-8", errors="replace").splitlines()
    plus = minus = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        minus += (i2 - i1) if op in ("replace", "delete") else 0
        plus += (j2 - j1) if op in ("replace", "insert") else 0
    return plus, minus


def chapter_title(stage, what):
    """'Chapter N, <what>: <the chapter page's title>'."""
    page = ROOT / "docs" / "chapters" / f"{stage.name}.md"
    title = stage.name
    if page.is_file():
        heads = [l[2:].strip() for l in page.read_text(encoding="utf-8").splitlines()
                 if l.startswith("# ")]
        title = re.sub(r"^Chapter \d+:\s*", "", heads[0]) if heads else title
    return f"# Chapter {stage.num}, {what}: {title}"


def file_item(n, rel, prev, stage, kind):
    """One numbered list item: the file, what changed, its sentence."""
    if kind == "removed":
        sentence, lines = describe(prev.path / rel)
        what = f"removed ({lines} lines in `{prev.name}`)"
    else:
        sentence, lines = describe(stage.path / rel)
        if kind == "new":
            what = f"new, {lines} lines"
        elif kind == "changed":
            plus, minus = change_counts(prev.path / rel, stage.path / rel)
            what = f"changed, +{plus} −{minus} lines"
        else:
            what = f"{lines} lines"
    return f"{n}. `{rel}` ({what}): {sentence}"


def test_item(rel, regex, num):
    sentence, lines = describe(ROOT / rel)
    run = (f"`ctest --test-dir build-{num} -R '{regex}'`" if regex
           else "not a CTest test: its header says how to run it")
    return f"- `{rel}` ({lines} lines): {sentence} Run: {run}."


def section_of(rel):
    for k, (_title, pats) in enumerate(SECTIONS):
        if any(fnmatch.fnmatchcase(rel, p) for p in pats):
            return k
    return 4  # Build files and docs


def intro(stage, prev):
    num = stage.num
    chap = f"[the chapter page](../{stage.name}.md)"
    if prev is None:
        return [
            f"This page is chapter {num}'s library, `{stage.name}/`, file by file in the order "
            f"the chapter builds it: the public header, the entry points, the communicator, "
            f"groups and planning, the algorithm, the primitives and executors, the transport. "
            f"Each file comes with the first sentence of its header comment and its size; "
            f"each step ends with the tests that check it. In a workshop sitting, read the "
            f"files of one step in the order given (open them in an editor beside {chap}, "
            f"which explains why they are shaped so), then run that step's tests from a build "
            f"of this stage alone (`cmake -S {stage.name} -B build-{num} && cmake --build "
            f"build-{num} -j2`) and read what they check. The page is generated by "
            f"`tools/stage gen-guides` (`tools/stage guide {num}` prints it); do not edit it."]
    return [
        f"This page is chapter {num}'s diff (`{prev.name}` → `{stage.name}`) in reading order: "
        f"the core library files the chapter adds or changes first, in the order to read them, "
        f"then its tests, then the rest (shim, benchmarks, examples, build files and docs, "
        f"labs). Each file comes with the first sentence of its header comment and the size "
        f"of the change. In a workshop sitting, read the core files in this order with "
        f"{chap} open beside them, looking at each changed file's diff rather than the whole "
        f"file; then run the named tests from a build of this stage alone (`cmake -S "
        f"{stage.name} -B build-{num} && cmake --build build-{num} -j2`) and skim the rest. "
        f"The page is generated by `tools/stage gen-guides` (`tools/stage guide {num}` prints "
        f"it); do not edit it.", "",
        f"One file's full diff: `diff -u {prev.name}/F {stage.name}/F` (F: the path shown); "
        f"the whole chapter: `tools/stage diff {prev.num} {num}`, also in "
        f"[diffs/stage{num}.diff](../diffs/stage{num}.diff)."]


def chapter1_page(stage):
    files = sorted((f for f in stage_files(stage) if f != "CHAPTER"), key=str)
    core = sorted((f for f in files if is_core(f)), key=order_key)
    out = [chapter_title(stage, "guided tour"), ""] + intro(stage, None) + [""]
    exercised = gt.exercised_by(core)
    programs = {}
    for frag in gt.fragments_of(stage.num):
        for rel, names, regex in gt.fragment_programs(frag, stage.num)[0]:
            programs[rel] = (names, regex)
    n, seen, step = 0, set(), None
    for f in core + [None]:
        title = step_title(order_key(f)) if f else None
        if title != step and step is not None:  # close the previous step with its tests
            out += step_tests(stage, step_files, exercised, programs, seen)
        if f is None:
            break
        if title != step:
            step, step_files = title, []
            out += [f"## Step {order_key(f)[0] + 1}: {title}", ""]
        n += 1
        step_files.append(f)
        out.append(file_item(n, f, None, stage, "whole"))
    out += tests_section(stage, None, [])
    out += other_sections(stage, None, [(f, "whole") for f in files if not is_core(f)])
    return out


def step_tests(stage, step_files, exercised, programs, seen):
    """The tests of one chapter-1 step: one ctest command, each test described once."""
    tests = sorted({t for g in step_files for t in exercised.get(g, [])})
    if not tests:
        return [""]
    names = sorted({n for t in tests for n in programs[t][0]})
    every = sorted({n for t in programs for n in programs[t][0]})
    out = ["", f"Tests that check this step: `ctest --test-dir build-{stage.num} -R "
               f"'{gt.ctest_regex(stage.num, names, every)}'` runs them all.", ""]
    again = [t for t in tests if t in seen]
    out += [test_item(t, programs[t][1], stage.num) for t in tests if t not in seen]
    if again:
        out.append("- Again, as above: " + ", ".join(f"`{t}`" for t in again) + ".")
    seen.update(tests)
    return out + [""]


def tests_section(stage, prev, changed):
    """The chapter's new test fragments, and (N >= 2) earlier tests of the changed files."""
    num = stage.num
    out = ["## The tests of this chapter", ""]
    frags = gt.fragments_of(num)
    if not frags:
        out += ["This chapter adds no test fragment; the earlier chapters' tests run against "
                "it unchanged (tests/StageTests.cmake).", ""]
    for frag in frags:
        progs, rest = gt.fragment_programs(frag, num)
        label = gt.fragment_label(frag)
        out += [f"`tests/{frag}` (first run in stage {num}; all of it: `ctest --test-dir "
                f"build-{num} -L {label}`):", ""]
        out += [test_item(rel, regex, num) for rel, _names, regex in progs]
        if rest:
            out.append("- Also in this fragment, earlier programs in new settings: "
                       + ", ".join(f"`s{num}_{r}`" for r in rest) + ".")
        out.append("")
    if prev is not None and changed:
        old = gt.exercised_by([f for f in changed if is_core(f)])
        first = {f: first_stage(f) for f in changed if is_core(f)}
        by_frag = {}
        for f, tests in old.items():
            for t in tests:
                by_frag.setdefault(t.split("/")[1], set()).add(f)
        for f, k in first.items():
            if k is not None and 1 < k < num and gt.fragments_of(k):
                main = gt.fragments_of(k)[0]  # the chapter's own: ring, tree, torch, shm, ...
                by_frag.setdefault(main.split("/")[0], set()).add(f)
        if by_frag:
            out += ["Earlier tests that exercise the files this chapter changes (for a file of "
                    "stage 1, the tests tools/stagetool/guide_tests.py's table names; for a "
                    "later file, the main tests of the chapter that added it):", ""]
            for frag in sorted(by_frag):
                files = ", ".join(f"`{f}`" for f in sorted(by_frag[frag]))
                label = gt.fragment_label(frag + "/")
                out.append(f"- `tests/{frag}/` (`ctest --test-dir build-{num} -L {label}`): "
                           f"{files}.")
            out.append("")
    return out


def first_stage(rel):
    """The number of the first stage with code that has the file."""
    return next((s.num for s in code_stages() if (s.path / rel).is_file()), None)


def other_sections(stage, prev, items):
    out = []
    for k, (title, _pats) in enumerate(SECTIONS):
        mine = sorted(i for i in items if section_of(i[0]) == k)
        if not mine:
            continue
        out += [f"## {title}", ""]
        if prev is not None:
            out += [f"Full diff of one file: `diff -u {prev.name}/F {stage.name}/F`.", ""]
        out += [file_item(n + 1, rel, prev, stage, kind) for n, (rel, kind) in enumerate(mine)]
        out.append("")
    return out


def chapter_page(prev, stage):
    new, changed, removed = file_sets(prev, stage)
    kinds = {**{f: "new" for f in new}, **{f: "changed" for f in changed},
             **{f: "removed" for f in removed}}
    core = sorted((f for f in kinds if is_core(f)), key=order_key)
    out = [chapter_title(stage, "guided diff"), ""] + intro(stage, prev) + [""]
    out += [f"The chapter: {len(new)} new, {len(changed)} changed and {len(removed)} removed "
            f"files, {len(core)} of them in the core library.", ""]
    out += ["## The core library, in reading order", "",
            f"Full diff of one file: `diff -u {prev.name}/F {stage.name}/F`.", ""]
    step = None
    for n, f in enumerate(core, 1):
        title = step_title(order_key(f))
        if title != step:
            out += ([""] if step else []) + [f"### {title}", ""]
            step = title
        out.append(file_item(n, f, prev, stage, kinds[f]))
    rest = [(f, k) for f, k in kinds.items() if not is_core(f)]
    torch = [i for i in rest if section_of(i[0]) == 0]  # chapter 4's core: before its tests
    out += [""] + other_sections(stage, prev, torch) + tests_section(stage, prev, changed)
    out += other_sections(stage, prev, [i for i in rest if i not in torch])
    return out


def guide_text(stage):
    pairs = {b.num: a for a, b in diff_targets()}
    lines = chapter_page(pairs[stage.num], stage) if stage.num in pairs else chapter1_page(stage)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def guide_targets():
    """{file name: stage} for every stage with code."""
    return {f"stage{s.num}.md": s for s in code_stages()}


def cmd_guide(args):
    print(guide_text(resolve_stage(args.stage)), end="")
    return 0


def cmd_gen_guides(args):
    wanted = {name: guide_text(stage).encode("utf-8") for name, stage in guide_targets().items()}
    write_generated(ROOT / GUIDES_DIR, wanted, ".md")
    return 0
