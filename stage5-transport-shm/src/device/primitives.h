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
 * Fan-in and fan-out of two (stage 3): a binary tree node receives from two children and sends
 * to two. Built with a second receive and/or send connection, the same calls reduce both
 * received slots into the result (prev and prev2 (+) src) and send it to both (next and next2),
 * as NCCL's Primitives do over their recvPeers/sendPeers arrays. The second slot joins the
 * result in a second pass through reduceCopy with chained(fn) (pre() must not run twice), and the
 * second send slot is filled from the first result; such calls never go direct.
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
 * Added in: stage 1; direct steps and fan-in and fan-out of two in stage 3; in stage 5 the
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

template <typename T, typename Fn, class Backend>
class Primitives : public PrimitiveCalls<Primitives<T, Fn, Backend>, T> {
  // Stage 5: the calls, chunk() and the records' fields come from here (device/prim_calls.h).
  using Calls = PrimitiveCalls<Primitives, T>;
  friend Calls;
  using Calls::chunk_, Calls::recvPeer_, Calls::sendPeer_, Calls::channel_;
  using Direct = typename Backend::Direct;  // host direct mode, or none (device/direct.h)

 public:
  /// recvConn2 / sendConn2 (stage 3): a second peer on each side (a tree node's children).
  TCCL_HOST_DEVICE Primitives(Backend& be, ConnInfo* recvConn, ConnInfo* sendConn, Fn fn = Fn(),
                              ConnInfo* recvConn2 = nullptr, ConnInfo* sendConn2 = nullptr)
      : be_(be), recv_(recvConn ? recvConn : recvConn2), send_(sendConn ? sendConn : sendConn2),
        recv2_(recvConn ? recvConn2 : nullptr), send2_(sendConn ? sendConn2 : nullptr), fn_(fn) {
    // Every thread reads the persistent step counters; nobody writes them until finish().
    if (recv_) recvStep_ = recv_->step;
    if (send_) sendStep_ = send_->step;
    if (recv2_) recvStep2_ = recv2_->step;
    if (send2_) sendStep2_ = send2_->step;
    if (be_.tracing()) {  // who is at the ends, for the records (trace.h)
      recvPeer_ = recv_ ? int16_t(recv_->peer) : -1;
      sendPeer_ = send_ ? int16_t(send_->peer) : -1;
      recvPeer2_ = recv2_ ? int16_t(recv2_->peer) : -1;
      sendPeer2_ = send2_ ? int16_t(send2_->peer) : -1;
      channel_ = int16_t(recv_ ? recv_->channel : send_ ? send_->channel : 0);
    }
  }

  /// Announces that a receive of n elements on the receive connection follows, before a send
  /// that the peer answers with its own send (an exchange, device/rec_doubling.h): on the host
  /// the proxy may then stage those steps as they arrive, so that neither side's send waits
  /// on a socket the other side has not drained (MPI_Irecv before MPI_Send). Kernels never
  /// stage by permission (fifo.h), so this is a no-op there. Stage 3.
  TCCL_HOST_DEVICE void prepostRecv(size_t n) {
    if (recv_ == nullptr) return;
    const size_t stepElems = recv_->stepBytes / sizeof(T);
    Direct::prepostRecv(recv_, recvStep_, (n + stepElems - 1) / stepElems);
  }

  /// Writes the step counters back so the next operation on these connections continues
  /// where this one stopped. Returns the status (WorkStatus::kOk when every call succeeded).
  TCCL_HOST_DEVICE WorkStatus finish() {
    be_.sync();  // every thread is done with its last slot before the steps move on
    // Every thread writes the same values: a thread that goes on to another primitives object
    // on these connections in this kernel (the next collective of an item) reads its own
    // write, where a write by the leader alone might not yet be visible to it.
    if (recv_) recv_->step = recvStep_;
    if (send_) send_->step = sendStep_;
    if (recv2_) recv2_->step = recvStep2_;
    if (send2_) send2_->step = sendStep2_;
    return status_;
  }

  TCCL_HOST_DEVICE WorkStatus status() const { return status_; }

 private:
  /// The one loop behind every primitive (NCCL's genericOp). `src` and `dst` are the user-side
  /// input and output (either may be null); doRecv/doSend say whether the FIFOs take part.
  /// With a received slot and a src, the two are combined with fn_; postOp applies post().
  /// `prim` names the call in the step timeline.
  TCCL_HOST_DEVICE TCCL_NOINLINE bool op(TraceWhat prim, const T* src, T* dst, size_t n,
                                         bool doRecv, bool doSend, bool postOp) {
    if (status_ != WorkStatus::kOk) return false;
    const uint64_t tCall = be_.traceNow();  // 0 when tracing is off (then nothing is recorded)
    ConnInfo* c = doSend ? send_ : recv_;
    const size_t stepElems = (c ? c->stepBytes : n * sizeof(T)) / sizeof(T);
    // A second peer on a side that takes part (stage 3): the call reads or fills two slots.
    const bool fanIn = doRecv && recv2_ != nullptr;
    const bool fanOut = doSend && send2_ != nullptr;
    // Which steps go straight between the user's buffers and the proxy (device/direct.h):
    // on the host, lent sends and receives in place; in a kernel, none.
    Direct direct(DirectCall{Fn::kPlain, src, dst, n * sizeof(T), stepElems * sizeof(T),
                             doRecv ? recv_ : nullptr, fanIn ? recv2_ : nullptr,
                             doSend ? send_ : nullptr, fanOut, recvStep_, recvStep2_});
    for (size_t off = 0; off < n; off += stepElems) {
      const size_t m = (n - off < stepElems) ? n - off : stepElems;
      const T* recvSlot = nullptr;
      T* sendSlot = nullptr;
      bool landed = false;  // a direct receive: the proxy wrote straight into dst
      uint64_t t = be_.traceNow();
      if (doRecv) {
        const int slot = int(recvStep_ % kNSteps);
        // Pre-post receives, as MPI does, or let the proxy stage: before the wait, so bytes
        // that arrive while this thread is away still move.
        landed = direct.beforeRecvWait(recvStep_);
        // >>> exercise 1.1: the consumer's wait and size check
        // Protocol step 1 (consumer): wait until the producer has published this step.
        if (!be_.waitAtLeast(&recv_->fifo->tail, recvStep_ + 1, &recv_->fifo->closed)) {
          return fail(loadFlag(&recv_->fifo->closed) ? WorkStatus::kPeerClosed
                                                     : WorkStatus::kAborted);
        }
        traceStep(TraceWhat::kWaitRecv, t, recvStep_, kTraceNoStep, 0);
        t = be_.traceNow();
        // The size was written before tail (release) and tail was read with acquire: it is
        // the producer's value for this step.
        if (recv_->fifo->sizes[slot] != int64_t(m * sizeof(T))) {
          return fail(WorkStatus::kSizeMismatch);
        }
        // <<< exercise 1.1
        recvSlot = reinterpret_cast<const T*>(recv_->buff + slot * recv_->stepBytes);
      }
      const T* recvSlot2 = nullptr;
      if (fanIn) {  // the same protocol step on the second receive connection
        const uint64_t t2 = be_.traceNow();
        direct.beforeRecvWait2(recvStep2_);
        if (!be_.waitAtLeast(&recv2_->fifo->tail, recvStep2_ + 1, &recv2_->fifo->closed)) {
          return fail(loadFlag(&recv2_->fifo->closed) ? WorkStatus::kPeerClosed
                                                      : WorkStatus::kAborted);
        }
        traceStep2(TraceWhat::kWaitRecv, t2, recvStep2_, kTraceNoStep, 0);
        const int slot2 = int(recvStep2_ % kNSteps);
        if (recv2_->fifo->sizes[slot2] != int64_t(m * sizeof(T))) {
          return fail(WorkStatus::kSizeMismatch);
        }
        recvSlot2 = reinterpret_cast<const T*>(recv2_->buff + slot2 * recv2_->stepBytes);
      }
      if (doSend) {
        // Protocol step 1 (producer): wait for a free slot, i.e. head + kNSteps > step: the
        // consumer is fewer than kNSteps steps behind. (Written without subtraction from step,
        // which would wrap below zero on the first kNSteps steps.)
        if (sendStep_ + 1 > uint64_t(kNSteps) &&
            !be_.waitAtLeast(&send_->fifo->head, sendStep_ + 1 - kNSteps, &send_->fifo->closed)) {
          return fail(loadFlag(&send_->fifo->closed) ? WorkStatus::kPeerClosed
                                                     : WorkStatus::kAborted);
        }
        traceStep(TraceWhat::kWaitSend, t, kTraceNoStep, sendStep_, 0);
        t = be_.traceNow();
        const int slot = int(sendStep_ % kNSteps);
        sendSlot = reinterpret_cast<T*>(send_->buff + slot * send_->stepBytes);
        // Direct: the proxy sends from the user buffer; otherwise from the slot.
        char* lent = direct.lent(src ? src + off : nullptr, dst ? dst + off : nullptr);
        if (be_.leader()) send_->fifo->ptrs[slot] = lent;
        if (direct.fromDst) sendSlot = nullptr;  // the data goes to dst only
      }
      T* sendSlot2 = nullptr;
      if (fanOut) {  // the same protocol step on the second send connection
        if (sendStep2_ + 1 > uint64_t(kNSteps) &&
            !be_.waitAtLeast(&send2_->fifo->head, sendStep2_ + 1 - kNSteps, &send2_->fifo->closed)) {
          return fail(loadFlag(&send2_->fifo->closed) ? WorkStatus::kPeerClosed
                                                      : WorkStatus::kAborted);
        }
        const int slot2 = int(sendStep2_ % kNSteps);
        sendSlot2 = reinterpret_cast<T*>(send2_->buff + slot2 * send2_->stepBytes);
        if (be_.leader()) send2_->fifo->ptrs[slot2] = nullptr;  // the proxy sends the slot
      }
      // Step 2: move (and combine) the data. Sources: the received slot and/or the user input;
      // destinations: the user output and/or the send slot.
      if (!landed && !direct.send) {
        const T* userIn = src ? src + off : nullptr;
        T* d0 = dst ? dst + off : sendSlot;
        T* d1 = (dst && sendSlot) ? sendSlot : nullptr;
        // Pass 0 is every primitive's one pass. With a second receive (fan-in), pass 1 folds
        // that slot into the partial result in place, with chained(fn_): the own input has been
        // through pre() already; post() runs there, on the final value. With a second send
        // (fan-out), pass 2 copies the result into that slot. One reduceCopy call site for all
        // passes: on the GPU it is inlined, and each site would cost its compile time again.
        for (int pass = 0; pass < 3; pass++) {
          const T* a = recvSlot;
          const T* b = userIn;
          T* o0 = d0;
          T* o1 = d1;
          bool post = postOp && !recvSlot2;
          if (pass == 1) {
            if (!recvSlot2) continue;
            a = recvSlot2, b = d0, post = postOp;
          } else if (pass == 2) {
            if (!sendSlot2) continue;
            a = d0, b = nullptr, o0 = sendSlot2, o1 = nullptr, post = false;
          }
          // The barrier: this pass reads what the last one wrote (on the GPU another thread
          // may have written an element).
          if (pass > 0) be_.sync();
          be_.reduceCopy(a, b, o0, o1, m, pass == 1 ? chained(fn_) : fn_, post);
        }
      }
      // Traced before tail moves: the consumer can only see this step later.
      traceStep(landed || direct.send ? TraceWhat::kDirect
                : (recvSlot && src)  ? TraceWhat::kReduce
                                     : TraceWhat::kCopy,
                t, doRecv ? recvStep_ : kTraceNoStep, doSend ? sendStep_ : kTraceNoStep,
                int64_t(m * sizeof(T)));
      // Step 3: publish. The producer records the size, then moves tail (the backend fences so
      // the slot and size are visible first); the consumer frees the slot by moving head.
      if (doSend) {
        cleanLL(send_, sendStep_);
        if (be_.leader()) send_->fifo->sizes[sendStep_ % kNSteps] = int64_t(m * sizeof(T));
        be_.post(&send_->fifo->tail, ++sendStep_, send_->gpuScope);
      }
      if (fanIn || fanOut) {
        // The second connections' halves of this step (who published or consumed what, for the
        // trace checker), taken, like the record above, before tail moves.
        traceStep2(recvSlot && src ? TraceWhat::kReduce : TraceWhat::kCopy, t,
                   fanIn ? recvStep2_ : kTraceNoStep, fanOut ? sendStep2_ : kTraceNoStep,
                   int64_t(m * sizeof(T)));
      }
      if (fanOut) {
        cleanLL(send2_, sendStep2_);
        if (be_.leader()) send2_->fifo->sizes[sendStep2_ % kNSteps] = int64_t(m * sizeof(T));
        be_.post(&send2_->fifo->tail, ++sendStep2_, send2_->gpuScope);
      }
      if (doRecv) be_.postConsumed(&recv_->fifo->head, ++recvStep_);
      if (fanIn) be_.postConsumed(&recv2_->fifo->head, ++recvStep2_);
    }
    // A direct send lent the proxy pointers into src or dst: return only once it has sent
    // them all (the caller may change both as soon as the operation is over).
    if (direct.lends() && sendStep_ > 0 &&
        !be_.waitAtLeast(&send_->fifo->head, sendStep_, &send_->fifo->closed)) {
      return fail(loadFlag(&send_->fifo->closed) ? WorkStatus::kPeerClosed : WorkStatus::kAborted);
    }
    if (be_.tracing()) {
      TraceRecord r = record(prim, tCall, kTraceNoStep, kTraceNoStep, int64_t(n * sizeof(T)));
      r.chunk = chunk_;
      be_.traceEmit(r);
    }
    chunk_ = -1;
    return true;
  }

  /// A record of this call or one of its steps, from t0 until now.
  TCCL_HOST_DEVICE TraceRecord record(TraceWhat what, uint64_t t0, uint64_t recvStep,
                                      uint64_t sendStep, int64_t bytes) {
    return this->makeRecord(what, t0, be_.traceNow(), recvStep, sendStep, bytes);
  }

  TCCL_HOST_DEVICE void traceStep(TraceWhat what, uint64_t t0, uint64_t recvStep,
                                  uint64_t sendStep, int64_t bytes) {
    if (be_.tracing()) be_.traceEmit(record(what, t0, recvStep, sendStep, bytes));
  }

  /// The same for the second connections (fan-in / fan-out, stage 3): their peers.
  TCCL_HOST_DEVICE void traceStep2(TraceWhat what, uint64_t t0, uint64_t recvStep,
                                   uint64_t sendStep, int64_t bytes) {
    if (!be_.tracing()) return;
    TraceRecord r = record(what, t0, recvStep, sendStep, bytes);
    r.recvPeer = recvPeer2_;
    r.sendPeer = sendPeer2_;
    be_.traceEmit(r);
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
  ConnInfo* recv_;
  ConnInfo* send_;
  ConnInfo* recv2_;  // fan-in / fan-out of two (stage 3); null otherwise
  ConnInfo* send2_;
  Fn fn_;
  uint64_t recvStep_ = 0;
  uint64_t sendStep_ = 0;
  uint64_t recvStep2_ = 0;
  uint64_t sendStep2_ = 0;
  WorkStatus status_ = WorkStatus::kOk;
  // Step timeline only (set when tracing): the second connections' peers.
  int16_t recvPeer2_ = -1, sendPeer2_ = -1;
};

}  // namespace tccl

#endif  // TCCL_DEVICE_PRIMITIVES_H_
