/*
 * trace.cc: the library's side of the step timeline. See trace.h.
 *
 * What it is: event names and their argument labels, the per-communicator set-up (trace
 * process, lane names, the clock offset to rank 0 that common/trace_clock.h measures), the
 * conversion of executor records (host or GPU) into trace events, and the API and proxy hooks.
 *
 * Added in: stage 1 (observability).
 */
#include "trace.h"

#include <memory>
#include <string>
#include <vector>

#include "comm_context.h"
#include "cuda_wrap.h"
#include "executor.h"
#include "launch_state.h"
#include "tccl/common/trace_clock.h"

namespace tccl {

namespace {

/// The event names of executor records, indexed by TraceWhat.
const char* const kWhatNames[] = {"send",  "recv", "copySend", "recvCopySend", "recvReduceSend",
                                  "recvReduceCopy", "recvReduceCopySend", "wait recv",
                                  "wait send", "copy", "reduce", "direct"};
static_assert(sizeof(kWhatNames) / sizeof(kWhatNames[0]) == size_t(TraceWhat::kCount),
              "one name per TraceWhat");

struct Names {
  uint16_t what[size_t(TraceWhat::kCount)];
  uint16_t proxySend, proxyRecv;
  Names() {
    for (size_t i = 0; i < size_t(TraceWhat::kCount); i++) {
      if (i <= size_t(TraceWhat::kRecvReduceCopySend)) {
        what[i] = traceName(kWhatNames[i], "prim",
                            {"chunk", "bytes", "channel", "recvPeer", "sendPeer"});
      } else if (i == size_t(TraceWhat::kWaitRecv) || i == size_t(TraceWhat::kWaitSend)) {
        what[i] = traceName(kWhatNames[i], "step", {"step", "peer", "channel"});
      } else {
        what[i] = traceName(kWhatNames[i], "step",
                            {"recvStep", "recvPeer", "sendStep", "sendPeer", "channel", "bytes"});
      }
    }
    proxySend = traceName("proxy send", "proxy", {"step", "peer", "channel", "bytes"});
    proxyRecv = traceName("proxy recv", "proxy", {"step", "peer", "channel", "bytes"});
  }
};

const Names& names() {
  static const Names n;
  return n;
}

int64_t argOr(int64_t v, bool have) { return have ? v : kTraceNoArg; }
int64_t stepArg(uint64_t step) { return step == kTraceNoStep ? kTraceNoArg : int64_t(step); }

}  // namespace

tcclResult_t traceCommInit(CommContext* comm) {
  bool any = false;
  for (const PeerInfo& p : comm->peers) any = any || p.trace != 0;
  if (!any) return tcclSuccess;
  // Every rank takes part in the measurement (rank 0 serves it), traced or not.
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : comm->peers) hosts.push_back(p.hostHash);
  TraceClockOffset clock;
  TCCL_CHECK(traceMeasureClockOffset(*comm->bootstrap, comm->rank, hosts, &clock));
  if (!traceEnabled()) return tcclSuccess;
  const uint64_t commHash = traceCommHash(comm->bootstrap->secret());
  comm->tracePid = tracePid(commHash, comm->rank);
  traceRank(TraceRank{comm->tracePid, comm->rank, comm->nranks, commHash,
                      comm->peers[comm->rank].hostHash, clock.offsetUs, clock.errUs,
                      clock.pings});
  traceTrack(comm->tracePid, kTraceTidApi, "api");
  names();  // registers the names now, not inside the first timed step
  if (comm->cudaDev >= 0) {
    // The GPU's records are converted at the end of each kernel (traceCollectGpu).
    int64_t errNs = 0;
    TCCL_CHECK(traceCalibrateGpuClock(&comm->traceGpuOffsetNs, &errNs));
    TCCL_INFO(kInit, "trace: host clock = GPU clock %+lld ns (read within +- %lld ns)",
              (long long)comm->traceGpuOffsetNs, (long long)errNs);
  }
  return tcclSuccess;
}

void traceCommDestroy(CommContext* comm) {
  if (comm->tracePid < 0) return;
  traceFlush();
  hostFree(comm->traceBufs, true);
  comm->traceBufs = nullptr;
}

tcclResult_t traceAllocGpu(CommContext* comm) {
  const size_t head = kMaxWorkItems * sizeof(TraceBuffer);
  const size_t recs = size_t(kMaxWorkItems) * kTraceRecsPerBlock * sizeof(TraceRecord);
  void* mem = nullptr;
  TCCL_CHECK(hostCalloc(&mem, head + recs, /*mapped=*/true));
  comm->traceBufs = static_cast<TraceBuffer*>(mem);
  auto* rec = reinterpret_cast<TraceRecord*>(static_cast<char*>(mem) + head);
  for (int b = 0; b < kMaxWorkItems; b++) {
    comm->traceBufs[b].cap = kTraceRecsPerBlock;
    comm->traceBufs[b].recs = rec + size_t(b) * kTraceRecsPerBlock;
  }
  return tcclSuccess;
}

void traceCollectGpu(CommContext* comm) {
  // Runs on a CUDA callback thread after the kernel finished: the blocks' writes to mapped
  // memory are complete and visible, and the next kernel of this communicator waits for us
  // (launches are chained after this callback), so the buffers can be reset here.
  for (int b = 0; b < kMaxWorkItems; b++) {
    TraceBuffer& buf = comm->traceBufs[b];
    const uint32_t n = buf.count;
    if (n == 0) continue;
    traceLane(comm, kTraceTidGpuBlock + b, "GPU block", b);
    const uint32_t kept = n < buf.cap ? n : buf.cap;
    traceCountDropped(n - kept);
    for (uint32_t i = n - kept; i < n; i++) {
      traceRecordEmit(comm->tracePid, kTraceTidGpuBlock + b, buf.recs[i % buf.cap],
                      comm->traceGpuOffsetNs);
    }
    buf.count = 0;
  }
}

void traceLane(const CommContext* comm, int tid, const char* what, int index) {
  if (comm->tracePid < 0) return;
  traceTrack(comm->tracePid, tid, std::string(what) + " " + std::to_string(index));
}

void traceRecordEmit(int pid, int tid, const TraceRecord& r, int64_t offsetNs) {
  if (r.what >= uint8_t(TraceWhat::kCount)) return;
  const TraceWhat what = TraceWhat(r.what);
  TraceEvent e{};
  e.t0 = uint64_t(int64_t(r.t0) + offsetNs);
  e.t1 = uint64_t(int64_t(r.t1) + offsetNs);
  e.pid = pid;
  e.tid = tid;
  e.name = names().what[r.what];
  for (int64_t& a : e.args) a = kTraceNoArg;
  if (what <= TraceWhat::kRecvReduceCopySend) {
    e.args[0] = argOr(r.chunk, r.chunk >= 0);
    e.args[1] = r.bytes;
    e.args[2] = r.channel;
    e.args[3] = argOr(r.recvPeer, r.recvPeer >= 0);
    e.args[4] = argOr(r.sendPeer, r.sendPeer >= 0);
  } else if (what == TraceWhat::kWaitRecv) {
    e.args[0] = stepArg(r.recvStep);
    e.args[1] = r.recvPeer;
    e.args[2] = r.channel;
  } else if (what == TraceWhat::kWaitSend) {
    e.args[0] = stepArg(r.sendStep);
    e.args[1] = r.sendPeer;
    e.args[2] = r.channel;
  } else {
    const bool recv = r.recvStep != kTraceNoStep, send = r.sendStep != kTraceNoStep;
    e.args[0] = stepArg(r.recvStep);
    e.args[1] = argOr(r.recvPeer, recv);
    e.args[2] = stepArg(r.sendStep);
    e.args[3] = argOr(r.sendPeer, send);
    e.args[4] = r.channel;
    e.args[5] = r.bytes;
  }
  traceRecord(e);
}

namespace {

void emitOp(int pid, const TraceOp& op, uint64_t t0, uint64_t t1) {
  // One name per operation kind ("AllReduce"), all with the same labels.
  TraceEvent e{};
  e.t0 = t0;
  e.t1 = t1;
  e.pid = pid;
  e.tid = kTraceTidApi;
  e.name = traceName(op.name, "op",
                     {"seq", "count", "bytes", "$type", "$op", "root", "peer", "$algo"});
  e.args[0] = int64_t(op.seq);
  e.args[1] = op.count;
  e.args[2] = op.bytes;
  e.args[3] = op.type ? traceString(op.type) : kTraceNoArg;
  e.args[4] = op.op ? traceString(op.op) : kTraceNoArg;
  e.args[5] = argOr(op.root, op.root >= 0);
  e.args[6] = argOr(op.peer, op.peer >= 0);
  e.args[7] = traceString(op.onDevice ? (std::string(op.algo) + " (GPU)").c_str() : op.algo);
  traceRecord(e);
}

/// What the host callback needs to record a group's GPU operations: copies, so that it does
/// not depend on anything of the call that queued it.
struct StreamOps {
  int pid;
  uint64_t t0;
  std::vector<TraceOp> ops;
};

void streamOpsDone(void* arg) {
  std::unique_ptr<StreamOps> p(static_cast<StreamOps*>(arg));
  const uint64_t t1 = traceNowNs();
  for (const TraceOp& op : p->ops) emitOp(p->pid, op, p->t0, t1);
}

}  // namespace

void traceOp(const CommContext* comm, const TraceOp& op, uint64_t t0, uint64_t t1) {
  if (comm->tracePid >= 0) emitOp(comm->tracePid, op, t0, t1);
}

void traceOpsOnStream(CommContext* comm, LaunchState& launch, cudaStream_t stream,
                      std::vector<TraceOp> ops, uint64_t t0) {
  if (comm->tracePid < 0 || ops.empty()) return;
  auto* p = new StreamOps{comm->tracePid, t0, std::move(ops)};
  if (launchHostFunc(stream, streamOpsDone, p) != tcclSuccess) {
    delete p;  // (launchHostFunc warned) the spans are lost, the operations are not
    return;
  }
  // tcclCommDestroy waits for lastLaunch before it writes the file: let it cover this
  // callback too, so the group's spans are in the file. (Only when tracing: the next launch
  // then also waits for the callback.)
  eventRecord(launch.lastLaunch, stream);
}

void traceProxyStep(const CommContext& comm, int peer, int channel, bool isSend, uint64_t step,
                    int64_t bytes, uint64_t t0) {
  if (comm.tracePid < 0) return;
  const int tid = kTraceTidProxy + 2 * (peer * 256 + channel) + (isSend ? 1 : 0);
  traceTrack(comm.tracePid, tid,
             std::string(isSend ? "proxy send to " : "proxy recv from ") +
                 std::to_string(peer) + " ch " + std::to_string(channel));
  TraceEvent e{};
  e.t0 = t0;
  e.t1 = traceNowNs();
  e.pid = comm.tracePid;
  e.tid = tid;
  e.name = isSend ? names().proxySend : names().proxyRecv;
  for (int64_t& a : e.args) a = kTraceNoArg;
  e.args[0] = int64_t(step);
  e.args[1] = peer;
  e.args[2] = channel;
  e.args[3] = bytes;
  traceRecord(e);
}

}  // namespace tccl
