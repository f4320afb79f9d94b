/*
 * group.h: group semantics -- batching calls until tcclGroupEnd.
 *
 * What it is: every communication call becomes a task queued on its communicator inside the
 * calling thread's current group; a call made outside any group is a group of one. At the
 * outermost tcclGroupEnd the group is launched: every communicator's tasks are planned into a
 * WorkBatch, the connectors the batch needs are connected, and the batches run (host) or are
 * launched (GPU) -- all communicators together, so no rank of the group waits on another
 * that has not started.
 *
 * Invariants: group state is per thread (like NCCL's); only the outermost GroupEnd launches;
 * after an error inside a group the whole group is dropped at GroupEnd and the error returned
 * (no rank launches half a group); one communicator's tasks in a group share one stream.
 *
 * NCCL counterpart: src/group.cc, src/include/group.h (ncclGroupStart/End, ncclGroupCommJoin).
 * Added in: stage 1; collective tasks in stage 2; their algorithm in stage 3.
 */
#ifndef TCCL_GROUP_H_
#define TCCL_GROUP_H_

#include <vector>

#include "algo_mask.h"
#include "core.h"
#include "device/work.h"
#include "red_op.h"

struct tcclComm;

namespace tccl {

/// One point-to-point call.
struct P2pTask {
  bool isSend;
  int peer;
  const void* sendbuff;  // send
  void* recvbuff;        // recv
  size_t bytes;
};

/// One collective call (stage 2).
struct CollTask {
  WorkFunc func;
  tcclDataType_t dtype;
  RedOpChoice op;  // resolved when queued (reducing collectives)
  int root;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // elements (per rank for AllGather / ReduceScatter)
  Algo algo = Algo::kRing;  // the algorithm chosen at launch (tuning.h; stage 3)
};

/// Names of a collective's parts, as logs and step traces show them (collectives.cc).
const char* collName(WorkFunc f);          // "AllReduce"
const char* dtypeName(tcclDataType_t t);   // "float32"
const char* redOpName(DevRedOp op);        // "sum"

/// Everything one communicator was asked to do in the current group.
struct CommTasks {
  tcclComm* comm = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<P2pTask> p2p;
  std::vector<CollTask> colls;
  bool empty() const { return p2p.empty() && colls.empty(); }
};

/// Queues a task in the current group (opening and closing a group of one if none is open).
tcclResult_t groupEnqueueP2p(tcclComm* comm, const P2pTask& task, cudaStream_t stream);
tcclResult_t groupEnqueueColl(tcclComm* comm, const CollTask& task, cudaStream_t stream);
/// Records an error inside an open group: GroupEnd will return it and launch nothing.
void groupSetError(tcclResult_t err);
/// Passes `res` through, recording it in the open group when it is an error: wrap every check
/// of a call's arguments with it, so a bad call inside a group stops the whole group.
inline tcclResult_t groupCheck(tcclResult_t res) {
  if (res != tcclSuccess) groupSetError(res);
  return res;
}
/// True when the calling thread has an open group holding tasks for `comm`.
bool groupHasTasksFor(const tcclComm* comm);

/// Launches the tasks of one group (group_launch.cc).
tcclResult_t groupLaunch(std::vector<CommTasks>& comms);

}  // namespace tccl

#endif  // TCCL_GROUP_H_
