"""test_streams.py: the "tccl" backend keeps ProcessGroupNCCL's stream semantics (CUDA only).

What it checks, with a long kernel (torch.cuda._sleep) making any missing wait visible:
  side stream   a tensor written by a kernel on a side stream, all-reduced while that side
                stream is current: the collective must wait for the write (the backend records
                its start event on the caller's current stream), so the sum is exact.
  no host block Work.wait() returns before the GPU has finished (the host is not blocked:
                is_completed() is still false right after it), and a kernel queued on the
                current stream after wait() reads the all-reduced values (the current stream
                waits on the Work's end event), with no host synchronisation in between.
  future        get_future().wait() then a read on the current stream: same guarantee.
  lifetime      the tensors of an in-flight collective may be dropped by Python at once; the
                caching allocator must not reuse their memory before the collective is done
                (recordStream on the backend stream), so a tensor allocated right after and
                filled with other values leaves the collective's result intact.
Run: launch.py --np N test_streams.py --device cuda
Added in: stage 4.
"""
import torch
import torch.distributed as dist

import torch_testlib as tl

SLEEP = 200_000_000  # GPU cycles: ~0.1 s, long enough to overtake with the host


def main():
    args = tl.parse_args()
    assert args.device == "cuda", "test_streams.py needs --device cuda"
    rank, size = tl.init(args)
    ck = tl.Checker("test_streams", rank)
    want = float(sum(range(1, size + 1)))
    n = 1 << 20

    # side stream: the writer is slow; the collective is issued with the side stream current
    side = torch.cuda.Stream()
    t = torch.zeros(n, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP)
        t.fill_(rank + 1)
        dist.all_reduce(t)
    side.synchronize()
    ck.check(bool((t == want).all()), f"side stream: got {t[:4].tolist()}, want {want}")

    # no host block: delay the current stream, then wait() must return before the GPU is there
    t = torch.full((n,), float(rank + 1), device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    ck.check(not work.is_completed(), "wait() blocked the host until the GPU finished")
    y = t * 2  # queued on the current stream after wait(): must see the sum
    torch.cuda.synchronize()
    ck.check(bool((y == 2 * want).all()), f"read after wait(): got {y[:4].tolist()}")

    # future: the value is usable on the current stream once wait() returns
    t = torch.full((n,), float(rank + 1), device="cuda")
    torch.cuda._sleep(SLEEP)
    fut = dist.all_reduce(t, async_op=True).get_future()
    z = fut.wait()[0] + 1
    torch.cuda.synchronize()
    ck.check(bool((z == want + 1).all()), f"read after future.wait(): got {z[:4].tolist()}")

    # lifetime: drop the tensor while its collective is in flight, reuse the memory at once
    keep = []
    for i in range(4):
        torch.cuda._sleep(SLEEP // 4)
        x = torch.full((n,), float(rank + 1), device="cuda")
        w = dist.all_reduce(x, async_op=True)
        keep.append((w, x.data_ptr()))
        del x  # Python lets go; the allocator must wait for the backend stream
        junk = torch.full((n,), -7.0, device="cuda")
        del junk
    out = torch.full((n,), float(rank + 1), device="cuda")
    dist.all_reduce(out)
    torch.cuda.synchronize()
    ck.check(bool((out == want).all()), f"after dropped tensors: got {out[:4].tolist()}")
    for w, _ in keep:
        w.wait()

    dist.barrier()
    dist.destroy_process_group()
    ck.finish()


if __name__ == "__main__":
    main()
