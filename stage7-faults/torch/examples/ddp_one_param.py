"""ddp_one_param.py: the smallest DistributedDataParallel program, on the tccl backend.

What you learn: what DDP does to gradients. A model with one parameter w and loss w * x: the
gradient on a rank is its x. Rank r gets x = 7 * r, so on two ranks the local gradients are 0
and 7; after backward() DDP has all-reduced them (tccl's all_reduce, through the backend) and
every rank holds their average, 3.5. (The example from the GPU MODE lecture on NCCL.)

Run (any number of ranks; CPU tensors, or --device cuda):
  torchrun --nproc_per_node=2 ddp_one_param.py
  (Debian 12's torch 1.13: python3 -m torch.distributed.run --redirects 9:0 --tee 9:0 ...)
It prints what it verified and exits non-zero if the average is wrong.
Added in: stage 4.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import tccl_torch  # noqa: F401  registers the backend "tccl"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())

    # STEP 1: join the job. torchrun set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; the
    # backend makes a tccl communicator, passing its unique id through torch's Store.
    dist.init_process_group("tccl")
    rank, size = dist.get_rank(), dist.get_world_size()

    # STEP 2: one parameter, the same on every rank (DDP broadcasts rank 0's at construction).
    model = torch.nn.Linear(1, 1, bias=False).to(args.device)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ddp = DDP(model)

    # STEP 3: loss = w * x, so d(loss)/dw = x: each rank's local gradient is its own x.
    x = torch.tensor([[7.0 * rank]], device=args.device)
    ddp(x).sum().backward()

    # STEP 4: DDP all-reduced the gradient (sum, then / size): the average of 0, 7, 14...
    want = 7.0 * (size - 1) / 2
    got = model.weight.grad.item()
    ok = abs(got - want) < 1e-6
    print(f"[rank {rank}] ddp_one_param: local gradient {7.0 * rank:g}, after DDP {got:g}, "
          f"expected the average {want:g}: {'verified OK' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
