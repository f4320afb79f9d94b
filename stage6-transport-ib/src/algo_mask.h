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

namespace tccl {

enum Algo : int { kAlgoRing = 0, kAlgoTree = 1, kAlgoRecDoubling = 2, kNumAlgos = 3 };
constexpr int kNumCollFuncs = 5;  // AllReduce, AllGather, ReduceScatter, Broadcast, Reduce
constexpr int kNumProtos = 2;     // WorkProto: Simple, LL (stage 5)

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
