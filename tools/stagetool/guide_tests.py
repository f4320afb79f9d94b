"""tools/stagetool/guide_tests.py: which tests a guided diff names, and how to run them.

What it is: the test half of `tools/stage guide` (guide.py renders the page). Three sources:
  - tests/StageTests.cmake's feature table (`<first stage> <fragment>`): the fragments a
    chapter adds are the ones whose first stage is the chapter's number;
  - a fragment's test programs: the files beside it named *_test.* or test_*.* (.cc, .cu,
    .py), or every .cc there when none is so named (tests/soak/soak.cc); the CTest names a
    program registers are the names in the fragment that contain its key (its file stem
    without test_/_test), and the names no program claims are listed as "also run";
  - STAGE1_EXERCISES: a hand-made table of which stage-1 files each stage-1 test program
    exercises, from what it calls and includes (tests/p2p/p2p_errors_test.cc calls init.cc's
    and enqueue.cc's argument checks, tests/primitives/test_primitives.cc includes
    device/primitives.h and host_backend.h, ...). It is a judgement, kept small and explicit,
    not a coverage measurement; a glob that matches no file of the stage is dropped.
Invariants: reads the tree only; every list it returns is sorted or in the table's order.
Part of tools/stage (see its --help). NCCL counterpart: none. Added in: foundation (tools/).
"""

import fnmatch
import os
import re

from .chain import ROOT

TESTS_DIR = ROOT / "tests"
FEATURE_RE = re.compile(r"^\s*(\d+)\s+([\w/]+_tests\.cmake)\)?\s*$", re.M)
# How a fragment names its CTest tests (the stage prefix, s<N>_, is added by the fragment).
NAME_RES = [re.compile(r"(?:NAME|set\(_name)\s+\$\{TCCL_STAGE_PREFIX\}(\w+)"),
            re.compile(r"_tccl_trace_test\((\w+)"),
            re.compile(r"tccl_torch_test\(NAME\s+(\w+)")]
TEST_FILE_RE = re.compile(r"^(test_\w+|\w+_test)\.(cc|cu|py)$")

# Stage 1: test program -> the stage-1 files it exercises (see the module's header).
STAGE1_EXERCISES = {
    "tests/primitives/test_primitives.cc": [
        "src/device/fifo.h", "src/device/primitives.h", "src/device/reduce_copy.h",
        "src/host_backend.h", "src/progress_signal.h"],
    "tests/p2p/p2p_errors_test.cc": [
        "include/tccl.h", "src/init.cc", "src/misc.cc", "src/enqueue.h", "src/enqueue.cc",
        "src/p2p_patterns.cc", "src/core.h", "src/comm_context.*", "src/group.*"],
    "tests/p2p/p2p_threads_test.cc": [
        "src/init.cc", "src/comm.*", "src/group.*", "src/executor.h", "src/executor_host.cc",
        "src/host_backend.h", "src/progress_signal.h"],
    "tests/p2p/p2p_group_test.cc": [
        "src/enqueue.cc", "src/group.*", "src/group_launch.cc", "src/launch_state.h",
        "src/plan.h", "src/plan_p2p.cc", "src/device/work.h", "src/transport.*"],
    "tests/p2p/p2p_patterns_test.cc": [
        "include/tccl.h", "src/p2p_patterns.cc", "src/plan_p2p.cc", "src/device/work.h",
        "src/device/run_work.h", "src/device/p2p.h", "src/device/primitives.h",
        "src/device/reduce_copy.h", "src/executor*", "src/device/kernel*",
        "src/device/device_backend.cuh", "src/cuda_wrap.*", "src/transport/socket/*"],
    "tests/p2p/p2p_large_test.cc": [
        "src/device/p2p.h", "src/device/fifo.h", "src/device/primitives.h", "src/proxy.*",
        "src/transport/socket/*"],
    "tests/p2p/p2p_peer_death_test.cc": [
        "src/comm_context.*", "src/proxy.*", "src/transport/socket/*", "src/executor_host.cc"],
    "tests/p2p/p2p_netns_test.cc": [
        "src/comm.*", "src/transport.*", "src/transport/socket/*"],
    "tests/trace/trace_test.cc": [
        "src/trace.*", "src/device/trace_record.h"],
}


def feature_table(tests_dir=None):
    """[(first stage, fragment path relative to tests/)] in the table's order."""
    path = (tests_dir or TESTS_DIR) / "StageTests.cmake"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    m = re.search(r"set\(features\b(.*?)\)", text, re.S)
    return [(int(n), frag) for n, frag in FEATURE_RE.findall(m.group(1) + "\n")] if m else []


def fragments_of(num, tests_dir=None):
    """The fragments (paths relative to tests/) whose feature starts at stage num."""
    tdir = tests_dir or TESTS_DIR
    return [f for n, f in feature_table(tdir) if n == num and (tdir / f).is_file()]


def fragment_label(fragment):
    """The CTest label a fragment gives its tests besides stage<N> (its folder's name, except
    where the fragment says otherwise: ring's is coll)."""
    return "coll" if fragment.startswith("ring/") else fragment.split("/")[0]


def ctest_names(fragment_text):
    text = "\n".join(line.split("#", 1)[0] for line in fragment_text.splitlines())
    names = set()
    for rx in NAME_RES:
        names.update(rx.findall(text))
    if "NAME ${_t}" in text:  # tests/primitives: the test is named after its program, _t
        names.update(re.findall(r"set\(_t\s+\$\{TCCL_STAGE_PREFIX\}(\w+)", text))
    return sorted(names)


def test_key(filename):
    stem = os.path.splitext(filename)[0]
    return stem[:-5] if stem.endswith("_test") else stem


def ctest_regex(num, mine, names):
    """The -R regex that selects the tests `mine` of a fragment's `names` and no other
    (CTest adds .np<k> to a multi-rank test's name)."""
    prefix = os.path.commonprefix(mine)
    if len(mine) > 1 and prefix and all(n in mine for n in names if n.startswith(prefix)):
        return f"^s{num}_{prefix}"
    alts = mine[0] if len(mine) == 1 else "(" + "|".join(mine) + ")"
    return f"^s{num}_{alts}(\\.np[0-9]+)?$"


def fragment_programs(fragment, num, tests_dir=None):
    """([(test file relative to the repository, its CTest names, -R regex)], unclaimed names)
    for one fragment, as stage num registers it."""
    tdir = tests_dir or TESTS_DIR
    frag = tdir / fragment
    folder = frag.parent
    files = sorted(f for f in os.listdir(folder) if TEST_FILE_RE.match(f))
    if not files:
        files = sorted(f for f in os.listdir(folder) if f.endswith(".cc"))
    names = ctest_names(frag.read_text(encoding="utf-8"))
    keys = {f: test_key(f) for f in files}
    out, claimed = [], set()
    for f in files:
        key = keys[f]
        # errors_fork is errors_fork_test.cc's, not errors_test.cc's.
        longer = [k for k in keys.values() if k != key and key in k]
        mine = [n for n in names if key in n and not any(k in n for k in longer)]
        if not mine and key.startswith("test_"):
            mine = [n for n in names if key[5:] in n]
        claimed.update(mine)
        rel = (folder / f).relative_to(tdir.parent).as_posix()
        out.append((rel, mine, ctest_regex(num, mine, names) if mine else None))
    return out, [n for n in names if n not in claimed]


def exercised_by(stage_files_list):
    """{stage-1 file: [test programs]} from STAGE1_EXERCISES, globs expanded over the files."""
    out = {}
    for test, pats in STAGE1_EXERCISES.items():
        for f in stage_files_list:
            if any(fnmatch.fnmatchcase(f, p) for p in pats):
                out.setdefault(f, []).append(test)
    return out
