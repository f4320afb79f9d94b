/*
 * group_launch.cc: turning a group's tasks into work and running it.
 *
 * What it is: the launcher behind tcclGroupEnd, which calls the planners. For each
 * communicator:
 *
 *   1. classify buffers: all host (host executor) or all device (GPU executor), never mixed;
 *   2. plan: the tasks become a list of phases, each a WorkBatch run to completion before the
 *      next (stage 1 has one phase: p2p, plan_p2p.cc);
 *   3. connect the connectors the plan needs and that do not exist yet (lazily, as NCCL);
 *   4. run, phase by phase: host batches start on every communicator's pool and are then
 *      waited for; GPU batches are launched on their streams (stream order keeps the phases
 *      in order).
 *
 * Invariants: every rank cuts the same work from matching calls (items ordered by peer, elems
 * in issue order), so the two ends of each connector see the same sequence of messages;
 * zero-byte operations move nothing on either side; a plan that does not fit one batch is
 * refused with a message rather than split in a way that could deadlock.
 *
 * NCCL counterpart: src/enqueue.cc (ncclPrepareTasks, ncclLaunchPrepare), src/group.cc
 * (groupLaunch).
 * Added in: stage 1.
 */
#include <algorithm>
#include <set>

#include "comm.h"
#include "cuda_wrap.h"
#include "executor.h"
#include "group.h"
#include "plan.h"
#include "proxy.h"
#include "trace.h"

namespace tccl {

namespace {

tcclResult_t classifyMemory(tcclComm* comm, const CommTasks& t, bool* onDevice) {
  bool anyHost = false, anyDevice = false;
  for (const P2pTask& p : t.p2p) {
    if (p.bytes == 0) continue;
    MemType m;
    TCCL_CHECK(pointerMemType(p.isSend ? p.sendbuff : p.recvbuff, comm->cudaDev, &m));
    (m == MemType::kDevice ? anyDevice : anyHost) = true;
  }
  if (anyHost && anyDevice) {
    TCCL_WARN("a group mixes host and device buffers on one communicator; use one kind per group");
    return tcclInvalidUsage;
  }
  *onDevice = anyDevice;
  return tcclSuccess;
}


/// The step timeline's "api" lane (trace.h): one span per operation of the group, from the
/// launch until it is done (on the GPU: until the stream has passed the group's kernels).
/// Every operation gets its sequence number here, traced or not.
void recordOps(CommTasks& t, bool onDevice, uint64_t t0) {
  tcclComm* comm = t.comm;
  if (comm->tracePid < 0) {  // the hot path: numbers only, nothing allocated
    comm->launch.opCount += t.p2p.size();
    return;
  }
  std::vector<TraceOp> ops;
  for (const P2pTask& p : t.p2p) {
    ops.push_back(TraceOp{p.isSend ? "Send" : "Recv", comm->launch.opCount++, int64_t(p.bytes),
                          int64_t(p.bytes), nullptr, nullptr, -1, p.peer, "p2p", onDevice});
  }
  if (onDevice) return traceOpsOnStream(comm, comm->launch, t.stream, std::move(ops), t0);
  const uint64_t t1 = traceNowNs();
  for (const TraceOp& op : ops) traceOp(comm, op, t0, t1);
}

/// After connecting: point each item at its connector's ConnInfo.
void bindConnectors(Phase& phase) {
  for (auto& [index, c] : phase.itemConns) {
    WorkItem& it = phase.batch.items[index];
    if (c == nullptr) continue;
    (c->isSend ? it.sendConn : it.recvConn) = c->conn;
  }
}

/// Step 4 for one phase of one communicator: launch on the GPU, or start on the host pool.
tcclResult_t runPhase(CommTasks& tasks, bool onDevice, Phase& phase) {
  tcclComm* comm = tasks.comm;
  bindConnectors(phase);
  phase.batch.abortFlag = comm->abortFlag;
  if (onDevice) {
    phase.batch.status = comm->devStatus;
    if (comm->tracePid >= 0 && comm->traceBufs == nullptr) TCCL_CHECK(traceAllocGpu(comm));
    phase.batch.trace = comm->traceBufs;  // null unless tracing
    return launchGpuBatch(comm, comm->launch, phase.batch, tasks.stream);
  }
  if (comm->cudaDev >= 0) {
    // Host buffers on a GPU communicator: the call is ordered after earlier work on the
    // stream and on the communicator, then runs to completion.
    if (comm->launch.haveLaunched) TCCL_CHECK(eventSynchronize(comm->launch.lastLaunch));
    TCCL_CHECK(streamSynchronize(tasks.stream));
  }
  TCCL_CHECK(startHostBatch(comm, comm->launch, phase.batch, &phase.status));
  phase.started = true;
  return tcclSuccess;
}

/// After step 3: connectors that the proxy thread progresses (network ones) join it, the
/// proxy starting with the first of them.
tcclResult_t addToProxy(tcclComm* comm, const std::vector<Connector*>& conns) {
  for (Connector* c : conns) {
    if (!c->transportComm->needsProxy()) continue;
    TCCL_CHECK(comm->launch.ensureProxy(*comm));
    comm->launch.proxy->add(c);
  }
  return tcclSuccess;
}

}  // namespace

tcclResult_t groupLaunch(std::vector<CommTasks>& comms) {
  const uint64_t t0 = traceEnabled() ? traceNowNs() : 0;
  std::vector<CommPlan> plans(comms.size());
  std::vector<PendingConnects> pending;
  std::vector<tcclComm*> pendingComms;  // the communicator of each pending entry
  for (size_t i = 0; i < comms.size(); i++) {
    tcclComm* comm = comms[i].comm;
    setLogRank(comm->rank);
    TCCL_CHECK(comm->checkAsyncError());
    plans[i].tasks = &comms[i];
    TCCL_CHECK(classifyMemory(comm, comms[i], &plans[i].onDevice));
    TCCL_CHECK(planP2p(comm, comm->connectors, plans[i]));
    PendingConnects pc{comm, {}};
    // Phases may share connectors (a collective's ring and a send to the same neighbour use
    // the same (peer, channel, direction)): connect each one once.
    std::set<Connector*> seen;
    for (Phase& phase : plans[i].phases) {
      for (auto& [index, c] : phase.itemConns) {
        if (c != nullptr && !c->connected && seen.insert(c).second) pc.conns.push_back(c);
      }
    }
    if (!pc.conns.empty()) {
      pending.push_back(std::move(pc));
      pendingComms.push_back(comm);
    }
  }
  if (!pending.empty()) {
    TCCL_CHECK(connectAll(pending));
    for (size_t i = 0; i < pending.size(); i++) {
      TCCL_CHECK(addToProxy(pendingComms[i], pending[i].conns));
    }
  }

  // Phase by phase, host batches of every communicator start before any is waited for
  // (several ranks may be driven by this one thread); GPU batches are simply launched.
  size_t nPhases = 0;
  for (auto& plan : plans) nPhases = std::max(nPhases, plan.phases.size());
  tcclResult_t res = tcclSuccess;
  for (size_t ph = 0; ph < nPhases && res == tcclSuccess; ph++) {
    for (size_t i = 0; i < plans.size() && res == tcclSuccess; i++) {
      if (ph < plans[i].phases.size()) {
        res = runPhase(comms[i], plans[i].onDevice, plans[i].phases[ph]);
      }
    }
    for (size_t i = 0; i < plans.size(); i++) {
      if (ph >= plans[i].phases.size() || !plans[i].phases[ph].started) continue;
      Phase& phase = plans[i].phases[ph];
      // A failure after some batches started would leave them waiting for peers that will
      // never come: abort those communicators so their items return.
      if (res != tcclSuccess) comms[i].comm->setError(res);
      tcclComm* comm = comms[i].comm;
      tcclResult_t r = finishHostBatch(comm, comm->launch, phase.batch, phase.status);
      if (res == tcclSuccess) res = r;
    }
  }
  for (size_t i = 0; i < plans.size(); i++) recordOps(comms[i], plans[i].onDevice, t0);
  return res;
}

}  // namespace tccl
