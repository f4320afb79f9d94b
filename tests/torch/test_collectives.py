"""test_collectives.py: every collective of the "tccl" backend against a reference and gloo.

What it checks, on every rank, for the default group and a sub-group (dist.new_group):
  all_reduce        every dtype x every ReduceOp torch has (SUM, AVG, PRODUCT, MIN, MAX,
                    PREMUL_SUM, BAND, BOR, BXOR where the dtype allows it), counts 0, 1,
                    fewer than ranks, odd, large; async (Work.wait, is_completed, get_future)
  broadcast, reduce, gather, scatter     every root
  all_gather, all_gather_into_tensor     out of place and in place (input inside the output)
  reduce_scatter, reduce_scatter_tensor  out of place and in place
  all_to_all_single (equal and uneven splits), all_to_all, send/recv, isend/irecv,
  all_reduce_coalesced, barrier
The reference is computed by hand from every rank's input (torch_testlib.value), so ops gloo
lacks (AVG, PREMUL_SUM, bfloat16 on 1.13) are checked too; where gloo can run the same call on
the same inputs (a gloo group in the same job), tccl's result must equal gloo's as well.
Run: launch.py --np N test_collectives.py [--device cuda] [--init env|tcp|file] [--quick]
Added in: stage 4.
"""
import torch
import torch.distributed as dist

import torch_testlib as tl

OPS = {
    "SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG, "PRODUCT": dist.ReduceOp.PRODUCT,
    "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND,
    "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR, "PREMUL_SUM": None,
}
PREMUL = 3.0


def op_object(name, dtype, device):
    if name != "PREMUL_SUM":
        return OPS[name]
    return dist._make_nccl_premul_sum(PREMUL)


def op_applies(name, dtype):
    if name in ("BAND", "BOR", "BXOR"):
        return not dtype.is_floating_point and not dtype.is_complex
    if dtype == torch.bool:
        return name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")
    if dtype.is_complex:
        return name in ("SUM", "AVG", "PREMUL_SUM")
    if name == "PREMUL_SUM":
        return dtype.is_floating_point
    return True


def reference(name, inputs, dtype, n):
    """The reduction of `inputs` (every rank's tensor, on the CPU) as torch defines it."""
    if dtype == torch.bool:
        stack = torch.stack(inputs)
        if name in ("SUM", "MAX", "BOR"):
            return stack.any(0)
        if name in ("PRODUCT", "MIN", "BAND"):
            return stack.all(0)
        return (stack.sum(0) % 2).bool()  # BXOR
    if name in ("BAND", "BOR", "BXOR"):
        acc = inputs[0].clone()
        for t in inputs[1:]:
            acc = {"BAND": acc & t, "BOR": acc | t, "BXOR": acc ^ t}[name]
        return acc
    wide = torch.complex128 if dtype.is_complex else (
        torch.float64 if dtype.is_floating_point else torch.int64)
    stack = torch.stack([t.to(wide) for t in inputs])
    if name == "SUM":
        r = stack.sum(0)
    elif name == "PREMUL_SUM":
        r = (stack * PREMUL).sum(0)
    elif name == "AVG":
        r = stack.sum(0) / n if (dtype.is_floating_point or dtype.is_complex) else stack.sum(0) // n
    elif name == "PRODUCT":
        r = stack.prod(0)
    elif name == "MIN":
        r = stack.min(0).values
    else:
        r = stack.max(0).values
    return r.to(dtype)


def try_gloo(fn):
    """Runs fn() on the gloo group; None when gloo refuses the call (op or dtype)."""
    try:
        return fn()
    except (RuntimeError, ValueError):
        return None


class Suite:
    def __init__(self, args, group, gloo, ck, label):
        self.dev, self.group, self.gloo, self.ck, self.label = args.device, group, gloo, ck, label
        self.rank = dist.get_rank(group)
        self.n = dist.get_world_size(group)
        self.quick = args.quick

    def counts(self):
        c = [0, 1, 7, 1031]
        if self.n > 2:
            c.append(self.n - 1)
        return c

    def inputs(self, count, dtype, shift=0, small=False):
        return [tl.value(r, count, dtype, "cpu", shift, small) for r in range(self.n)]

    # ---- all_reduce ------------------------------------------------------------------------
    def all_reduce(self):
        dtypes = tl.FLOAT_TYPES + tl.INT_TYPES + [torch.bool, torch.complex64]
        if self.quick:
            dtypes = [torch.float32, torch.int32, torch.bool]
        for dtype in dtypes:
            for name in OPS:
                if not op_applies(name, dtype):
                    continue
                for count in self.counts():
                    small = name == "PRODUCT"
                    ins = self.inputs(count, dtype, small=small)
                    want = reference(name, ins, dtype, self.n)
                    t = ins[self.rank].clone().to(self.dev)
                    dist.all_reduce(t, op=op_object(name, dtype, self.dev), group=self.group)
                    what = f"{self.label} all_reduce {name} {dtype} count={count}"
                    self.ck.equal(t, want, what)
                    if name in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
                        # gloo's answer on the same inputs, when gloo supports the pair
                        g = ins[self.rank].clone()
                        if try_gloo(lambda: dist.all_reduce(g, op=OPS[name], group=self.gloo)
                                    or True):
                            self.ck.equal(t, g, what + " (vs gloo)")
        # a large one, per op family, to cross many FIFO steps
        count = 300_001 if not self.quick else 70_001
        for name in ("SUM", "MAX", "PREMUL_SUM", "BXOR"):
            dtype = torch.int32 if name == "BXOR" else torch.float32
            ins = self.inputs(count, dtype)
            t = ins[self.rank].clone().to(self.dev)
            dist.all_reduce(t, op=op_object(name, dtype, self.dev), group=self.group)
            self.ck.equal(t, reference(name, ins, dtype, self.n),
                          f"{self.label} all_reduce large {name} {dtype}")

    def async_work(self):
        ins = self.inputs(1000, torch.float32)
        t = ins[self.rank].clone().to(self.dev)
        work = dist.all_reduce(t, async_op=True, group=self.group)
        fut = work.get_future()
        work.wait()
        self.ck.check(work.is_completed() or self.dev == "cuda", "work.is_completed after wait")
        self.ck.check(work.is_success(), "work.is_success")
        self.ck.equal(fut.wait()[0], reference("SUM", ins, torch.float32, self.n),
                      f"{self.label} get_future().wait()")
        chained = fut.then(lambda f: f.value()[0] * 2).wait()
        self.ck.equal(chained, reference("SUM", ins, torch.float32, self.n) * 2,
                      f"{self.label} get_future().then()")
        # several in flight, completed in order
        ts = [x.clone().to(self.dev) for x in ins[self.rank:self.rank + 1] * 4]
        works = [dist.all_reduce(x, async_op=True, group=self.group) for x in ts]
        for w in works:
            w.wait()
        for x in ts:
            self.ck.equal(x, reference("SUM", ins, torch.float32, self.n),
                          f"{self.label} four async all_reduces")

    # ---- rooted --------------------------------------------------------------------------
    def rooted(self):
        for root in range(self.n):
            groot = dist.get_global_rank(self.group, root) if self.group is not None else root
            for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.bool):
                for count in self.counts():
                    ins = self.inputs(count, dtype, shift=root)
                    t = ins[self.rank].clone().to(self.dev)
                    dist.broadcast(t, src=groot, group=self.group)
                    self.ck.equal(t, ins[root], f"{self.label} broadcast root={root} {dtype} "
                                                f"count={count}")
            for name in ("SUM", "MAX", "BOR", "AVG"):
                dtype = torch.int32
                ins = self.inputs(7, dtype)
                t = ins[self.rank].clone().to(self.dev)
                dist.reduce(t, dst=groot, op=OPS[name], group=self.group)
                if self.rank == root:
                    self.ck.equal(t, reference(name, ins, dtype, self.n),
                                  f"{self.label} reduce {name} root={root}")
            for count in (0, 1, 5):
                ins = self.inputs(count, torch.float64)
                t = ins[self.rank].clone().to(self.dev)
                outs = [torch.empty(count, dtype=torch.float64, device=self.dev)
                        for _ in range(self.n)] if self.rank == root else None
                dist.gather(t, outs, dst=groot, group=self.group)
                if self.rank == root:
                    for r in range(self.n):
                        self.ck.equal(outs[r], ins[r], f"{self.label} gather root={root} "
                                                       f"from {r} count={count}")
                pieces = [tl.value(r, count, torch.int64, self.dev, shift=100)
                          for r in range(self.n)] if self.rank == root else None
                out = torch.empty(count, dtype=torch.int64, device=self.dev)
                dist.scatter(out, pieces, src=groot, group=self.group)
                self.ck.equal(out, tl.value(self.rank, count, torch.int64, "cpu", shift=100),
                              f"{self.label} scatter root={root} count={count}")

    # ---- gathers and scatters -------------------------------------------------------------
    def gathers(self):
        n, me = self.n, self.rank
        for dtype in (torch.float32, torch.float16, torch.int8, torch.complex64):
            for count in self.counts():
                ins = self.inputs(count, dtype)
                want = torch.cat(ins)
                outs = [torch.empty(count, dtype=dtype, device=self.dev) for _ in range(n)]
                dist.all_gather(outs, ins[me].to(self.dev), group=self.group)
                self.ck.equal(torch.cat([o.cpu() for o in outs]), want,
                              f"{self.label} all_gather {dtype} count={count}")
                out = torch.empty(n * count, dtype=dtype, device=self.dev)
                dist.all_gather_into_tensor(out, ins[me].to(self.dev), group=self.group)
                self.ck.equal(out, want, f"{self.label} all_gather_into_tensor {dtype} "
                                         f"count={count}")
                # in place: the input is this rank's block of the output (NCCL's in-place rule)
                out = torch.zeros(n * count, dtype=dtype, device=self.dev)
                out.narrow(0, me * count, count).copy_(ins[me])
                dist.all_gather_into_tensor(out, out.narrow(0, me * count, count),
                                            group=self.group)
                self.ck.equal(out, want, f"{self.label} all_gather_into_tensor in place "
                                         f"{dtype} count={count}")

    def reduce_scatters(self):
        n, me = self.n, self.rank
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            for name in ("SUM", "MIN", "AVG", "BXOR"):
                if not op_applies(name, dtype):
                    continue
                for count in self.counts():
                    ins = self.inputs(n * count, dtype)
                    full = reference(name, ins, dtype, n)
                    want = full.narrow(0, me * count, count)
                    out = torch.empty(count, dtype=dtype, device=self.dev)
                    chunks = [c.to(self.dev) for c in ins[me].split(count)] if count else \
                        [torch.empty(0, dtype=dtype, device=self.dev) for _ in range(n)]
                    what = f"{self.label} reduce_scatter {name} {dtype} count={count}"
                    if name != "AVG" or dtype.is_floating_point:
                        dist.reduce_scatter(out, chunks, op=OPS[name], group=self.group)
                        self.ck.equal(out, want, what)
                    out = torch.empty(count, dtype=dtype, device=self.dev)
                    dist.reduce_scatter_tensor(out, ins[me].to(self.dev), op=OPS[name],
                                               group=self.group)
                    self.ck.equal(out, want,
                                  what.replace("reduce_scatter", "reduce_scatter_tensor"))
                    inp = ins[me].clone().to(self.dev)  # in place: output is my block of input
                    blk = inp.narrow(0, me * count, count)
                    dist.reduce_scatter_tensor(blk, inp, op=OPS[name], group=self.group)
                    self.ck.equal(blk, want, what + " (in place)")

    # ---- all-to-all and point to point -----------------------------------------------------
    def all_to_all(self):
        n, me = self.n, self.rank
        for per in (0, 1, 3):
            ins = [tl.value(r, n * per, torch.float32, "cpu", shift=r) for r in range(n)]
            out = torch.empty(n * per, device=self.dev)
            dist.all_to_all_single(out, ins[me].to(self.dev), group=self.group)
            want = torch.cat([ins[r].narrow(0, me * per, per) for r in range(n)])
            self.ck.equal(out, want, f"{self.label} all_to_all_single equal per={per}")
        # uneven: rank r sends (r + p) % 3 rows of 2 columns to rank p
        def rows(src, dst):
            return (src + dst) % 3
        inp = torch.cat([torch.full((rows(me, p), 2), float(me * 10 + p)) for p in range(n)])
        out = torch.empty(sum(rows(s, me) for s in range(n)), 2, device=self.dev)
        dist.all_to_all_single(out, inp.to(self.dev),
                               output_split_sizes=[rows(s, me) for s in range(n)],
                               input_split_sizes=[rows(me, p) for p in range(n)],
                               group=self.group)
        want = torch.cat([torch.full((rows(s, me), 2), float(s * 10 + me)) for s in range(n)])
        self.ck.equal(out, want, f"{self.label} all_to_all_single uneven")
        outs = [torch.empty(rows(s, me) + 1, device=self.dev) for s in range(n)]
        dist.all_to_all(outs, [torch.full((rows(me, p) + 1,), float(me * 10 + p),
                                          device=self.dev) for p in range(n)], group=self.group)
        for s in range(n):
            self.ck.equal(outs[s], torch.full((rows(s, me) + 1,), float(s * 10 + me)),
                          f"{self.label} all_to_all from {s}")

    def point_to_point(self):
        n, me = self.n, self.rank
        if n < 2:
            return
        g = (lambda r: dist.get_global_rank(self.group, r)) if self.group is not None else \
            (lambda r: r)
        nxt, prv = (me + 1) % n, (me - 1) % n
        for count in (0, 1, 100_003):
            send = tl.value(me, count, torch.float32, self.dev)
            recv = torch.empty(count, device=self.dev)
            # a ring shift: even ranks send first, odd ranks receive first (blocking calls)
            if me % 2 == 0:
                dist.send(send, g(nxt), group=self.group)
                dist.recv(recv, g(prv), group=self.group)
            else:
                dist.recv(recv, g(prv), group=self.group)
                dist.send(send, g(nxt), group=self.group)
            if n % 2 == 1 and me == n - 1:
                pass  # odd ring: the last (even) rank sends to rank 0 (even) first: still fine
            self.ck.equal(recv, tl.value(prv, count, torch.float32, "cpu"),
                          f"{self.label} send/recv count={count}")
        send = tl.value(me, 10, torch.int64, self.dev)
        recv = torch.empty(10, dtype=torch.int64, device=self.dev)
        reqs = [dist.isend(send, g(nxt), group=self.group),
                dist.irecv(recv, g(prv), group=self.group)]
        for r in reqs:
            r.wait()
        self.ck.equal(recv, tl.value(prv, 10, torch.int64, "cpu"), f"{self.label} isend/irecv")

    def coalesced_and_barrier(self):
        ins = [self.inputs(c, torch.float32, shift=c) for c in (3, 0, 17)]
        ts = [x[self.rank].clone().to(self.dev) for x in ins]
        dist.all_reduce_coalesced(ts, group=self.group)
        for t, x in zip(ts, ins):
            self.ck.equal(t, reference("SUM", x, torch.float32, self.n),
                          f"{self.label} all_reduce_coalesced")
        dist.barrier(group=self.group)
        self.ck.check(True, "barrier returned")

    def run(self):
        self.all_reduce()
        self.async_work()
        self.rooted()
        self.gathers()
        self.reduce_scatters()
        self.all_to_all()
        self.point_to_point()
        self.coalesced_and_barrier()


def main():
    args = tl.parse_args(lambda ap: ap.add_argument("--quick", action="store_true"))
    rank, size = tl.init(args)
    ck = tl.Checker("test_collectives", rank)
    gloo = dist.new_group(backend="gloo")
    Suite(args, None, gloo, ck, "world").run()
    # A sub-group: ranks 0 and the last (a new communicator made from the sub-group's Store).
    members = sorted({0, size - 1})
    sub = dist.new_group(ranks=members, backend="tccl")
    gsub = dist.new_group(ranks=members, backend="gloo")
    if rank in members:
        Suite(args, sub, gsub, ck, f"group{members}").run()
    dist.barrier()
    dist.destroy_process_group()
    ck.finish()


if __name__ == "__main__":
    main()
