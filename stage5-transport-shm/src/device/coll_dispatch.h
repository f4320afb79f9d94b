/*
 * device/coll_dispatch.h: from a collective WorkElem to the typed loop of its algorithm.
 *
 * What it is: the switch from run-time (data type, reduction, collective) to the template
 * instance that runs it -- what NCCL does by generating one kernel function per combination.
 * Broadcast and all-gather move bytes and are instantiated once; the three reducing
 * collectives are instantiated per element type and reduction. One rank is a local copy.
 *
 * Invariants: every ring item of a batch runs every collective elem in order, each on its own
 * channel's share; an item whose channel is beyond the elem's channel count skips the elem on
 * every rank alike.
 *
 * Stage 5: on the GPU, the ring and recursive-doubling collectives also come in the LL
 * protocol's flavour (device/prims_ll.h), and the ring ones in LL128's (device/prims_ll128.h),
 * picked by the elem's proto; the host executor has Simple only (Backend::kHasLL), so it never
 * instantiates either.
 *
 * NCCL counterpart: src/device/generate.py and the ncclDevFuncTable (one function per
 * collective x op x type x algorithm x protocol).
 * Added in: stage 2; the tree and recursive-doubling cases in stage 3; the GPU's per-type
 * translation units and the LL protocol in stage 5.
 */
#ifndef TCCL_DEVICE_COLL_DISPATCH_H_
#define TCCL_DEVICE_COLL_DISPATCH_H_

#include <cstring>
#include <type_traits>

#include "device/float16.h"
#include "device/prims_ll.h"
#include "device/prims_ll128.h"
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

/// The reducing ring collectives on one protocol's primitives (stage 5: Simple or LL).
template <template <typename, typename, class> class Prims, typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE WorkStatus runRingReducing(Backend& be, const WorkElem& e, const WorkItem& it,
                                            const RingSlice& s, const T* in, T* out, Fn fn) {
  switch (e.func) {
    case WorkFunc::kAllReduce:
      return ringAllReduce<T, Fn, Backend, Prims>(be, it, s, in, out, fn);
    case WorkFunc::kReduceScatter:
      return ringReduceScatter<T, Fn, Backend, Prims>(be, it, s, size_t(e.count), in, out, fn);
    case WorkFunc::kReduce:
      return ringReduce<T, Fn, Backend, Prims>(be, it, s, e.root, in, out, fn);
    default:
      return WorkStatus::kOk;
  }
}

template <typename T, typename Fn, class Backend>
TCCL_HOST_DEVICE TCCL_NOINLINE WorkStatus runReducing(Backend& be, const WorkBatch& b,
                                                      const WorkElem& e, const WorkItem& it,
                                                      Fn fn) {
  const T* in = static_cast<const T*>(e.sendbuff);
  T* out = static_cast<T*>(e.recvbuff);
  RingSlice s = ringSlice<T>(b, e, it, size_t(e.count));
  if (b.nranks == 1) {
    // One rank: the result is post(pre(input)).
    if (s.end > s.begin) be.reduceCopy(static_cast<const T*>(nullptr), in + s.begin, out + s.begin,
                                       static_cast<T*>(nullptr), s.end - s.begin, fn, true);
    return WorkStatus::kOk;
  }
  switch (it.kind) {  // stage 3: the algorithm families other than the ring
    case WorkKind::kRing:
      break;
    case WorkKind::kRecDoubling:
      if constexpr (Backend::kHasLL) {  // stage 5: kernels run LL where the planner chose it
        if (e.proto == WorkProto::kLL) {
          return recDoublingAllReduce<T, Fn, Backend, PrimitivesLL>(be, b, it, s, in, out, fn);
        }
      }
      return recDoublingAllReduce<T>(be, b, it, s, in, out, fn);
    default:  // a tree item: all-reduce on its half, or Reduce up the rooted tree
      if (e.func == WorkFunc::kAllReduce) return treeAllReduce<T>(be, b, it, s, in, out, fn);
      return treeUp<T>(be, b, it, s, in, out, fn, /*turnAround=*/false);
  }
  if constexpr (Backend::kHasLL) {
    if (e.proto == WorkProto::kLL) return runRingReducing<PrimitivesLL>(be, e, it, s, in, out, fn);
    if (e.proto == WorkProto::kLL128) {
      return runRingReducing<PrimitivesLL128>(be, e, it, s, in, out, fn);
    }
  }
  return runRingReducing<Primitives>(be, e, it, s, in, out, fn);
}

template <typename T, class Backend>
TCCL_HOST_DEVICE WorkStatus runReducingType(Backend& be, const WorkBatch& b, const WorkElem& e,
                                            const WorkItem& it) {
  switch (DevRedOp(e.redOp)) {
    case DevRedOp::kSum:
      return runReducing<T>(be, b, e, it, FuncSum<T>());
    case DevRedOp::kProd:
      return runReducing<T>(be, b, e, it, FuncProd<T>());
    case DevRedOp::kMax:
      return runReducing<T>(be, b, e, it, FuncMax<T>());
    case DevRedOp::kMin:
      return runReducing<T>(be, b, e, it, FuncMin<T>());
    case DevRedOp::kPreMulSum:
      return runReducing<T>(be, b, e, it, FuncPreMulSum<T>{redOpScalar<T>(e)});
    case DevRedOp::kSumPostDiv:
      // Integer average only (the planner turns float average into premulsum by 1/n).
      if constexpr (std::is_integral<T>::value) {
        return runReducing<T>(be, b, e, it, FuncSumPostDiv<T>{redOpScalar<T>(e)});
      }
      break;
  }
  return WorkStatus::kBadOp;
}

/// Broadcast and all-gather on the ring, on one protocol's primitives (stage 5: LL or LL128).
template <template <typename, typename, class> class Prims, class Backend>
TCCL_HOST_DEVICE WorkStatus runRingCopying(Backend& be, const WorkElem& e, const WorkItem& it,
                                           const RingSlice& s, size_t bytes, const uint8_t* in,
                                           uint8_t* out) {
  using Fn = FuncCopy<uint8_t>;
  if (e.func == WorkFunc::kBroadcast) {
    return ringBroadcast<uint8_t, Fn, Backend, Prims>(be, it, s, e.root, in, out, Fn());
  }
  return ringAllGather<uint8_t, Fn, Backend, Prims>(be, it, s, bytes, in, out, Fn());
}

/// Broadcast and all-gather: bytes, whatever the element type.
template <class Backend>
TCCL_HOST_DEVICE TCCL_NOINLINE WorkStatus runCopying(Backend& be, const WorkBatch& b,
                                                     const WorkElem& e, const WorkItem& it,
                                                     size_t elemSize) {
  using Bytes = uint8_t;
  const Bytes* in = static_cast<const Bytes*>(e.sendbuff);
  Bytes* out = static_cast<Bytes*>(e.recvbuff);
  const size_t bytes = size_t(e.count) * elemSize;
  RingSlice s = ringSlice<Bytes>(b, e, it, bytes);
  FuncCopy<Bytes> copy;
  if (b.nranks == 1) {
    if (s.end > s.begin) be.reduceCopy(static_cast<const Bytes*>(nullptr), in + s.begin,
                                       out + s.begin, static_cast<Bytes*>(nullptr),
                                       s.end - s.begin, copy, false);
    return WorkStatus::kOk;
  }
  if (it.kind != WorkKind::kRing) return treeDown<Bytes>(be, b, it, s, in, out, copy);  // stage 3
  if constexpr (Backend::kHasLL) {  // stage 5
    if (e.proto == WorkProto::kLL) return runRingCopying<PrimitivesLL>(be, e, it, s, bytes, in, out);
    if (e.proto == WorkProto::kLL128) {
      return runRingCopying<PrimitivesLL128>(be, e, it, s, bytes, in, out);
    }
  }
  if (e.func == WorkFunc::kBroadcast) return ringBroadcast<Bytes>(be, it, s, e.root, in, out, copy);
  return ringAllGather<Bytes>(be, it, s, bytes, in, out, copy);
}

TCCL_HOST_DEVICE inline size_t devTypeSize(uint8_t dtype) {
  // tcclDataType_t: int8 uint8 int32 uint32 int64 uint64 float16 float32 float64 bfloat16
  constexpr uint8_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
  return dtype < sizeof(kSizes) ? kSizes[dtype] : 0;
}

/// Stage 5: DevType maps a tcclDataType_t value to its element type. Backend::kReducing
/// (device/work.h) says which reducing collectives an executor runs; kReducingDType is the
/// type of a kernel that runs one type's.
template <int DType> struct DevType;
template <> struct DevType<0> { using T = int8_t; };
template <> struct DevType<1> { using T = uint8_t; };
template <> struct DevType<2> { using T = int32_t; };
template <> struct DevType<3> { using T = uint32_t; };
template <> struct DevType<4> { using T = int64_t; };
template <> struct DevType<5> { using T = uint64_t; };
template <> struct DevType<6> { using T = Half; };
template <> struct DevType<7> { using T = float; };
template <> struct DevType<8> { using T = double; };
template <> struct DevType<9> { using T = Bf16; };

template <class Backend>
TCCL_HOST_DEVICE WorkStatus runCollElem(Backend& be, const WorkBatch& b, const WorkElem& e,
                                        const WorkItem& it) {
  if (e.func == WorkFunc::kBroadcast || e.func == WorkFunc::kAllGather) {
    if (!be.runsCopies()) return WorkStatus::kOk;  // stage 5: another launch of this batch runs it
    return runCopying(be, b, e, it, devTypeSize(e.dtype));
  }
  if constexpr (Backend::kReducing == ReducingTypes::kOne) {  // stage 5: one type's kernel
    if (e.dtype != Backend::kReducingDType) return WorkStatus::kOk;  // another kernel runs it
    return runReducingType<typename DevType<Backend::kReducingDType>::T>(be, b, e, it);
  } else if constexpr (Backend::kReducing == ReducingTypes::kNone) {
    return WorkStatus::kBadOp;  // the launcher never sends a reducing collective here
  } else {
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
    return WorkStatus::kBadOp;
  }
}

/// Runs every collective of the batch on this item's channel, in issue order. (Tree and
/// recursive-doubling items, stage 3, run theirs the same way: the channel is their share.)
template <class Backend>
TCCL_HOST_DEVICE WorkStatus runCollItem(Backend& be, const WorkBatch& b, const WorkItem& it) {
  for (int i = it.elemStart; i < it.elemStart + it.elemCount; i++) {
    const WorkElem& e = b.elems[i];
    if (it.channel >= e.nChannels) continue;
    WorkStatus status = runCollElem(be, b, e, it);
    if (status != WorkStatus::kOk) return status;
  }
  return WorkStatus::kOk;
}

}  // namespace tccl

#endif  // TCCL_DEVICE_COLL_DISPATCH_H_
