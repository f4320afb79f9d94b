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
 * NCCL counterpart: src/device/sendrecv.h (runSend, runRecv).
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_P2P_H_
#define TCCL_DEVICE_P2P_H_

#include "device/primitives.h"
#include "device/work.h"

namespace tccl {

template <class Backend>
TCCL_HOST_DEVICE WorkStatus runP2pItem(Backend& be, const WorkBatch& batch, const WorkItem& item) {
  using Bytes = uint8_t;
  Primitives<Bytes, Backend> prims(be, item.recvConn, item.sendConn);
  for (int e = item.elemStart; e < item.elemStart + item.elemCount; e++) {
    const WorkElem& w = batch.elems[e];
    const Bytes* src = static_cast<const Bytes*>(w.sendbuff);
    Bytes* dst = static_cast<Bytes*>(w.recvbuff);
    switch (w.func) {
      case WorkFunc::kSend:
        prims.send(src, w.count);
        break;
      case WorkFunc::kRecv:
        prims.recv(dst, w.count);
        break;
      case WorkFunc::kCopy:
        // A send to oneself: no connection, just the copy (skipped when in place).
        if (src != dst) be.copy(src, dst, static_cast<Bytes*>(nullptr), w.count);
        break;
      default:  // not a p2p operation: the planner never puts one in a p2p item
        break;
    }
  }
  return prims.finish();
}

}  // namespace tccl

#endif  // TCCL_DEVICE_P2P_H_
