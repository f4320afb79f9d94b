"""tools/stagetool/chain.py: the stage chain: which stages exist, which have code, their files.

Invariants: a stage is a directory stageN-name at the repository root; it "has code" when it
has a CMakeLists.txt; EXCLUDES (build trees, editor files) are invisible to every command.
Part of tools/stage (see its --help). NCCL counterpart: none. Added in: foundation (tools/).
"""

import fnmatch
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # tools/stagetool/ -> repo
DIFFS_DIR = Path("docs/chapters/diffs")

# Basenames (globs) left out of diffs and comparisons: build trees and editor droppings.
# The same list feeds `diff -x`, so the diff and the check always see the same files.
EXCLUDES = ["build", "build-*", "build_*", "cmake-build-*", ".git", ".cache", "__pycache__",
            "*.pyc", "*.o", "*.swp", "*~", ".#*", ".DS_Store"]
# The chapter diff also leaves out CHAPTER: its list is the diff's summary already.
DIFF_EXCLUDES = EXCLUDES + ["CHAPTER"]
STAGE_RE = re.compile(r"^stage(\d+)-[A-Za-z0-9_-]+$")


class Stage:
    def __init__(self, num, name):
        self.num = num
        self.name = name
        self.path = ROOT / name

    @property
    def has_code(self):
        return (self.path / "CMakeLists.txt").is_file()

    def __repr__(self):
        return self.name


def all_stages():
    out = []
    for p in ROOT.iterdir():
        m = STAGE_RE.match(p.name)
        if m and p.is_dir():
            out.append(Stage(int(m.group(1)), p.name))
    return sorted(out, key=lambda s: s.num)


def code_stages():
    return [s for s in all_stages() if s.has_code]


def resolve_stage(arg):
    """'2', 'stage2', 'stage2-ring', 'stage2-ring/' or a path to it -> Stage."""
    text = os.path.basename(os.path.normpath(str(arg)))
    m = re.match(r"^(?:stage)?(\d+)(?:-.*)?$", text)
    if not m:
        die(f"not a stage: {arg!r} (use a number, stageN or the directory name)")
    num = int(m.group(1))
    for s in all_stages():
        if s.num == num and (text.isdigit() or text == f"stage{num}" or text == s.name):
            return s
    die(f"no stage directory for {arg!r}")


def die(msg):
    print(f"tools/stage: {msg}", file=sys.stderr)
    sys.exit(2)


def excluded(name, patterns=EXCLUDES):
    return any(fnmatch.fnmatchcase(name, pat) for pat in patterns)


def stage_files(stage):
    """Relative paths (posix strings) of every file in a stage, minus EXCLUDES."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(stage.path):
        dirnames[:] = sorted(d for d in dirnames if not excluded(d))
        for f in filenames:
            if not excluded(f):
                full = Path(dirpath) / f
                out.add(full.relative_to(stage.path).as_posix())
    return out


def read_bytes(path):
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return None
