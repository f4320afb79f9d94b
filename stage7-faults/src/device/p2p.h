/*
 * device/p2p.h: running a point-to-point work item.
 *
 * What it is: the "algorithm" of chapter 1. A p2p item owns one connection in one direction
 * (or none, for a local copy) and runs its elems in issue order: a send pushes the user buffer
 * through the send FIFO, a receive drains the receive FIFO into the user buffer. Large
 * messages pipeline on their own: the primitive cuts them into FIFO steps and the producer may
 * run kNSteps ahead of the consumer.
 *
 * Invariants: p2p moves bytes (no reduction, no element type needed); a send of n bytes
 * matches a receive of n bytes on the peer (the FIFO's per-step size check catches a mismatch).
 *
 * Stage 5: on the GPU a small message goes by the LL protocol (device/prims_ll.h) when the
 * planner says so (WorkElem::proto); both ends decide alike, from the message's size. A large
 * one is cut into parts (WorkElem::nChannels), one per channel: the items of every channel
 * run the same elems, each moving its own part (p2pPart).
 *
 * NCCL counterpart: src/device/sendrecv.h (runSend, runRecv).
 * Added in: stage 1; the host fast path (prepostP2pRecv) in stage 3; the LL protocol in
 * stage 5.
 */
#ifndef TCCL_DEVICE_P2P_H_
#define TCCL_DEVICE_P2P_H_

#include "device/prims_ll.h"
#include "device/primitives.h"
#include "device/reduce_op.h"
#include "device/work.h"

namespace tccl {

/// Stage 5: the part of a p2p operation of `bytes` that channel `c` moves when the operation
/// is cut into `n` parts (WorkElem::nChannels): 16-byte aligned boundaries (vector copies),
/// the last part takes the rest. Both ends compute it from the same numbers (NCCL's
/// ncclP2pPartBounds does the same on the device).
TCCL_HOST_DEVICE inline void p2pPart(uint64_t bytes, int c, int n, uint64_t* off, uint64_t* len) {
  const uint64_t step = (bytes / uint64_t(n)) / 16 * 16;
  *off = step * uint64_t(c);
  *len = c == n - 1 ? bytes - *off : step;
}

/// Stage 5: whether the item's channel moves a part of elem `w` (an operation cut into fewer
/// parts has none on the higher channels; the items of all channels share the elems).
TCCL_HOST_DEVICE inline bool p2pOnChannel(const WorkElem& w, const WorkItem& item) {
  return item.channel < w.nChannels;
}

/// Runs the item's elems from *e on while they have the same protocol as elem *e, on one
/// primitives object of that protocol; *e ends at the first elem it did not run. Elems with
/// no part on this channel are passed over.
template <template <typename, typename, class> class Prims, class Backend>
TCCL_HOST_DEVICE WorkStatus runP2pElems(Backend& be, const WorkBatch& batch, const WorkItem& item,
                                        int* e) {
  using Bytes = uint8_t;
  Prims<Bytes, FuncCopy<Bytes>, Backend> prims(be, item.recvConn, item.sendConn);
  const WorkProto proto = batch.elems[*e].proto;
  for (; *e < item.elemStart + item.elemCount && batch.elems[*e].proto == proto; ++*e) {
    const WorkElem& w = batch.elems[*e];
    if (!p2pOnChannel(w, item)) continue;
    uint64_t off, len;
    p2pPart(w.count, item.channel, w.nChannels, &off, &len);
    const Bytes* src = static_cast<const Bytes*>(w.sendbuff);
    Bytes* dst = static_cast<Bytes*>(w.recvbuff);
    switch (w.func) {
      case WorkFunc::kSend:
        prims.send(src + off, len);
        break;
      case WorkFunc::kRecv:
        prims.recv(dst + off, len);
        break;
      case WorkFunc::kCopy:
        // A send to oneself: no connection, just the copy (skipped when in place).
        if (src != dst) {
          be.reduceCopy(static_cast<const Bytes*>(nullptr), src + off, dst + off,
                        static_cast<Bytes*>(nullptr), len, FuncCopy<Bytes>(), false);
        }
        break;
      default:  // not a p2p operation: the planner never puts one in a p2p item
        break;
    }
  }
  return prims.finish();
}

/// Stage 5: an item's elems may alternate between Simple and LL (each message's protocol
/// depends on its size); each run of one protocol gets its own primitives object, which
/// continues at the steps the previous one wrote back.
template <class Backend>
TCCL_HOST_DEVICE WorkStatus runP2pItem(Backend& be, const WorkBatch& batch, const WorkItem& item) {
  int e = item.elemStart;
  while (e < item.elemStart + item.elemCount) {
    if (!p2pOnChannel(batch.elems[e], item)) {  // (no primitives object for nothing)
      e++;
      continue;
    }
    WorkStatus status = WorkStatus::kOk;
    if constexpr (Backend::kP2pLL) {
      if (batch.elems[e].proto == WorkProto::kLL) {
        status = runP2pElems<PrimitivesLL>(be, batch, item, &e);
      } else {
        status = runP2pElems<Primitives>(be, batch, item, &e);
      }
    } else {
      status = runP2pElems<Primitives>(be, batch, item, &e);
    }
    if (status != WorkStatus::kOk) return status;
  }
  return WorkStatus::kOk;
}

#if !defined(__CUDA_ARCH__)
/// Host executor, at launch: pre-post the first receive of a p2p item (up to kNSteps steps,
/// exactly as the primitive will cut them) before any thread is handed the item. Bytes the peer
/// sends while the item still waits for its thread then land in the user buffer instead of a
/// staging slot; the primitive's own offers of those steps find them already made.
inline void prepostP2pRecv(const WorkBatch& batch, const WorkItem& item) {
  ConnInfo* c = item.recvConn;
  if (item.kind != WorkKind::kP2p || c == nullptr || !c->direct || item.elemCount == 0) return;
  const WorkElem& w = batch.elems[item.elemStart];
  // (Host buffers: one part per operation, so channel 0's item runs the whole of each.)
  if (w.func != WorkFunc::kRecv || w.recvbuff == nullptr || w.nChannels != 1) return;
  RecvOffers offers{c->step};
  offers.offerUpTo(c->fifo, c->stepBytes, static_cast<char*>(w.recvbuff), w.count,
                   c->step + kNSteps);
}
#endif

}  // namespace tccl

#endif  // TCCL_DEVICE_P2P_H_
