/*
 * algo_mask.h: the algorithms by id, and which of them TCCL_ALGO allows per collective.
 *
 * What it is: the small types the cost model (tuning.h) decides with and the communicator's
 * context keeps (comm_context.h): the algorithm ids a CollTask carries, and the mask that
 * TCCL_ALGO parses into; stage 5, the same for the protocols and TCCL_PROTO. Kept apart from
 * tuning.h so that the context, which everything below the communicator includes, does not
 * include the cost model, which itself reads the context.
 *
 * Invariants: ids are dense from 0 (they index the masks and the cost table); every rank
 * holds the same masks (tuningCheckPeers checks it at init).
 *
 * NCCL counterpart: NCCL_ALGO_* and NCCL_PROTO_* in src/include/nccl_common.h; the algorithm
 * and protocol enable tables of src/graph/tuning.cc.
 * Added in: stage 3; protocols in stage 5.
 */
#ifndef TCCL_ALGO_MASK_H_
#define TCCL_ALGO_MASK_H_

#include "device/work.h"  // WorkProto (stage 5)

namespace tccl {

/// The algorithms, as NCCL_ALGO_RING and NCCL_ALGO_TREE (recursive doubling is tccl's): dense
/// from 0 and listed in kAlgos in that order, so idx(a) indexes the masks and the cost table.
enum class Algo : int { kRing = 0, kTree = 1, kRecDoubling = 2 };
constexpr int kNumAlgos = 3;
constexpr Algo kAlgos[kNumAlgos] = {Algo::kRing, Algo::kTree, Algo::kRecDoubling};
constexpr int idx(Algo a) { return static_cast<int>(a); }  // an algorithm as an array index

constexpr int kNumCollFuncs = 5;  // AllReduce, AllGather, ReduceScatter, Broadcast, Reduce

/// Stage 5: the protocols (device/work.h), listed in idx order as kAlgos lists the algorithms.
constexpr int kNumProtos = 3;
constexpr WorkProto kProtos[kNumProtos] = {WorkProto::kSimple, WorkProto::kLL, WorkProto::kLL128};
constexpr int idx(WorkProto p) { return static_cast<int>(p); }  // a protocol as an array index

/// Which algorithms each collective may use: allowed[coll][algo], coll = collIndex(func).
struct AlgoMask {
  bool allowed[kNumCollFuncs][kNumAlgos];
};

/// Stage 5: which protocols each collective may use (TCCL_PROTO): allowed[coll][proto].
struct ProtoMask {
  bool allowed[kNumCollFuncs][kNumProtos];
};

}  // namespace tccl

#endif  // TCCL_ALGO_MASK_H_
