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

struct PlanCache;
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
};

namespace tccl {

/// Creates and tears down communicators (comm.cc).
tcclResult_t commCreate(const void* id, int nranks, int rank, const tcclConfig_t* config,
                        tcclComm** out);
tcclResult_t commFree(tcclComm* comm, bool abort);

}  // namespace tccl

#endif  // TCCL_COMM_H_
