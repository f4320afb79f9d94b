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
 *
 * Each call cuts its n elements into FIFO steps (stepBytes each) and, per step, waits for the
 * slot, copies the step's data, and posts the counter. The same code runs on the host (one
 * thread) and on the GPU (one thread block): the Backend supplies waiting, posting and the
 * copy loop (host_backend.h, device_backend.cuh).
 *
 * Why the template has no reduction functor: every call above has one source (the received
 * slot or the user input), so there is nothing to combine, and Primitives<T, Backend> reads as
 * the FIFO protocol and nothing else. The calls that combine a received slot with the rank's
 * input (recvReduceSend, ...) need a functor (NCCL's RedOp parameter); they and the functor
 * parameter come together, with the first algorithm that reduces (the ring, chapter 2).
 *
 * With TCCL_TRACE_FILE set, each call and each of its steps leaves a record (device/trace_record.h):
 * the waits, the copy, the call as a whole with the chunk index the algorithm
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
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_PRIMITIVES_H_
#define TCCL_DEVICE_PRIMITIVES_H_

#include <cstddef>
#include <cstdint>

#include "device/fifo.h"
#include "device/trace_record.h"
#include "device/work.h"

namespace tccl {

template <typename T, class Backend>
class Primitives {
 public:
  TCCL_HOST_DEVICE Primitives(Backend& be, ConnInfo* recvConn, ConnInfo* sendConn)
      : be_(be), recv_(recvConn), send_(sendConn) {
    // Every thread reads the persistent step counters; nobody writes them until finish().
    if (recv_) recvStep_ = recv_->step;
    if (send_) sendStep_ = send_->step;
    if (be_.tracing()) {  // who is at the ends, for the records (trace.h)
      recvPeer_ = recv_ ? int16_t(recv_->peer) : -1;
      sendPeer_ = send_ ? int16_t(send_->peer) : -1;
      channel_ = int16_t(recv_ ? recv_->channel : send_ ? send_->channel : 0);
    }
  }

  /// Names the algorithm's chunk that the next call moves (shown in step traces only).
  TCCL_HOST_DEVICE Primitives& chunk(int c) {
    chunk_ = c;
    return *this;
  }

  TCCL_HOST_DEVICE bool send(const T* src, size_t n) {
    return op(TraceWhat::kSend, src, nullptr, n, false, true);
  }
  TCCL_HOST_DEVICE bool recv(T* dst, size_t n) {
    return op(TraceWhat::kRecv, nullptr, dst, n, true, false);
  }
  TCCL_HOST_DEVICE bool copySend(const T* src, T* dst, size_t n) {
    return op(TraceWhat::kCopySend, src, dst, n, false, true);
  }
  TCCL_HOST_DEVICE bool recvCopySend(T* dst, size_t n) {
    return op(TraceWhat::kRecvCopySend, nullptr, dst, n, true, true);
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
    return status_;
  }

  TCCL_HOST_DEVICE WorkStatus status() const { return status_; }

 private:
  /// The one loop behind every primitive (NCCL's genericOp). `src` and `dst` are the user-side
  /// input and output (either may be null); doRecv/doSend say whether the FIFOs take part.
  /// A call that receives copies from the received slot, any other from src.
  /// `prim` names the call in the step timeline.
  TCCL_HOST_DEVICE TCCL_NOINLINE bool op(TraceWhat prim, const T* src, T* dst, size_t n,
                                         bool doRecv, bool doSend) {
    if (status_ != WorkStatus::kOk) return false;
    const uint64_t tCall = be_.traceNow();  // 0 when tracing is off (then nothing is recorded)
    ConnInfo* c = doSend ? send_ : recv_;
    const size_t stepElems = (c ? c->stepBytes : n * sizeof(T)) / sizeof(T);
    for (size_t off = 0; off < n; off += stepElems) {
      const size_t m = (n - off < stepElems) ? n - off : stepElems;
      const T* recvSlot = nullptr;
      T* sendSlot = nullptr;
      uint64_t t = be_.traceNow();
      if (doRecv) {
        const int slot = int(recvStep_ % kNSteps);
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
      }
      // Step 2: move the data. Source: the received slot, else the user input; destinations:
      // the user output and/or the send slot.
      const T* in = recvSlot ? recvSlot : src + off;
      T* d0 = dst ? dst + off : sendSlot;
      T* d1 = (dst && sendSlot) ? sendSlot : nullptr;
      be_.copy(in, d0, d1, m);
      // Traced before tail moves: the consumer can only see this step later.
      traceStep(TraceWhat::kCopy, t, doRecv ? recvStep_ : kTraceNoStep,
                doSend ? sendStep_ : kTraceNoStep, int64_t(m * sizeof(T)));
      // Step 3: publish. The producer records the size, then moves tail (the backend fences so
      // the slot and size are visible first); the consumer frees the slot by moving head.
      if (doSend) {
        if (be_.leader()) send_->fifo->sizes[sendStep_ % kNSteps] = int64_t(m * sizeof(T));
        be_.post(&send_->fifo->tail, ++sendStep_);
      }
      if (doRecv) be_.post(&recv_->fifo->head, ++recvStep_);
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
    TraceRecord r;
    r.t0 = t0;
    r.t1 = be_.traceNow();
    r.recvStep = recvStep;
    r.sendStep = sendStep;
    r.bytes = bytes;
    r.chunk = -1;
    r.recvPeer = recvPeer_;
    r.sendPeer = sendPeer_;
    r.channel = channel_;
    r.what = uint8_t(what);
    return r;
  }

  TCCL_HOST_DEVICE void traceStep(TraceWhat what, uint64_t t0, uint64_t recvStep,
                                  uint64_t sendStep, int64_t bytes) {
    if (be_.tracing()) be_.traceEmit(record(what, t0, recvStep, sendStep, bytes));
  }

  TCCL_HOST_DEVICE bool fail(WorkStatus why) {
    status_ = why;
    return false;
  }

  Backend& be_;
  ConnInfo* recv_;
  ConnInfo* send_;
  uint64_t recvStep_ = 0;
  uint64_t sendStep_ = 0;
  WorkStatus status_ = WorkStatus::kOk;
  // Step timeline only (set when tracing).
  int32_t chunk_ = -1;
  int16_t recvPeer_ = -1, sendPeer_ = -1, channel_ = 0;
};

}  // namespace tccl

#endif  // TCCL_DEVICE_PRIMITIVES_H_
