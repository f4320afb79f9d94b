/*
 * device/rec_doubling.h: recursive-doubling all-reduce, the latency algorithm.
 *
 * What it is: what MPI libraries run for small all-reduces. With p = 2^k ranks, in step j every
 * rank exchanges its partial result with the rank at distance 2^j (rank ^ 2^j) and combines the
 * two: after k steps every rank holds the full result. Each step is one message each way at the
 * same time, so the time is k = log2 p one-way latencies -- one at 2 ranks, where a ring or a
 * tree needs two hops in a row. Every step moves the whole buffer, so it loses to the ring and
 * the tree as soon as bytes, not latency, set the time: the cost model (tuning.cc) keeps it to
 * small messages.
 *
 * When n is not a power of two, the first 2(n - p) ranks fold in pairs before the exchanges
 * (even rank r sends its input to r+1 and waits) and get the result back after them; the other
 * ranks take part directly. Rank r's place among the p: r/2 for the odd folding ranks, r - (n-p)
 * for the rest.
 *
 * Slots in WorkBatch::conns (from it.connStart): 0/1 send to / receive from the folding
 * partner, then 2+2j / 3+2j send to / receive from the partner of step j.
 *
 * Invariants: partners combine in opposite orders (theirs (+) mine, mine (+) theirs), and the
 * reductions are commutative, so after each step both hold bitwise the same value and every
 * rank ends with the same result; pre() touches each input once (as it leaves or enters the
 * first combination) and post() each result once (in the last step); a step's receive is
 * announced before its send (prepostRecv), so two partners sending to each other at once never
 * wait on each other's socket.
 *
 * NCCL counterpart: none (NCCL has no recursive doubling; its latency answer is the tree and
 * the LL protocols). MPICH's MPIR_Allreduce_intra_recursive_doubling and Open MPI's
 * ompi_coll_base_allreduce_intra_recursivedoubling are the models.
 * Added in: stage 3.
 */
#ifndef TCCL_DEVICE_REC_DOUBLING_H_
#define TCCL_DEVICE_REC_DOUBLING_H_

#include "device/primitives.h"
#include "device/reduce_op.h"
#include "device/ring.h"
#include "device/work.h"

namespace tccl {

/// The largest power of two <= n.
TCCL_HOST_DEVICE inline int rdPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/// One exchange on [off, off+len): src goes to the partner, theirs (+) src lands in out.
template <typename T, typename F, class Backend>
TCCL_HOST_DEVICE WorkStatus rdExchange(Backend& be, ConnInfo* send, ConnInfo* recv,
                                       const RingSlice& s, const T* src, T* out, F fn, bool last) {
  Primitives<T, F, Backend> prims(be, recv, send, fn);
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    prims.prepostRecv(len);  // the partner's half of the exchange may arrive while we send
    prims.send(src + off, len);
    prims.recvReduceCopy(src + off, out + off, len, /*postOp=*/last);
  }
  return prims.finish();
}

template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus recDoublingAllReduce(Backend& be, const WorkBatch& b,
                                                 const WorkItem& it, const RingSlice& s,
                                                 const T* in, T* out, Fn fn) {
  ConnInfo* const* c = b.conns + it.connStart;
  const int r = s.rank, n = s.nranks, p = rdPow2(n), extra = n - p;
  const int steps = (it.nConns - 2) / 2;
  WorkStatus st = WorkStatus::kOk;
  // >>> exercise 3.3: recursive doubling
  if (r < 2 * extra && r % 2 == 0) {
    // Folded: hand the input to r+1 (pre() applied on the way), then take the result back.
    Primitives<T, Fn, Backend> prims(be, c[1], c[0], fn);
    for (size_t off = s.begin; off < s.end; off += s.chunk) {
      prims.send(in + off, minSize(s.chunk, s.end - off));
    }
    for (size_t off = s.begin; off < s.end; off += s.chunk) {
      prims.recv(out + off, minSize(s.chunk, s.end - off));
    }
    return prims.finish();
  }
  const T* src = in;     // what this rank contributes next: its input, then its partial result
  bool partial = false;  // src has been through pre() (in place, src == in says nothing)
  if (r < 2 * extra) {
    // Odd folding rank: out = mine (+) my even neighbour's.
    Primitives<T, Fn, Backend> prims(be, c[1], nullptr, fn);
    for (size_t off = s.begin; off < s.end; off += s.chunk) {
      prims.recvReduceCopy(in + off, out + off, minSize(s.chunk, s.end - off), steps == 0);
    }
    if ((st = prims.finish()) != WorkStatus::kOk) return st;
    src = out;
    partial = true;
  }
  for (int j = 0; j < steps && st == WorkStatus::kOk; j++) {
    const bool last = j == steps - 1;
    // The first combination applies pre() to our input; later ones continue a partial result.
    st = rdExchange<T>(be, c[2 + 2 * j], c[3 + 2 * j], s, src, out, partial ? chained(fn) : fn,
                       last);
    src = out;
    partial = true;
  }
  if (st == WorkStatus::kOk && r < 2 * extra) {
    // Give the folded neighbour its result.
    // (chained: a result must not go through pre() again on its way out.)
    Primitives<T, Fn, Backend> prims(be, nullptr, c[0], chained(fn));
    for (size_t off = s.begin; off < s.end; off += s.chunk) {
      prims.send(out + off, minSize(s.chunk, s.end - off));
    }
    st = prims.finish();
  }
  // <<< exercise 3.3
  return st;
}

}  // namespace tccl

#endif  // TCCL_DEVICE_REC_DOUBLING_H_
