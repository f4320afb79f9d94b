/*
 * collectives.cc: the five collective calls -- argument checks, then a task in the group.
 *
 * What it is: the front door of chapter 2. Each call checks its buffers (only those that are
 * significant on this rank: the root's send buffer for broadcast, the root's receive buffer for
 * reduce), its type, count and op, and queues a CollTask. The planner (plan_ring.cc) turns the
 * group's collectives into ring work.
 *
 * Invariants: a call that returns an error queued nothing and marks an open group failed; the
 * byte size of every buffer (count x nranks for the gathered side) is checked for overflow.
 *
 * NCCL counterpart: src/collectives.cc (ncclAllReduce, ...), src/enqueue.cc (ncclEnqueueCheck).
 * Added in: stage 2.
 */
#include <cstdint>

#include "comm_context.h"
#include "enqueue.h"
#include "group.h"
#include "red_op.h"

namespace tccl {

const char* collName(WorkFunc f) {
  switch (f) {
    case WorkFunc::kAllReduce: return "AllReduce";
    case WorkFunc::kAllGather: return "AllGather";
    case WorkFunc::kReduceScatter: return "ReduceScatter";
    case WorkFunc::kBroadcast: return "Broadcast";
    case WorkFunc::kReduce: return "Reduce";
    default: return "?";
  }
}

const char* dtypeName(tcclDataType_t t) {
  static const char* const kNames[] = {"int8",    "uint8",   "int32",   "uint32",  "int64",
                                       "uint64",  "float16", "float32", "float64", "bfloat16"};
  return unsigned(t) < sizeof(kNames) / sizeof(kNames[0]) ? kNames[t] : "?";
}

const char* redOpName(DevRedOp op) {
  switch (op) {
    case DevRedOp::kSum: return "sum";
    case DevRedOp::kProd: return "prod";
    case DevRedOp::kMax: return "max";
    case DevRedOp::kMin: return "min";
    case DevRedOp::kPreMulSum: return "premulsum";
    case DevRedOp::kSumPostDiv: return "avg";
  }
  return "?";
}

}  // namespace tccl

using namespace tccl;

namespace {

tcclResult_t enqueueColl(tcclComm* comm, const char* call, const CollTask& task,
                         cudaStream_t stream) {
  setLogRank(commContext(comm).rank);
  TCCL_INFO(kColl, "%s: count %zu type %d op %d root %d send %p recv %p stream %p", call,
            task.count, int(task.dtype), int(task.op.op), task.root, task.sendbuff,
            (void*)task.recvbuff, (void*)stream);
  return groupEnqueueColl(comm, task, stream);
}

}  // namespace

extern "C" tcclResult_t tcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                      tcclDataType_t datatype, tcclRedOp_t op, tcclComm_t comm,
                                      cudaStream_t stream) {
  const char* call = "tcclAllReduce";
  size_t bytes;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, sendbuff, count, datatype, &bytes)));
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, recvbuff, count, datatype, &bytes)));
  RedOpChoice red;
  TCCL_CHECK(groupCheck(resolveRedOp(comm, call, op, datatype, &red)));
  return enqueueColl(comm, call,
                     CollTask{WorkFunc::kAllReduce, datatype, red, 0, sendbuff, recvbuff, count},
                     stream);
}

extern "C" tcclResult_t tcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                      tcclDataType_t datatype, tcclComm_t comm,
                                      cudaStream_t stream) {
  const char* call = "tcclAllGather";
  size_t bytes;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, sendbuff, sendcount, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, recvbuff, sendcount, datatype, &bytes)));
  TCCL_CHECK(groupCheck(checkBlocks(call, sendcount, datatype, ctx.nranks)));
  return enqueueColl(
      comm, call,
      CollTask{WorkFunc::kAllGather, datatype, {}, 0, sendbuff, recvbuff, sendcount}, stream);
}

extern "C" tcclResult_t tcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                          tcclDataType_t datatype, tcclRedOp_t op,
                                          tcclComm_t comm, cudaStream_t stream) {
  const char* call = "tcclReduceScatter";
  size_t bytes;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, sendbuff, recvcount, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, recvbuff, recvcount, datatype, &bytes)));
  TCCL_CHECK(groupCheck(checkBlocks(call, recvcount, datatype, ctx.nranks)));
  RedOpChoice red;
  TCCL_CHECK(groupCheck(resolveRedOp(comm, call, op, datatype, &red)));
  return enqueueColl(
      comm, call,
      CollTask{WorkFunc::kReduceScatter, datatype, red, 0, sendbuff, recvbuff, recvcount}, stream);
}

extern "C" tcclResult_t tcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                      tcclDataType_t datatype, int root, tcclComm_t comm,
                                      cudaStream_t stream) {
  const char* call = "tcclBroadcast";
  size_t bytes;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, recvbuff, count, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkPeer(comm, "tcclBroadcast root", root)));
  // The send buffer is read on the root only.
  if (ctx.rank == root) {
    TCCL_CHECK(groupCheck(checkDataArgs(comm, call, sendbuff, count, datatype, &bytes)));
  }
  return enqueueColl(
      comm, call,
      CollTask{WorkFunc::kBroadcast, datatype, {}, root,
               ctx.rank == root ? sendbuff : nullptr, recvbuff, count},
      stream);
}

extern "C" tcclResult_t tcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                   tcclDataType_t datatype, tcclRedOp_t op, int root,
                                   tcclComm_t comm, cudaStream_t stream) {
  const char* call = "tcclReduce";
  size_t bytes;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, call, sendbuff, count, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkPeer(comm, "tcclReduce root", root)));
  RedOpChoice red;
  TCCL_CHECK(groupCheck(resolveRedOp(comm, call, op, datatype, &red)));
  // The receive buffer is written on the root only.
  if (ctx.rank == root) {
    TCCL_CHECK(groupCheck(checkDataArgs(comm, call, recvbuff, count, datatype, &bytes)));
  }
  return enqueueColl(comm, call,
                     CollTask{WorkFunc::kReduce, datatype, red, root, sendbuff,
                              ctx.rank == root ? recvbuff : nullptr, count},
                     stream);
}
