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
 * so while one chunk's steps drain the next can already fill; an LL chunk (stage 5) is one LL
 * step.
 *
 * Invariants: channel counts and chunk sizes depend only on the call (count, type) and on
 * knobs every rank shares, so all ranks cut the same chunks; one rank needs no connector.
 *
 * NCCL counterpart: src/enqueue.cc (ncclPrepareTasks / computeColl: nChannels, chunkSize),
 * src/graph/rings.cc (the ring order; ours is plain rank order).
 * Added in: stage 2; makeCollElem shared with the tree planner in stage 3.
 */
#include <algorithm>
#include <cstring>

#include "comm_context.h"
#include "plan.h"
#include "red_op.h"

// Channels (parallel rings) per collective, as NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS. On
// host buffers one by default: over sockets each channel costs a host thread per rank, more
// than a second channel gives on a host with few cores (docs/knobs.md, TCCL_MAX_NCHANNELS,
// measures it). On device buffers (stage 5) up to kDeviceChannels: a channel is a thread
// block, and one block moves a few tens of GB/s where a GPU's memory and links move a
// thousand (deviceChannels below). 0 means that default.
// Every rank must use the same values.
TCCL_PARAM(MinNChannels, "MIN_NCHANNELS", 1)
TCCL_PARAM(MaxNChannels, "MAX_NCHANNELS", 0)

namespace tccl {

namespace {

constexpr int kChunkSteps = kNSteps / 2;        // NCCL's ALLREDUCE_CHUNKSTEPS
constexpr size_t kMinChannelBytes = 256 << 10;  // host: less costs more than a channel gives
// Device buffers (stage 5): a channel is a thread block, and a block's share of a message
// should keep each of its 512 threads busy for longer than the block's start costs. NCCL
// drops channels while the bytes are fewer than channels x threads x a per-thread threshold
// (64 bytes on Simple: one channel per 32 KiB; 8 x nranks on ring LL: per 8 KiB at 2 ranks).
// Measured on 2 H200 over NVLink (2026-11-29, chapter 5 "Channels per call"): 32 KiB and
// 4 KiB took all-reduce at 32 KiB to 512 KiB from 16-17 us to 12-15 us against 256 KiB and
// 32 KiB, and no size from 8 B to 16 MiB got slower beyond the noise; 64 KiB and 8 KiB
// measured the same within the noise, 16 KiB and 2 KiB nowhere better.
constexpr size_t kDeviceMinChannelBytes = 32 << 10;
constexpr size_t kLLMinChannelBytes = 4 << 10;
// LL128: NCCL's per-thread threshold is between LL's and Simple's; so is this, unmeasured
// beyond the sizes chapter 5's LL128 table shows.
constexpr size_t kLL128MinChannelBytes = 16 << 10;
constexpr int kDeviceChannels = 32;  // device buffers: NCCL's most on NVLink H100s
// Device buffers: every block of a launch must be resident at once, on every rank sharing the
// GPU (tests run several ranks on one GPU), and each block fills an SM (512 threads).
// kDeviceBlockBudget blocks per GPU -- half an H100's 132 SMs -- shared by its ranks.
constexpr int kDeviceBlockBudget = 64;

/// The bytes a channel must have at least, for a collective on `onDevice` buffers by `proto`.
size_t leastChannelBytes(bool onDevice, WorkProto proto) {
  if (proto == WorkProto::kLL) return kLLMinChannelBytes;  // LL runs in kernels only
  if (proto == WorkProto::kLL128) return kLL128MinChannelBytes;  // and so does LL128
  return onDevice ? kDeviceMinChannelBytes : kMinChannelBytes;
}

/// How many channels a collective of `bytes` (per rank block for gather/scatter) uses: one per
/// minChannelBytes (leastChannelBytes() above), within [TCCL_MIN_NCHANNELS or minCTAs,
/// maxChannels].
int channelsFor(const CommContext* comm, size_t bytes, int maxChannels, size_t minChannelBytes) {
  int n = int(std::min<size_t>(size_t(maxChannels), std::max<size_t>(1, bytes / minChannelBytes)));
  int minChannels = std::max(int(tcclParamMinNChannels()), comm->minChannels);
  return std::max(n, std::min(maxChannels, minChannels));
}

/// The default channel bound on device buffers: kDeviceBlockBudget over the most ranks that
/// share one GPU, at most kDeviceChannels. From the all-gathered peers, so every rank agrees.
int deviceChannels(const CommContext* comm) {
  return std::clamp(kDeviceBlockBudget / comm->ranksPerGpu, 1, kDeviceChannels);
}

int maxRingChannels(const CommContext* comm, bool onDevice) {
  int n = int(tcclParamMaxNChannels());
  if (n <= 0) n = onDevice ? deviceChannels(comm) : 1;
  if (comm->maxChannels > 0) n = std::min(n, comm->maxChannels);
  return std::clamp(n, 1, kMaxWorkItems);
}

}  // namespace

bool oneRankIsCopy(const WorkElem& e) {
  const bool reduces = e.func == WorkFunc::kAllReduce || e.func == WorkFunc::kReduce ||
                       e.func == WorkFunc::kReduceScatter;
  return !reduces || DevRedOp(e.redOp) != DevRedOp::kPreMulSum;
}

tcclResult_t makeCollElem(const CollTask& t, bool onDevice, WorkElem* out) {
  const uint64_t stepBytes = uint64_t(tcclParamBuffSize()) / kNSteps;
  WorkElem e{};
  e.func = t.func;
  e.dtype = uint8_t(t.dtype);
  e.root = t.root;
  e.sendbuff = t.sendbuff;
  e.recvbuff = t.recvbuff;
  e.count = t.count;
  if (t.func == WorkFunc::kAllReduce || t.func == WorkFunc::kReduceScatter ||
      t.func == WorkFunc::kReduce) {
    TCCL_CHECK(applyRedOp(t.op, t.dtype, onDevice, &e));
  }
  e.nChannels = 1;
  e.chunkBytes = int32_t(std::min<uint64_t>(stepBytes * kChunkSteps, 1u << 30) / 16 * 16);
  // Stage 5, LL: a chunk is one step (32 KiB), as NCCL's LL chunkSize = stepSize: the steps
  // are small, so a chunk of several would only delay the next rank's start.
  e.proto = t.proto;
  if (t.proto == WorkProto::kLL) e.chunkBytes = int32_t(kLLStepBytes);
  if (t.proto == WorkProto::kLL128) e.chunkBytes = int32_t(kLL128StepBytes);  // likewise
  *out = e;
  return tcclSuccess;
}

tcclResult_t planRing(const CommContext* comm, ConnectorTable& connectors, CommPlan& plan) {
  const int maxChannels = maxRingChannels(comm, plan.onDevice);
  std::vector<WorkElem> elems;
  std::vector<DeviceCopy> copies;
  int usedChannels = 1;
  for (const CollTask& t : plan.tasks->colls) {
    if (t.algo != Algo::kRing) continue;  // stage 3: planTree takes the others
    // Stage 5: nothing moves (the count is the same on every rank), so there is nothing to
    // run, on the host or on the GPU; a group with nothing else then neither launches nor
    // waits for the stream, which alone costs many times NCCL's whole call (chapter 5, "The
    // fast GPU path").
    if (t.count == 0) continue;
    WorkElem e;
    TCCL_CHECK(makeCollElem(t, plan.onDevice, &e));
    if (plan.onDevice && comm->nranks == 1 && oneRankIsCopy(e)) {
      // One rank on the GPU: every collective is its input, unchanged (stage 5).
      const size_t bytes = t.count * typeSize(t.dtype);
      if (bytes > 0 && t.sendbuff != t.recvbuff) copies.push_back({t.sendbuff, t.recvbuff, bytes});
      continue;
    }
    e.nChannels = channelsFor(comm, t.count * typeSize(t.dtype), maxChannels,
                              leastChannelBytes(plan.onDevice, t.proto));
    usedChannels = std::max(usedChannels, e.nChannels);
    elems.push_back(e);
  }
  if (elems.empty() && copies.empty()) return tcclSuccess;
  // Built in place: a WorkBatch is 18 KB, and moving a Phase into the vector copied it (stage 5).
  Phase& phase = plan.phases.emplace_back();
  phase.deviceCopies = std::move(copies);
  phase.batch.rank = comm->rank;
  phase.batch.nranks = comm->nranks;
  const int next = (comm->rank + 1) % comm->nranks;
  const int prev = (comm->rank + comm->nranks - 1) % comm->nranks;
  for (int c = 0; c < usedChannels && !elems.empty(); c++) {
    const bool dev = plan.onDevice;
    Connector* send = comm->nranks > 1 ? connectors.get(next, c, true, dev) : nullptr;
    Connector* recv = comm->nranks > 1 ? connectors.get(prev, c, false, dev) : nullptr;
    // The elems are stored once (with channel 0's item); every channel's item runs them all.
    TCCL_CHECK(addItem(phase, WorkKind::kRing, next, c, send, recv,
                       c == 0 ? elems : std::vector<WorkElem>{}));
    WorkItem& it = phase.batch.items[phase.batch.nItems - 1];
    it.elemStart = 0;
    it.elemCount = int(elems.size());
  }
  TCCL_INFO(kColl, "ring plan: %zu collective(s) on %d channel(s)", elems.size(), usedChannels);
  return tcclSuccess;
}

}  // namespace tccl
