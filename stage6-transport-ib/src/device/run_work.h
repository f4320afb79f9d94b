/*
 * device/run_work.h: the executor's entry point for one work item.
 *
 * What it is: the single switch from an item's kind to the function that runs it. The host
 * executor calls it from a worker thread, the GPU kernel from a thread block: the same
 * algorithm code runs on both. Each chapter that adds an algorithm family adds one case here.
 *
 * NCCL counterpart: src/device/common.h (ncclKernelMain dispatching to RunWorkBatch).
 * Added in: stage 1; the ring case in stage 2; the tree and recursive-doubling cases in stage 3.
 */
#ifndef TCCL_DEVICE_RUN_WORK_H_
#define TCCL_DEVICE_RUN_WORK_H_

#include "device/coll_dispatch.h"
#include "device/p2p.h"
#include "device/work.h"

namespace tccl {

template <class Backend>
TCCL_HOST_DEVICE WorkStatus runWorkItem(Backend& be, const WorkBatch& batch, int itemIndex) {
  const WorkItem& item = batch.items[itemIndex];
  switch (item.kind) {
    case WorkKind::kP2p:
      return runP2pItem(be, batch, item);
    case WorkKind::kRing:
    case WorkKind::kTreeUp:  // stage 3: the other collective algorithms
    case WorkKind::kTreeDown:
    case WorkKind::kTreeRoot:
    case WorkKind::kTreeUpDown:
    case WorkKind::kRecDoubling:
      return runCollItem(be, batch, item);
  }
  return WorkStatus::kOk;
}

}  // namespace tccl

#endif  // TCCL_DEVICE_RUN_WORK_H_
