"""tools/stagetool/forward.py: carrying a change along the chain (`forward`).

Invariants: writes only files of stages after K, and only where the rules of --help say so;
never changes git state (it reads git show, runs git merge-file on temporary files).
Part of tools/stage (see its --help). NCCL counterpart: none. Added in: foundation (tools/).
"""

import re
import subprocess
import tempfile
from pathlib import Path

from .chain import ROOT, code_stages, die, read_bytes, resolve_stage


def git_version(stage, rel, base):
    spec = f":{stage.name}/{rel}" if base == "INDEX" else f"{base}:{stage.name}/{rel}"
    res = subprocess.run(["git", "-C", str(ROOT), "show", spec], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    return res.stdout if res.returncode == 0 else None


def write_or_delete(path, data):
    if data is None:
        path.unlink()
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def merge_file(cur, base, new, labels):
    """git merge-file -p; returns (conflicts, merged bytes) or (None, None) on error."""
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for name, data in (("cur", cur), ("base", base), ("new", new)):
            p = Path(d) / name
            p.write_bytes(data)
            paths.append(str(p))
        cmd = ["git", "merge-file", "-p"]
        for label in labels:
            cmd += ["-L", label]
        res = subprocess.run(cmd + paths, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if res.returncode < 0 or res.returncode > 127:
            return None, None
        return res.returncode, res.stdout


def normalize_rel(stage, arg):
    p = Path(arg)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(stage.path)
        except ValueError:
            die(f"{arg} is not inside {stage.name}")
    parts = p.as_posix().split("/")
    if parts and parts[0] in (stage.name, f"./{stage.name}"):
        parts = parts[1:]
    elif parts and parts[0] == "." and len(parts) > 1 and parts[1] == stage.name:
        parts = parts[2:]
    rel = "/".join(parts)
    if not rel:
        die(f"{arg}: not a file inside {stage.name}")
    return rel


def forward_file(k, later, rel, args):
    pre = git_version(k, rel, args.base)
    post = read_bytes(k.path / rel)
    label = f"{k.name}/{rel}"
    if pre is None and post is None:
        print(f"{label}: no such file (and none at {args.base})")
        return 1
    if pre == post:
        print(f"{label}: unchanged since {args.base}; nothing to forward")
        return 0
    if pre is None:
        print(f"{label}: new since {args.base}: it is created where later stages lack it")
    if post is None:
        print(f"{label}: deleted since {args.base}: it is deleted where later stages still "
              f"hold the old version")
    src = k
    for stage in later:
        dst = stage.path / rel
        cur = read_bytes(dst)
        where = f"  {stage.name}/{rel}"
        if cur == post:
            print(f"{where}: already up to date")
            continue
        if cur == pre:
            action = "created" if cur is None else ("deleted" if post is None else "updated")
            if not args.dry_run:
                write_or_delete(dst, post)
            print(f"{where}: {action}{' (dry run)' if args.dry_run else ''}")
            continue
        own_base = git_version(stage, rel, args.base)
        if own_base is not None and cur is not None and cur != own_base:
            # Someone already changed this stage's copy (a hand merge): carry its change on.
            print(f"{where}: the chapter changed it, and its working copy differs from "
                  f"{args.base}: taken as merged by hand; carrying its own change on")
            pre, post, src = own_base, cur, stage
            continue
        if args.merge and cur is not None and pre is not None and post is not None:
            conflicts, merged = merge_file(cur, pre, post, [f"{stage.name}", f"{args.base}",
                                                            f"{src.name}"])
            if conflicts is None:
                print(f"{where}: git merge-file failed; merge by hand")
                return 1
            if not args.dry_run:
                dst.write_bytes(merged)
            if conflicts == 0:
                print(f"{where}: the chapter changed it; merged cleanly with git merge-file "
                      f"(review it){' (dry run)' if args.dry_run else ''}")
                pre, post, src = cur, merged, stage
                continue
            print(f"{where}: {conflicts} conflict(s) left as <<<<<<< markers"
                  f"{' (dry run: nothing written)' if args.dry_run else ''}; resolve them, "
                  f"then run: tools/stage forward {stage.num} {rel}")
            return 1
        print(f"{where}: the chapter changed this file, so the change must be merged by hand "
              f"(or retry with --merge); then run: tools/stage forward {stage.num} {rel}")
        return 1
    return 0


def patch_strip(patch_text, k):
    """The -p level for a patch made against stage k (from the root or from inside the stage)."""
    paths = []
    for line in patch_text.splitlines():
        if line.startswith(("--- ", "+++ ")):
            p = line[4:].split("\t", 1)[0].strip()
            if p != "/dev/null":
                paths.append(p)
    if not paths:
        die("the patch names no files")
    levels = set()
    for p in paths:
        parts = p.split("/")
        if k.name in parts:
            levels.add(parts.index(k.name) + 1)
        elif len(parts) > 1 and parts[0] in ("a", "b") and (k.path / "/".join(parts[1:])).exists():
            levels.add(1)
        elif (k.path / p).exists():
            levels.add(0)
        else:
            levels.add(1 if parts[0] in ("a", "b") else 0)
    if len(levels) != 1:
        die(f"cannot tell how the patch's paths relate to {k.name}: {paths[:4]}")
    return levels.pop()


def forward_patch(k, later, patch_path, args):
    text = Path(patch_path).read_text(encoding="utf-8", errors="replace")
    strip = patch_strip(text, k)
    status = 0
    for stage in later:
        base = ["patch", f"-p{strip}", f"--directory={stage.path}", "--batch", "--forward",
                "--no-backup-if-mismatch", "-i", str(Path(patch_path).resolve())]
        dry = subprocess.run(base + ["--dry-run"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if dry.returncode == 0:
            if not args.dry_run:
                subprocess.run(base, stdout=subprocess.DEVNULL, check=True)
            print(f"{stage.name}: applied cleanly{' (dry run)' if args.dry_run else ''}")
            continue
        status = 1
        out = dry.stdout.decode(errors="replace")
        if args.dry_run:
            print(f"{stage.name}: does not apply cleanly (dry run):")
            print("\n".join("    | " + line for line in out.splitlines()))
            continue
        res = subprocess.run(base, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = res.stdout.decode(errors="replace")
        rejects = re.findall(r"saving rejects to file (\S+)", out)
        print(f"{stage.name}: applied with failures; merge the rejected hunks by hand:")
        print("\n".join("    | " + line for line in out.splitlines()))
        for r in rejects:
            print(f"    reject: {stage.name}/{r}")
    return status


def cmd_forward(args):
    k = resolve_stage(args.stage)
    later = [s for s in code_stages() if s.num > k.num]
    if not later:
        print(f"no stage with code after {k.name}: nothing to do")
        return 0
    patch = args.patch
    if patch is None and len(args.files) == 1:
        f = Path(args.files[0])
        inside = (k.path / f).exists() and not f.is_absolute()
        if f.suffix in (".patch", ".diff") and f.is_file() and not inside:
            patch = args.files[0]
    if patch is not None:
        return forward_patch(k, later, patch, args)
    if not args.files:
        die("forward: give files inside the stage, or --patch FILE")
    status = 0
    for f in args.files:
        status |= forward_file(k, later, normalize_rel(k, f), args)
    return status
