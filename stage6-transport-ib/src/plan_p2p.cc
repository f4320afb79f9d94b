/*
 * plan_p2p.cc: the p2p phase of a plan -- a group's sends and receives become work items.
 *
 * What it is: step 2 of tcclGroupEnd for point-to-point operations (group_launch.cc runs the
 * steps). Each send joins its peer's send list and each receive its peer's receive list, in
 * issue order; each list becomes one WorkItem (one connector, one direction) whose elems the
 * executor runs in order (stage 5: one item per channel on device buffers, each moving its
 * part of every operation; small messages by LL). Sends to oneself are paired, in order, with
 * receives from oneself as local copies. addItem is how every planner puts an item into a
 * batch.
 *
 * Invariants: every rank cuts the same items from matching calls (ordered by p2pOrderKey,
 * elems in issue order), so the two ends of each connector see the same sequence of messages;
 * zero-byte operations move nothing on either side; a group that does not fit one batch is
 * refused with a message rather than split in a way that could deadlock.
 *
 * NCCL counterpart: src/enqueue.cc (scheduleP2pTasksToPlan, addP2pToPlan).
 * Added in: stage 1; channels, LL and the shared item order in stage 5.
 */
#include <algorithm>
#include <map>
#include <vector>

#include "comm_context.h"
#include "plan.h"
#include "tuning.h"

namespace tccl {

namespace {

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
// channels the same way, up to NCCL_MAX_P2P_NCHANNELS). One block copies a few tens of GB/s,
// so a large message wants many (chapter 5, "The fast GPU path", measures each part count).
// Host buffers keep one channel (each would cost a host thread).
//
// The bound: a send to one peer and a receive from another, each cut into this many parts,
// fill the rank's share of the GPU's blocks (kP2pBlockBudget over the ranks sharing the GPU,
// plan.h), and an all-to-all still fits one batch (2 items per peer and part, and one per part
// for the copy to oneself). That is 32 parts at 2 ranks on one GPU, 16 at 4; 9 at 8 ranks on a
// GPU each. A group with more items than blocks is still safe (the kernel runs them in turns,
// in an order every rank shares: see orderP2pItems below). The cut depends on the message's
// size and these communicator-wide numbers alone, so the receiver cuts the matching receive
// the same way; each part is computed where it runs (p2pPart, device/p2p.h).
// TCCL_MAX_P2P_NCHANNELS, set, lowers the bound. Every rank must use the same value (plan.h;
// checked at init).
// The part size: 32 KiB, a channel's least share of a Simple collective (plan_ring.cc says
// why). Measured on 2 H200 (2026-11-29): 512 KiB parts left a single block moving 512 KiB
// messages at 16 GB/s (33 us against NCCL's 13); 32 KiB parts take 13.4 us, and from 128 KiB
// to 64 MiB every size is below NCCL's time or within 3% of it.
constexpr size_t kP2pChannelBytes = 32 << 10;  // at least this much per part
constexpr int kP2pMaxParts = 32;

int p2pParts(const CommContext* comm, size_t bytes, bool onDevice) {
  if (!onDevice) return 1;
  int most = std::min(kP2pBlockBudget / (2 * comm->ranksPerGpu),
                      kMaxWorkItems / (2 * std::max(1, comm->nranks - 1) + 1));
  if (tcclParamMaxP2pNChannels() > 0) most = std::min<int64_t>(most, tcclParamMaxP2pNChannels());
  most = std::clamp(most, 1, kP2pMaxParts);
  return int(std::clamp<size_t>(bytes / kP2pChannelBytes, 1, size_t(most)));
}

/// Appends one peer's operations in one direction to the batch's elems, in issue order, each
/// with the number of parts it is cut into (and its protocol, stage 5); returns how many
/// channels they need (the most parts of any). Every channel's item runs the same elems,
/// each moving its own part (device/p2p.h).
int addPeerElems(const CommContext* comm, bool onDevice, Phase& phase,
                 std::vector<WorkElem>& elems) {
  int channels = 1;
  for (WorkElem& e : elems) {
    e.nChannels = p2pParts(comm, e.count, onDevice);
    // Stage 5: small messages go by LL, in one part (an LL step is 32 KiB: a message below
    // the threshold gains nothing from more blocks, whatever TCCL_P2P_LL_THRESHOLD says).
    if (onDevice && comm->llAvailable && int64_t(e.count) <= tcclParamP2pLLThreshold()) {
      e.proto = WorkProto::kLL;
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
tcclResult_t orderP2pItems(const CommContext* comm, ConnectorTable& connectors, bool onDevice,
                           Phase& phase, std::map<int, std::vector<WorkElem>>& sends,
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
    Connector* conn = connectors.get(it.peer, it.channel, it.isSend, onDevice);
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
  Phase& phase = plan.phases.emplace_back();  // in place (stage 5: plan_ring.cc says why)
  if (!copies.empty() && plan.onDevice && sends.empty() && recvs.empty()) {
    // Only copies to oneself on the GPU (one rank, say): the copy engine does them, at the
    // memory's rate, or a small copy kernel (stage 5).
    for (const WorkElem& e : copies) {
      if (e.sendbuff != e.recvbuff) phase.deviceCopies.push_back({e.sendbuff, e.recvbuff, e.count});
    }
  } else if (!copies.empty()) {
    // A send to oneself is cut into parts like any other message (host buffers: one), each
    // channel's item copying its part, in the kernel on the GPU (stage 5), beside the
    // transfers to the peers: a copy-engine copy would run before the kernel, not beside it
    // (all-to-all on 2 H200 measured 764 against 914 us at 512 MiB, 14.6 against 19.4 us at 32 B).
    // These items come first in the batch: they wait for nobody, so the order that keeps
    // blocks running items in turns from deadlocking (orderP2pItems) still holds behind them.
    int channels = 1;
    for (WorkElem& e : copies) {
      e.nChannels = p2pParts(comm, e.count, plan.onDevice);
      channels = std::max(channels, e.nChannels);
    }
    const int start = phase.batch.nElems;
    if (start + int(copies.size()) > kMaxWorkElems) return groupTooLarge();
    for (const WorkElem& e : copies) phase.batch.elems[phase.batch.nElems++] = e;
    for (int c = 0; c < channels; c++) {
      const int n = int(copies.size());
      TCCL_CHECK(addRangeItem(phase, WorkKind::kP2p, -1, c, nullptr, nullptr, start, n));
    }
  }
  TCCL_CHECK(orderP2pItems(comm, connectors, plan.onDevice, phase, sends, recvs));
  if (phase.batch.nItems == 0 && phase.deviceCopies.empty()) plan.phases.pop_back();
  return tcclSuccess;
}

}  // namespace tccl
