/*
 * group_launch.cc: turning a group's tasks into work and running it.
 *
 * What it is: the launcher behind tcclGroupEnd, which calls the planners. For each
 * communicator:
 *
 *   1. classify buffers: all host (host executor) or all device (GPU executor), never mixed;
 *   2. plan: the tasks become a list of phases, each a WorkBatch run to completion before the
 *      next: the collectives (stage 2, plan_ring.cc; stage 3 first picks each one's algorithm,
 *      tuning.h, and plans trees after rings, plan_tree.cc), then the p2p operations
 *      (plan_p2p.cc);
 *   3. connect the connectors the plan needs and that do not exist yet (lazily, as NCCL);
 *   4. run, phase by phase: host batches start on every communicator's pool and are then
 *      waited for; GPU batches are launched on their streams (stream order keeps the phases
 *      in order).
 *
 * Invariants: every rank cuts the same work from matching calls (items ordered by peer --
 * stage 5: by p2pOrderKey --, elems in issue order), so the two ends of each connector see the
 * same sequence of messages;
 * zero-byte operations move nothing on either side; a plan that does not fit one batch is
 * refused with a message rather than split in a way that could deadlock.
 *
 * NCCL counterpart: src/enqueue.cc (ncclPrepareTasks, ncclLaunchPrepare), src/group.cc
 * (groupLaunch).
 * Added in: stage 1; the collectives phase in stage 2; algorithm selection and trees in stage 3;
 * CUDA graph capture in stage 5.
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
#include "tuning.h"

namespace tccl {

namespace {

/// *onDevice: the group's buffers are in GPU memory; *moves (stage 5): any operation of the
/// group moves a byte at all (one without bytes has no buffer to classify).
tcclResult_t classifyMemory(tcclComm* comm, const CommTasks& t, bool* onDevice, bool* moves) {
  bool anyHost = false, anyDevice = false;
  for (const P2pTask& p : t.p2p) {
    if (p.bytes == 0) continue;
    MemType m;
    TCCL_CHECK(pointerMemType(p.isSend ? p.sendbuff : p.recvbuff, comm->cudaDev, &m));
    (m == MemType::kDevice ? anyDevice : anyHost) = true;
  }
  for (const CollTask& c : t.colls) {
    for (const void* buf : {c.sendbuff, static_cast<const void*>(c.recvbuff)}) {
      if (c.count == 0 || buf == nullptr) continue;  // not significant on this rank
      MemType m;
      TCCL_CHECK(pointerMemType(buf, comm->cudaDev, &m));
      (m == MemType::kDevice ? anyDevice : anyHost) = true;
    }
  }
  if (anyHost && anyDevice) {
    TCCL_WARN("a group mixes host and device buffers on one communicator; use one kind per group");
    return tcclInvalidUsage;
  }
  *onDevice = anyDevice;
  *moves = anyDevice || anyHost;
  return tcclSuccess;
}


/// The step timeline's "api" lane (trace.h): one span per operation of the group, from the
/// launch until it is done (on the GPU: until the stream has passed the group's kernels).
/// Every operation gets its sequence number here, traced or not.
void recordOps(CommTasks& t, bool onDevice, uint64_t t0) {
  tcclComm* comm = t.comm;
  if (comm->tracePid < 0) {  // the hot path: numbers only, nothing allocated
    comm->launch.opCount += t.colls.size() + t.p2p.size();
    return;
  }
  std::vector<TraceOp> ops;
  for (const CollTask& c : t.colls) {  // the collectives phase runs first (plan_ring.cc)
    const bool reduces = c.func != WorkFunc::kAllGather && c.func != WorkFunc::kBroadcast;
    const bool rooted = c.func == WorkFunc::kBroadcast || c.func == WorkFunc::kReduce;
    ops.push_back(TraceOp{collName(c.func), comm->launch.opCount++, int64_t(c.count),
                          int64_t(c.count * typeSize(c.dtype)), dtypeName(c.dtype),
                          reduces ? redOpName(c.op.op) : nullptr, rooted ? c.root : -1, -1,
                          algoName(c.algo), onDevice});
  }
  for (const P2pTask& p : t.p2p) {
    ops.push_back(TraceOp{p.isSend ? "Send" : "Recv", comm->launch.opCount++, int64_t(p.bytes),
                          int64_t(p.bytes), nullptr, nullptr, -1, p.peer, "p2p", onDevice});
  }
  if (onDevice) return traceOpsOnStream(comm, comm->launch, t.stream, std::move(ops), t0);
  const uint64_t t1 = traceNowNs();
  for (const TraceOp& op : ops) traceOp(comm, op, t0, t1);
}

/// Step 2a (stage 3): each collective's algorithm, from the cost model or TCCL_ALGO.
tcclResult_t selectAlgorithms(tcclComm* comm, CommTasks& t, bool onDevice) {
  for (CollTask& c : t.colls) {
    const bool blocks = c.func == WorkFunc::kAllGather || c.func == WorkFunc::kReduceScatter;
    const size_t bytes = c.count * typeSize(c.dtype) * (blocks ? size_t(comm->nranks) : 1);
    TCCL_CHECK(selectAlgorithm(comm, c.func, bytes, onDevice, &c.algo, &c.proto));
  }
  return tcclSuccess;
}

/// After connecting: point each item at its connector's ConnInfo (a kernel's at the copy in
/// GPU memory, stage 5).
void bindConnectors(Phase& phase) {
  auto view = [](const Connector* c) { return c->devConn ? c->devConn : c->conn; };
  for (auto& [index, c] : phase.itemConns) {
    WorkItem& it = phase.batch.items[index];
    if (c == nullptr) continue;
    (c->isSend ? it.sendConn : it.recvConn) = view(c);
  }
  for (auto& [index, c] : phase.tableConns) phase.batch.conns[index] = view(c);  // stage 3
}

/// Step 4 for one phase of one communicator: launch on the GPU, or start on the host pool.
/// callerRuns: this thread drives only this communicator, so it runs the items itself.
tcclResult_t runPhase(CommTasks& tasks, const CommPlan& plan, Phase& phase, bool callerRuns) {
  tcclComm* comm = tasks.comm;
  bindConnectors(phase);
  phase.batch.abortFlag = comm->abortFlag;
  if (plan.onDevice) {
    phase.batch.status = comm->devStatus;
    if (comm->tracePid >= 0 && comm->traceBufs == nullptr) TCCL_CHECK(traceAllocGpu(comm));
    phase.batch.trace = comm->traceBufs;  // null unless tracing
    return launchGpuBatch(comm, comm->launch, phase.batch, phase.deviceCopies, tasks.stream,
                          plan.capturing);
  }
  if (comm->cudaDev >= 0) {
    // Host buffers on a GPU communicator: the call is ordered after earlier work on the
    // stream and on the communicator, then runs to completion.
    if (comm->launch.haveLaunched) TCCL_CHECK(eventSynchronize(comm->launch.lastLaunch));
    TCCL_CHECK(streamSynchronize(tasks.stream));
  }
  TCCL_CHECK(startHostBatch(comm, comm->launch, phase.batch, &phase.status, callerRuns));
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

tcclResult_t launchOneRankColl(tcclComm* comm, const CollTask& t, cudaStream_t stream,
                              bool* done) {
  // The planner's way for what this does not cover: the step timeline (it records the
  // group's spans), a premultiplied sum (a kernel multiplies), host buffers (a host executor
  // copies them, or the call must wait for the stream) -- except in place without a GPU.
  // Everything else about a one-rank collective is its copy, and planning a group of one
  // costs the host several times what NCCL spends on the whole call (chapter 5, "The fast
  // GPU path", has the figures).
  *done = false;
  if (comm->tracePid >= 0) return tcclSuccess;
  WorkElem e;
  TCCL_CHECK(makeCollElem(t, /*onDevice=*/comm->cudaDev >= 0, &e));
  if (!oneRankIsCopy(e)) return tcclSuccess;
  const size_t bytes = t.count * typeSize(t.dtype);
  const bool moves = bytes > 0 && t.sendbuff != t.recvbuff;
  // On a communicator with a GPU, host buffers take the planner's way even in place: a
  // host-buffer call is ordered after the stream's earlier work (a copy into that buffer),
  // and refused inside a capture. In place on device memory, or without a GPU, nothing moves.
  if (comm->cudaDev >= 0 && bytes > 0) {
    for (const void* buf : {t.sendbuff, static_cast<const void*>(t.recvbuff)}) {
      MemType m;
      TCCL_CHECK(pointerMemType(buf, comm->cudaDev, &m));
      if (m != MemType::kDevice) return tcclSuccess;
      if (!moves) break;  // (in place: one buffer)
    }
  } else if (moves) {
    return tcclSuccess;  // host buffers without a GPU: the host executor copies
  }
  TCCL_CHECK(comm->checkAsyncError());
  *done = true;
  comm->launch.opCount++;  // the operation's sequence number, as recordOps gives it
  if (!moves) return tcclSuccess;
  bool capturing = false;
  TCCL_CHECK(streamIsCapturing(stream, &capturing));
  static const WorkBatch kNoItems{};
  const std::vector<DeviceCopy> copies{{t.sendbuff, t.recvbuff, bytes}};
  return launchGpuBatch(comm, comm->launch, kNoItems, copies, stream, capturing);
}

tcclResult_t groupLaunch(std::vector<CommTasks>& comms) {
  // Stage 5: a group of one collective on a one-rank communicator (every call outside a
  // group is one; nccl-tests puts each call in a group of its own) skips the planner.
  if (comms.size() == 1 && comms[0].comm->nranks == 1 && comms[0].colls.size() == 1 &&
      comms[0].p2p.empty()) {
    bool done = false;
    TCCL_CHECK(launchOneRankColl(comms[0].comm, comms[0].colls[0], comms[0].stream, &done));
    if (done) return tcclSuccess;
  }
  // Stage 5: a group of one collective on host buffers shaped like the last one reuses its
  // plan (plan_cache.cc).
  if (comms.size() == 1) {
    tcclResult_t res;
    if (planCacheRun(comms[0], &res)) return res;
  }
  const uint64_t t0 = traceEnabled() ? traceNowNs() : 0;
  std::vector<CommPlan> plans(comms.size());
  std::vector<PendingConnects> pending;
  std::vector<tcclComm*> pendingComms;  // the communicator of each pending entry
  for (size_t i = 0; i < comms.size(); i++) {
    tcclComm* comm = comms[i].comm;
    setLogRank(comm->rank);
    TCCL_CHECK(comm->checkAsyncError());
    plans[i].tasks = &comms[i];
    bool moves = false;
    TCCL_CHECK(classifyMemory(comm, comms[i], &plans[i].onDevice, &moves));
    // Stage 5: device work may be captured into a CUDA graph (executor_gpu.cu says what changes);
    // host buffers cannot be (host threads move them now, not at each replay). A group that
    // moves nothing runs nothing, and may be captured.
    if (comm->cudaDev >= 0) TCCL_CHECK(streamIsCapturing(comms[i].stream, &plans[i].capturing));
    if (plans[i].capturing && !plans[i].onDevice && moves) {
      TCCL_WARN("host buffers cannot be captured in a CUDA graph (host threads move them when "
                "the call is made, not when the graph runs): use device buffers");
      return tcclInvalidUsage;
    }
    TCCL_CHECK(selectAlgorithms(comm, comms[i], plans[i].onDevice));
    TCCL_CHECK(planRing(comm, comm->connectors, plans[i]));
    TCCL_CHECK(planTree(comm, comm->connectors, plans[i]));
    TCCL_CHECK(planP2p(comm, comm->connectors, plans[i]));
    PendingConnects pc{comm, {}};
    // Phases may share connectors (a collective's ring and a send to the same neighbour use
    // the same (peer, channel, direction)): connect each one once.
    std::set<Connector*> seen;
    for (Phase& phase : plans[i].phases) {
      for (auto& [index, c] : phase.itemConns) {
        if (c != nullptr && !c->connected && seen.insert(c).second) pc.conns.push_back(c);
      }
      for (auto& [index, c] : phase.tableConns) {
        if (!c->connected && seen.insert(c).second) pc.conns.push_back(c);
      }
    }
    if (!pc.conns.empty()) {
      pending.push_back(std::move(pc));
      pendingComms.push_back(comm);
    }
  }
  if (!pending.empty()) {
    // Connecting allocates and maps memory: allowed even while a stream is being captured
    // (which only a communicator with a GPU can be part of).
    bool anyGpu = false;
    for (const PendingConnects& pc : pending) anyGpu = anyGpu || pc.comm->cudaDev >= 0;
    RelaxedCaptureScope relaxed(anyGpu);
    TCCL_CHECK(connectAll(pending));
    for (size_t i = 0; i < pending.size(); i++) {
      TCCL_CHECK(addToProxy(pendingComms[i], pending[i].conns));
    }
  }

  tcclResult_t res = runPlans(comms.data(), plans.data(), plans.size());
  for (size_t i = 0; i < plans.size(); i++) {
    // A traced capture was refused (launchGpuBatch): its spans are not recorded, because the
    // trace's host callback and event must not land in the user's graph.
    if (plans[i].capturing && comms[i].comm->tracePid >= 0) continue;
    recordOps(comms[i], plans[i].onDevice, t0);
  }
  if (res == tcclSuccess && comms.size() == 1) planCacheKeep(comms[0], plans[0]);  // stage 5
  return res;
}

tcclResult_t runPlans(CommTasks* comms, CommPlan* plans, size_t n) {
  // Phase by phase, host batches of every communicator start before any is waited for
  // (several ranks may be driven by this one thread); GPU batches are simply launched.
  size_t nPhases = 0;
  for (size_t i = 0; i < n; i++) nPhases = std::max(nPhases, plans[i].phases.size());
  const bool callerRuns = n == 1;
  tcclResult_t res = tcclSuccess;
  for (size_t ph = 0; ph < nPhases && res == tcclSuccess; ph++) {
    for (size_t i = 0; i < n && res == tcclSuccess; i++) {
      if (ph < plans[i].phases.size()) {
        plans[i].phases[ph].started = false;  // (a kept plan ran before: plan_cache.cc)
        res = runPhase(comms[i], plans[i], plans[i].phases[ph], callerRuns);
      }
    }
    for (size_t i = 0; i < n; i++) {
      if (ph >= plans[i].phases.size() || !plans[i].phases[ph].started) continue;
      Phase& phase = plans[i].phases[ph];
      // A failure after some batches started would leave them waiting for peers that will
      // never come: abort those communicators so their items return.
      if (res != tcclSuccess) comms[i].comm->setError(res);
      tcclComm* comm = comms[i].comm;
      tcclResult_t r = finishHostBatch(comm, comm->launch, phase.batch, phase.status, callerRuns);
      if (res == tcclSuccess) res = r;
    }
  }
  return res;
}

}  // namespace tccl
