/*
 * device/coll_dispatch.h: from a collective WorkElem to the typed loop of its algorithm.
 *
 * What it is: the switch from run-time (data type, reduction, algorithm, collective) to the
 * template instance that runs it -- what NCCL does by generating one kernel function per
 * combination. Two steps:
 *   runCollElem, runReducingType   (type, reduction) -> element type T and functor Fn.
 *                                  Broadcast and all-gather move bytes and are instantiated
 *                                  once (uint8_t, FuncCopy); the three reducing collectives
 *                                  per element type and reduction.
 *   runColl, runAlgorithm          (algorithm, collective) -> the loop. runAlgorithm is the one
 *                                  switch over algorithms; one rank is a local copy, before it.
 *
 * Invariants: every collective item of a batch runs every elem in order, each on its own
 * channel's share; an item whose channel is beyond the elem's channel count skips the elem on
 * every rank alike.
 *
 * NCCL counterpart: src/device/generate.py and the ncclDevFuncTable (one function per
 * collective x op x type x algorithm x protocol).
 * Added in: stage 2; the tree and recursive-doubling cases in stage 3.
 */
#ifndef TCCL_DEVICE_COLL_DISPATCH_H_
#define TCCL_DEVICE_COLL_DISPATCH_H_

#include <cstring>
#include <type_traits>

#include "device/float16.h"
#include "device/rec_doubling.h"
#include "device/reduce_op.h"
#include "device/ring.h"
#include "device/tree.h"

namespace tccl {

/// The premulsum scalar or the avg divisor, as a T.
template <typename T>
TCCL_HOST_DEVICE inline T redOpScalar(const WorkElem& e) {
  if (e.redOpArgPtr != nullptr) return *static_cast<const T*>(e.redOpArgPtr);  // tcclScalarDevice
  T v;
  memcpy(&v, &e.redOpArg, sizeof(T));
  return v;
}

/// The one switch over algorithms: the loop that runs this item's share of the elem. Fn is
/// FuncCopy for broadcast and all-gather (on bytes), a reduction for the other three.
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE uint32_t runAlgorithm(Backend& be, const WorkBatch& b, const WorkElem& e,
                                       const WorkItem& it, const RingSlice& s, size_t count,
                                       const T* in, T* out, Fn fn) {
  constexpr bool kReduces = !std::is_same<Fn, FuncCopy<T>>::value;
  switch (it.kind) {
    case WorkKind::kRing:
      if constexpr (kReduces) {
        if (e.func == WorkFunc::kAllReduce) return ringAllReduce<T>(be, it, s, in, out, fn);
        if (e.func == WorkFunc::kReduceScatter) {
          return ringReduceScatter<T>(be, it, s, count, in, out, fn);
        }
        return ringReduce<T>(be, it, s, e.root, in, out, fn);
      } else {
        if (e.func == WorkFunc::kBroadcast) return ringBroadcast<T>(be, it, s, e.root, in, out, fn);
        return ringAllGather<T>(be, it, s, count, in, out, fn);
      }
    case WorkKind::kRecDoubling:  // stage 3: all-reduce only (the planner's rule)
      if constexpr (kReduces) return recDoublingAllReduce<T>(be, b, it, s, in, out, fn);
      break;
    case WorkKind::kTreeUp:  // stage 3: a tree node's halves (device/tree.h)
    case WorkKind::kTreeDown:
    case WorkKind::kTreeRoot:
    case WorkKind::kTreeUpDown:
      if constexpr (kReduces) {
        if (e.func == WorkFunc::kAllReduce) return treeAllReduce<T>(be, b, it, s, in, out, fn);
        return treeUp<T>(be, b, it, s, in, out, fn, /*turnAround=*/false);  // reduce
      } else {
        return treeDown<T>(be, b, it, s, in, out, fn);  // broadcast
      }
    case WorkKind::kP2p:
      break;
  }
  return kWorkBadOp;  // a p2p item never reaches here (device/run_work.h)
}

/// One collective elem: `count` elements of T (bytes for broadcast and all-gather).
template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE TCCL_NOINLINE uint32_t runColl(Backend& be, const WorkBatch& b,
                                                const WorkElem& e, const WorkItem& it,
                                                size_t count, Fn fn) {
  const T* in = static_cast<const T*>(e.sendbuff);
  T* out = static_cast<T*>(e.recvbuff);
  RingSlice s = ringSlice<T>(b, e, it, count);
  if (b.nranks == 1) {
    // One rank: the result is post(pre(input)); a plain copy for FuncCopy.
    if (s.end > s.begin) be.reduceCopy(static_cast<const T*>(nullptr), in + s.begin, out + s.begin,
                                       static_cast<T*>(nullptr), s.end - s.begin, fn, true);
    return kWorkOk;
  }
  return runAlgorithm<T>(be, b, e, it, s, count, in, out, fn);
}

template <typename T, class Backend>
TCCL_HOST_DEVICE uint32_t runReducingType(Backend& be, const WorkBatch& b, const WorkElem& e,
                                          const WorkItem& it) {
  switch (DevRedOp(e.redOp)) {
    case DevRedOp::kSum:
      return runColl<T>(be, b, e, it, size_t(e.count), FuncSum<T>());
    case DevRedOp::kProd:
      return runColl<T>(be, b, e, it, size_t(e.count), FuncProd<T>());
    case DevRedOp::kMax:
      return runColl<T>(be, b, e, it, size_t(e.count), FuncMax<T>());
    case DevRedOp::kMin:
      return runColl<T>(be, b, e, it, size_t(e.count), FuncMin<T>());
    case DevRedOp::kPreMulSum:
      return runColl<T>(be, b, e, it, size_t(e.count), FuncPreMulSum<T>{redOpScalar<T>(e)});
    case DevRedOp::kSumPostDiv:
      // Integer average only (the planner turns float average into premulsum by 1/n).
      if constexpr (std::is_integral<T>::value) {
        return runColl<T>(be, b, e, it, size_t(e.count), FuncSumPostDiv<T>{redOpScalar<T>(e)});
      }
      break;
  }
  return kWorkBadOp;
}

TCCL_HOST_DEVICE inline size_t devTypeSize(uint8_t dtype) {
  // tcclDataType_t: int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 bfloat16
  constexpr uint8_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return dtype < sizeof(kSizes) ? kSizes[dtype] : 0;
}

template <class Backend>
TCCL_HOST_DEVICE uint32_t runCollElem(Backend& be, const WorkBatch& b, const WorkElem& e,
                                      const WorkItem& it) {
  if (e.func == WorkFunc::kBroadcast || e.func == WorkFunc::kAllGather) {
    // Bytes, whatever the element type.
    return runColl<uint8_t>(be, b, e, it, size_t(e.count) * devTypeSize(e.dtype),
                            FuncCopy<uint8_t>());
  }
  switch (e.dtype) {  // tcclDataType_t values
    case 0: return runReducingType<int8_t>(be, b, e, it);
    case 1: return runReducingType<uint8_t>(be, b, e, it);
    case 2: return runReducingType<int32_t>(be, b, e, it);
    case 3: return runReducingType<uint32_t>(be, b, e, it);
    case 4: return runReducingType<int64_t>(be, b, e, it);
    case 5: return runReducingType<uint64_t>(be, b, e, it);
    case 6: return runReducingType<Half>(be, b, e, it);
    case 7: return runReducingType<float>(be, b, e, it);
    case 8: return runReducingType<double>(be, b, e, it);
    case 9: return runReducingType<Bf16>(be, b, e, it);
  }
  return kWorkBadOp;
}

/// Runs every collective of the batch on this item's channel, in issue order. (Tree and
/// recursive-doubling items, stage 3, run theirs the same way: the channel is their share.)
template <class Backend>
TCCL_HOST_DEVICE uint32_t runCollItem(Backend& be, const WorkBatch& b, const WorkItem& it) {
  for (int i = it.elemStart; i < it.elemStart + it.elemCount; i++) {
    const WorkElem& e = b.elems[i];
    if (it.channel >= e.nChannels) continue;
    uint32_t status = runCollElem(be, b, e, it);
    if (status != kWorkOk) return status;
  }
  return kWorkOk;
}

}  // namespace tccl

#endif  // TCCL_DEVICE_COLL_DISPATCH_H_
