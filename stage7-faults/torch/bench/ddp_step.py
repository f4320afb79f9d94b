"""ddp_step.py: DDP step time of the examples' MLP, on the "tccl" backend against gloo.

What it measures: the median wall time of one training step (forward, backward with DDP's
bucketed all-reduces, optimizer step) of ddp_mlp.py's model, for each backend in the same job,
interleaved (tccl step, gloo step, tccl step...) so that machine noise hits both alike.
Both DDPs wrap copies of one model; the gloo one uses a gloo group made in the same job.
Prints one table row per backend: ranks, device, median and p10/p90 step time in ms, ratio.

Run: launch.py --np N ddp_step.py [--device cuda] [--steps 200] (tests/torch/launch.py), or
torchrun --nproc_per_node=N ddp_step.py.
Added in: stage 4.
"""
import argparse
import copy
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tccl_torch  # noqa: F401


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=128, help="hidden width (128: the example's)")
    ap.add_argument("--compare-nccl", action="store_true",
                    help="CUDA: also time DDP on an NCCL group (one rank per GPU only)")
    a = ap.parse_args()
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group("tccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    dev = torch.device(a.device)
    torch.manual_seed(0)
    base = nn.Sequential(nn.Linear(32, a.width), nn.ReLU(), nn.Linear(a.width, a.width),
                         nn.ReLU(), nn.Linear(a.width, 8)).to(dev)
    runs = {"tccl": DDP(copy.deepcopy(base))}
    if a.device == "cpu":  # gloo is the CPU yardstick; NCCL the CUDA one
        runs["gloo"] = DDP(copy.deepcopy(base), process_group=dist.new_group(backend="gloo"))
    elif a.compare_nccl:
        runs["nccl"] = DDP(copy.deepcopy(base), process_group=dist.new_group(backend="nccl"))
    opts = {k: torch.optim.Adam(m.parameters(), lr=1e-3) for k, m in runs.items()}
    x = torch.randn(a.batch, 32, device=dev)
    y = torch.randn(a.batch, 8, device=dev)
    times = {k: [] for k in runs}

    def step(name):
        opts[name].zero_grad()
        nn.functional.mse_loss(runs[name](x), y).backward()
        opts[name].step()
        if a.device == "cuda":
            torch.cuda.synchronize()

    for i in range(a.warmup + a.steps):
        for name in runs:
            dist.barrier()  # every rank starts the step together
            t0 = time.perf_counter()
            step(name)
            if i >= a.warmup:
                times[name].append(time.perf_counter() - t0)
    if rank == 0:
        params = sum(p.numel() for p in base.parameters())
        print(f"# ddp_step: MLP of {params} parameters, batch {a.batch}/rank, {size} ranks, "
              f"{a.device}, {a.steps} steps each, interleaved")
        print(f"# {'backend':8} {'ranks':>5} {'median_ms':>10} {'p10_ms':>8} {'p90_ms':>8} "
              f"{'vs_tccl':>8}")
        med = {k: statistics.median(v) for k, v in times.items()}
        for name, v in times.items():
            q = statistics.quantiles(v, n=10)
            print(f"  {name:8} {size:5d} {med[name] * 1e3:10.3f} {q[0] * 1e3:8.3f} "
                  f"{q[-1] * 1e3:8.3f} {med[name] / med['tccl']:8.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
