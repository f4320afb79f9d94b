/*
 * group_launch.cc: turning a group's tasks into work and running it.
 *
 * What it is: the planner and launcher behind tcclGroupEnd. For each communicator:
 *
 *   1. classify buffers: all host (host executor) or all device (GPU executor), never mixed;
 *   2. plan: the tasks become a list of phases, each a WorkBatch run to completion before the
 *      next: the collectives (stage 2, plan_ring.cc; stage 3 first picks each one's algorithm,
 *      tuning.h, and plans trees after rings, plan_tree.cc), then the p2p operations. In the p2p
 *      phase, one WorkItem per (peer, direction) holds that peer's sends (or receives) in
 *      issue order (stage 5: one per channel, each moving its part of every operation);
 *      sends to oneself are paired with receives from oneself as local copies;
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
 * NCCL counterpart: src/enqueue.cc (ncclPrepareTasks, scheduleP2pTasksToPlan,
 * ncclLaunchPrepare), src/group.cc (groupLaunch).
 * Added in: stage 1; the collectives phase in stage 2; algorithm selection and trees in stage 3;
 * CUDA graph capture in stage 5.
 */
#include <algorithm>
#include <map>
#include <set>

#include "comm.h"
#include "executor.h"
#include "group.h"
#include "plan.h"
#include "trace.h"

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

WorkElem p2pElem(WorkFunc f, const void* src, void* dst, size_t bytes) {
  WorkElem e{};
  e.func = f;
  e.sendbuff = src;
  e.recvbuff = dst;
  e.count = bytes;
  e.nChannels = 1;  // one part (stage 5: addPeerElems cuts large device-buffer ones)
  return e;
}

// Device buffers (stage 5): a large message to a peer is cut into parts, one per channel, so
// that several thread blocks move it over several connections at once (NCCL spreads p2p over
// channels the same way, up to NCCL_MAX_P2P_NCHANNELS). One block copies a few tens of GB/s
// (measured on the H100, 2 ranks sharing it, 256 MiB send/recv per rank: 142 GB/s on 4
// channels, 302 on 16, 341 on 32), so a large message wants many. Host buffers keep one
// channel (each would cost a host thread).
//
// The bound: a send to one peer and a receive from another, each cut into this many parts,
// fill the rank's share of the GPU's blocks (kP2pBlockBudget over the ranks sharing the GPU,
// plan.h), and an all-to-all still fits one batch (2 items per peer and part). That is 32
// parts at 2 ranks on one GPU, 16 at 4; 9 at 8 ranks on a GPU each. A group with more items
// than blocks is still safe (the kernel runs them in turns, in an order every rank shares:
// see orderP2pItems below). The cut depends on the message's size and these
// communicator-wide numbers alone, so the receiver cuts the matching receive the same way;
// each part is computed where it runs (p2pPart, device/p2p.h). TCCL_MAX_P2P_NCHANNELS, set,
// lowers the bound. Every rank must use the same value (plan.h; checked at init).
constexpr size_t kP2pChannelBytes = 512 << 10;  // at least this much per part
constexpr int kP2pMaxParts = 32;

int p2pParts(const tcclComm* comm, size_t bytes, bool onDevice) {
  if (!onDevice) return 1;
  int most = std::min(kP2pBlockBudget / (2 * comm->ranksPerGpu),
                      kMaxWorkItems / (2 * std::max(1, comm->nranks - 1)));
  if (tcclParamMaxP2pNChannels() > 0) most = std::min<int64_t>(most, tcclParamMaxP2pNChannels());
  most = std::clamp(most, 1, kP2pMaxParts);
  return int(std::clamp<size_t>(bytes / kP2pChannelBytes, 1, size_t(most)));
}

/// Appends one peer's operations in one direction to the batch's elems, in issue order, each
/// with the number of parts it is cut into (and its protocol, stage 5); returns how many
/// channels they need (the most parts of any). Every channel's item runs the same elems,
/// each moving its own part (device/p2p.h).
int addPeerElems(tcclComm* comm, bool onDevice, Phase& phase, std::vector<WorkElem>& elems) {
  int channels = 1;
  for (WorkElem& e : elems) {
    e.nChannels = p2pParts(comm, e.count, onDevice);
    // Stage 5: small messages go by LL, in one part (an LL step is 32 KiB: a message below
    // the threshold gains nothing from more blocks, whatever TCCL_P2P_LL_THRESHOLD says).
    if (onDevice && comm->llAvailable && int64_t(e.count) <= tcclParamP2pLLThreshold()) {
      e.proto = kProtoLL;
      e.nChannels = 1;
    }
    channels = std::max(channels, e.nChannels);
    phase.batch.elems[phase.batch.nElems++] = e;
  }
  return channels;
}

/// The items of the p2p phase, in the order every rank shares (p2pOrderKey, plan.h): when a
/// kernel has fewer blocks than items and each block runs its items in this order
/// (device/kernel_entry.cuh), no group can wait on a block that never starts.
tcclResult_t orderP2pItems(tcclComm* comm, bool onDevice, Phase& phase,
                           std::map<int, std::vector<WorkElem>>& sends,
                           std::map<int, std::vector<WorkElem>>& recvs) {
  struct Pending {
    P2pOrderKey key;
    int peer, channel, elemStart, elemCount;
    bool isSend;
  };
  std::vector<Pending> items;
  WorkBatch& b = phase.batch;
  for (bool isSend : {true, false}) {
    for (auto& [peer, elems] : isSend ? sends : recvs) {
      if (b.nElems + int(elems.size()) > kMaxWorkElems) return groupTooLarge();
      const int start = b.nElems;
      const int channels = addPeerElems(comm, onDevice, phase, elems);
      for (int c = 0; c < channels; c++) {
        items.push_back({p2pOrderKey(comm->rank, peer, c, isSend), peer, c, start,
                         int(elems.size()), isSend});
      }
    }
  }
  std::sort(items.begin(), items.end(),
            [](const Pending& x, const Pending& y) { return x.key < y.key; });
  for (const Pending& it : items) {
    Connector* conn = comm->getConnector(it.peer, it.channel, it.isSend, onDevice);
    TCCL_CHECK(addRangeItem(phase, WorkKind::kP2p, it.peer, it.channel,
                            it.isSend ? conn : nullptr, it.isSend ? nullptr : conn,
                            it.elemStart, it.elemCount));
  }
  return tcclSuccess;
}

}  // namespace

tcclResult_t addItem(Phase& phase, WorkKind kind, int peer, int channel, Connector* send,
                     Connector* recv, const std::vector<WorkElem>& elems) {
  WorkBatch& b = phase.batch;
  if (b.nElems + int(elems.size()) > kMaxWorkElems) return groupTooLarge();
  const int start = b.nElems;
  for (const WorkElem& e : elems) b.elems[b.nElems++] = e;
  return addRangeItem(phase, kind, peer, channel, send, recv, start, int(elems.size()));
}

tcclResult_t addRangeItem(Phase& phase, WorkKind kind, int peer, int channel, Connector* send,
                          Connector* recv, int elemStart, int elemCount) {
  WorkBatch& b = phase.batch;
  if (b.nItems >= kMaxWorkItems) return groupTooLarge();
  WorkItem& it = b.items[b.nItems];
  it = WorkItem{};
  it.kind = kind;
  it.peer = peer;
  it.channel = channel;
  it.elemStart = elemStart;
  it.elemCount = elemCount;
  if (send) phase.itemConns.push_back({b.nItems, send});
  if (recv) phase.itemConns.push_back({b.nItems, recv});
  b.nItems++;
  return tcclSuccess;
}

tcclResult_t groupTooLarge() {
  TCCL_WARN("group too large: at most %d work items (peers x directions, channels) and %d "
            "operations per communicator in one group",
            kMaxWorkItems, kMaxWorkElems);
  return tcclInvalidUsage;
}

/// Step 2, the p2p phase: items per (peer, direction); self sends paired with self receives.
tcclResult_t planP2p(tcclComm* comm, CommPlan& plan) {
  if (plan.tasks->p2p.empty()) return tcclSuccess;
  std::map<int, std::vector<WorkElem>> sends, recvs;
  std::vector<const P2pTask*> selfSends, selfRecvs;
  // >>> exercise 1.2: a group's operations become per-peer lists
  for (const P2pTask& p : plan.tasks->p2p) {
    if (p.bytes == 0) continue;  // NCCL semantics: nothing moves, on either side
    if (p.peer == comm->rank) {
      (p.isSend ? selfSends : selfRecvs).push_back(&p);
    } else if (p.isSend) {
      sends[p.peer].push_back(p2pElem(WorkFunc::kSend, p.sendbuff, nullptr, p.bytes));
    } else {
      recvs[p.peer].push_back(p2pElem(WorkFunc::kRecv, nullptr, p.recvbuff, p.bytes));
    }
  }
  // <<< exercise 1.2
  if (selfSends.size() != selfRecvs.size()) {
    TCCL_WARN("rank %d: %zu send(s) to itself but %zu receive(s) from itself in one group",
              comm->rank, selfSends.size(), selfRecvs.size());
    return tcclInvalidUsage;
  }
  std::vector<WorkElem> copies;
  for (size_t i = 0; i < selfSends.size(); i++) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes) {
      TCCL_WARN("rank %d: send to itself of %zu bytes matched with a receive of %zu bytes",
                comm->rank, selfSends[i]->bytes, selfRecvs[i]->bytes);
      return tcclInvalidUsage;
    }
    copies.push_back(p2pElem(WorkFunc::kCopy, selfSends[i]->sendbuff, selfRecvs[i]->recvbuff,
                             selfSends[i]->bytes));
  }
  Phase& phase = plan.phases.emplace_back();  // in place (stage 5: plan_ring.cc says why)
  if (!copies.empty() && plan.onDevice) {
    // On the GPU the copy engine does them, at device-copy speed (stage 5).
    for (const WorkElem& e : copies) {
      if (e.sendbuff != e.recvbuff) phase.deviceCopies.push_back({e.sendbuff, e.recvbuff, e.count});
    }
  } else if (!copies.empty()) {
    TCCL_CHECK(addItem(phase, WorkKind::kP2p, -1, 0, nullptr, nullptr, copies));
  }
  TCCL_CHECK(orderP2pItems(comm, plan.onDevice, phase, sends, recvs));
  if (phase.batch.nItems == 0 && phase.deviceCopies.empty()) plan.phases.pop_back();
  return tcclSuccess;
}

namespace {

/// The step timeline's "api" lane (trace.h): one span per operation of the group, from the
/// launch until it is done (on the GPU: until the stream has passed the group's kernels).
/// Every operation gets its sequence number here, traced or not.
void recordOps(CommTasks& t, bool onDevice, uint64_t t0) {
  tcclComm* comm = t.comm;
  if (comm->tracePid < 0) {  // the hot path: numbers only, nothing allocated
    comm->opCount += t.colls.size() + t.p2p.size();
    return;
  }
  std::vector<TraceOp> ops;
  for (const CollTask& c : t.colls) {  // the collectives phase runs first (plan_ring.cc)
    const bool reduces = c.func != WorkFunc::kAllGather && c.func != WorkFunc::kBroadcast;
    const bool rooted = c.func == WorkFunc::kBroadcast || c.func == WorkFunc::kReduce;
    ops.push_back(TraceOp{collName(c.func), comm->opCount++, int64_t(c.count),
                          int64_t(c.count * typeSize(c.dtype)), dtypeName(c.dtype),
                          reduces ? redOpName(c.op.op) : nullptr, rooted ? c.root : -1, -1,
                          algoName(c.algo), onDevice});
  }
  for (const P2pTask& p : t.p2p) {
    ops.push_back(TraceOp{p.isSend ? "Send" : "Recv", comm->opCount++, int64_t(p.bytes),
                          int64_t(p.bytes), nullptr, nullptr, -1, p.peer, "p2p", onDevice});
  }
  if (onDevice) return traceOpsOnStream(comm, t.stream, std::move(ops), t0);
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
    return launchGpuBatch(comm, phase.batch, phase.deviceCopies, tasks.stream, plan.capturing);
  }
  if (comm->cudaDev >= 0) {
    // Host buffers on a GPU communicator: the call is ordered after earlier work on the
    // stream and on the communicator, then runs to completion.
    if (comm->haveLaunched) TCCL_CHECK(eventSynchronize(comm->lastLaunch));
    TCCL_CHECK(streamSynchronize(tasks.stream));
  }
  TCCL_CHECK(startHostBatch(comm, phase.batch, &phase.status, callerRuns));
  phase.started = true;
  return tcclSuccess;
}

}  // namespace

tcclResult_t launchOneRankColl(tcclComm* comm, const CollTask& t, cudaStream_t stream,
                              bool* done) {
  // The planner's way for what this does not cover: the step timeline (it records the
  // group's spans), a premultiplied sum (a kernel multiplies), host buffers (a host executor
  // copies them, or the call must wait for the stream) -- except in place without a GPU.
  // Everything else about a one-rank collective is its copy, and a group of one cost the
  // host about a microsecond to plan that (measured on the H100: NCCL's in-place one-rank
  // all-reduce took 0.18 us of host time, tccl's 0.7 to 1.8 through the planner).
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
  comm->opCount++;  // the operation's sequence number, as recordOps gives it
  if (!moves) return tcclSuccess;
  bool capturing = false;
  TCCL_CHECK(streamIsCapturing(stream, &capturing));
  static const WorkBatch kNoItems{};
  const std::vector<DeviceCopy> copies{{t.sendbuff, t.recvbuff, bytes}};
  return launchGpuBatch(comm, kNoItems, copies, stream, capturing);
}

tcclResult_t launchGroup(std::vector<CommTasks>& comms) {
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
  for (size_t i = 0; i < comms.size(); i++) {
    tcclComm* comm = comms[i].comm;
    setLogRank(comm->rank);
    TCCL_CHECK(comm->checkAsyncError());
    plans[i].tasks = &comms[i];
    bool moves = false;
    TCCL_CHECK(classifyMemory(comm, comms[i], &plans[i].onDevice, &moves));
    // Stage 5: device work may be captured into a CUDA graph (kernel.cu says what changes);
    // host buffers cannot be (host threads move them now, not at each replay). A group that
    // moves nothing runs nothing, and may be captured.
    if (comm->cudaDev >= 0) TCCL_CHECK(streamIsCapturing(comms[i].stream, &plans[i].capturing));
    if (plans[i].capturing && !plans[i].onDevice && moves) {
      TCCL_WARN("host buffers cannot be captured in a CUDA graph (host threads move them when "
                "the call is made, not when the graph runs): use device buffers");
      return tcclInvalidUsage;
    }
    TCCL_CHECK(selectAlgorithms(comm, comms[i], plans[i].onDevice));
    TCCL_CHECK(planRing(comm, plans[i]));
    TCCL_CHECK(planTree(comm, plans[i]));
    TCCL_CHECK(planP2p(comm, plans[i]));
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
    if (!pc.conns.empty()) pending.push_back(std::move(pc));
  }
  if (!pending.empty()) {
    // Connecting allocates and maps memory: allowed even while a stream is being captured
    // (which only a communicator with a GPU can be part of).
    bool anyGpu = false;
    for (const PendingConnects& pc : pending) anyGpu = anyGpu || pc.comm->cudaDev >= 0;
    RelaxedCaptureScope relaxed(anyGpu);
    TCCL_CHECK(connectAll(pending));
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
      tcclResult_t r = finishHostBatch(comms[i].comm, phase.batch, phase.status, callerRuns);
      if (res == tcclSuccess) res = r;
    }
  }
  return res;
}

}  // namespace tccl
