"""test_ddp.py: DistributedDataParallel on the "tccl" backend is data parallelism, exactly.

What it checks: an MLP trained for a few SGD steps under DDP on tccl, each rank on its slice
of a global batch, has after every step the parameters of
  (1) a single-process reference model trained on the whole (concatenated) batch: averaging
      the ranks' gradients of their mean losses is the gradient of the global mean loss, so the
      two agree up to float rounding; this is the check that data parallelism is right;
  (2) the same DDP training run on gloo in the same job (CPU tensors: gloo is the yardstick).
Small buckets (bucket_cap_mb) make DDP all-reduce several buckets per step, overlapped with
backward through Work.get_future(), which is what DDP needs from a backend.
Run: launch.py --np N test_ddp.py [--device cuda] [--steps S]
Added in: stage 4.
"""
import copy

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_testlib as tl


def make_model():
    torch.manual_seed(1234)  # the same initial weights on every rank and in the reference
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 4))


def batch(step, rank, per_rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(per_rank, 16, generator=g), torch.randn(per_rank, 4, generator=g)


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def main():
    args = tl.parse_args(lambda ap: ap.add_argument("--steps", type=int, default=5))
    rank, size = tl.init(args)
    dev = torch.device(args.device)
    ck = tl.Checker("test_ddp", rank)
    per_rank = 8

    base = make_model().to(dev)
    tccl_model = DDP(copy.deepcopy(base), bucket_cap_mb=0.01)  # ~2500 floats per bucket
    ref_model = copy.deepcopy(base)
    models = [("tccl", tccl_model), ("reference", ref_model)]
    gloo_model = None
    if args.device == "cpu":
        gloo_model = DDP(copy.deepcopy(base), process_group=dist.new_group(backend="gloo"),
                         bucket_cap_mb=0.01)
        models.append(("gloo", gloo_model))
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for name, m in models}

    for step in range(args.steps):
        xs, ys = zip(*[batch(step, r, per_rank) for r in range(size)])
        x, y = xs[rank].to(dev), ys[rank].to(dev)
        train_step(tccl_model, opts["tccl"], x, y)
        if gloo_model is not None:
            train_step(gloo_model, opts["gloo"], x, y)
        train_step(ref_model, opts["reference"], torch.cat(xs).to(dev), torch.cat(ys).to(dev))
        for (name, p), q in zip(tccl_model.module.named_parameters(), ref_model.parameters()):
            ck.check(torch.allclose(p.detach(), q.detach(), rtol=1e-5, atol=1e-6),
                     f"step {step}: {name} differs from the single-process reference "
                     f"(max diff {(p - q).abs().max().item():.3g})")
        if gloo_model is not None:
            for (name, p), q in zip(tccl_model.module.named_parameters(),
                                    gloo_model.module.parameters()):
                ck.check(torch.allclose(p.detach(), q.detach(), rtol=1e-5, atol=1e-6),
                         f"step {step}: {name} differs from gloo's DDP "
                         f"(max diff {(p - q).abs().max().item():.3g})")
    # Every rank ends with the same weights (DDP's invariant), compared through the backend.
    flat = torch.cat([p.detach().flatten() for p in tccl_model.parameters()])
    mx, mn = flat.clone(), flat.clone()
    dist.all_reduce(mx, op=dist.ReduceOp.MAX)
    dist.all_reduce(mn, op=dist.ReduceOp.MIN)
    ck.check(torch.equal(mx, mn), "ranks ended with different weights")
    dist.destroy_process_group()
    ck.finish()


if __name__ == "__main__":
    main()
