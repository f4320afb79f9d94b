"""tools/exercisetool/cli.py: the commands of tools/exercise (see its --help).

What it is: list, start, check, reset and verify over the catalog (catalog.py) and the markers
(markers.py). Grading is the stage's standalone CMake build (cmake -S stageN, CUDA off), only
the targets the exercise's tests need, then `ctest -R` on those tests; CTest's multi-rank tests
already pass mpirun --allow-run-as-root/--oversubscribe where needed.

Build folders (under build/, the whole tree's folder, which tools/test uses; tools/demo builds
a stage on its own next to it, in build-N/): `start` writes the learner's copy to
build/exercises/learn-<stage> (`start X.Y`: build/exercises/learn-X.Y) unless --to says
otherwise, and needs nothing built before it; `check` builds in the copy's own
build/exercises/<stage>, `verify` in build/exercises/verify.

Invariants: `start` and `reset` write only inside the learner's copy; `check` and `verify`
write only inside their build directory (default build/exercises), never /tmp; verify rewrites
a scratch file only when its content changes, so one build tree per stage is reused
incrementally across exercises and runs; a test passes only when CTest says "Passed".

NCCL counterpart: none. Added in: curriculum (exercises).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import catalog, markers

ROOT = Path(__file__).resolve().parents[2]
STATE = ".tccl-exercises.json"   # in a learner's copy: its stage and the exercises stubbed
COPY_DIRS = ["common", "tests", "tools", "docs"]  # plus the stage and the top-level files


def die(msg):
    print(f"tools/exercise: {msg}", file=sys.stderr)
    sys.exit(2)


# ---- stages ---------------------------------------------------------------------------------
def stages(root=ROOT):
    """{number: directory name} of the stages with code in `root`."""
    out = {}
    for d in root.iterdir():
        m = re.match(r"stage(\d+)-", d.name)
        if m and (d / "CMakeLists.txt").is_file():
            out[int(m[1])] = d.name
    return out


def parse_stage(arg, root=ROOT):
    m = re.match(r"^(?:stage)?(\d+)(?:-.*)?$", arg)
    if not m or int(m[1]) not in stages(root):
        die(f"no stage with code called '{arg}' in {root} (have: "
            f"{', '.join(stages(root).values())})")
    return int(m[1])


def prefix(n):
    return f"s{n}_"


def learner_state(root=ROOT):
    p = root / STATE
    return json.loads(p.read_text()) if p.is_file() else None


# ---- files ----------------------------------------------------------------------------------
def repo_files(root, tops):
    """Files under the top-level entries `tops` ('' = top-level files): git's list (tracked
    and untracked-not-ignored) in a checkout, else a walk that skips build trees."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"],
                             check=True, capture_output=True, text=True).stdout.split("\n")
        files = [f for f in out if f and (root / f).is_file()]
    else:
        files = []
        for dp, dns, fns in os.walk(root):
            rel = Path(dp).relative_to(root)
            dns[:] = [d for d in dns if not (rel == Path(".") and d.startswith("build"))
                      and d not in (".git", "__pycache__")]
            files += [str(rel / f) if str(rel) != "." else f for f in fns]
    keep = []
    for f in files:
        head = f.split("/", 1)[0]
        if ("/" not in f and "" in tops) or ("/" in f and head in tops):
            keep.append(f)
    return sorted(keep)


def write_if_changed(path, data):
    """Leaves the file (and its mtime, so the build does not redo it) alone when equal."""
    path = Path(path)
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def sync(root, dst, tops, skip=()):
    files = [f for f in repo_files(root, tops) if not f.startswith(tuple(skip))]
    for f in files:
        src = root / f
        write_if_changed(dst / f, src.read_bytes())
        shutil.copymode(src, dst / f)
    return files


def stub_file(path, ex):
    text = path.read_text()
    path.write_text(markers.stub(text, ex, str(path)))


# ---- building and testing -------------------------------------------------------------------
def njobs():
    return str(max(1, os.cpu_count() or 1))


def run(cmd, log, timeout=900, env=None):
    """Runs cmd, appending its output to log; returns (rc, output)."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env, errors="replace")
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or b"").decode(errors="replace") + "\n[timed out]\n"
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}   ({time.time() - t0:.1f}s, exit {rc})\n{out}\n")
    return rc, out


# verify's compiler flags: the learner's build type (RelWithDebInfo, so NDEBUG as theirs) at -Og
# and without -g. Verify grades behaviour, which a stub's error status and the solution's
# results do not owe to the optimiser, and the whole-tree build runs the same tests on the
# solutions at -O2 (ctest). -O2 -g is most of verify's time: src/executor_host.cc, which every
# device-code stub rebuilds, compiles in 39 s at -O2 -g, 9 s at -Og, 7 s at -O0 (2 cores); -O0
# then runs the host executor's loops three times slower (tree_rooted_sweep.np5: 21 s, against
# 7 s at -Og and 4 s at -O2), which costs more than it saves.
FAST_FLAGS = {"CMAKE_BUILD_TYPE": "RelWithDebInfo",
              "CMAKE_CXX_FLAGS_RELWITHDEBINFO": "-Og -DNDEBUG"}


def cached(bld, settings):
    """True when bld's CMakeCache.txt holds every one of `settings` ({name: value})."""
    cache = bld / "CMakeCache.txt"
    if not cache.is_file():
        return False
    have = {}
    for line in cache.read_text(errors="replace").splitlines():
        m = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line)
        if m:
            have[m[1]] = m[2]
    return all(have.get(k) == v for k, v in settings.items())


def configure(src, bld, log, settings=None, quiet=False):
    """Configures the standalone build of stage directory `src` in bld (CUDA off, tests on),
    once: again only when bld's cache lacks one of `settings`. quiet: no output on failure
    (the log has it)."""
    settings = settings or {}
    if cached(bld, settings):
        return 0
    bld.mkdir(parents=True, exist_ok=True)
    fresh = not (bld / "CMakeCache.txt").is_file()
    gen = ["-G", "Ninja"] if shutil.which("ninja") and fresh else []
    rc, out = run(["cmake", "-S", str(src), "-B", str(bld), *gen, "-DTCCL_WITH_CUDA=OFF",
                   "-DTCCL_BUILD_TESTS=ON", *(f"-D{k}={v}" for k, v in settings.items())], log)
    if rc != 0 and not quiet:
        print(out[-3000:])
    return rc


def build(bld, targets, log):
    return run(["cmake", "--build", str(bld), "-j", njobs(), "--target", *targets], log)


RESULT = re.compile(r"Test\s+#\d+: (\S+) \.*\s*(\*+)?(Passed|Failed|Timeout|Not Run|Exception"
                    r"[^\d]*?|\S+)\s+[\d.]+ sec")


def ctest(bld, tests, log, extra_env=None):
    """{test: 'Passed' | 'Failed' | ...} and the output. Tests CTest did not report are
    'missing'. extra_env (a GoogleTest filter, knobs) travels in the environment: mpirun's
    local ranks inherit it."""
    regex = "^(" + "|".join(re.escape(t) for t in tests) + ")$"
    env = {k: v for k, v in os.environ.items()
           if k != "GTEST_FILTER" and not k.startswith("TCCL_")}
    env.update(extra_env or {})
    # Three times the cores, as tools/test: MPI tests declare PROCESSORS = ranks, and their
    # ranks spend much of a run waiting on sockets, so several of them share 2 cores well.
    rc, out = run(["ctest", "--test-dir", str(bld), "-R", regex, "--output-on-failure",
                   "-j", str(3 * int(njobs()))], log, env=env)
    got = {m[1]: m[3].strip() for m in RESULT.finditer(out)}
    return {t: got.get(t, "missing") for t in tests}, out


def names(ex, n):
    p = prefix(n)
    return [t.replace("{p}", p) for t in ex.tests], [t.replace("{p}", p) for t in ex.targets]


# ---- commands -------------------------------------------------------------------------------
def cmd_list(args):
    by = {}
    for e in catalog.EXERCISES:
        by.setdefault(e.chapter, []).append(e)
    st = stages()
    # The id comes first on each line: tools/test reads it with awk's $1.
    for ch in sorted(by):
        print(f"chapter {ch} ({st.get(ch, '?')})")
        for e in by[ch]:
            print(f"  {e.id}  {e.level:<6}  {e.kind:<7}  {e.title:<45} {e.file}")
    return 0


def chosen(only, default):
    if not only:
        return default
    ids = [i for o in only for i in o.split(",") if i]
    try:
        return [catalog.find(i) for i in ids]
    except KeyError as k:
        die(f"no exercise {k} (see tools/exercise list)")


def cmd_start(args):
    one = None
    if re.match(r"^\d+\.\d+$", args.stage):
        # One exercise, X.Y: its chapter's stage with that exercise stubbed (as --only X.Y),
        # in a copy of its own.
        one = chosen([args.stage], [])[0]
        args.only = [one.id] + (args.only or [])
        n = parse_stage(str(one.chapter))
    else:
        n = parse_stage(args.stage)
    sdir = stages()[n]
    exs = chosen(args.only, [e for e in catalog.EXERCISES if e.chapter == n])
    for e in exs:
        if e.chapter > n:
            die(f"exercise {e.id} is chapter {e.chapter}'s; stage {n} does not have it")
    name = f"learn-{one.id}" if one else f"learn-{sdir}"
    dst = Path(args.to or ROOT / "build" / "exercises" / name).resolve()
    if dst.exists() and any(dst.iterdir()) and not args.force:
        st = learner_state(dst)
        if st:
            die(f"{dst} already holds a learner's copy ({st['stage']}, stubbed: "
                f"{', '.join(st['stubbed']) or 'none'}): cd there and go on, or use --force "
                f"to write a new one over it (what you changed there is lost)")
        die(f"{dst} exists and is not empty (use --force to overwrite it)")
    if dst == ROOT or ROOT in dst.parents and not str(dst).startswith(str(ROOT / "build")):
        die("write the learner's copy outside the repository (or under its build/)")
    # The generated chapter diffs would hand the learner every solution of the chapter.
    files = sync(ROOT, dst, COPY_DIRS + ["", sdir], skip=["docs/chapters/diffs/"])
    for e in exs:
        stub_file(dst / sdir / e.file, e)
    (dst / STATE).write_text(json.dumps({"stage": sdir, "stubbed": [e.id for e in exs]},
                                        indent=2) + "\n")
    print(f"wrote {len(files)} files to {dst}, with these exercises stubbed:")
    for e in exs:
        print(f"  {e.id}  {e.level:<6}  {e.title}   ({sdir}/{e.file}; {e.page_path()})")
    print(f"\nnext:  cd {dst}\n       tools/exercise check {exs[0].id if exs else 'X.Y'}")
    return 0


def grading_stage(e, root=ROOT):
    st = learner_state(root)
    if st:
        n = int(re.match(r"stage(\d+)", st["stage"])[1])
    else:
        n = e.chapter
    if n < e.chapter or n not in stages(root):
        die(f"exercise {e.id} needs stage {e.chapter} or later; this tree has "
            f"{', '.join(stages(root).values())}")
    return n


def cmd_check(args):
    e = chosen([args.id], [])[0]
    n = grading_stage(e)
    sdir = stages()[n]
    bld = Path(args.build or ROOT / "build" / "exercises" / sdir).resolve()
    bld.mkdir(parents=True, exist_ok=True)
    log = bld / "exercise-check.log"
    log.write_text("")
    tests, targets = names(e, n)
    print(f"exercise {e.id}: {e.title}  ({sdir}/{e.file})\nbuilding {', '.join(targets)} in "
          f"{bld} ...", flush=True)
    if configure(ROOT / sdir, bld, log) != 0:
        print(f"FAIL: configure failed (see {log})")
        return 1
    rc, out = build(bld, targets, log)
    if rc != 0:
        print("\n".join(l for l in out.split("\n") if "error" in l or "rror:" in l)[-4000:])
        print(f"FAIL: the build failed (full log: {log})")
        return 1
    stubbed = [x for x in e.needs if still_stubbed(catalog.find(x), sdir)]
    if stubbed:
        print(f"note: these tests also run exercise(s) {', '.join(stubbed)}, still a stub in "
              f"this copy: solve {'it' if len(stubbed) == 1 else 'them'} first")
    env = " ".join(f"{k}={v}" for k, v in e.test_env().items())
    print(f"running {len(tests)} grading test(s)" + (f" with {env}" if env else "") + " ...",
          flush=True)
    res, out = ctest(bld, tests, log, e.test_env())
    if any(v != "Passed" for v in res.values()):
        tail = [l for l in out.split("\n") if "not implemented" in l or "FAILED" in l
                or "[  FAILED" in l or "WARN" in l]
        if tail:
            print("\n".join(dict.fromkeys(tail[:40])))
    for t, v in res.items():
        print(f"  {'pass' if v == 'Passed' else 'FAIL'}  {t}{'' if v == 'Passed' else '  (' + v + ')'}")
    ok = all(v == "Passed" for v in res.values())
    print(f"exercise {e.id}: {'PASSED' if ok else 'not yet'}  (log: {log})")
    return 0 if ok else 1


def still_stubbed(e, sdir):
    path = ROOT / sdir / e.file
    return path.is_file() and f"not implemented: exercise {e.id} (" in path.read_text()


def cmd_reset(args):
    e = chosen([args.id], [])[0]
    st = learner_state()
    if not st:
        die("reset works in a learner's copy (made by tools/exercise start), not in the repository")
    path = ROOT / st["stage"] / e.file
    stub_file(path, e)
    print(f"exercise {e.id}: {path.relative_to(ROOT)} is back to the stub")
    return 0


def envkey(e):
    return tuple(sorted(e.test_env().items()))


def passed_in(log_path):
    """The tests a CTest log reports as passed (tools/test's ctest step writes one for the
    whole tree: the same sources and test programs as a stage built alone, at -O2)."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        return set()
    return {m[1] for m in RESULT.finditer(text) if m[3].strip() == "Passed"}


def trusts_whole_tree(env):
    """True when a grading run with this environment tests what the whole tree's run did:
    GoogleTest's own filter and fail-fast select among the cases, which the whole tree ran
    all of; any other variable (a transport turned off, say) changes what runs."""
    return all(k in ("GTEST_FILTER", "GTEST_FAIL_FAST") for k in env)


def configure_all(sdirs, base):
    """Copies each stage's sources to its scratch folder and configures its build, one stage
    per core at a time. CMake's configure step runs on one core (about 10 s a stage on CI's
    2 cores), so side by side the seven take half the time they take in turn; the builds that
    follow use every core each, one stage after another. A failed configure is reported by
    cmd_verify's own configure call, which runs it again and prints its output."""
    def one(sdir):
        work = base / "verify" / sdir
        work.mkdir(parents=True, exist_ok=True)
        (work / "verify.log").write_text("")
        # tools/ too: some grading tests run a tool of the tree (s7_frtrace and
        # s7_fault_inject run ${TCCL_STAGE_DIR}/../tools/frtrace on the dumps).
        sync(ROOT, work / "src", ["common", "tests", "tools", sdir])
        if configure(work / "src" / sdir, work / "build", work / "verify.log", FAST_FLAGS,
                     quiet=True) != 0:
            # A half-written cache would pass for a configured one: drop it.
            (work / "build" / "CMakeCache.txt").unlink(missing_ok=True)
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=int(njobs())) as pool:
        list(pool.map(one, sdirs))
    print(f"== {len(sdirs)} stage(s) copied and configured, {njobs()} at a time "
          f"({time.time() - t0:.0f}s)", flush=True)


def cmd_verify(args):
    if learner_state():
        die("verify runs in the repository, not in a learner's copy")
    exs = chosen(args.ids, catalog.EXERCISES)
    base = Path(args.build or ROOT / "build" / "exercises").resolve()
    t_all = time.time()
    rows, bad = [], 0
    passed = passed_in(args.passed_from) if args.passed_from else set()
    table = catalog.problems()  # the table's own invariants, before any build
    for p in table:
        print(f"catalog: {p}")
    st = stages()
    chapters = sorted({e.chapter for e in exs})
    configure_all([st[n] for n in chapters], base)
    for n in chapters:
        mine = [e for e in exs if e.chapter == n]
        sdir = st[n]
        work = base / "verify" / sdir
        src, bld, log = work / "src", work / "build", work / "verify.log"
        t0 = time.time()
        print(f"== {sdir}: {len(mine)} exercise(s), scratch copy {src}", flush=True)
        if configure(src / sdir, bld, log, FAST_FLAGS) != 0:
            for e in mine:
                rows.append((e.id, sdir, "-", "configure failed", "-", "MISMATCH", 0))
            bad += len(mine)
            continue
        all_targets = sorted({t for e in mine for t in names(e, n)[1]})
        # The solution: one build (the stubs' builds start from it); every grading test must
        # pass, one CTest run per filter, except those the whole tree's CTest run has passed.
        rc, _ = build(bld, all_targets, log)
        sol = {}
        for key in sorted({envkey(e) for e in mine}):
            tests = sorted({t for e in mine if envkey(e) == key for t in names(e, n)[0]})
            known = {t for t in tests if t in passed and trusts_whole_tree(dict(key))}
            res = {t: "Passed" for t in known}
            rest = [t for t in tests if t not in known]
            if rest:
                res.update({t: "build failed" for t in rest} if rc else
                           ctest(bld, rest, log, dict(key))[0])
            sol.update({(t, key): v for t, v in res.items()})
        print(f"   solution built and graded ({time.time() - t0:.0f}s)", flush=True)
        for e in mine:
            t1 = time.time()
            tests, targets = names(e, n)
            path = src / sdir / e.file
            solution = path.read_bytes()
            try:
                stub_file(path, e)
                rc, _ = build(bld, targets, log)
                if rc != 0:
                    stub_build, stub_res, seen = "FAILED", {}, False
                else:
                    stub_build = "ok"
                    stub_res, out = ctest(bld, tests, log, e.test_env())
                    seen = f"not implemented: exercise {e.id}" in out
            finally:
                # Newer than the stub's objects: the next stub's build, or the next run's first,
                # recompiles the solution, so no build here.
                path.write_bytes(solution)
            nfail = sum(1 for t in tests if stub_res.get(t, "Passed") != "Passed")
            npass = sum(1 for t in tests if sol.get((t, envkey(e))) == "Passed")
            ok = stub_build == "ok" and nfail == len(tests) and seen and npass == len(tests)
            bad += not ok
            stub_col = (f"{nfail}/{len(tests)} fail" + (", says so" if seen else ", SILENT")
                        if stub_build == "ok" else "stub does not build")
            rows.append((e.id, sdir, stub_build, stub_col, f"{npass}/{len(tests)} pass",
                         "ok" if ok else "MISMATCH", time.time() - t1))
            print(f"   {e.id}: {'ok' if ok else 'MISMATCH'} ({time.time() - t1:.0f}s)", flush=True)
            if not ok:
                for t in tests:
                    print(f"      {t}: solution {sol.get((t, envkey(e)))}, "
                          f"stub {stub_res.get(t, '-')}")
    print()
    print(f"{'exercise':<9} {'stage':<12} {'stub build':<11} {'stub: tests':<20} "
          f"{'solution':<10} {'result':<9} time")
    for r in rows:
        print(f"{r[0]:<9} {r[1]:<12} {r[2]:<11} {r[3]:<20} {r[4]:<10} {r[5]:<9} {r[6]:.0f}s")
    print(f"{len(rows) - bad} ok, {bad} mismatched, {time.time() - t_all:.0f}s "
          f"(logs: {base}/verify/*/verify.log)")
    if table:
        print(f"catalog: {len(table)} problem(s) (above)")
    return 1 if bad or table else 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="tools/exercise", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=sys.modules["__main__"].__doc__)
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND", required=True)
    sub.add_parser("list", help="the exercises per chapter: difficulty, kind (fill in or piece), "
                                "title and file")
    p = sub.add_parser("start", help="write a learner's copy of a stage with exercises stubbed")
    p.add_argument("stage", metavar="STAGE|X.Y",
                   help="1 / stage1 / stage1-p2p: the chapter's exercises; X.Y: only that one")
    p.add_argument("--to", help="where (default build/exercises/learn-<stage>, or learn-X.Y)")
    p.add_argument("--only", action="append", metavar="X.Y",
                   help="stub only these exercises (repeat, or X.Y,X.Z)")
    p.add_argument("--force", action="store_true", help="write into a non-empty directory")
    p = sub.add_parser("check", help="build and run the tests that grade one exercise")
    p.add_argument("id", metavar="X.Y")
    p.add_argument("--build", help="build directory (default build/exercises/<stage>)")
    p = sub.add_parser("reset", help="put an exercise's stub back (in a learner's copy)")
    p.add_argument("id", metavar="X.Y")
    p = sub.add_parser("verify", help="CI: stubs fail their tests, solutions pass them")
    p.add_argument("ids", nargs="*", metavar="X.Y")
    p.add_argument("--build", help="build directory (default build/exercises)")
    p.add_argument("--passed-from", metavar="CTEST_LOG",
                   help="a CTest log of the whole tree, from the same sources: a solution's "
                        "grading test it reports as passed is not run again (tools/test "
                        "passes its own ctest step's log)")
    args = ap.parse_args(argv)
    try:
        return {"list": cmd_list, "start": cmd_start, "check": cmd_check, "reset": cmd_reset,
                "verify": cmd_verify}[args.cmd](args)
    except markers.MarkerError as e:
        die(str(e))
