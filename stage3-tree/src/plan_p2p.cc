/*
 * plan_p2p.cc: the p2p phase of a plan -- a group's sends and receives become work items.
 *
 * What it is: step 2 of tcclGroupEnd for point-to-point operations (group_launch.cc runs the
 * steps). Each send joins its peer's send list and each receive its peer's receive list, in
 * issue order; each list becomes one WorkItem (one connector, one direction) whose elems the
 * executor runs in order. Sends to oneself are paired, in order, with receives from oneself
 * as local copies. addItem is how every planner puts an item into a batch.
 *
 * Invariants: every rank cuts the same items from matching calls (ordered by peer, elems in
 * issue order), so the two ends of each connector see the same sequence of messages;
 * zero-byte operations move nothing on either side; a group that does not fit one batch is
 * refused with a message rather than split in a way that could deadlock.
 *
 * NCCL counterpart: src/enqueue.cc (scheduleP2pTasksToPlan, addP2pToPlan).
 * Added in: stage 1.
 */
#include <map>
#include <vector>

#include "comm_context.h"
#include "plan.h"

namespace tccl {

namespace {

WorkElem p2pElem(WorkFunc f, const void* src, void* dst, size_t bytes) {
  WorkElem e{};
  e.func = f;
  e.sendbuff = src;
  e.recvbuff = dst;
  e.count = bytes;
  return e;
}

}  // namespace

tcclResult_t addItem(Phase& phase, WorkKind kind, int peer, int channel, Connector* send,
                     Connector* recv, const std::vector<WorkElem>& elems) {
  WorkBatch& b = phase.batch;
  if (b.nItems >= kMaxWorkItems || b.nElems + int(elems.size()) > kMaxWorkElems) {
    TCCL_WARN("group too large: at most %d work items (peers x directions, channels) and %d "
              "operations per communicator in one group",
              kMaxWorkItems, kMaxWorkElems);
    return tcclInvalidUsage;
  }
  WorkItem& it = b.items[b.nItems];
  it = WorkItem{};
  it.kind = kind;
  it.peer = peer;
  it.channel = channel;
  it.elemStart = b.nElems;
  it.elemCount = int(elems.size());
  for (const WorkElem& e : elems) b.elems[b.nElems++] = e;
  if (send) phase.itemConns.push_back({b.nItems, send});
  if (recv) phase.itemConns.push_back({b.nItems, recv});
  b.nItems++;
  return tcclSuccess;
}

/// Step 2, the p2p phase: items per (peer, direction); self sends paired with self receives.
tcclResult_t planP2p(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan) {
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
  Phase phase;
  if (!copies.empty()) TCCL_CHECK(addItem(phase, WorkKind::kP2p, -1, 0, nullptr, nullptr, copies));
  for (auto& [peer, elems] : sends) {
    TCCL_CHECK(addItem(phase, WorkKind::kP2p, peer, 0, connectors.get(peer, 0, true),
                       nullptr, elems));
  }
  for (auto& [peer, elems] : recvs) {
    TCCL_CHECK(addItem(phase, WorkKind::kP2p, peer, 0, nullptr,
                       connectors.get(peer, 0, false), elems));
  }
  if (phase.batch.nItems > 0) plan.phases.push_back(std::move(phase));
  return tcclSuccess;
}

}  // namespace tccl
