"""tools/stagetool/new.py: `tools/stage new N`: start chapter N as a copy of stage N-1.

A chapter begins as an exact copy of the stage before it, so that its diff shows only what
the chapter then changes. `new` copies every file of stage N-1 (minus build trees and editor
files) into stage N's directory, keeps the planned README.md that directory already holds,
and writes a CHAPTER file that declares README.md and CMakeLists.txt; each file the chapter
then adds or edits gets its line there (tools/stage check says which are missing).

Invariants: refuses when stage N already has code or stage N-1 has none; never touches git.
Part of tools/stage (see its --help). NCCL counterpart: none. Added in: stage 3 (tools/).
"""

import shutil

from .chain import all_stages, die, resolve_stage, stage_files

CHAPTER_TEMPLATE = """\
# Chapter {num} ({title}): the files this chapter adds or changes relative to {prev}.
# Every other file is identical to stage {prevnum}'s (tools/stage check enforces it).
README.md
CMakeLists.txt
"""


def cmd_new(args):
    target = resolve_stage(args.stage)
    prev = [s for s in all_stages() if s.num == target.num - 1]
    if not prev:
        die(f"no stage {target.num - 1} to copy from")
    prev = prev[0]
    if target.has_code:
        die(f"{target.name} already has code (it has a CMakeLists.txt)")
    if not prev.has_code:
        die(f"{prev.name} has no code to start from")
    kept = 0
    for rel in sorted(stage_files(prev)):
        if rel == "CHAPTER":
            continue  # each chapter lists its own files
        dst = target.path / rel
        if dst.exists():
            kept += 1  # the planned README.md: the chapter rewrites it
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(prev.path / rel, dst)
    title = target.name.split("-", 1)[1] if "-" in target.name else target.name
    (target.path / "CHAPTER").write_text(CHAPTER_TEMPLATE.format(
        num=target.num, title=title, prev=prev.name, prevnum=prev.num))
    print(f"{target.name}: copied from {prev.name} ({kept} file(s) kept as they were); "
          f"wrote CHAPTER.\nNext: add {target.name} to TCCL_STAGES in the top-level "
          f"CMakeLists.txt, set TCCL_STAGE_NUM in {target.name}/CMakeLists.txt, and list each "
          f"file the chapter adds or changes in CHAPTER.")
    return 0
