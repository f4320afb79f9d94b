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
 * two. Built with up to kMaxFan receive and send connections, the same calls reduce every
 * received slot into the result (prev[0] (+) prev[1] (+) src) and send it to every peer, as
 * NCCL's Primitives do over their recvPeers/sendPeers arrays. Each further received slot joins
 * the result in a pass of its own through reduceCopy with chained(fn) (pre() must not run
 * twice), and each further send slot is filled from the result.
 *
 * Each call cuts its n elements into FIFO steps (stepBytes each) and, per step, waits for the
 * slot, runs reduceCopy over it, and posts the counter. The same code runs on the host (one
 * thread) and on the GPU (one thread block): the Backend supplies waiting, posting and the
 * reduceCopy loop (host_backend.h, device_backend.cuh).
 *
 * On the host, over a transport with a proxy, steps go direct where they can: the backend's
 * policy (Backend::Direct, device/direct.h) says which steps the proxy moves from or into the
 * user's buffer; in a kernel it says "none" at compile time.
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
 * Added in: stage 1; direct steps (device/direct.h) and fan-in and fan-out in stage 3; in
 * stage 5 the calls moved to device/prim_calls.h (shared with the LL protocol's primitives),
 * and the LL slots' cleanup.
 */
#ifndef TCCL_DEVICE_PRIMITIVES_H_
#define TCCL_DEVICE_PRIMITIVES_H_

#include <cstddef>
#include <cstdint>

#include "device/fifo.h"
#include "device/prim_calls.h"
#include "device/reduce_op.h"
#include "device/trace_record.h"
#include "device/work.h"

namespace tccl {

template <typename T, typename Fn, class Backend>
class Primitives : public PrimitiveCalls<Primitives<T, Fn, Backend>, T> {
  // Stage 5: the calls, chunk() and the records' fields come from here (device/prim_calls.h).
  using Calls = PrimitiveCalls<Primitives, T>;
  friend Calls;
  using Calls::chunk_, Calls::recvPeer_, Calls::sendPeer_, Calls::channel_;

 public:
  /// recvConn2 / sendConn2 (stage 3): a second peer on each side (a tree node's children).
  /// Null connections are left out: the first non-null one on a side is that side's peer 0.
  TCCL_HOST_DEVICE Primitives(Backend& be, ConnInfo* recvConn, ConnInfo* sendConn, Fn fn = Fn(),
                              ConnInfo* recvConn2 = nullptr, ConnInfo* sendConn2 = nullptr)
      : be_(be), fn_(fn) {
    if (recvConn) recv_[nRecv_++] = recvConn;
    if (recvConn2) recv_[nRecv_++] = recvConn2;
    if (sendConn) send_[nSend_++] = sendConn;
    if (sendConn2) send_[nSend_++] = sendConn2;
    // Every thread reads the persistent step counters; nobody writes them until finish().
    for (int i = 0; i < nRecv_; i++) recvStep_[i] = recv_[i]->step;
    for (int i = 0; i < nSend_; i++) sendStep_[i] = send_[i]->step;
    if (be_.tracing()) {  // who is at the ends, for the records (trace.h)
      recvPeer_ = nRecv_ ? int16_t(recv_[0]->peer) : -1;
      sendPeer_ = nSend_ ? int16_t(send_[0]->peer) : -1;
      channel_ = int16_t(nRecv_ ? recv_[0]->channel : nSend_ ? send_[0]->channel : 0);
    }
  }

  /// Announces that a receive of n elements on the receive connection follows, before a send
  /// that the peer answers with its own send (an exchange, device/rec_doubling.h); the
  /// backend's direct policy decides what that allows (device/direct.h). Stage 3.
  TCCL_HOST_DEVICE void prepostRecv(size_t n) {
    if (nRecv_ == 0) return;
    const size_t stepElems = recv_[0]->stepBytes / sizeof(T);
    Direct::prepostRecv(recv_[0], recvStep_[0], (n + stepElems - 1) / stepElems);
  }

  /// Writes the step counters back so the next operation on these connections continues
  /// where this one stopped. Returns the status (kWorkOk when every call succeeded).
  TCCL_HOST_DEVICE uint32_t finish() {
    be_.sync();  // every thread is done with its last slot before the steps move on
    // Every thread writes the same values: a thread that goes on to another primitives object
    // on these connections in this kernel (the next collective of an item) reads its own
    // write, where a write by the leader alone might not yet be visible to it.
    for (int i = 0; i < nRecv_; i++) recv_[i]->step = recvStep_[i];
    for (int i = 0; i < nSend_; i++) send_[i]->step = sendStep_[i];
    return status_;
  }

  TCCL_HOST_DEVICE uint32_t status() const { return status_; }

 private:
  using Direct = typename Backend::Direct;

  /// The one loop behind every primitive (NCCL's genericOp): per FIFO step, wait for every
  /// peer, move the data, post every peer. `src` and `dst` are the user-side input and output
  /// (either may be null); doRecv/doSend say whether the FIFOs take part. With a received slot
  /// and a src, the two are combined with fn_; postOp applies post(). `prim` names the call in
  /// the step timeline.
  TCCL_HOST_DEVICE TCCL_NOINLINE bool op(TraceWhat prim, const T* src, T* dst, size_t n,
                                         bool doRecv, bool doSend, bool postOp) {
    if (status_ != kWorkOk) return false;
    const uint64_t tCall = be_.traceNow();  // 0 when tracing is off (then nothing is recorded)
    const int nRecv = doRecv ? nRecv_ : 0, nSend = doSend ? nSend_ : 0;
    ConnInfo* c = nSend ? send_[0] : nRecv ? recv_[0] : nullptr;
    const size_t stepElems = (c ? c->stepBytes : n * sizeof(T)) / sizeof(T);
    Direct direct(Fn::kPlain, src, dst, recv_, recvStep_, nRecv, send_, nSend,
                  (n + stepElems - 1) / stepElems);
    for (size_t off = 0; off < n; off += stepElems) {
      const size_t m = (n - off < stepElems) ? n - off : stepElems;
      const int64_t bytes = int64_t(m * sizeof(T));
      const T* in = src ? src + off : nullptr;  // this step's piece of the user's buffers
      T* out = dst ? dst + off : nullptr;
      const T* recvSlot[kMaxFan] = {};
      T* sendSlot[kMaxFan] = {};
      bool landed = false;  // a direct receive: the proxy wrote straight into dst
      uint64_t t = be_.traceNow();
      // Step 1: wait. Consumer: until the producer has published this step.
      for (int i = 0; i < nRecv; i++) {
        ConnInfo* r = recv_[i];
        const int slot = int(recvStep_[i] % kNSteps);
        landed |= direct.beforeRecvWait(i, recvStep_[i], (char*)dst, n * sizeof(T));
        if (!be_.waitAtLeast(&r->fifo->tail, recvStep_[i] + 1, &r->fifo->closed)) {
          return fail(loadFlag(&r->fifo->closed) ? kWorkPeerClosed : kWorkAborted);
        }
        traceStep(i, TraceWhat::kWaitRecv, t, recvStep_[i], kTraceNoStep, 0);
        t = be_.traceNow();
        // The size was written before tail (release) and tail was read with acquire: it is
        // the producer's value for this step.
        if (r->fifo->sizes[slot] != bytes) return fail(kWorkSizeMismatch);
        recvSlot[i] = reinterpret_cast<const T*>(r->buff + slot * r->stepBytes);
      }
      // Producer: until its slot is free, i.e. head + kNSteps > step: the consumer is fewer
      // than kNSteps steps behind. (Written without subtraction from step, which would wrap
      // below zero on the first kNSteps steps.)
      for (int i = 0; i < nSend; i++) {
        ConnInfo* s = send_[i];
        const int slot = int(sendStep_[i] % kNSteps);
        if (sendStep_[i] + 1 > uint64_t(kNSteps) &&
            !be_.waitAtLeast(&s->fifo->head, sendStep_[i] + 1 - kNSteps, &s->fifo->closed)) {
          return fail(loadFlag(&s->fifo->closed) ? kWorkPeerClosed : kWorkAborted);
        }
        traceStep(i, TraceWhat::kWaitSend, t, kTraceNoStep, sendStep_[i], 0);
        t = be_.traceNow();
        sendSlot[i] = reinterpret_cast<T*>(s->buff + slot * s->stepBytes);
        // Direct: the proxy sends from the user's buffer, and the data goes to dst only.
        char* lent = i == 0 ? direct.lent(in, out) : nullptr;
        if (be_.leader()) s->fifo->ptrs[slot] = lent;
        if (lent) sendSlot[i] = nullptr;
      }
      // Step 2: move (and combine) the data.
      if (!landed && !direct.send) {
        moveStep(recvSlot, nRecv, in, out, sendSlot, nSend, m, postOp);
      }
      // Traced before tail moves: the consumer can only see this step later.
      const TraceWhat moved = landed || direct.send    ? TraceWhat::kDirect
                              : (recvSlot[0] && src) ? TraceWhat::kReduce
                                                     : TraceWhat::kCopy;
      for (int i = 0; i < nRecv || i < nSend; i++) {
        traceStep(i, moved, t, i < nRecv ? recvStep_[i] : kTraceNoStep,
                  i < nSend ? sendStep_[i] : kTraceNoStep, bytes);
      }
      // Step 3: post. The producer records the size, then moves tail (the backend fences so
      // the slot and size are visible first); the consumer frees the slot by moving head.
      for (int i = 0; i < nSend; i++) {
        if constexpr (Backend::kHasLL) llCleanSimpleStep(send_[i], sendStep_[i]);  // stage 5
        if (be_.leader()) send_[i]->fifo->sizes[sendStep_[i] % kNSteps] = bytes;
        be_.post(&send_[i]->fifo->tail, ++sendStep_[i], send_[i]->gpuScope);
      }
      for (int i = 0; i < nRecv; i++) be_.postConsumed(&recv_[i]->fifo->head, ++recvStep_[i]);
    }
    // A direct send lent the proxy pointers into src or dst: return only once it has sent
    // them all (the caller may change both as soon as the operation is over).
    if (direct.lends() && sendStep_[0] > 0 &&
        !be_.waitAtLeast(&send_[0]->fifo->head, sendStep_[0], &send_[0]->fifo->closed)) {
      return fail(loadFlag(&send_[0]->fifo->closed) ? kWorkPeerClosed : kWorkAborted);
    }
    if (be_.tracing()) {
      TraceRecord r = record(0, prim, tCall, kTraceNoStep, kTraceNoStep, int64_t(n * sizeof(T)));
      r.chunk = chunk_;
      be_.traceEmit(r);
    }
    chunk_ = -1;
    return true;
  }

  /// A step's data movement. Sources: the received slots and/or the user input (userIn);
  /// destinations: the user output (userOut) and/or the send slots. Pass 0 is every
  /// primitive's one pass: recvSlot[0] (+) userIn -> userOut or sendSlot[0] (and sendSlot[0]
  /// too when both). Each further received slot is folded into that result in place, with
  /// chained(fn_): the own input has been through pre() already; post() runs on the final
  /// value. Each further send slot is then filled from the result. One reduceCopy call site
  /// for all passes: on the GPU it is inlined, and each site would cost its compile time again.
  TCCL_HOST_DEVICE void moveStep(const T* const* recvSlot, int nRecv, const T* userIn,
                                 T* userOut, T* const* sendSlot, int nSend, size_t m,
                                 bool postOp) {
    T* result = userOut ? userOut : sendSlot[0];
    T* alsoTo = (userOut && nSend > 0) ? sendSlot[0] : nullptr;
    const int folds = nRecv > 1 ? nRecv - 1 : 0, copies = nSend > 1 ? nSend - 1 : 0;
    for (int pass = 0; pass <= folds + copies; pass++) {
      const T* a = recvSlot[0];
      const T* b = userIn;
      T* o0 = result;
      T* o1 = alsoTo;
      bool post = postOp && folds == 0;
      if (pass > 0 && pass <= folds) {  // fold received slot `pass` into the result
        a = recvSlot[pass], b = result, post = postOp && pass == folds;
      } else if (pass > folds) {  // copy the result to send slot `pass - folds`
        a = result, b = nullptr, o0 = sendSlot[pass - folds], o1 = nullptr, post = false;
      }
      // The barrier: this pass reads what the last one wrote (on the GPU another thread may
      // have written an element).
      if (pass > 0) be_.sync();
      be_.reduceCopy(a, b, o0, o1, m, pass > 0 && pass <= folds ? chained(fn_) : fn_, post);
    }
  }

  /// A record of this call or one of its steps on peers i, from t0 until now.
  TCCL_HOST_DEVICE TraceRecord record(int i, TraceWhat what, uint64_t t0, uint64_t recvStep,
                                      uint64_t sendStep, int64_t bytes) {
    TraceRecord r = this->makeRecord(what, t0, be_.traceNow(), recvStep, sendStep, bytes);
    if (i > 0) {  // a further peer (fan-in / fan-out): who is at its ends
      r.recvPeer = i < nRecv_ ? int16_t(recv_[i]->peer) : -1;
      r.sendPeer = i < nSend_ ? int16_t(send_[i]->peer) : -1;
    }
    return r;
  }

  TCCL_HOST_DEVICE void traceStep(int i, TraceWhat what, uint64_t t0, uint64_t recvStep,
                                  uint64_t sendStep, int64_t bytes) {
    if (be_.tracing()) be_.traceEmit(record(i, what, t0, recvStep, sendStep, bytes));
  }

  TCCL_HOST_DEVICE bool fail(uint32_t why) {
    status_ = why;
    return false;
  }

  Backend& be_;
  Fn fn_;
  ConnInfo* recv_[kMaxFan] = {};  // the receive peers, [0, nRecv_)
  ConnInfo* send_[kMaxFan] = {};  // the send peers, [0, nSend_)
  int nRecv_ = 0, nSend_ = 0;
  uint64_t recvStep_[kMaxFan] = {};
  uint64_t sendStep_[kMaxFan] = {};
  uint32_t status_ = kWorkOk;
};

}  // namespace tccl

#endif  // TCCL_DEVICE_PRIMITIVES_H_
