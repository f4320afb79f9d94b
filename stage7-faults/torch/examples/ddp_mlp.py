"""ddp_mlp.py: a DistributedDataParallel training loop (an MLP and an optimizer) on tccl.

What you learn: a real DDP loop, and how to check it. Every rank trains the same MLP on its own
slice of each global batch; DDP all-reduces the gradients bucket by bucket during backward()
(each bucket one tccl all-reduce, chained through Work.get_future()). Rank 0 also trains a
plain copy of the model on the whole batch, alone: data parallelism is right exactly when the
two agree after every step, and the loss goes down.

Run: torchrun --nproc_per_node=2 ddp_mlp.py [--steps 20] [--device cuda]
  (Debian 12's torch 1.13: python3 -m torch.distributed.run --redirects 9:0 --tee 9:0 ...)
Added in: stage 4.
"""
import argparse
import copy
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tccl_torch  # noqa: F401  registers the backend "tccl"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    args = ap.parse_args()
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    dev = torch.device(args.device)

    # STEP 1: join; build the same model everywhere (same seed), wrap it in DDP.
    dist.init_process_group("tccl")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 8)).to(dev)
    alone = copy.deepcopy(model)  # rank 0's single-process reference
    ddp = DDP(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    opt_alone = torch.optim.Adam(alone.parameters(), lr=1e-3)

    # A fixed regression task: y = W x for a random W.
    torch.manual_seed(1)
    w_true = torch.randn(8, 32)
    first = last = None
    worst = 0.0
    for step in range(args.steps):
        # STEP 2: the global batch of this step; this rank trains on its slice.
        g = torch.Generator().manual_seed(step)
        x_all = torch.randn(size * args.batch, 32, generator=g)
        y_all = x_all @ w_true.t()
        x = x_all[rank * args.batch:(rank + 1) * args.batch].to(dev)
        y = y_all[rank * args.batch:(rank + 1) * args.batch].to(dev)

        # STEP 3: forward, backward (DDP all-reduces the gradients here), step.
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()

        # STEP 4: the global loss (an all_reduce of our own), and rank 0's reference.
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss, op=dist.ReduceOp.SUM)
        global_loss /= size
        first = global_loss.item() if first is None else first
        last = global_loss.item()
        if rank == 0:
            opt_alone.zero_grad()
            nn.functional.mse_loss(alone(x_all.to(dev)), y_all.to(dev)).backward()
            opt_alone.step()
            worst = max(worst, max((p - q).abs().max().item()
                                   for p, q in zip(model.parameters(), alone.parameters())))

    ok = last < first
    if rank == 0:
        ok = ok and worst < 1e-4
        print(f"[rank 0] ddp_mlp: {args.steps} steps on {size} ranks: loss {first:.4f} -> "
              f"{last:.4f}; largest difference from training alone on the whole batch "
              f"{worst:.2e}: {'verified OK' if ok else 'WRONG'}", flush=True)
    else:
        print(f"[rank {rank}] ddp_mlp: loss {first:.4f} -> {last:.4f}: "
              f"{'verified OK' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
