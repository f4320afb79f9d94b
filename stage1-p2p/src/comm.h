/*
 * comm.h: the communicator.
 *
 * What it is: one rank's view of a group of ranks, as ncclComm. It owns the bootstrap, what
 * every peer told us about itself (PeerInfo), the connectors (created lazily per peer, channel
 * and direction), the proxy thread that progresses network connectors, the host worker pool,
 * and the state the GPU path needs (mapped abort flag and status words, the last launch's
 * event).
 *
 * Invariants:
 *  - A communicator is used by one thread at a time (as in NCCL); the proxy and the workers
 *    touch only the connectors and the flags, never the plan.
 *  - abortFlag only goes from 0 to 1; once raised every executor leaves its spin loops and
 *    asyncError holds the reason.
 *  - Operations on one communicator run in issue order: GPU launches are chained through
 *    lastLaunch, host operations wait for it first.
 *
 * NCCL counterpart: src/include/comm.h (struct ncclComm, ncclPeerInfo in src/include/info.h).
 * Added in: stage 1.
 */
#ifndef TCCL_COMM_H_
#define TCCL_COMM_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core.h"
#include "cuda_wrap.h"
#include "device/trace_record.h"
#include "progress_signal.h"
#include "tccl/common/bootstrap.h"
#include "transport.h"

namespace tccl {

class Proxy;
class WorkerPool;

/// What each rank tells the others at init (all-gathered over the bootstrap).
struct PeerInfo {
  int32_t rank;
  int32_t pid;
  uint64_t hostHash;
  int32_t cudaDev;      // -1: no GPU
  int32_t stage;        // TCCL_STAGE of the library: all ranks must run the same chapter
  uint64_t buffSize;    // TCCL_BUFFSIZE: all ranks must agree (FIFO steps must line up)
  int32_t trace;        // TCCL_TRACE_FILE is set: every rank then helps measure clock offsets
  char busId[32];
};

/// Key of a connector: (peer, channel, direction).
struct ConnKey {
  int peer;
  int channel;
  bool isSend;
  bool operator<(const ConnKey& o) const {
    return std::tie(peer, channel, isSend) < std::tie(o.peer, o.channel, o.isSend);
  }
};

constexpr uint64_t kCommMagic = 0x7cc1c0330cc1c033ull;

}  // namespace tccl

struct tcclComm {
  uint64_t magic = tccl::kCommMagic;
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;       // -1: host buffers only
  std::string name;       // config commName, for logs
  int minChannels = 0;    // config minCTAs / maxCTAs (0: unset); bound the channels per call
  int maxChannels = 0;
  std::unique_ptr<tccl::Bootstrap> bootstrap;
  std::vector<tccl::PeerInfo> peers;

  // Connectors, created on first use and kept for the communicator's life.
  std::map<tccl::ConnKey, std::unique_ptr<tccl::Connector>> connectors;

  // Failure state. abortFlag lives in host memory that a kernel can read (mapped when cudaDev
  // >= 0); devStatus is written by kernels, one word per work item, never cleared.
  volatile uint32_t* abortFlag = nullptr;
  uint32_t* devStatus = nullptr;
  std::atomic<int> asyncError{tcclSuccess};

  tccl::ProgressSignal progress;   // the proxy notifies it whenever it moves a counter
  std::unique_ptr<tccl::Proxy> proxy;
  std::unique_ptr<tccl::WorkerPool> workers;

  // GPU launches: each waits for the previous one so operations stay in issue order even when
  // the user switches streams.
  tccl::CudaEvent* lastLaunch = nullptr;
  bool haveLaunched = false;
  std::atomic<int> gpuOpsInFlight{0};  // the proxy polls instead of sleeping while > 0

  // Operations issued so far, in issue order (their sequence numbers in traces).
  uint64_t opCount = 0;
  // Step timeline (trace.h): this rank's trace process (-1: tracing off); for the GPU, the
  // per-block record buffers (mapped; allocated at the first traced launch) and the offset
  // that turns %globaltimer into the host's clock.
  int tracePid = -1;
  tccl::TraceBuffer* traceBufs = nullptr;
  int64_t traceGpuOffsetNs = 0;

  tccl::Connector* getConnector(int peer, int channel, bool isSend);
  /// Starts the proxy thread on first use (a communicator that never talks over the network,
  /// e.g. one rank, never has one).
  tcclResult_t ensureProxy();
  /// Records the first asynchronous error and raises the abort flag.
  void setError(tcclResult_t err);
  tcclResult_t checkAsyncError();
};

namespace tccl {

/// Creates and tears down communicators (comm.cc).
tcclResult_t commCreate(const void* id, int nranks, int rank, const tcclConfig_t* config,
                        tcclComm** out);
tcclResult_t commFree(tcclComm* comm, bool abort);

/// Live-communicator registry: lets every API call reject a null, garbage or destroyed handle
/// without touching the memory it points to.
bool commIsLive(const tcclComm* comm);
tcclResult_t commCheck(const tcclComm* comm, const char* call);

}  // namespace tccl

#endif  // TCCL_COMM_H_
