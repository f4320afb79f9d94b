/*
 * trace.h: the library's side of the step timeline (TCCL_TRACE_FILE).
 *
 * What it is: the hooks that turn what the library does into trace events (common/trace.h
 * keeps and writes them). Who records what:
 *
 *   lane "api" (tid 0)          each operation of a group: name, sequence number, count, type,
 *                               op, root or peer, algorithm (traceOp, from group_launch.cc)
 *   lanes "fiber i" / "worker i" / "GPU block i"
 *                               the primitive calls and FIFO steps of work item i
 *                               (device/trace_record.h records, emitted by traceRecordEmit)
 *   lanes "proxy send to p ch c" / "proxy recv from p ch c"
 *                               each step the proxy put on or took off the network
 *                               (traceProxyStep, from the socket transport)
 *
 * Each rank of each communicator is one trace process (CommContext::tracePid, -1 when tracing is
 * off). At init every rank whose host differs from rank 0's measures its clock offset to rank
 * 0 over the bootstrap (a few ping-pongs, the fastest kept), so tools/trace can line up hosts.
 *
 * Invariants: with tracing off (tracePid < 0) every hook returns at its first test; a hook
 * never fails an operation.
 *
 * NCCL counterpart: src/misc/profiler.cc and the profiler plugin hooks (ncclProfilerStartColl,
 * proxy step events).
 * Added in: stage 1 (observability).
 */
#ifndef TCCL_TRACE_H_
#define TCCL_TRACE_H_

#include <cstdint>
#include <vector>

#include "core.h"
#include "device/trace_record.h"
#include "tccl/common/trace.h"


namespace tccl {

struct CommContext;
struct LaunchState;

/// Lanes (trace tids) of one rank.
constexpr int kTraceTidApi = 0;
constexpr int kTraceTidFiber = 1;        // + item index
constexpr int kTraceTidWorker = 200;     // + item index
constexpr int kTraceTidGpuBlock = 400;   // + block index
constexpr int kTraceTidProxy = 1000;     // + 2 * (peer * 256 + channel) + isSend

/// Where a host executor's records go.
struct TraceLane {
  int pid;
  int tid;
};

/// Sets up tracing for a new communicator once its peers are known: its trace process, and
/// the clock offset to rank 0 (every rank takes part when any rank traces).
tcclResult_t traceCommInit(CommContext* comm);
/// Writes the trace file (tcclCommDestroy).
void traceCommDestroy(CommContext* comm);

/// Names lane `tid` of this communicator's rank.
void traceLane(const CommContext* comm, int tid, const char* what, int index);

/// GPU: allocates the per-block record buffers of the communicator (mapped host memory, at
/// its first traced launch).
tcclResult_t traceAllocGpu(CommContext* comm);

/// GPU: converts the records of the kernel that just finished (its completion callback).
void traceCollectGpu(CommContext* comm);

/// Emits one executor record on lane (pid, tid); `offsetNs` converts its clock to the host's.
void traceRecordEmit(int pid, int tid, const TraceRecord& r, int64_t offsetNs);

/// One API operation, for the "api" lane.
struct TraceOp {
  const char* name;  // "Send", "AllReduce", ...
  uint64_t seq;      // the communicator's operation count
  int64_t count;     // elements (bytes for send/recv)
  int64_t bytes;
  const char* type;  // element type name, or null
  const char* op;    // reduction name, or null
  int root;          // -1: none
  int peer;          // -1: none
  const char* algo;  // "p2p", "ring", ...
  bool onDevice;     // a GPU operation (see traceOpsOnStream)
};
void traceOp(const CommContext* comm, const TraceOp& op, uint64_t t0, uint64_t t1);
/// GPU operations of one group, called at t0: their spans end when `stream` has passed the
/// group's last kernel (a host callback queued behind it). Names in `ops` must be literals.
void traceOpsOnStream(CommContext* comm, LaunchState& launch, cudaStream_t stream,
                      std::vector<TraceOp> ops, uint64_t t0);

/// One step the proxy moved over the connector to `peer` on `channel` (a send or a receive),
/// from t0 until now.
void traceProxyStep(const CommContext& comm, int peer, int channel, bool isSend, uint64_t step,
                    int64_t bytes, uint64_t t0);

}  // namespace tccl

#endif  // TCCL_TRACE_H_
