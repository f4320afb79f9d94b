/*
 * device/work.h: the description of work that an executor runs.
 *
 * What it is: at tcclGroupEnd the planner turns the batched calls into a WorkBatch. A WorkItem
 * is what one executor unit runs: one host worker thread, or one CUDA thread block. A p2p or
 * ring item owns at most one receive and one send connection; a tree or recursive-doubling item
 * (stage 3) talks to several peers and names its connections in the batch's `conns` table. An
 * item runs its WorkElems (operations) in order. The batch is plain data: the GPU gets it by
 * value as a kernel parameter.
 *
 * Invariants:
 *  - No two items of one batch use the same connection, so items can run concurrently without
 *    locks; several operations on one connection are elems of the same item, in issue order
 *    (that is how sends to one peer stay matched in order).
 *  - Pointers in a batch are valid on the executor that runs it (device-visible for the GPU).
 *
 * NCCL counterpart: src/include/device.h (ncclDevWorkP2p, ncclDevWorkColl, ncclDevKernelArgs).
 * Added in: stage 1 (p2p); stage 2 adds the collectives and the ring item kind; stage 3 the
 * tree and recursive-doubling kinds and the conns table; stage 5 the protocol.
 */
#ifndef TCCL_DEVICE_WORK_H_
#define TCCL_DEVICE_WORK_H_

#include <cstdint>

#include "device/fifo.h"
#include "device/trace_record.h"

namespace tccl {

/// What one operation does.
enum class WorkFunc : uint8_t {
  kSend,  // sendbuff -> the item's send connection (count bytes)
  kRecv,  // the item's receive connection -> recvbuff (count bytes)
  kCopy,  // sendbuff -> recvbuff locally: a send to oneself matched with a receive from oneself
  // Collectives (stage 2): count is in elements, per rank for AllGather and ReduceScatter.
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
};

/// The reduction an elem applies, after tcclRedOp_t has been resolved (avg and user ops
/// become premulsum or sum-post-div with their argument in WorkElem::redOpArg).
enum class DevRedOp : uint8_t { kSum, kProd, kMax, kMin, kPreMulSum, kSumPostDiv };

/// How an item runs its elems (the algorithm family).
enum class WorkKind : uint8_t {
  kP2p,   // each elem is a send, a receive or a local copy
  kRing,  // each elem is a collective; the item runs its channel's share on the channel's ring
  // Stage 3 (device/tree.h): the halves of a tree node's work. A non-root node runs an up and
  // a down item side by side (NCCL's runTreeSplit), the root one item that turns around.
  kTreeUp,    // children -> (reduce with own input) -> parent
  kTreeDown,  // parent -> own output -> children
  kTreeRoot,  // children -> (reduce) -> own output -> children
  kTreeUpDown,  // small all-reduce, one tree: the up half, then the down half, in one item
  kRecDoubling,  // exchanges with partners at distance 1, 2, 4, ... (device/rec_doubling.h)
};

/// The protocol an elem's steps use (stage 5): Simple (FIFO slots, tail and a fence per step),
/// LL (a flag per 8 data bytes, no fence: device/prims_ll.h) or LL128 (a flag per 120 data
/// bytes, NVLink only: device/prims_ll128.h), as NCCL_PROTO_SIMPLE / _LL / _LL128; kSimple = 0,
/// so a value-initialised elem runs Simple.
enum class WorkProto : uint8_t { kSimple = 0, kLL = 1, kLL128 = 2 };

/// Which reducing collectives an executor runs (stage 5; Backend::kReducing, read by
/// device/coll_dispatch.h): those of every element type (the host), of one element type,
/// Backend::kReducingDType (each GPU kernel, device/kernel_entry.cuh), or none (the GPU's base
/// kernel).
enum class ReducingTypes : uint8_t { kEvery, kOne, kNone };

/// One operation.
struct WorkElem {
  WorkFunc func;
  uint8_t dtype;    // tcclDataType_t (collectives; p2p moves bytes)
  uint8_t redOp;    // DevRedOp (collectives)
  WorkProto proto;  // stage 5; kernels only: host executors run Simple
  int32_t root;     // collectives with a root
  const void* sendbuff;
  void* recvbuff;
  uint64_t count;  // bytes for p2p, elements for collectives
  // Collectives: the reduction's argument (the premulsum scalar's bits in the element type,
  // or the divisor of sum-post-div); when redOpArgPtr is set the scalar is read from there
  // instead (a scalar in device memory, tcclScalarDevice).
  uint64_t redOpArg;
  const void* redOpArgPtr;
  int32_t nChannels;    // how many channels share this collective
  int32_t chunkBytes;   // bytes per ring chunk (a multiple of 16)
};

/// What one executor unit (host thread / thread block) runs.
struct WorkItem {
  WorkKind kind;
  int32_t peer;        // p2p: the remote rank (-1 for a local copy)
  int32_t channel;
  int32_t elemStart;   // first elem of this item in WorkBatch::elems
  int32_t elemCount;
  ConnInfo* recvConn;  // may be null
  ConnInfo* sendConn;  // may be null
  // Tree and recursive-doubling items (stage 3): their connections are
  // WorkBatch::conns[connStart ..], in the slot order their algorithm defines (null: no peer).
  int16_t connStart;
  int16_t nConns;
};

/// Executor status codes, one per item (kOk = 0 = fine), read by the host after the item ends.
/// A kernel stores them as uint32_t words (WorkBatch::status), which the host zeroes and scans.
enum class WorkStatus : uint32_t {
  kOk = 0,
  kAborted = 1,       // the communicator's abort flag was raised (peer failure, abort)
  kSizeMismatch = 2,  // the sender's step size differs from what the receiver expected
  kPeerClosed = 3,    // the peer closed the connection while we still expected data
  kBadOp = 4,         // a reduction this element type does not have (a planner bug)
  kBadProto = 5,      // an LL step on a connection without LL slots (a planner bug; stage 5)
};

constexpr int kMaxWorkItems = 128;
constexpr int kMaxWorkElems = 128;
constexpr int kMaxWorkConns = 256;  // the conns table (stage 3): 2 KiB of the kernel parameter

/// A batch: everything one launch runs.
struct WorkBatch {
  int32_t nItems;
  int32_t nElems;
  int32_t rank;    // this rank and the ring's size (collectives)
  int32_t nranks;
  const volatile uint32_t* abortFlag;  // raised by the proxy or tcclCommAbort
  uint32_t* status;                    // nItems WorkStatus words, zeroed (kOk) before the launch
  TraceBuffer* trace;                  // GPU step timeline: one per item; null when off
  WorkItem items[kMaxWorkItems];
  WorkElem elems[kMaxWorkElems];
  ConnInfo* conns[kMaxWorkConns];  // multi-peer items' connections (stage 3)
};

}  // namespace tccl

#endif  // TCCL_DEVICE_WORK_H_
