/*
 * device/primitives.h: the primitives every algorithm is written in.
 *
 * What it is: NCCL's Primitives class, for the Simple protocol. An algorithm sees a receive
 * connection (from the previous rank) and a send connection (to the next) and calls
 *
 *   send(src, n)                  src                       -> next
 *   recv(dst, n)                  prev                      -> dst
 *   copySend(src, dst, n)         src                       -> dst and next
 *   recvCopySend(dst, n)          prev                      -> dst and next
 *   recvReduceSend(src, n)        prev (+) src              -> next
 *   recvReduceCopy(src, dst, n)   prev (+) src              -> dst
 *   recvReduceCopySend(src,dst,n) prev (+) src              -> dst and next
 *
 * (+) is the functor's op; the rank's own input (src) goes through its pre() as it enters, and
 * the two calls that can produce a final result take `postOp` to apply post() to it.
 *
 * Fan-in and fan-out (stage 3): a binary tree node receives from two children and sends to
 * two. PrimitivesFan<..., Fan<MaxRecv, MaxSend>> holds arrays of connections, and each protocol
 * step loops over them: wait for every receive slot and every send slot, reduce all received
 * slots into the result (prev (+) prev2 (+) src), publish it to every send peer -- NCCL's
 * Primitives over their recvPeers/sendPeers arrays. The first slot is reduced with the own
 * input as in a one-peer call; each further slot joins the result in one more pass through
 * reduceCopy with chained(fn) (pre() must not run twice), and each further send slot is filled
 * from the result; such calls never go direct. Primitives (Fan<1, 1>) is what rings and p2p use.
 *
 * Each call cuts its n elements into FIFO steps (stepBytes each) and, per step, waits for the
 * slot, runs reduceCopy over it, and posts the counter. The same code runs on the host (one
 * thread) and on the GPU (one thread block): the Backend supplies waiting, posting and the
 * reduceCopy loop (host_backend.h, device_backend.cuh).
 *
 * On the host, over a transport with a proxy, steps go direct where they can, as the backend's
 * policy decides (device/direct.h; kernels have none): a plain send lends src to the proxy, a
 * call with a dst and a send lends dst once the step's result is written there (one write
 * instead of two), and a receive without a reduction (recv, recvCopySend) pre-posts dst, so a
 * forwarded step goes from socket to dst to socket untouched.
 *
 * With TCCL_TRACE_FILE set, each call and each of its steps leaves a record (device/trace_record.h):
 * the waits, the copy or reduction, the call as a whole with the chunk index the algorithm
 * gave with chunk(c). The records of a step are taken at the protocol's edges -- a wait ends
 * right after the counter was seen, a data movement right before tail is published -- so the
 * timeline shows the FIFO protocol itself.
 *
 * Invariants: matching calls on the two ends of a connection move the same element counts, so
 * both cut the same steps; after the first failure (abort, size mismatch) every later call
 * returns false at once, and finish() still writes the step counters back.
 *
 * NCCL counterpart: src/device/primitives.h, src/device/prims_simple.h (genericOp, waitPeer,
 * postPeer).
 * Added in: stage 1; direct steps and fan-in and fan-out in stage 3; in stage 5 the
 * calls moved to device/prim_calls.h (shared with the LL protocol's primitives), and the LL
 * slots' cleanup.
 */
#ifndef TCCL_DEVICE_PRIMITIVES_H_
#define TCCL_DEVICE_PRIMITIVES_H_

#include <cstddef>
#include <cstdint>

#include "device/direct.h"
#include "device/fifo.h"
#include "device/prim_calls.h"
#include "device/reduce_op.h"
#include "device/trace_record.h"
#include "device/work.h"

namespace tccl {

/// How many peers one Primitives object receives from and sends to, at most (NCCL's
/// FanAsymmetric): a ring or p2p step has one of each; a tree node reduces from up to two
/// children and sends its result to up to two. Compile-time, so that a one-peer object's loops
/// over its peers vanish and its code is the single-connection code.
template <int MaxRecv, int MaxSend>
struct Fan {
  static constexpr int kMaxRecv = MaxRecv;
  static constexpr int kMaxSend = MaxSend;
};

template <typename T, typename Fn, class Backend, class F>
class PrimitivesFan : public PrimitiveCalls<PrimitivesFan<T, Fn, Backend, F>, T> {
  // Stage 5: the calls, chunk() and the records' fields come from here (device/prim_calls.h).
  using Calls = PrimitiveCalls<PrimitivesFan, T>;
  friend Calls;
  using Calls::chunk_, Calls::recvPeer_, Calls::sendPeer_, Calls::channel_;
  using Direct = typename Backend::Direct;  // host direct mode, or none (device/direct.h)
  static constexpr int kMaxRecv = F::kMaxRecv;
  static constexpr int kMaxSend = F::kMaxSend;

 public:
  /// Up to kMaxRecv receive and kMaxSend send connections; null entries are skipped (a tree
  /// leaf has no children), the others keep their order.
  TCCL_HOST_DEVICE PrimitivesFan(Backend& be, ConnInfo* const (&recvConns)[kMaxRecv],
                                 ConnInfo* const (&sendConns)[kMaxSend], Fn fn = Fn())
      : be_(be), fn_(fn) {
    connect(recvConns, kMaxRecv, sendConns, kMaxSend);
  }

  /// One receive and one send connection (either may be null): a ring or p2p step.
  TCCL_HOST_DEVICE PrimitivesFan(Backend& be, ConnInfo* recvConn, ConnInfo* sendConn,
                                 Fn fn = Fn())
      : be_(be), fn_(fn) {
    connect(&recvConn, 1, &sendConn, 1);
  }

  /// Announces that a receive of n elements on the receive connection follows, before a send
  /// that the peer answers with its own send (an exchange, device/rec_doubling.h): on the host
  /// the proxy may then stage those steps as they arrive, so that neither side's send waits
  /// on a socket the other side has not drained (MPI_Irecv before MPI_Send). Kernels never
  /// stage by permission (fifo.h), so this is a no-op there. Stage 3.
  TCCL_HOST_DEVICE void prepostRecv(size_t n) {
    if (nrecv_ == 0) return;
    const size_t stepElems = recv_[0]->stepBytes / sizeof(T);
    Direct::prepostRecv(recv_[0], recvStep_[0], (n + stepElems - 1) / stepElems);
  }

  /// Writes the step counters back so the next operation on these connections continues
  /// where this one stopped. Returns the status (WorkStatus::kOk when every call succeeded).
  TCCL_HOST_DEVICE WorkStatus finish() {
    be_.sync();  // every thread is done with its last slot before the steps move on
    // Every thread writes the same values: a thread that goes on to another primitives object
    // on these connections in this kernel (the next collective of an item) reads its own
    // write, where a write by the leader alone might not yet be visible to it.
    for (int i = 0; i < nrecv_; i++) recv_[i]->step = recvStep_[i];
    for (int i = 0; i < nsend_; i++) send_[i]->step = sendStep_[i];
    return status_;
  }

  TCCL_HOST_DEVICE WorkStatus status() const { return status_; }

 private:
  TCCL_HOST_DEVICE void connect(ConnInfo* const* recvConns, int nr, ConnInfo* const* sendConns,
                                int ns) {
    // Every thread reads the persistent step counters; nobody writes them until finish().
    for (int i = 0; i < nr; i++) {
      if (recvConns[i] == nullptr) continue;
      recv_[nrecv_] = recvConns[i];
      recvStep_[nrecv_++] = recvConns[i]->step;
    }
    for (int i = 0; i < ns; i++) {
      if (sendConns[i] == nullptr) continue;
      send_[nsend_] = sendConns[i];
      sendStep_[nsend_++] = sendConns[i]->step;
    }
    if (be_.tracing()) {  // who is at the ends, for the records (trace.h)
      recvPeer_ = nrecv_ > 0 ? int16_t(recv_[0]->peer) : -1;
      sendPeer_ = nsend_ > 0 ? int16_t(send_[0]->peer) : -1;
      channel_ = int16_t(nrecv_ > 0 ? recv_[0]->channel : nsend_ > 0 ? send_[0]->channel : 0);
    }
  }

  /// The one loop behind every primitive (NCCL's genericOp). `src` and `dst` are the user-side
  /// input and output (either may be null); doRecv/doSend say whether the FIFOs take part.
  /// With a received slot and a src, the two are combined with fn_; postOp applies post().
  /// `prim` names the call in the step timeline.
  TCCL_HOST_DEVICE TCCL_NOINLINE bool op(TraceWhat prim, const T* src, T* dst, size_t n,
                                         bool doRecv, bool doSend, bool postOp) {
    if (status_ != WorkStatus::kOk) return false;
    const uint64_t tCall = be_.traceNow();  // 0 when tracing is off (then nothing is recorded)
    // The peers that take part. A one-peer object is told by the call alone (its connection
    // exists whenever the algorithm asks for that side), which keeps its code free of counts.
    const int nr = !doRecv ? 0 : kMaxRecv == 1 ? 1 : nrecv_;
    const int ns = !doSend ? 0 : kMaxSend == 1 ? 1 : nsend_;
    ConnInfo* c = doSend ? send_[0] : recv_[0];
    const size_t stepElems = (c ? c->stepBytes : n * sizeof(T)) / sizeof(T);
    // Which steps go straight between the user's buffers and the proxy (device/direct.h):
    // on the host, lent sends and receives in place; in a kernel, none.
    Direct direct(DirectCall{Fn::kPlain, src, dst, n * sizeof(T), stepElems * sizeof(T),
                             nr > 0 ? recv_[0] : nullptr, nr > 1, ns > 0 ? send_[0] : nullptr,
                             ns > 1, nr > 0 ? recvStep_[0] : 0});
    for (size_t off = 0; off < n; off += stepElems) {
      const size_t m = (n - off < stepElems) ? n - off : stepElems;
      const T* recvSlot[kMaxRecv] = {};
      T* sendSlot[kMaxSend] = {};
      bool landed = false;  // a direct receive: the proxy wrote straight into dst
      uint64_t t = be_.traceNow();
      for (int i = 0; i < kMaxRecv && i < nr; i++) {
        ConnInfo* r = recv_[i];
        const int slot = int(recvStep_[i] % kNSteps);
        // Pre-post receives, as MPI does, or let the proxy stage: before the wait, so bytes
        // that arrive while this thread is away still move. Only the first receive can land
        // in dst (direct.h); a later one never clears what the first reported.
        if (direct.beforeRecvWait(i, r, recvStep_[i], (n - off + stepElems - 1) / stepElems)) {
          landed = true;
        }
        // >>> exercise 1.1: the consumer's wait and size check
        // Protocol step 1 (consumer): wait until the producer has published this step.
        if (!be_.waitAtLeast(&r->fifo->tail, recvStep_[i] + 1, &r->fifo->closed)) {
          return fail(loadFlag(&r->fifo->closed) ? WorkStatus::kPeerClosed : WorkStatus::kAborted);
        }
        traceStep(TraceWhat::kWaitRecv, t, i, recvStep_[i], kTraceNoStep, 0);
        t = be_.traceNow();
        // The size was written before tail (release) and tail was read with acquire: it is
        // the producer's value for this step.
        if (r->fifo->sizes[slot] != int64_t(m * sizeof(T))) return fail(WorkStatus::kSizeMismatch);
        // <<< exercise 1.1
        recvSlot[i] = reinterpret_cast<const T*>(r->buff + slot * r->stepBytes);
      }
      for (int i = 0; i < kMaxSend && i < ns; i++) {
        ConnInfo* s = send_[i];
        // Protocol step 1 (producer): wait for a free slot, i.e. head + kNSteps > step: the
        // consumer is fewer than kNSteps steps behind. (Written without subtraction from step,
        // which would wrap below zero on the first kNSteps steps.)
        if (sendStep_[i] + 1 > uint64_t(kNSteps) &&
            !be_.waitAtLeast(&s->fifo->head, sendStep_[i] + 1 - kNSteps, &s->fifo->closed)) {
          return fail(loadFlag(&s->fifo->closed) ? WorkStatus::kPeerClosed : WorkStatus::kAborted);
        }
        traceStep(TraceWhat::kWaitSend, t, i, kTraceNoStep, sendStep_[i], 0);
        t = be_.traceNow();
        const int slot = int(sendStep_[i] % kNSteps);
        sendSlot[i] = reinterpret_cast<T*>(s->buff + slot * s->stepBytes);
        // Direct: the proxy sends from the user buffer; otherwise from the slot. Only the
        // first send connection lends (direct.h).
        char* lent = i == 0 ? direct.lent(src ? src + off : nullptr, dst ? dst + off : nullptr)
                            : nullptr;
        if (be_.leader()) s->fifo->ptrs[slot] = lent;
        if (i == 0 && direct.fromDst) sendSlot[0] = nullptr;  // the data goes to dst only
      }
      // Step 2: move (and combine) the data. Sources: the received slot and/or the user input;
      // destinations: the user output and/or the send slot.
      if (!landed && !direct.send) reduceCopyStep(recvSlot, sendSlot, nr, ns, src, dst, off, m,
                                                  postOp);
      // Traced before tail moves: the consumer can only see this step later.
      const TraceWhat moved = landed || direct.send ? TraceWhat::kDirect
                              : (recvSlot[0] && src) ? TraceWhat::kReduce
                                                     : TraceWhat::kCopy;
      for (int i = 0; i < kMaxRecv || i < kMaxSend; i++) {
        if (i >= nr && i >= ns) break;
        traceStep(moved, t, i, i < nr ? recvStep_[i] : kTraceNoStep,
                  i < ns ? sendStep_[i] : kTraceNoStep, int64_t(m * sizeof(T)));
      }
      // Step 3: publish. The producer records the size, then moves tail (the backend fences so
      // the slot and size are visible first); the consumer frees the slot by moving head.
      for (int i = 0; i < kMaxSend && i < ns; i++) {
        ConnInfo* s = send_[i];
        cleanLL(s, sendStep_[i]);
        if (be_.leader()) s->fifo->sizes[sendStep_[i] % kNSteps] = int64_t(m * sizeof(T));
        be_.post(&s->fifo->tail, ++sendStep_[i], s->gpuScope);
      }
      for (int i = 0; i < kMaxRecv && i < nr; i++) {
        be_.postConsumed(&recv_[i]->fifo->head, ++recvStep_[i]);
      }
    }
    // A direct send lent the proxy pointers into src or dst: return only once it has sent
    // them all (the caller may change both as soon as the operation is over).
    if (direct.lends() && sendStep_[0] > 0 &&
        !be_.waitAtLeast(&send_[0]->fifo->head, sendStep_[0], &send_[0]->fifo->closed)) {
      return fail(loadFlag(&send_[0]->fifo->closed) ? WorkStatus::kPeerClosed
                                                    : WorkStatus::kAborted);
    }
    if (be_.tracing()) {
      TraceRecord r = record(prim, tCall, 0, kTraceNoStep, kTraceNoStep, int64_t(n * sizeof(T)));
      r.chunk = chunk_;
      be_.traceEmit(r);
    }
    chunk_ = -1;
    return true;
  }

  /// One step's data movement. Pass 0 is every primitive's one pass: receive slot 0 (+) the
  /// own input -> dst and/or send slot 0. With more receive peers (fan-in), each next pass
  /// folds one more slot into the partial result in place, with chained(fn_): the own input
  /// has been through pre() already; post() runs on the last fold, on the final value. With
  /// more send peers (fan-out), the last passes copy the result into their slots. One
  /// reduceCopy call site for all passes: on the GPU it is inlined, and each site would cost
  /// its compile time again.
  TCCL_HOST_DEVICE void reduceCopyStep(const T* const (&recvSlot)[kMaxRecv],
                                       T* const (&sendSlot)[kMaxSend], int nr, int ns,
                                       const T* src, T* dst, size_t off, size_t m,
                                       bool postOp) {
    T* d0 = dst ? dst + off : sendSlot[0];
    T* d1 = (dst && sendSlot[0]) ? sendSlot[0] : nullptr;
    const int folds = (kMaxRecv > 1 && nr > 1) ? nr - 1 : 0;
    const int copies = (kMaxSend > 1 && ns > 1) ? ns - 1 : 0;
    for (int pass = 0; pass <= folds + copies; pass++) {
      const T* a = recvSlot[0];
      const T* b = src ? src + off : nullptr;
      T* o0 = d0;
      T* o1 = d1;
      bool post = postOp && folds == 0;
      if (pass > folds) {
        a = d0, b = nullptr, o0 = sendSlot[pass - folds], o1 = nullptr, post = false;
      } else if (pass > 0) {
        a = recvSlot[pass], b = d0, post = postOp && pass == folds;
      }
      // The barrier: this pass reads what the last one wrote (on the GPU another thread may
      // have written an element).
      if (pass > 0) be_.sync();
      be_.reduceCopy(a, b, o0, o1, m, pass > 0 && pass <= folds ? chained(fn_) : fn_, post);
    }
  }

  /// A record of this call or one of its steps on peer i's connections, from t0 until now.
  TCCL_HOST_DEVICE TraceRecord record(TraceWhat what, uint64_t t0, int i, uint64_t recvStep,
                                      uint64_t sendStep, int64_t bytes) {
    TraceRecord r = this->makeRecord(what, t0, be_.traceNow(), recvStep, sendStep, bytes);
    if (i > 0) {  // a tree node's second child: that connection's peers
      r.recvPeer = i < nrecv_ ? int16_t(recv_[i]->peer) : -1;
      r.sendPeer = i < nsend_ ? int16_t(send_[i]->peer) : -1;
    }
    return r;
  }

  TCCL_HOST_DEVICE void traceStep(TraceWhat what, uint64_t t0, int i, uint64_t recvStep,
                                  uint64_t sendStep, int64_t bytes) {
    if (be_.tracing()) be_.traceEmit(record(what, t0, i, recvStep, sendStep, bytes));
  }

  TCCL_HOST_DEVICE bool fail(WorkStatus why) {
    status_ = why;
    return false;
  }

  /// Stage 5: the LL slots' flag-wrap cleanup (fifo.h) is due at certain step numbers,
  /// whichever protocol the step uses; on a Simple step the whole LL slot gets the flag.
  TCCL_HOST_DEVICE void cleanLL(ConnInfo* c, uint64_t step) {
    if constexpr (Backend::kHasLL) {
      if (c->llBuff && llCleanStep(step)) llCleanLines(llSlot(c, step), 0, kLLSlotLines, llFlag(step));
    }
  }

  Backend& be_;
  Fn fn_;
  // The connections that take part, first nrecv_ / nsend_ entries, and their next steps.
  ConnInfo* recv_[kMaxRecv] = {};
  ConnInfo* send_[kMaxSend] = {};
  uint64_t recvStep_[kMaxRecv] = {};
  uint64_t sendStep_[kMaxSend] = {};
  int nrecv_ = 0;
  int nsend_ = 0;
  WorkStatus status_ = WorkStatus::kOk;
};

/// The primitives of a ring or p2p step: one peer on each side.
template <typename T, typename Fn, class Backend>
using Primitives = PrimitivesFan<T, Fn, Backend, Fan<1, 1>>;

}  // namespace tccl

#endif  // TCCL_DEVICE_PRIMITIVES_H_
