/*
 * device/ring.h: the ring algorithms, written as loops over the primitives.
 *
 * What it is: chapter 2's heart. Ranks form a ring (rank r receives from r-1 and sends to r+1)
 * on every channel; each collective is a fixed sequence of primitive calls around it. For
 * all-reduce on n ranks with the data cut into n chunks, rank r does:
 *
 *   step 0      send                chunk r-1                      (push data to the next rank)
 *   n-2 steps   recvReduceSend      chunks r-2, r-3, ..., r-n+1    (reduce and pass on)
 *   step n-1    recvReduceCopySend  chunk r: now fully reduced: keep it, pass it on
 *   n-2 steps   recvCopySend        chunks r-1, ..., r-n+2         (all-gather: keep, pass on)
 *   last        recv                chunk r+1                      (keep)
 *
 * The first half is a reduce-scatter, the second an all-gather; each rank sends 2(n-1) chunks
 * of size S/n, which is where busbw = algbw * 2(n-1)/n comes from. Broadcast and reduce are a
 * chain around the ring starting (ending) at the root.
 *
 * Each call names its chunk (prims.chunk(c)), which only the step timeline uses: a trace of
 * an all-reduce then shows chunk r-1 leaving rank r first and chunk r coming back reduced.
 *
 * Pipelining: every collective walks its channel's share of the data in loops of n chunks of
 * at most chunkBytes; a primitive call cuts its chunk into FIFO steps, so rank r+1 forwards the
 * first step of a chunk while rank r is still sending the rest.
 *
 * Invariants: the chunk sizes are a function of (count, channel, loop, chunk index) only, so
 * the sender of a chunk and its receiver agree on every size; zero-size chunks (counts smaller
 * than the ring) move nothing on either side; the rank's own input enters through the
 * functor's pre() exactly once and each final result goes through post() exactly once.
 *
 * NCCL counterpart: src/device/all_reduce.h, all_gather.h, reduce_scatter.h, broadcast.h,
 * reduce.h (runRing).
 * Added in: stage 2.
 */
#ifndef TCCL_DEVICE_RING_H_
#define TCCL_DEVICE_RING_H_

#include "device/primitives.h"
#include "device/work.h"

namespace tccl {

/// Where one channel's share of a collective lies, and how to cut it into chunks.
struct RingSlice {
  int rank, nranks;
  size_t begin, end;  // this channel's elements: [begin, end) of the buffer (or of each block)
  size_t chunk;       // elements per chunk
  size_t align;       // elements per 16-byte pack: chunk boundaries stay vector-aligned

  TCCL_HOST_DEVICE int mod(int x) const { return (x % nranks + nranks) % nranks; }
};

template <typename T>
TCCL_HOST_DEVICE inline RingSlice ringSlice(const WorkBatch& b, const WorkElem& e,
                                            const WorkItem& it, size_t count) {
  RingSlice s;
  s.rank = b.rank;
  s.nranks = b.nranks;
  s.align = sizeof(T) >= 16 ? 1 : 16 / sizeof(T);
  // Channels split the data into contiguous, pack-aligned parts.
  size_t per = (count + e.nChannels - 1) / e.nChannels;
  per = (per + s.align - 1) / s.align * s.align;
  s.begin = size_t(it.channel) * per < count ? size_t(it.channel) * per : count;
  s.end = s.begin + per < count ? s.begin + per : count;
  s.chunk = size_t(e.chunkBytes) / sizeof(T);
  if (s.chunk < s.align) s.chunk = s.align;
  return s;
}

TCCL_HOST_DEVICE inline size_t minSize(size_t a, size_t b) { return a < b ? a : b; }

/// One loop of a chunked ring: n chunks covering [base, base + n*realChunk) of the slice.
struct RingLoop {
  size_t base, rem, realChunk;
  TCCL_HOST_DEVICE size_t off(int c) const { return base + minSize(size_t(c) * realChunk, rem); }
  TCCL_HOST_DEVICE size_t len(int c) const {
    size_t o = minSize(size_t(c) * realChunk, rem);
    return minSize(realChunk, rem - o);
  }
};

TCCL_HOST_DEVICE inline RingLoop ringLoop(const RingSlice& s, size_t base) {
  RingLoop l;
  l.base = base;
  l.rem = s.end - base;
  // The last loop may hold less than n full chunks: spread it evenly (pack-aligned).
  size_t even = (l.rem + s.nranks - 1) / s.nranks;
  even = (even + s.align - 1) / s.align * s.align;
  l.realChunk = minSize(s.chunk, even);
  return l;
}

template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus ringAllReduce(Backend& be, const WorkItem& it, const RingSlice& s,
                                          const T* in, T* out, Fn fn) {
  Primitives<T, Fn, Backend> prims(be, it.recvConn, it.sendConn, fn);
  const int r = s.rank, n = s.nranks;
  for (size_t base = s.begin; base < s.end; base += size_t(n) * s.chunk) {
    RingLoop l = ringLoop(s, base);
    // >>> exercise 2.2: the ring all-reduce steps
    int c;
    // step 0: push data to the next rank
    c = s.mod(r - 1);
    prims.chunk(c).send(in + l.off(c), l.len(c));
    // k-2 steps: reduce and copy to the next rank
    for (int j = 2; j < n; ++j) {
      c = s.mod(r - j);
      prims.chunk(c).recvReduceSend(in + l.off(c), l.len(c));
    }
    // step k-1: reduce this buffer and the data received, which produces the final result for
    // chunk r: store it and push it to the next rank
    c = r;
    prims.chunk(c).recvReduceCopySend(in + l.off(c), out + l.off(c), l.len(c), /*postOp=*/true);
    // k-2 steps: copy to the next rank
    for (int j = 1; j < n - 1; ++j) {
      c = s.mod(r - j);
      prims.chunk(c).recvCopySend(out + l.off(c), l.len(c));
    }
    // final copy from the FIFO to the destination
    c = s.mod(r + 1);
    prims.chunk(c).recv(out + l.off(c), l.len(c));
    // <<< exercise 2.2
  }
  return prims.finish();
}

/// count: elements per rank; in holds n blocks of count, out one.
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus ringReduceScatter(Backend& be, const WorkItem& it, const RingSlice& s,
                                              size_t count, const T* in, T* out, Fn fn) {
  Primitives<T, Fn, Backend> prims(be, it.recvConn, it.sendConn, fn);
  const int r = s.rank, n = s.nranks;
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    auto block = [&](int b) { return in + size_t(b) * count + off; };
    // step 0: push block r-1 to the next rank
    prims.chunk(s.mod(r - 1)).send(block(s.mod(r - 1)), len);
    // k-2 steps: reduce and pass on
    for (int j = 2; j < n; ++j) {
      prims.chunk(s.mod(r - j)).recvReduceSend(block(s.mod(r - j)), len);
    }
    // last step: block r is complete: it is ours
    prims.chunk(r).recvReduceCopy(block(r), out + off, len, /*postOp=*/true);
  }
  return prims.finish();
}

/// count: elements per rank; out holds n blocks of count, in one.
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus ringAllGather(Backend& be, const WorkItem& it, const RingSlice& s,
                                          size_t count, const T* in, T* out, Fn fn) {
  Primitives<T, Fn, Backend> prims(be, it.recvConn, it.sendConn, fn);
  const int r = s.rank, n = s.nranks;
  // >>> exercise 2.1: the ring all-gather loop
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    auto block = [&](int b) { return out + size_t(b) * count + off; };
    // step 0: our block goes into our output (a no-op in place) and to the next rank
    prims.chunk(r).copySend(in + off, block(r), len);
    // k-2 steps: keep and pass on
    for (int j = 1; j < n - 1; ++j) {
      prims.chunk(s.mod(r - j)).recvCopySend(block(s.mod(r - j)), len);
    }
    // last: block r+1 has come all the way round
    prims.chunk(s.mod(r + 1)).recv(block(s.mod(r + 1)), len);
  }
  // <<< exercise 2.1
  return prims.finish();
}

/// A chain around the ring from the root: root -> root+1 -> ... -> root-1.
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus ringBroadcast(Backend& be, const WorkItem& it, const RingSlice& s,
                                          int root, const T* in, T* out, Fn fn) {
  Primitives<T, Fn, Backend> prims(be, it.recvConn, it.sendConn, fn);
  const int r = s.rank;
  const bool last = s.mod(r + 1) == root;  // the chain ends before it wraps to the root
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    if (r == root) {
      prims.copySend(in + off, out + off, len);
    } else if (last) {
      prims.recv(out + off, len);
    } else {
      prims.recvCopySend(out + off, len);
    }
  }
  return prims.finish();
}

/// A chain around the ring ending at the root: root+1 -> ... -> root.
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus ringReduce(Backend& be, const WorkItem& it, const RingSlice& s,
                                       int root, const T* in, T* out, Fn fn) {
  Primitives<T, Fn, Backend> prims(be, it.recvConn, it.sendConn, fn);
  const int r = s.rank;
  const bool first = s.mod(root + 1) == r;
  for (size_t off = s.begin; off < s.end; off += s.chunk) {
    const size_t len = minSize(s.chunk, s.end - off);
    if (first) {
      prims.send(in + off, len);
    } else if (r == root) {
      prims.recvReduceCopy(in + off, out + off, len, /*postOp=*/true);
    } else {
      prims.recvReduceSend(in + off, len);
    }
  }
  return prims.finish();
}

}  // namespace tccl

#endif  // TCCL_DEVICE_RING_H_
