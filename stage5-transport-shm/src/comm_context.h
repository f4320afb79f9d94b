/*
 * comm_context.h: what every layer below the communicator may know about it.
 *
 * What it is: the part of a communicator that transports, the proxy, the executors and the
 * step timeline read -- who we are (rank, size, device, peers, bootstrap), how the
 * communicator fails (abort flag, status words, the first asynchronous error), the signals
 * between the user's thread, the proxy and the workers, and the trace process. tcclComm
 * (comm.h) is a CommContext plus what only the top of the library touches: the connectors,
 * the launch state, the registry entry. A file below that top includes this header, never
 * comm.h, so the layers point one way: API -> enqueue -> transports, proxy, executors ->
 * context.
 *
 * Invariants:
 *  - rank, nranks, cudaDev, name, peers and bootstrap are set at init and then only read.
 *  - abortFlag only goes from 0 to 1; once it is raised, every executor leaves its spin loops
 *    and asyncError holds the reason (setError writes the error first, then the flag).
 *  - The handle functions below accept only a live communicator: commCheck first, then
 *    commContext.
 *
 * NCCL counterpart: the fields of struct ncclComm (src/include/comm.h) that transports and
 * the proxy read; ncclPeerInfo (src/include/info.h). NCCL hands them the whole ncclComm.
 * Added in: stage 1.
 */
#ifndef TCCL_COMM_CONTEXT_H_
#define TCCL_COMM_CONTEXT_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "algo_mask.h"
#include "core.h"
#include "device/trace_record.h"
#include "progress_signal.h"
#include "tccl/common/bootstrap.h"

namespace tccl {

class PeerWatch;

/// What each rank tells the others at init (all-gathered over the bootstrap).
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;
  int32_t cudaDev;      // -1: no GPU
  int32_t stage;        // TCCL_STAGE of the library: all ranks must run the same chapter
  uint64_t buffSize;    // TCCL_BUFFSIZE: all ranks must agree (FIFO steps must line up)
  int32_t trace;        // TCCL_TRACE_FILE is set: every rank then helps measure clock offsets
  int64_t p2pLLThreshold;  // TCCL_P2P_LL_THRESHOLD: all ranks must agree (stage 5)
  int64_t p2pMaxChannels;  // TCCL_MAX_P2P_NCHANNELS: all ranks must agree (stage 5)
  char busId[32];
};

struct CommContext {
  // Who we are.
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;       // -1: host buffers only
  std::string name;       // config commName, for logs
  int minChannels = 0;    // config minCTAs / maxCTAs (0: unset); bound the channels per call
  int maxChannels = 0;
  std::unique_ptr<Bootstrap> bootstrap;
  std::vector<PeerInfo> peers;

  // Tuning (algo_mask.h and tuning.h, stage 3): what TCCL_ALGO allows per collective; the
  // cost model's device row (every rank has a GPU); more ranks on this host than cores
  // (host_backend.h).
  AlgoMask algoMask;
  bool tuneDevice = false;
  bool oversubscribed = false;
  // Stage 5: what TCCL_PROTO allows per collective; whether kernels may run LL (every rank's
  // kernels reach every peer over P2P or SHM; set at init by tuningCheckPeers from every
  // rank's answer); the most ranks of this communicator sharing one GPU; the kernel blocks
  // this rank's GPU holds at once (executor_gpu.cu; 0: not measured yet).
  ProtoMask protoMask;
  bool llAvailable = false;
  bool ll128Available = false;  // and LL128: NVLink to every peer, one GPU architecture
  int ranksPerGpu = 1;
  int residentBlocks = 0;

  // Failure state. abortFlag lives in host memory that a kernel can read (mapped when cudaDev
  // >= 0); devStatus is written by kernels, one word per work item, never cleared.
  volatile uint32_t* abortFlag = nullptr;
  uint32_t* devStatus = nullptr;
  std::atomic<int> asyncError{tcclSuccess};

  // Signals between threads: the proxy notifies `progress` whenever it moves a counter; while
  // gpuOpsInFlight > 0 a kernel may be waiting on the proxy, which then polls, never sleeps.
  ProgressSignal progress;
  std::atomic<int> gpuOpsInFlight{0};
  // Peer processes this rank shares FIFOs with (SHM, stage 5; null when none): nobody
  // notifies `progress` for their counters, so host waiters poll longer before they sleep,
  // and ask it whether they still live (host_backend.h). (PeerWatch is incomplete here: a
  // context is destroyed only as part of a tcclComm, in comm.cc, which sees it whole.)
  std::unique_ptr<PeerWatch> peerWatch;

  // Step timeline (trace.h): this rank's trace process (-1: tracing off); for the GPU, the
  // per-block record buffers (mapped; allocated at the first traced launch) and the offset
  // that turns %globaltimer into the host's clock.
  int tracePid = -1;
  TraceBuffer* traceBufs = nullptr;
  int64_t traceGpuOffsetNs = 0;

  /// Records the first asynchronous error and raises the abort flag.
  void setError(tcclResult_t err);
  /// The communicator's error state: the first asynchronous error, a failed kernel's status
  /// word, or an abort.
  tcclResult_t checkAsyncError();
};

/// The handle (comm.cc). A live-communicator registry lets every API call reject a null,
/// garbage or destroyed handle without touching the memory it points to.
bool commIsLive(const tcclComm* comm);
tcclResult_t commCheck(const tcclComm* comm, const char* call);
/// The context of a handle commCheck accepted: what an API file above the communicator reads
/// (rank, size) without seeing the rest of tcclComm.
CommContext& commContext(tcclComm* comm);

}  // namespace tccl

#endif  // TCCL_COMM_CONTEXT_H_
