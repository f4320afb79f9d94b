"""test_errors.py: the "tccl" backend's errors are Python exceptions that say what went wrong.

Cases (--case):
  usage     unsupported ops and dtypes (BAND on floats, MAX on complex, float8-free checks),
            send/recv tags, receive from any source, wrong list lengths and sizes, uneven
            splits that do not add up, non-contiguous tensors: each raises RuntimeError naming
            the collective and the problem, on the calling rank, before anything is queued, and
            the group still works afterwards.
  rank-dies the last rank exits abruptly mid-job; every other rank's next collective raises
            (the peer's connection closed) well within the timeout, instead of hanging.
  timeout   the last rank stays alive but never joins; the others' all_reduce raises after the
            process group's timeout (2 s here), naming the operation, and the group refuses
            further work.
Run: launch.py --np N [--expect-fail R] test_errors.py --case CASE
Added in: stage 4.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_testlib as tl


def expect_error(ck, fn, words, what):
    try:
        fn()
    except (RuntimeError, ValueError) as e:  # torch 2.x raises ValueError for some checks
        msg = str(e)
        ck.check(all(w in msg for w in words), f"{what}: message {msg!r} lacks {words}")
        return msg
    ck.check(False, f"{what}: no exception")
    return ""


def case_usage(args, rank, size, ck):
    dev = args.device
    f = torch.ones(4, device=dev)
    expect_error(ck, lambda: dist.all_reduce(f, op=dist.ReduceOp.BAND), ["allreduce", "BAND"],
                 "BAND on float")
    c = torch.ones(4, dtype=torch.complex64, device=dev)
    expect_error(ck, lambda: dist.all_reduce(c, op=dist.ReduceOp.MAX), ["complex"],
                 "MAX on complex")
    expect_error(ck, lambda: dist.send(f, (rank + 1) % size, tag=7), ["tags", "tag=7"],
                 "send with a tag")
    expect_error(ck, lambda: dist.recv(f), ["any source"], "recv from any source")
    expect_error(ck, lambda: dist.all_gather([torch.ones(4, device=dev)], f),
                 ["allgather", "expected one per rank"] if size > 1 else ["allgather"],
                 "all_gather with a short list") if size > 1 else None
    expect_error(ck, lambda: dist.all_gather_into_tensor(torch.empty(size * 4 + 1, device=dev), f),
                 ["all_gather_into_tensor", "elements"], "all_gather_into_tensor output size")
    expect_error(ck, lambda: dist.reduce_scatter_tensor(f, torch.ones(size * 4 + 2, device=dev)),
                 ["reduce_scatter_tensor", "elements"], "reduce_scatter_tensor input size")
    expect_error(ck, lambda: dist.all_to_all_single(
        torch.empty(4, device=dev), torch.ones(4, device=dev),
        output_split_sizes=[4] + [0] * (size - 1), input_split_sizes=[1] * size),
        ["all_to_all_single", "splits"], "uneven splits that do not add up")
    strided = torch.ones(4, 4, device=dev).t()
    expect_error(ck, lambda: dist.all_reduce(strided), ["contiguous"], "non-contiguous")
    big = [torch.ones(4, device=dev), torch.ones(5, device=dev)]
    if size > 1:
        expect_error(ck, lambda: dist.all_gather(big + [torch.ones(4, device=dev)] * (size - 2),
                                                 f), ["allgather", "elements"],
                     "all_gather with a wrong-sized output")
    # None of that reached tccl: the group still works.
    t = torch.full((3,), float(rank), device=dev)
    dist.all_reduce(t)
    ck.check(t.tolist() == [float(sum(range(size)))] * 3, "the group works after the errors")


def case_rank_dies(args, rank, size, ck):
    t = torch.ones(1000)
    dist.all_reduce(t)  # everyone is connected
    if rank == size - 1:
        print("rank dies now", flush=True)
        os._exit(3)
    start = time.monotonic()
    msg = expect_error(ck, lambda: [dist.all_reduce(t) for _ in range(50)], ["tccl"],
                       "all_reduce with a dead peer")
    took = time.monotonic() - start
    print(f"raised after {took:.2f} s: {msg.splitlines()[0][:200]}", flush=True)
    ck.check(took < args.timeout, f"raised after {took:.1f} s, past the timeout")
    expect_error(ck, lambda: dist.all_reduce(t), ["failed earlier"], "the group refuses work")


def case_timeout(args, rank, size, ck):
    t = torch.ones(10)
    dist.all_reduce(t)
    # The others count themselves done in the job's store once they have raised; the silent
    # rank stays alive until then (at most timeout + 4 s), so what they see is the timeout, not
    # a closed connection. The store is rank 0's: when rank 0 has gone, everyone is done.
    store = dist.distributed_c10d._get_default_store()
    if rank == size - 1:
        deadline = time.monotonic() + args.timeout + 4
        while time.monotonic() < deadline:  # alive, silent: never joins the next all_reduce
            try:
                if store.add("timeout_case_done", 0) >= size - 1:
                    break
            except RuntimeError:
                break
            time.sleep(0.05)
        ck.finish()
        os._exit(0)
    start = time.monotonic()
    msg = expect_error(ck, lambda: dist.all_reduce(t), ["timed out", "allreduce"],
                       "all_reduce with a silent peer")
    took = time.monotonic() - start
    print(f"raised after {took:.2f} s: {msg.splitlines()[0][:200]}", flush=True)
    ck.check(args.timeout <= took < args.timeout + 3, f"raised after {took:.1f} s, timeout "
                                                      f"{args.timeout} s")
    expect_error(ck, lambda: dist.all_reduce(t), ["failed earlier"], "the group refuses work")
    store.add("timeout_case_done", 1)


def main():
    args = tl.parse_args(lambda ap: ap.add_argument("--case", required=True,
                                                    choices=["usage", "rank-dies", "timeout"]))
    rank, size = tl.init(args)
    ck = tl.Checker(f"test_errors {args.case}", rank)
    {"usage": case_usage, "rank-dies": case_rank_dies, "timeout": case_timeout}[args.case](
        args, rank, size, ck)
    if args.case == "usage":
        dist.destroy_process_group()
        ck.finish()
    else:
        ck.finish()
        sys.stdout.flush()
        # The group is broken by design here: leave without the collective teardown.
        os._exit(0)


if __name__ == "__main__":
    main()
