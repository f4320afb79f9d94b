/*
 * device/prims_ll128.h: the primitives of the LL128 protocol.
 *
 * What it is: NCCL's LL128, behind the same calls as Simple's and LL's primitives, so the ring
 * loops run on it unchanged. LL puts a flag beside every 8 bytes of data: no fence, but half
 * the bandwidth. LL128 puts one flag in every 128-byte line (fifo.h): eight threads of a warp
 * store a line together, 16 bytes each in one instruction, the flag in the eighth thread's
 * second word; the reader loads the line the same way and, once the flag is the step's, uses
 * all 120 data bytes. That is correct only where a 128-byte line written by one warp
 * instruction becomes visible at once -- NVLink between GPUs of one architecture (tuning.cc
 * enables it nowhere else). It keeps LL's latency (no fence, no tail, the reader polls the
 * data) at 15/16 of the link's bandwidth, which is why NCCL runs it between LL's small
 * messages and Simple's large ones.
 *
 *   producer, step s (slot s % kNSteps)         consumer, step s
 *   wait head + kNSteps > s (cached: headSeen)  per warp, kUnroll x 4 lines at a time: load
 *   per warp, kUnroll x 4 lines at a time:          them all; again while any flag thread of
 *     load own input; one 16-byte store per         the warp lacks ll128Flag(s, bytes)
 *     thread and line, flag in word 15          combine, store to dst and/or the next slot
 *                                               barrier; head = s + 1 (relaxed store)
 *
 * Thread t of warp w serves word pair t % 8 of line (w * kUnroll + u) * 4 + (t % 32) / 8 for
 * u < kUnroll, then the same a block's worth of lines further: a step is kLL128SlotLines
 * lines, 240 KiB of data, four lines per thread of a 512-thread block. Data word d of line L is word
 * L * 15 + d of the step's elements (device/word_pack.h); d = 2 (t % 8) + k, k < 2, except
 * that thread 7 of each line carries the flag as its second word.
 *
 * Invariants:
 *  - Steps and head are the connection's, shared with Simple and LL. A slot is rewritten only
 *    after the consumer moved head past its previous step, and flags never repeat within 2^46
 *    steps, so a stale line never looks valid.
 *  - The flag carries the step's byte count: a line of the right step and the wrong size
 *    raises WorkStatus::kSizeMismatch instead of leaving the reader waiting for lines that
 *    never come.
 *  - Every lane of a warp takes part in each poll (__any_sync): a line is trusted only when
 *    the warp's flag threads have all seen their flags in the same round of loads, and every
 *    thread leaves the poll in the same round. After a failure (abort, closed, size mismatch)
 *    the stop word is raised and every thread fails the call at the step's barrier, as in LL.
 *  - GPU only: host executors have neither the slots nor warps (Backend::kHasLL is false).
 *
 * NCCL counterpart: src/device/prims_ll128.h (loadRegsBegin, recvReduceSendCopy, storeLL128,
 * the flagThread), src/include/device.h (NCCL_LL128_LINEELEMS, NCCL_LL128_DATAELEMS).
 * Added in: stage 5.
 */
#ifndef TCCL_DEVICE_PRIMS_LL128_H_
#define TCCL_DEVICE_PRIMS_LL128_H_

#include <cstddef>
#include <cstdint>

#include "device/fifo.h"
#include "device/prim_calls.h"
#include "device/reduce_op.h"
#include "device/trace_record.h"
#include "device/word_pack.h"
#include "device/work.h"

namespace tccl {

/// One thread's 16 bytes of an LL128 line: a single vector access, so that the eight threads
/// of a line form one 128-byte access of the warp. Volatile: every poll goes to memory, every
/// store reaches the peer's memory, and nothing is cached in this SM.
TCCL_DEVICE inline void ll128Load(const uint64_t* p, uint64_t& v0, uint64_t& v1) {
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(v0), "=l"(v1) : "l"(p) : "memory");
#endif
}
TCCL_DEVICE inline void ll128Store(uint64_t* p, uint64_t v0, uint64_t v1) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(v0), "l"(v1) : "memory");
#endif
}

template <typename T, typename Fn, class Backend>
class PrimitivesLL128 : public PrimitiveCalls<PrimitivesLL128<T, Fn, Backend>, T> {
  // The calls, chunk() and the records' fields (device/prim_calls.h), as Simple's and LL's.
  using Calls = PrimitiveCalls<PrimitivesLL128, T>;
  friend Calls;
  using Calls::chunk_, Calls::recvPeer_, Calls::sendPeer_, Calls::channel_;

 public:
  /// The one-peer constructor (a ring step). A connection without LL128 slots is a planner
  /// bug here and fails every call with WorkStatus::kBadProto.
  TCCL_HOST_DEVICE PrimitivesLL128(Backend& be, ConnInfo* recvConn, ConnInfo* sendConn,
                                   Fn fn = Fn())
      : be_(be), recv_(recvConn), send_(sendConn), fn_(fn) {
    if ((recv_ && recv_->ll128Buff == nullptr) || (send_ && send_->ll128Buff == nullptr)) {
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

  /// Writes the steps (and the head cache) back for the next operation; every thread writes
  /// the same values (PrimitivesLL::finish says why no barrier is needed).
  TCCL_HOST_DEVICE WorkStatus finish() {
    if (recv_) recv_->step = recvStep_;
    if (send_) send_->step = sendStep_, send_->headSeen = headSeen_;
    return status_;
  }
  TCCL_HOST_DEVICE WorkStatus status() const { return status_; }

 private:
  using Words = WordPack<T>;
  static constexpr size_t kStepElems = kLL128StepBytes / sizeof(T);
  static_assert(kLL128StepBytes % 8 == 0, "a step holds whole words");
  /// Lines one warp instruction covers (32 threads x 16 bytes), and how many such groups a
  /// warp has in flight at once: its loads all issue before the first is waited for.
  static constexpr int kLinesPerGroup = 4;
  static constexpr int kUnroll = 4;  // 8 words in flight per thread, as NCCL's LL128
  static constexpr uint64_t kStepMask = (uint64_t(1) << 46) - 1;  // ll128Flag's step bits

  /// The one loop behind every call (NCCL's LL128 recvReduceSendCopy): per step, wait for a
  /// free send slot, then each warp moves its lines, then one barrier and head.
  TCCL_HOST_DEVICE TCCL_NOINLINE bool op(TraceWhat prim, const T* src, T* dst, size_t n,
                                         bool doRecv, bool doSend, bool postOp) {
#if defined(__CUDA_ARCH__)
    if (status_ != WorkStatus::kOk) return false;
    const uint64_t tCall = be_.traceNow();
    const bool srcAligned = (reinterpret_cast<uintptr_t>(src) % 8) == 0;
    const bool dstAligned = (reinterpret_cast<uintptr_t>(dst) % 8) == 0;
    const int tid = be_.tid(), nthreads = be_.nthreads();
    const int warp = tid / 32, nwarps = nthreads / 32;
    const int pair = tid % 8;                  // which 16 bytes of its line
    const int sub = (tid % 32) / 8;            // which line of its group of four
    const bool flagThread = pair == kLL128LineWords / 2 - 1;  // holds word 15: the flag
    for (size_t off = 0; off < n; off += kStepElems) {
      const size_t m = (n - off < kStepElems) ? n - off : kStepElems;
      const uint64_t bytes = uint64_t(m) * sizeof(T);
      const int nLines = int((bytes + 8 * kLL128DataWords - 1) / (8 * kLL128DataWords));
      uint64_t t = be_.traceNow();
      uint64_t* sendSlot = nullptr;
      if (doSend) {
        // Protocol step 1 (producer): the slot is free once head + kNSteps > step (LL's wait,
        // with the same head cache).
        if (sendStep_ + 1 > headSeen_ + kNSteps &&
            !be_.waitAtLeast(&send_->fifo->head, sendStep_ + 1 - kNSteps, &send_->fifo->closed,
                             &headSeen_)) {
          return fail(loadFlag(&send_->fifo->closed) ? WorkStatus::kPeerClosed
                                                     : WorkStatus::kAborted);
        }
        traceStep(TraceWhat::kWaitSend, t, kTraceNoStep, sendStep_, 0);
        t = be_.traceNow();
        sendSlot = ll128Slot(send_, sendStep_);
      }
      const uint64_t* recvSlot = doRecv ? ll128Slot(recv_, recvStep_) : nullptr;
      const uint64_t sendFlag = ll128Flag(sendStep_, bytes), recvFlag = ll128Flag(recvStep_, bytes);
      const uint64_t tPublish = be_.traceNow();
      const T* in = src ? src + off : nullptr;
      T* out = dst ? dst + off : nullptr;
      bool stopped = false;
      // Protocol step 2, per warp: its groups of lines, kUnroll at a time.
      for (int base = warp * kUnroll * kLinesPerGroup; base < nLines && !stopped;
           base += nwarps * kUnroll * kLinesPerGroup) {
        uint64_t mine[kUnroll][2], theirs[kUnroll][2];
        // The own input first, so its loads are in flight while the lines are polled.
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
          const int line = base + u * kLinesPerGroup + sub;
          const size_t w = size_t(line) * kLL128DataWords + 2 * pair;
          const bool have = in != nullptr && line < nLines;
          mine[u][0] = have ? Words::load(in, w, m, srcAligned) : 0;
          mine[u][1] = have && !flagThread ? Words::load(in, w + 1, m, srcAligned) : 0;
          theirs[u][0] = theirs[u][1] = 0;
        }
        if (doRecv) {
          // The consumer's poll: every lane loads all its lines, and the warp loads them all
          // again while any flag thread saw an old flag. A flag of this step with another
          // size is a mismatch (fifo.h, ll128Flag): raise the stop word, and every thread
          // leaves its poll.
          int spins = 0;
          bool lastLook = false;
          for (;;) {
            bool reload = false;
#pragma unroll
            for (int u = 0; u < kUnroll; u++) {
              const int line = base + u * kLinesPerGroup + sub;
              if (line >= nLines) continue;
              ll128Load(recvSlot + size_t(line) * kLL128LineWords + 2 * pair, theirs[u][0],
                        theirs[u][1]);
              if (flagThread && theirs[u][1] != recvFlag) {
                reload = true;
                if (((theirs[u][1] ^ recvFlag) & kStepMask) == 0) be_.llStop(WorkStatus::kSizeMismatch);
              }
            }
            if (!__any_sync(0xffffffffu, reload)) break;
            if (__any_sync(0xffffffffu, !be_.llKeepPolling(recv_->fifo, &spins, &lastLook))) {
              stopped = true;  // the stop word is raised: the barrier below reports it
              break;
            }
          }
          if (stopped) break;
          // Every flag is there: load the lines once more and use those values. A line lands
          // whole, but its data and its flag are read by different threads, and one
          // instruction does not make them read at one moment: thread 0 may have read its 16
          // bytes just before the line landed and thread 7 the flag just after. The reload
          // follows the flag, so it reads the whole line (NCCL reloads the same way).
#pragma unroll
          for (int u = 0; u < kUnroll; u++) {
            const int line = base + u * kLinesPerGroup + sub;
            if (line < nLines) {
              ll128Load(recvSlot + size_t(line) * kLL128LineWords + 2 * pair, theirs[u][0],
                        theirs[u][1]);
            }
          }
        }
        // Combine, then one 16-byte store per line to the next rank's slot (the flag thread's
        // second word is the flag) and the words to dst.
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
          const int line = base + u * kLinesPerGroup + sub;
          if (line >= nLines) continue;
          const size_t w = size_t(line) * kLL128DataWords + 2 * pair;
          const uint64_t v0 =
              Words::combine(fn_, theirs[u][0], mine[u][0], doRecv, in != nullptr, postOp);
          const uint64_t v1 =
              flagThread ? 0
                         : Words::combine(fn_, theirs[u][1], mine[u][1], doRecv, in != nullptr, postOp);
          if (doSend) {
            ll128Store(sendSlot + size_t(line) * kLL128LineWords + 2 * pair, v0,
                       flagThread ? sendFlag : v1);
          }
          if (out) {
            Words::store(out, w, m, dstAligned, v0);
            if (!flagThread) Words::store(out, w + 1, m, dstAligned, v1);
          }
        }
      }
      // Protocol step 3: one barrier (every thread is done with the slot and has seen every
      // line), then the consumer frees the slot; the stop word, read at the barrier, is the
      // same in every thread (DeviceBackend::llSyncStatus).
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
#else
    (void)prim, (void)src, (void)dst, (void)n, (void)doRecv, (void)doSend, (void)postOp;
    return fail(WorkStatus::kBadProto);  // host executors never run LL128
#endif
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

#endif  // TCCL_DEVICE_PRIMS_LL128_H_
