"""launch.py: runs one Python script as N ranks of a torch.distributed job, under a timeout.

What it is: the tests' launcher (a tiny torchrun): N processes of `python script args...`, each
with MASTER_ADDR, MASTER_PORT (a free port), RANK, LOCAL_RANK, WORLD_SIZE and
LOCAL_WORLD_SIZE set as torchrun sets them, so the scripts use init_method="env://" unchanged.
Each line a rank prints is shown with its rank in front.

Why not torchrun: Debian 12's torchrun (torch 1.13) dies before starting any rank (design
notes: `python3 -m torch.distributed.run --redirects 9:0 --tee 9:0` works, and one test runs
an example through it), and a test wants what torchrun does not give: one overall timeout that
kills every rank, and "rank r exited with s" for each failed rank.

Usage: launch.py [--np N] [--timeout S] [--expect-fail R,...] [--late-rank0 S]
                 script.py [args...]
  --expect-fail: these ranks must exit non-zero (a rank that dies on purpose); every other
                 rank must exit 0.
  --late-rank0:  start rank 0 S seconds after the others, as when its imports are slow on a
                 loaded machine (the others must wait for its store: torch_testlib.init).
Each rank also gets TCCL_TORCH_TEST_DIR, a scratch directory the launcher removes at the end.
Exit: 0 when every rank did as expected; 1 otherwise; 124 when the timeout killed the job.
Invariants: no rank outlives the launcher (a process group per launch, killed on exit).
Added in: stage 4.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pump(rank, stream):
    for line in iter(stream.readline, b""):
        sys.stdout.write(f"[{rank}] {line.decode(errors='replace')}")
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--expect-fail", default="")
    ap.add_argument("--late-rank0", type=float, default=0.0)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    expect_fail = {int(r) for r in a.expect_fail.split(",") if r}
    port = free_port()
    # A scratch directory for the job (file:// rendezvous), removed whatever happens.
    scratch = tempfile.mkdtemp(prefix="tccl_torch_test_")
    try:
        return run(a, expect_fail, port, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(a, expect_fail, port, scratch):
    procs, pumps = [None] * a.np, []
    for rank in list(range(1, a.np)) + [0]:  # rank 0 last, after --late-rank0 seconds
        if rank == 0 and a.late_rank0 > 0:
            time.sleep(a.late_rank0)
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE=str(a.np), LOCAL_WORLD_SIZE=str(a.np),
                   TCCL_TORCH_TEST_DIR=scratch, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.Popen([sys.executable, a.script, *a.args], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs[rank] = p
        t = threading.Thread(target=pump, args=(rank, p.stdout), daemon=True)
        t.start()
        pumps.append(t)

    deadline = time.monotonic() + a.timeout
    timed_out = False
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline:
            timed_out = True
            break
        # A rank that failed unexpectedly leaves the others waiting for it: end them after a
        # grace period long enough for their own timeout errors to show.
        time.sleep(0.05)
    if timed_out:
        print(f"launch.py: timeout after {a.timeout:.0f} s: killing every rank", flush=True)
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for t in pumps:
        t.join(timeout=5)
    ok = not timed_out
    for rank, p in enumerate(procs):
        failed = p.returncode != 0
        if failed != (rank in expect_fail):
            ok = False
            print(f"launch.py: rank {rank} exited with {p.returncode}"
                  f"{' (expected a failure)' if rank in expect_fail else ''}", flush=True)
    if timed_out:
        return 124
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
