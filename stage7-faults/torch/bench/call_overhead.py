"""call_overhead.py: what the backend costs per call, from torch down to tccl and back.

What it measures: `dist.all_reduce` of a tiny tensor (2 floats, 8 bytes) through the "tccl"
backend, (1) back to back with one synchronisation at the end, as tccl_perf times its calls,
and (2) one blocking call at a time (median). Compare (1) with the C++ benchmark calling
tcclAllReduce directly at the same size and rank count (stage4-torch/bench:
`mpirun -np N tccl_perf -t allreduce -b 8 -e 8 -n 2000 -m host|device`):
the difference is the backend's overhead (Python binding, tensor checks, Work and Future, the
queue hop to the worker thread and back). At one rank no data moves, so it is all overhead.

Run: launch.py --np N call_overhead.py [--device cuda] [--iters 2000]
Added in: stage 4.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import tccl_torch  # noqa: F401


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--count", type=int, default=2)
    a = ap.parse_args()
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dist.init_process_group("tccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    t = torch.ones(a.count, device=a.device)
    for _ in range(100):
        dist.all_reduce(t)
    if a.device == "cuda":
        torch.cuda.synchronize()
    # (1) back to back, one synchronisation at the end: what tccl_perf measures (-n iters)
    if a.device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        dist.all_reduce(t)
    if a.device == "cuda":
        torch.cuda.synchronize()
    per_call = (time.perf_counter() - t0) / a.iters
    # (2) one call at a time, waited for: the latency a blocking caller sees
    samples = []
    for _ in range(a.iters):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        if a.device == "cuda":
            torch.cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    if rank == 0:
        q = statistics.quantiles(samples, n=10)
        print(f"# call_overhead: dist.all_reduce of {a.count * 4} bytes, {size} ranks, "
              f"{a.device}, {a.iters} calls")
        print(f"  back_to_back_us {per_call * 1e6:.1f}  one_call_median_us "
              f"{statistics.median(samples) * 1e6:.1f} p10_us {q[0] * 1e6:.1f} "
              f"p90_us {q[-1] * 1e6:.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
