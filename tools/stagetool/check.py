"""tools/stagetool/check.py: the chain check (`check`).

Invariants: read-only, except the temporary build trees it removes again; one line per
problem, notes do not fail the check.
Part of tools/stage (see its --help). NCCL counterpart: none. Added in: foundation (tools/).
"""

import fnmatch
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .chain import (DIFFS_DIR, ROOT, all_stages, code_stages, excluded, read_bytes,
                    stage_files)
from .diffs import chapter_diff, diff_targets
from .guide import GUIDES_DIR, guide_targets, guide_text

KNOBS_DOC = Path("docs/knobs.md")
DOXYFILE = Path("docs/Doxyfile")
SOURCE_EXTS = {".h", ".hh", ".hpp", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".py"}
KNOB_PATTERNS = [
    # TCCL_PARAM(Name, "ENV", default) reads TCCL_ENV.
    (re.compile(r'TCCL_PARAM\(\s*\w+\s*,\s*"([A-Z0-9_]+)"'), "TCCL_{}"),
    # Direct reads of a full name.
    (re.compile(r'(?:getenv|getEnvString|readIntParam)\(\s*"(TCCL_[A-Z0-9_]+)"'), "{}"),
    (re.compile(r'environ(?:\.get)?[\(\[]\s*[\'"](TCCL_[A-Z0-9_]+)[\'"]'), "{}"),
    (re.compile(r'os\.getenv\(\s*[\'"](TCCL_[A-Z0-9_]+)[\'"]'), "{}"),
]


class Report:
    def __init__(self):
        self.problems = 0
        self.notes = 0

    def problem(self, msg):
        self.problems += 1
        print(f"problem: {msg}", flush=True)

    def note(self, msg):
        self.notes += 1
        print(f"note:    {msg}", flush=True)


def read_chapter(stage):
    """The CHAPTER patterns of a stage, or None when the file is missing."""
    path = stage.path / "CHAPTER"
    if not path.is_file():
        return None
    pats = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("./"):
            line = line[2:]
        pats.append(line)
    return pats


def declared(rel, patterns):
    for pat in patterns:
        if pat.endswith("/"):
            if rel.startswith(pat):
                return True
        elif fnmatch.fnmatchcase(rel, pat):
            return True
    return False


def is_glob(pat):
    return pat.endswith("/") or any(c in pat for c in "*?[")


def check_pair(prev, stage, rep):
    patterns = read_chapter(stage)
    if patterns is None:
        rep.problem(f"{stage.name}/CHAPTER is missing: list the files chapter {stage.num} adds "
                    f"or changes (see tools/stage --help)")
        return
    fa, fb = stage_files(prev), stage_files(stage)
    for rel in sorted(fa):
        if rel == "CHAPTER" or declared(rel, patterns):
            continue
        if rel not in fb:
            rep.problem(f"{stage.name}/{rel}: removed (present in {prev.name}) but not declared "
                        f"in {stage.name}/CHAPTER")
        elif read_bytes(prev.path / rel) != read_bytes(stage.path / rel):
            rep.problem(f"{stage.name}/{rel}: differs from {prev.name}/{rel} but is not declared "
                        f"in {stage.name}/CHAPTER (declare it, or make them agree: a fix made "
                        f"in {prev.name} travels on with `tools/stage forward {prev.num} {rel}`)")
    for rel in sorted(fb - fa):
        if rel != "CHAPTER" and not declared(rel, patterns):
            rep.problem(f"{stage.name}/{rel}: undeclared new file (not in {prev.name}, not in "
                        f"{stage.name}/CHAPTER)")
    for pat in patterns:
        if is_glob(pat):
            if not any(declared(f, [pat]) for f in fa | fb):
                rep.note(f"{stage.name}/CHAPTER: pattern {pat!r} matches no file")
        elif pat not in fa and pat not in fb:
            rep.note(f"{stage.name}/CHAPTER: {pat} exists in neither {prev.name} nor {stage.name}")
        elif pat in fa and pat in fb and read_bytes(prev.path / pat) == read_bytes(stage.path / pat):
            rep.note(f"{stage.name}/CHAPTER: {pat} is declared but identical to {prev.name}'s")


def check_diffs(rep):
    out_dir = ROOT / DIFFS_DIR
    wanted = set()
    for prev, stage in diff_targets():
        name = f"stage{stage.num}.diff"
        wanted.add(name)
        have = read_bytes(out_dir / name)
        want = chapter_diff(prev, stage).encode("utf-8", errors="surrogateescape")
        if have is None:
            rep.problem(f"{DIFFS_DIR / name}: missing (run tools/stage gen-diffs)")
        elif have != want:
            rep.problem(f"{DIFFS_DIR / name}: out of date (run tools/stage gen-diffs)")
    if out_dir.is_dir():
        for p in sorted(out_dir.glob("*.diff")):
            if p.name not in wanted:
                rep.problem(f"{DIFFS_DIR / p.name}: stale, no such chapter with code "
                            f"(run tools/stage gen-diffs)")
    return len(wanted)


def check_guides(rep):
    out_dir = ROOT / GUIDES_DIR
    wanted = guide_targets()
    for name, stage in wanted.items():
        have = read_bytes(out_dir / name)
        if have is None:
            rep.problem(f"{GUIDES_DIR}/{name}: missing (run tools/stage gen-guides)")
        elif have != guide_text(stage).encode("utf-8"):
            rep.problem(f"{GUIDES_DIR}/{name}: out of date (run tools/stage gen-guides)")
    if out_dir.is_dir():
        for p in sorted(out_dir.glob("*.md")):
            if p.name not in wanted:
                rep.problem(f"{GUIDES_DIR}/{p.name}: stale, no such chapter with code "
                            f"(run tools/stage gen-guides)")
    return len(wanted)


_C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip_c_comments(text):
    """Blanks out C/C++ comments (keeping their newlines, so line numbers stay right): a knob
    named in a comment is documentation, not a read."""
    def blank(m):
        tok = m.group(0)
        return "\n" * tok.count("\n") if tok.startswith("/") else tok
    return _C_TOKENS.sub(blank, text)


def code_knobs():
    """{knob: first 'path:line' that reads it} over common/ and stage*/ sources."""
    found = {}
    roots = [ROOT / "common"] + [s.path for s in all_stages()]
    for top in roots:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not excluded(d))
            for f in sorted(filenames):
                if Path(f).suffix not in SOURCE_EXTS:
                    continue
                path = Path(dirpath) / f
                text = path.read_text(encoding="utf-8", errors="replace")
                if path.suffix != ".py":
                    text = strip_c_comments(text)
                for rx, fmt in KNOB_PATTERNS:
                    for m in rx.finditer(text):
                        knob = fmt.format(m.group(1))
                        line = text.count("\n", 0, m.start()) + 1
                        found.setdefault(knob, f"{path.relative_to(ROOT)}:{line}")
    return found


def documented_knobs():
    path = ROOT / KNOBS_DOC
    if not path.is_file():
        return None
    knobs = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("|"):
            first = line.strip().strip("|").split("|")[0]
            knobs.update(re.findall(r"\bTCCL_[A-Z0-9_]+\b", first))
    return knobs


def check_knobs(rep):
    doc = documented_knobs()
    if doc is None:
        rep.problem(f"{KNOBS_DOC} is missing")
        return 0
    found = code_knobs()
    for knob in sorted(found):
        if knob not in doc:
            rep.problem(f"knob {knob} (read at {found[knob]}) is not in the table of {KNOBS_DOC}")
    return len(found)


def check_registration(rep):
    cs = code_stages()
    top = ROOT / "CMakeLists.txt"
    text = top.read_text(encoding="utf-8") if top.is_file() else ""
    text = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # drop comments
    m = re.search(r"set\(\s*TCCL_STAGES\s+([^)]*)\)", text)
    listed = m.group(1).split() if m else []
    if not m:
        rep.problem("CMakeLists.txt: no set(TCCL_STAGES ...) found")
    for s in cs:
        if s.name not in listed:
            rep.problem(f"CMakeLists.txt: {s.name} has code but is not in TCCL_STAGES")
    for name in listed:
        if name not in {s.name for s in cs}:
            rep.problem(f"CMakeLists.txt: TCCL_STAGES lists {name}, which has no CMakeLists.txt")
    dox = ROOT / DOXYFILE
    if cs and dox.is_file():
        want = f"{cs[-1].name}/include/tccl.h"
        text = re.sub(r"\\\s*\n", " ", dox.read_text(encoding="utf-8"))  # join continued lines
        inputs = re.findall(r"^\s*INPUT\s*=(.*)$", text, re.M)
        if not any(want in i for i in inputs):
            rep.problem(f"{DOXYFILE}: INPUT should name {want} (the latest stage with code)")


def run_logged(cmd, log):
    with open(log, "ab") as f:
        f.write(("$ " + " ".join(cmd) + "\n").encode())
        f.flush()
        return subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode


def check_builds(args, rep):
    cs = code_stages()
    if not cs:
        return 0, 0
    ok = 0
    root = Path(args.build_root) if args.build_root else Path(tempfile.mkdtemp(prefix="tccl-stage-"))
    root.mkdir(parents=True, exist_ok=True)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    try:
        # Every stage is configured first, --jobs at a time: a configure is mostly one process
        # (compiler checks, find_package), so one after each build would leave cores idle.
        # The builds then run one after another, each with --jobs.
        def configure(s):
            bdir = root / s.name
            log = root / f"{s.name}.log"
            log.unlink(missing_ok=True)
            cfg = ["cmake", "-S", str(s.path), "-B", str(bdir), "-DTCCL_BUILD_TESTS=OFF"]
            if not (bdir / "CMakeCache.txt").exists():
                cfg += gen
            cfg += args.cmake_arg
            return run_logged(cfg, log)

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            configured = list(pool.map(configure, cs))
        for s, cfg_rc in zip(cs, configured):
            bdir = root / s.name
            log = root / f"{s.name}.log"
            print(f"building {s.name} alone in {bdir} ...", flush=True)
            what = None
            if cfg_rc != 0:
                what = "does not configure on its own"
            elif run_logged(["cmake", "--build", str(bdir), f"-j{args.jobs}"], log) != 0:
                what = "does not build on its own"
            if what:
                tail = log.read_text(errors="replace").splitlines()[-30:]
                print("\n".join("    | " + t for t in tail))
                rep.problem(f"{s.name}: {what} (cmake -S {s.name} -B <dir> -DTCCL_BUILD_TESTS=OFF)")
            else:
                ok += 1
    finally:
        if not args.build_root and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"build trees and logs kept in {root}")
    return ok, len(cs)


def cmd_check(args):
    rep = Report()
    built, tried = (0, 0) if args.no_build else check_builds(args, rep)
    pairs = diff_targets()
    for prev, stage in pairs:
        check_pair(prev, stage, rep)
    ndiffs = check_diffs(rep)
    nguides = check_guides(rep)
    nknobs = check_knobs(rep)
    check_registration(rep)
    cs = code_stages()
    print(f"stage check: {rep.problems} problem(s), {rep.notes} note(s); "
          f"{len(cs)} stage(s) with code ({', '.join(s.name for s in cs) or 'none'}); "
          f"{'builds skipped' if args.no_build else f'{built} of {tried} built alone'}; "
          f"{len(pairs)} chapter(s) compared; {ndiffs} diff(s) and {nguides} guide(s) checked; "
          f"{nknobs} knob(s) found in code")
    return 1 if rep.problems else 0
