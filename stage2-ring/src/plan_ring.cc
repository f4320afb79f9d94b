/*
 * plan_ring.cc: planning a group's collectives as ring work.
 *
 * What it is: the collectives phase of a plan (it runs before the p2p phase). Every channel
 * gets one WorkItem that runs all the group's collectives in issue order on that channel's
 * ring: it receives from rank-1 and sends to rank+1 over the channel's connectors. A
 * collective uses as many channels as its size deserves (at least kMinChannelBytes each, at
 * most TCCL_NCHANNELS or the config's maxCTAs) and its data is split between them.
 *
 * Chunks: a ring chunk is kChunkSteps FIFO steps (half the FIFO, as NCCL's Simple protocol),
 * so while one chunk's steps drain the next can already fill.
 *
 * Invariants: channel counts and chunk sizes depend only on the call (count, type) and on
 * knobs every rank shares, so all ranks cut the same chunks; one rank needs no connector.
 *
 * NCCL counterpart: src/enqueue.cc (ncclPrepareTasks / computeColl: nChannels, chunkSize),
 * src/graph/rings.cc (the ring order; ours is plain rank order).
 * Added in: stage 2.
 */
#include <algorithm>

#include "comm_context.h"
#include "plan.h"
#include "red_op.h"

// Channels (parallel rings) per collective, as NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS. One
// by default: over sockets each channel costs a host thread per rank, more than a second
// channel gives on a host with few cores (docs/knobs.md, TCCL_MAX_NCHANNELS, measures it).
// Every rank must use the same values.
TCCL_PARAM(MinNChannels, "MIN_NCHANNELS", 1)
TCCL_PARAM(MaxNChannels, "MAX_NCHANNELS", 1)

namespace tccl {

namespace {

constexpr int kChunkSteps = kNSteps / 2;        // NCCL's ALLREDUCE_CHUNKSTEPS
constexpr size_t kMinChannelBytes = 256 << 10;  // below this a channel costs more than it gives

/// How many channels a collective of `bytes` (per rank block for gather/scatter) uses: one per
/// kMinChannelBytes, within [TCCL_MIN_NCHANNELS or minCTAs, maxChannels].
int channelsFor(const CommContext* comm, size_t bytes, int maxChannels) {
  int n = int(std::min<size_t>(size_t(maxChannels), std::max<size_t>(1, bytes / kMinChannelBytes)));
  int minChannels = std::max(int(tcclParamMinNChannels()), comm->minChannels);
  return std::max(n, std::min(maxChannels, minChannels));
}

int maxRingChannels(const CommContext* comm) {
  int n = int(tcclParamMaxNChannels());
  if (comm->maxChannels > 0) n = std::min(n, comm->maxChannels);
  return std::clamp(n, 1, kMaxWorkItems);
}

}  // namespace

tcclResult_t planRing(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan) {
  const std::vector<CollTask>& colls = plan.tasks->colls;
  if (colls.empty()) return tcclSuccess;
  const int maxChannels = maxRingChannels(comm);
  const uint64_t stepBytes = uint64_t(tcclParamBuffSize()) / kNSteps;
  std::vector<WorkElem> elems;
  int usedChannels = 1;
  for (const CollTask& t : colls) {
    WorkElem e{};
    e.func = t.func;
    e.dtype = uint8_t(t.dtype);
    e.root = t.root;
    e.sendbuff = t.sendbuff;
    e.recvbuff = t.recvbuff;
    e.count = t.count;
    if (t.func == WorkFunc::kAllReduce || t.func == WorkFunc::kReduceScatter ||
        t.func == WorkFunc::kReduce) {
      TCCL_CHECK(applyRedOp(t.op, t.dtype, plan.onDevice, &e));
    }
    e.nChannels = channelsFor(comm, t.count * typeSize(t.dtype), maxChannels);
    e.chunkBytes = int32_t(std::min<uint64_t>(stepBytes * kChunkSteps, 1u << 30) / 16 * 16);
    usedChannels = std::max(usedChannels, e.nChannels);
    elems.push_back(e);
  }
  Phase phase;
  phase.batch.rank = comm->rank;
  phase.batch.nranks = comm->nranks;
  const int next = (comm->rank + 1) % comm->nranks;
  const int prev = (comm->rank + comm->nranks - 1) % comm->nranks;
  for (int c = 0; c < usedChannels; c++) {
    Connector* send = comm->nranks > 1 ? connectors.get(next, c, true) : nullptr;
    Connector* recv = comm->nranks > 1 ? connectors.get(prev, c, false) : nullptr;
    // The elems are stored once (with channel 0's item); every channel's item runs them all.
    TCCL_CHECK(addItem(phase, WorkKind::kRing, next, c, send, recv,
                       c == 0 ? elems : std::vector<WorkElem>{}));
    WorkItem& it = phase.batch.items[phase.batch.nItems - 1];
    it.elemStart = 0;
    it.elemCount = int(elems.size());
  }
  TCCL_INFO(kColl, "ring plan: %zu collective(s) on %d channel(s)", colls.size(), usedChannels);
  plan.phases.push_back(std::move(phase));
  return tcclSuccess;
}

}  // namespace tccl
