/*
 * comm.h: the communicator.
 *
 * What it is: one rank's view of a group of ranks, as ncclComm: its context (comm_context.h:
 * rank, peers, bootstrap, failure state, signals), the connectors (created lazily per peer,
 * channel and direction) and the launch state (launch_state.h: the proxy thread, the host
 * worker pool, the chain of GPU launches). Only the top of the library includes this header:
 * the files that create, free and launch on a communicator. Transports, the proxy, the
 * executors and the trace see the context, never tcclComm.
 *
 * Invariants:
 *  - A communicator is used by one thread at a time (as in NCCL); the proxy and the workers
 *    touch only the connectors and the context's flags and signals, never the plan.
 *  - Operations on one communicator run in issue order: GPU launches are chained through
 *    launch.lastLaunch, host operations wait for it first.
 *
 * NCCL counterpart: src/include/comm.h (struct ncclComm).
 * Added in: stage 1.
 */
#ifndef TCCL_COMM_H_
#define TCCL_COMM_H_

#include "comm_context.h"
#include "launch_state.h"
#include "transport.h"

namespace tccl {

/// A premulsum op made by tcclRedOpCreatePreMulSum (red_op.cc, stage 2).
struct UserRedOp {
  bool live = false;
  tcclDataType_t dtype = tcclFloat32;
  uint64_t scalarBits = 0;            // tcclScalarHostImmediate: the value, read at creation
  const void* scalarPtr = nullptr;    // tcclScalarDevice: read when the operation runs
};

class FlightRecorder;  // stage 7
struct PlanCache;
class Watchdog;        // stage 7
constexpr uint64_t kCommMagic = 0x7cc1c0330cc1c033ull;
}  // namespace tccl

struct tcclComm : tccl::CommContext {
  uint64_t magic = tccl::kCommMagic;
  tccl::ConnectorTable connectors;  // kept for the communicator's life
  tccl::LaunchState launch;
  std::vector<tccl::UserRedOp> userRedOps;  // tcclRedOpCreatePreMulSum's ops (stage 2)
  // Stage 5: the last host collective's plan, reused by the next call of its shape
  // (plan_cache.cc); null until then. Its deleter comes with it from plan_cache.cc, which alone
  // sees a PlanCache whole.
  std::unique_ptr<tccl::PlanCache, void (*)(tccl::PlanCache*)> planCache{nullptr, nullptr};
  // Stage 7: the last operations (flight_recorder.h) and the thread that watches them
  // (watchdog.h); both exist for the communicator's whole life.
  std::unique_ptr<tccl::FlightRecorder> fr;
  std::unique_ptr<tccl::Watchdog> watchdog;
  // Stage 7: the communicator's life beyond create and destroy (async_job.h, comm_finalize.cc,
  // comm_split.cc). `users` counts the calls and jobs inside the communicator now (commAcquire):
  // tcclCommAbort and tcclCommDestroy free nothing before it is 0. `jobs` counts non-blocking
  // jobs not finished: while > 0, tcclCommGetAsyncError says tcclInProgress.
  tcclConfig_t config;  // as given (TCCL_CONFIG_INITIALIZER when none); children inherit it
  bool blocking = true;  // config blocking = 0: calls hand their work to a job and return
  std::atomic<int> users{0};
  std::atomic<int> jobs{0};
  // A blocking group is running on some thread (async_job.cc): a second thread's call while
  // it is set breaks NCCL's rule (one thread at a time per communicator) and is refused.
  std::atomic<bool> inCall{false};
  std::atomic<bool> finalized{false};  // tcclCommFinalize done: only destroy remains
  uint32_t splits = 0;  // tcclCommSplit/Shrink calls so far (their bootstrap tags)
};

namespace tccl {

/// Creates and tears down communicators (comm.cc).
tcclResult_t commCreate(const void* id, int nranks, int rank, const tcclConfig_t* config,
                        tcclComm** out);
tcclResult_t commFree(tcclComm* comm, bool abort);

/// Stage 7: a tcclConfig_t checked as tcclCommInitRankConfig checks it (NULL is fine), for
/// every call that takes one (init.cc; split and shrink too).
tcclResult_t commCheckConfig(const char* call, const tcclConfig_t* config);
/// Stage 7: commCheck, and no non-blocking job of the communicator is still running
/// (tcclInvalidArgument, as NCCL's ncclCommEnsureReady).
tcclResult_t commCheckIdle(const tcclComm* comm, const char* call);
/// Stage 7: unregisters a live communicator for the caller, who then frees it; fails when it
/// is not live (two threads destroying one communicator: one of them is told so).
tcclResult_t commClaim(tcclComm* comm, const char* call);
/// Stage 7: marks a live communicator in use (false when it is not live: destroyed, aborted,
/// or never made); commRelease ends the use. Freeing waits for every use to end, so a call
/// inside a communicator never has it freed under its feet (tcclCommAbort from another thread).
bool commAcquire(tcclComm* comm);
void commRelease(tcclComm* comm);
/// Stage 7: commCreate in two halves, for calls that must hand out the communicator before it
/// works (non-blocking init, split): commAlloc makes the object (rank and size may be set
/// later), commSetup joins the other ranks and starts the watchdog.
tcclComm* commAlloc(int nranks, int rank, const tcclConfig_t* config);
tcclResult_t commSetup(tcclComm* comm, const void* id);
/// Stage 7: registers a communicator as live (commCreate does it once the communicator works;
/// a non-blocking one is live while its job sets it up).
void commRegister(tcclComm* comm);
/// Stage 7: waits for the last launch and lets the proxy put every step on the wire: what
/// tcclCommFinalize does, and tcclCommDestroy when nobody did.
tcclResult_t commFlush(tcclComm* comm);
/// Stage 7: waits until at most `keep` uses of the communicator are left (the caller's own):
/// calls of other threads and jobs leave it (after an abort at once: every wait checks the
/// flag; otherwise bounded by the watchdog).
void commWaitUses(tcclComm* comm, int keep);
/// Stage 7: tcclCommRevoke's work (comm_finalize.cc): stops every operation in flight and
/// waits until it has; the caller holds one use of the communicator.
tcclResult_t commRevokeNow(tcclComm* comm);

}  // namespace tccl

#endif  // TCCL_COMM_H_
