/*
 * plan_cache.cc: the plan of a communicator's last host collective, kept for the next call of
 * the same shape.
 *
 * What it is: a training loop or a benchmark calls the same collective, with the same count,
 * type and op, over and over. Each call outside a group is a group of one, and planning it
 * (choosing the algorithm, cutting the work, allocating the phases, looking up connectors)
 * costs the host more than moving a few bytes between two processes over shared memory does;
 * the planner and its allocations are most of what separates a small call from Open MPI's
 * (chapter 5, "Measured"). So the plan of the last such call is kept, and a call of the same
 * shape runs it again with its own buffers written into the work elems.
 *
 * What may be reused. A plan depends on the call's shape -- collective, type, op and its
 * scalar, root, count -- and on communicator-wide state that does not change
 * between calls: the algorithm the cost model picks for that shape (tuning.h: a function of
 * the collective and its size), the channels and chunks (knobs read once), the connectors
 * (made once, connected for the communicator's life). Of the call itself only the two buffer
 * pointers reach the plan, and every elem of a one-collective plan carries exactly those two
 * (makeCollElem), so writing them in makes the kept plan the one the planner would build.
 * (In place or not is not part of the shape: the planner never looks; the algorithms compare
 * the two pointers when they run.)
 *
 * Invariants:
 *  - Only a group of one collective on host buffers, on a communicator without a GPU, is
 *    kept or reused: device plans and host buffers on a GPU communicator need the stream
 *    ordering and the memory classification that the full path does (group_launch.cc).
 *  - A kept plan ran to completion once: its connectors are connected.
 *  - Nothing is reused while the step timeline records (it wants the planner's spans) or
 *    while TCCL_DEBUG_SUBSYS=TUNING is on (stage 3 promises a line for every decision); a
 *    scalar passed by pointer (tcclScalarDevice) is read at plan time, so such a call is
 *    never reused.
 *  - The cache is dropped when a call through it fails: the next call plans afresh.
 *
 * NCCL counterpart: none for eager calls (NCCL plans every group: its host cost is hidden
 * behind a kernel launch). The idea is MPI's persistent collectives (MPI_Allreduce_init) made
 * implicit, and NCCL's CUDA-graph path, where one captured plan replays many times.
 * Added in: stage 5.
 */
#include "comm.h"
#include "executor.h"
#include "plan.h"

namespace tccl {

namespace {

/// True when `t` may be kept or reused on `comm` (the invariants above).
bool cacheable(const tcclComm* comm, const CommTasks& tasks) {
  if (comm->cudaDev >= 0 || comm->tracePid >= 0) return false;
  if (tasks.colls.size() != 1 || !tasks.p2p.empty()) return false;
  if (tasks.colls[0].op.argPtr != nullptr) return false;
  return !logEnabled(LogLevel::kInfo, kTuning);
}

bool sameShape(const PlanCache& cache, const CollTask& t) {
  // >>> exercise 5.2: reusing the kept plan
  const CollTask& k = cache.shape;
  return k.func == t.func && k.dtype == t.dtype && k.op.op == t.op.op && k.op.arg == t.op.arg &&
         k.root == t.root && k.count == t.count;
  // <<< exercise 5.2
}

}  // namespace

bool planCacheRun(CommTasks& tasks, tcclResult_t* result) {
  tcclComm* comm = tasks.comm;
  PlanCache* cache = comm->planCache.get();
  if (cache == nullptr || !cacheable(comm, tasks)) return false;
  // >>> exercise 5.2: reusing the kept plan
  const CollTask& t = tasks.colls[0];
  if (!sameShape(*cache, t)) return false;
  setLogRank(comm->rank);
  *result = comm->checkAsyncError();
  if (*result != tcclSuccess) return true;
  CommPlan& plan = cache->plan;
  plan.tasks = &tasks;
  for (Phase& phase : plan.phases) {
    // The call's buffers go where the planner would have put them: every elem is this
    // collective (root-only buffers were already nulled on the other ranks by the call).
    for (int e = 0; e < phase.batch.nElems; e++) {
      phase.batch.elems[e].sendbuff = t.sendbuff;
      phase.batch.elems[e].recvbuff = t.recvbuff;
    }
  }
  *result = runPlans(&tasks, &plan, 1);
  plan.tasks = nullptr;
  if (*result != tcclSuccess) {
    comm->planCache.reset();  // the next call plans afresh
  } else {
    comm->launch.opCount++;  // the operation's sequence number, as recordOps gives it
  }
  return true;
  // <<< exercise 5.2
}

void planCacheKeep(CommTasks& tasks, CommPlan& plan) {
  tcclComm* comm = tasks.comm;
  if (!cacheable(comm, tasks) || plan.onDevice || plan.capturing) return;
  if (!comm->planCache) comm->planCache = {new PlanCache, +[](PlanCache* p) { delete p; }};
  PlanCache& cache = *comm->planCache;
  cache.shape = tasks.colls[0];
  cache.plan.phases.swap(plan.phases);  // moved, not copied: a batch is 18 KB
  cache.plan.onDevice = false;
  cache.plan.capturing = false;
  cache.plan.tasks = nullptr;
}

}  // namespace tccl
