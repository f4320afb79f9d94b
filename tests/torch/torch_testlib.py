"""torch_testlib.py: what every stage-4 test script shares.

What it is: joining the job (init_process_group with the backend and init method the test
names), deterministic inputs that every rank can compute for every other rank (so each rank
checks its result against a reference it computes by hand), exact or tolerant comparison by
dtype, and a check() that counts failures and names them.

Invariants: inputs are small integers (exact in every dtype, float16 and bfloat16 included, and
in sums and products of up to 8 ranks within int8's range); a script ends with finish(), which
prints "<name>: N checks passed" or raises with the first failures (the launcher then reports
the rank's non-zero exit).
Added in: stage 4.
"""
import argparse
import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist

import tccl_torch  # noqa: F401  (registers the "tccl" backend)

# How long a rank waits for the others to join the job's store (env:// init): every rank's
# start, python and torch imports included, fits in it with room to spare.
JOIN_TIMEOUT_S = 120.0

FLOAT_TYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INT_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]


def parse_args(extra=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--init", default="env", choices=["env", "tcp", "file"])
    ap.add_argument("--timeout", type=float, default=60.0)
    if extra:
        extra(ap)
    return ap.parse_args()


def init(args, backend="tccl"):
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    kw = dict(backend=backend, timeout=datetime.timedelta(seconds=args.timeout))
    if args.init == "env":
        # The job's store, made here so that joining it has a timeout of its own: given to
        # env://, the process group's timeout would also bound each rank's wait for rank 0's
        # store to exist. The interleaving that breaks: rank 1 starts connecting while rank 0
        # is still importing torch (seconds on a loaded 2-core machine); with test_errors'
        # 2-s timeout rank 1 gives up ("The client socket has timed out") before the store
        # exists, and rank 0 then waits for rank 1 until the launcher kills the job.
        # Operations keep the process group's timeout.
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), size,
                              rank == 0, timeout=datetime.timedelta(seconds=max(args.timeout,
                                                                                JOIN_TIMEOUT_S)))
        kw.update(store=store, rank=rank, world_size=size)
    elif args.init == "tcp":
        kw.update(init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                  rank=rank, world_size=size)
    else:
        # The launcher's scratch directory (removed after the job): the same path on every rank.
        path = os.path.join(os.environ.get("TCCL_TORCH_TEST_DIR", tempfile.gettempdir()),
                            f"tccl_torch_init_{os.environ['MASTER_PORT']}")
        kw.update(init_method=f"file://{path}", rank=rank, world_size=size)
    dist.init_process_group(**kw)
    return dist.get_rank(), dist.get_world_size()


def value(rank, count, dtype, device, shift=0, small=False):
    """Rank `rank`'s input: small integers, distinct per rank and position."""
    i = torch.arange(count, dtype=torch.int64)
    if small:  # {1, 2}: products of up to 8 ranks stay exact, and within int8 for 6
        v = 1 + (i + rank + shift) % 2
    else:
        v = 1 + (i * 3 + rank * 5 + shift) % 7
    if dtype == torch.bool:
        return ((i + rank + shift) % 3 == 0).to(device)
    if dtype.is_complex:
        return torch.complex(v.double(), (v + 1).double()).to(dtype).to(device)
    return v.to(dtype).to(device)


class Checker:
    def __init__(self, name, rank):
        self.name, self.rank, self.passed, self.failures = name, rank, 0, []

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)

    def equal(self, got, want, what):
        got, want = got.cpu(), want.cpu()
        if got.shape != want.shape or got.dtype != want.dtype:
            self.check(False, f"{what}: shape/dtype {tuple(got.shape)} {got.dtype} vs "
                              f"{tuple(want.shape)} {want.dtype}")
            return
        if got.dtype in (torch.float16, torch.bfloat16):
            ok = torch.allclose(got.float(), want.float(), rtol=1e-2, atol=1e-2)
        elif got.dtype.is_floating_point or got.dtype.is_complex:
            ok = torch.allclose(got, want, rtol=1e-6, atol=1e-6)
        else:
            ok = torch.equal(got, want)
        self.check(ok, f"{what}: got {got.flatten()[:8].tolist()} want "
                       f"{want.flatten()[:8].tolist()}")

    def finish(self):
        if self.failures:
            for f in self.failures[:20]:
                print(f"FAIL {f}", file=sys.stderr)
            raise SystemExit(f"{self.name}: rank {self.rank}: {len(self.failures)} of "
                             f"{self.passed + len(self.failures)} checks failed")
        print(f"{self.name}: rank {self.rank}: {self.passed} checks passed", flush=True)
