/*
 * device/prims_ll.h: the primitives of the LL ("low latency") protocol.
 *
 * What it is: NCCL's LL protocol, behind the same calls as the Simple protocol's Primitives
 * (device/primitives.h), so the ring and recursive-doubling loops run on either unchanged.
 * Simple publishes a step's bytes, then a counter (tail) behind a release fence; the reader
 * polls the counter, then reads the bytes: two trips across the bus and a fence per step. LL
 * puts the validity mark in the data: each 16-byte line carries 8 bytes of data and two copies
 * of the step's flag (fifo.h), and the reader polls the line itself. A line whose two flags
 * are the step's flag holds the step's data, because the writer stores data and flag in one
 * 16-byte store whose 8-byte halves are never torn. No fence, no tail, no leader: every thread
 * writes and polls its own lines. The price is bandwidth: half of every line is flags, and the
 * reader's polls are the copy, one line at a time. So LL serves small messages, Simple large
 * ones, and the cost model (tuning.cc) chooses between them per call.
 *
 *   producer, step s (slot s % kNSteps)          consumer, step s
 *   wait head + kNSteps > s (cached: headSeen)   for each of its lines: poll until both flags
 *   for each of its lines: one v4 store              are llFlag(s); combine; write dst
 *       {data lo, flag, data hi, flag}           barrier; head = s + 1 (relaxed store)
 *   header line: {bytes of the step, flag}       header line: bytes == what it expects?
 *
 * Thread t takes lines t, t + nthreads, ...; a step is kLLDataLines lines, 32 KiB of data,
 * eight lines per thread of a 512-thread block. The header line (the slot's last) carries the
 * step's byte count, which the consumer checks like Simple's sizes[]: a send and a receive of
 * different sizes fail with WorkStatus::kSizeMismatch instead of waiting for lines that never come.
 *
 * Invariants:
 *  - Steps and head are the connection's, shared with Simple: an operation may use either
 *    protocol on a connection that has LL slots, and both ends use the same one for the same
 *    operation (the planner's choice depends on what every rank knows). tail moves only on
 *    Simple steps, so on such a connection head may pass tail (fifo.h).
 *  - A slot is rewritten only after the consumer moved head past its previous step (the
 *    producer's wait), and a step's flag differs from every flag its slot held within 2^32
 *    steps; the flag-wrap cleanup (fifo.h) covers longer lives.
 *  - After any thread gives up (abort, closed, size mismatch) it raises the block's stop word;
 *    every thread reads it after the step's barrier, so all threads fail the call together
 *    and no barrier is left waiting.
 *  - One receive and one send connection: the trees (fan-in and fan-out of two) run Simple.
 *
 * NCCL counterpart: src/device/prims_ll.h (storeLL, readLL, LLGenericOp, waitSend, postRecv).
 * Added in: stage 5.
 */
#ifndef TCCL_DEVICE_PRIMS_LL_H_
#define TCCL_DEVICE_PRIMS_LL_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device/fifo.h"
#include "device/prim_calls.h"
#include "device/reduce_op.h"
#include "device/trace_record.h"
#include "device/word_pack.h"
#include "device/work.h"

namespace tccl {

template <typename T, typename Fn, class Backend>
class PrimitivesLL : public PrimitiveCalls<PrimitivesLL<T, Fn, Backend>, T> {
  // The calls, chunk() and the records' fields (device/prim_calls.h), as Simple's.
  using Calls = PrimitiveCalls<PrimitivesLL, T>;
  friend Calls;
  using Calls::chunk_, Calls::recvPeer_, Calls::sendPeer_, Calls::channel_;

 public:
  /// The one-peer Simple constructor's arguments (LL has no fan: a tree runs Simple). A
  /// connection without LL slots is a planner bug here and fails every call with
  /// WorkStatus::kBadProto.
  TCCL_HOST_DEVICE PrimitivesLL(Backend& be, ConnInfo* recvConn, ConnInfo* sendConn,
                                Fn fn = Fn())
      : be_(be), recv_(recvConn), send_(sendConn), fn_(fn) {
    if ((recv_ && recv_->llBuff == nullptr) || (send_ && send_->llBuff == nullptr)) {
      status_ = WorkStatus::kBadProto;
    }
    if (recv_) recvStep_ = recv_->step;
    if (send_) sendStep_ = send_->step, headSeen_ = send_->headSeen;
    if (be_.tracing()) {
      recvPeer_ = recv_ ? int16_t(recv_->peer) : -1;
      sendPeer_ = send_ ? int16_t(send_->peer) : -1;
      channel_ = int16_t(recv_ ? recv_->channel : send_ ? send_->channel : 0);
    }
  }

  /// Nothing to announce: kernels never stage by permission (Primitives::prepostRecv).
  TCCL_HOST_DEVICE void prepostRecv(size_t) {}

  /// Writes the steps (and the head cache) back for the next operation. Every thread writes
  /// the same values, so each thread's next read of them (the next primitives object on these
  /// connections) sees its own write: no barrier needed before that read.
  TCCL_HOST_DEVICE WorkStatus finish() {
    if (recv_) recv_->step = recvStep_;
    if (send_) send_->step = sendStep_, send_->headSeen = headSeen_;
    return status_;
  }
  TCCL_HOST_DEVICE WorkStatus status() const { return status_; }

 private:
  using Words = WordPack<T>;  // line i carries word i of the step's elements (word_pack.h)
  static constexpr size_t kStepElems = kLLStepBytes / sizeof(T);

  /// The one loop behind every call (NCCL's LLGenericOp): per step, wait for a free send slot,
  /// then each thread moves its lines, then one barrier and head.
  TCCL_HOST_DEVICE TCCL_NOINLINE bool op(TraceWhat prim, const T* src, T* dst, size_t n,
                                         bool doRecv, bool doSend, bool postOp) {
    if (status_ != WorkStatus::kOk) return false;
    const uint64_t tCall = be_.traceNow();
    const bool srcAligned = (reinterpret_cast<uintptr_t>(src) % 8) == 0;
    const bool dstAligned = (reinterpret_cast<uintptr_t>(dst) % 8) == 0;
    const int tid = be_.tid(), nthreads = be_.nthreads();
    for (size_t off = 0; off < n; off += kStepElems) {
      const size_t m = (n - off < kStepElems) ? n - off : kStepElems;
      const int nLines = int((m + Words::kEltPerWord - 1) / Words::kEltPerWord);
      const uint64_t bytes = uint64_t(m) * sizeof(T);
      uint64_t t = be_.traceNow();
      LLLine* sendSlot = nullptr;
      if (doSend) {
        // Protocol step 1 (producer): the slot is free once head + kNSteps > step. The head we
        // saw last often says so already: then no poll and no barrier (NCCL's
        // sendConnHeadCache). Otherwise the leader polls and hands every thread what it saw.
        if (sendStep_ + 1 > headSeen_ + kNSteps &&
            !be_.waitAtLeast(&send_->fifo->head, sendStep_ + 1 - kNSteps, &send_->fifo->closed,
                             &headSeen_)) {
          return fail(loadFlag(&send_->fifo->closed) ? WorkStatus::kPeerClosed
                                                     : WorkStatus::kAborted);
        }
        traceStep(TraceWhat::kWaitSend, t, kTraceNoStep, sendStep_, 0);
        t = be_.traceNow();
        sendSlot = llSlot(send_, sendStep_);
      }
      const LLLine* recvSlot = doRecv ? llSlot(recv_, recvStep_) : nullptr;
      const uint32_t sendFlag = llFlag(sendStep_), recvFlag = llFlag(recvStep_);
      // The timeline's publish time: before any of this step's lines is written (every line
      // is written after it), as Simple's data-move record ends before tail moves.
      const uint64_t tPublish = be_.traceNow();
      // Protocol step 2, every thread: its lines. (The last thread also takes the header:
      // for a small step it has no data line of its own.)
      if (tid == nthreads - 1) {
        if (doSend) llStoreLine(sendSlot + kLLDataLines, bytes, sendFlag);
        uint64_t theirs;
        if (doRecv && be_.llWaitLine(recvSlot + kLLDataLines, recvFlag, recv_->fifo, recvStep_,
                                     &theirs) &&
            theirs != bytes) {
          be_.llStop(WorkStatus::kSizeMismatch);  // the others stop waiting for lines too
        }
      }
      const T* in = src ? src + off : nullptr;
      T* out = dst ? dst + off : nullptr;
      for (int i = tid; i < nLines; i += nthreads) {
        const uint64_t mine = in ? Words::load(in, size_t(i), m, srcAligned) : 0;
        uint64_t theirs = 0;
        if (doRecv && !be_.llWaitLine(recvSlot + i, recvFlag, recv_->fifo, recvStep_, &theirs)) {
          break;  // the stop word is raised: the barrier below reports it
        }
        const uint64_t v = Words::combine(fn_, theirs, mine, doRecv, in != nullptr, postOp);
        if (doSend) llStoreLine(sendSlot + i, v, sendFlag);
        if (out) Words::store(out, size_t(i), m, dstAligned, v);
      }
      // Flag wrap (fifo.h): the slot's lines this step left alone get its flag.
      if (doSend && llCleanStep(sendStep_)) llCleanLines(sendSlot, nLines, kLLDataLines, sendFlag);
      // Protocol step 3: one barrier (every thread is done with the slot and has seen every
      // line), then the consumer frees the slot. The stop word, read after the barrier, is
      // the same in every thread: they all fail together or go on together.
      const WorkStatus why = be_.llSyncStatus();
      if (why != WorkStatus::kOk) return fail(why);
      if (doRecv) {
        traceStep(TraceWhat::kWaitRecv, t, recvStep_, kTraceNoStep, 0);
        be_.postConsumed(&recv_->fifo->head, ++recvStep_, /*synced=*/true);
      }
      if (doSend) {
        traceStepAt(doRecv && src ? TraceWhat::kReduce : TraceWhat::kCopy, t, tPublish,
                    kTraceNoStep, sendStep_, int64_t(bytes));
        ++sendStep_;
      }
    }
    if (be_.tracing()) {
      TraceRecord r = this->makeRecord(prim, tCall, be_.traceNow(), kTraceNoStep, kTraceNoStep,
                                       int64_t(n * sizeof(T)));
      r.chunk = chunk_;
      be_.traceEmit(r);
    }
    chunk_ = -1;
    return true;
  }

  TCCL_HOST_DEVICE void traceStep(TraceWhat what, uint64_t t0, uint64_t recvStep,
                                  uint64_t sendStep, int64_t bytes) {
    traceStepAt(what, t0, be_.traceNow(), recvStep, sendStep, bytes);
  }
  TCCL_HOST_DEVICE void traceStepAt(TraceWhat what, uint64_t t0, uint64_t t1, uint64_t recvStep,
                                    uint64_t sendStep, int64_t bytes) {
    if (be_.tracing()) be_.traceEmit(this->makeRecord(what, t0, t1, recvStep, sendStep, bytes));
  }

  TCCL_HOST_DEVICE bool fail(WorkStatus why) {
    status_ = why;
    return false;
  }

  Backend& be_;
  ConnInfo* recv_;
  ConnInfo* send_;
  Fn fn_;
  uint64_t recvStep_ = 0;
  uint64_t sendStep_ = 0;
  uint64_t headSeen_ = 0;  // send side: the consumer's head as last seen (every thread alike)
  WorkStatus status_ = WorkStatus::kOk;
};

}  // namespace tccl

#endif  // TCCL_DEVICE_PRIMS_LL_H_
