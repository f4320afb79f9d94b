/*
 * init.cc: the public calls that create, query and destroy communicators.
 *
 * What it is: argument checking around commCreate / commFree (comm.cc), plus tcclCommInitAll
 * (several ranks in one process, one thread per rank while they bootstrap, because each
 * rank's init blocks until every rank has joined) and tcclCommInitFromEnv (torchrun-style).
 *
 * Invariants: every call validates its arguments before touching state and logs why it
 * refused; tcclCommDestroy refuses a communicator that still has operations queued in the
 * calling thread's open group (they would never run).
 *
 * NCCL counterpart: src/init.cc (ncclGetUniqueId, ncclCommInitRank, ncclCommInitAll,
 * ncclCommDestroy, ncclCommAbort, ncclCommCount, ncclCommCuDevice, ncclCommUserRank).
 * Added in: stage 1.
 */
#include <cstring>
#include <thread>
#include <vector>

#include "async_job.h"
#include "comm.h"
#include "cuda_wrap.h"
#include "group.h"
#include "watchdog.h"

using namespace tccl;

namespace tccl {

tcclResult_t commCheckConfig(const char* call, const tcclConfig_t* config) {
  if (config == nullptr) return tcclSuccess;
  TCCL_ARG_CHECK(config->magic == TCCL_CONFIG_MAGIC,
                 "%s: config was not initialised with TCCL_CONFIG_INITIALIZER", call);
  TCCL_ARG_CHECK(config->size == sizeof(tcclConfig_t), "%s: config size %zu, expected %zu", call,
                 config->size, sizeof(tcclConfig_t));
  // Stage 7: non-blocking communicators (async_job.h).
  TCCL_ARG_CHECK(config->blocking == TCCL_CONFIG_UNDEF_INT || config->blocking == 0 ||
                     config->blocking == 1,
                 "%s: blocking = %d (it must be 0 or 1)", call, config->blocking);
  return tcclSuccess;
}

}  // namespace tccl

namespace {


tcclResult_t initRank(tcclComm_t* comm, int nranks, const tcclUniqueId& id, int rank,
                      const tcclConfig_t* config) {
  TCCL_ARG_CHECK(comm != nullptr, "tcclCommInitRank: comm pointer is NULL");
  *comm = nullptr;
  TCCL_ARG_CHECK(nranks >= 1, "tcclCommInitRank: nranks %d must be at least 1", nranks);
  TCCL_ARG_CHECK(rank >= 0 && rank < nranks, "tcclCommInitRank: rank %d out of range [0, %d)",
                 rank, nranks);
  TCCL_CHECK(commCheckConfig("tcclCommInitRankConfig", config));
  if (config == nullptr || config->blocking != 0) {
    return commCreate(id.internal, nranks, rank, config, comm);
  }
  // Stage 7, non-blocking: the communicator is handed out at once (live, so that
  // tcclCommGetAsyncError and tcclCommAbort take it) and a job joins the other ranks.
  tcclComm* c = commAlloc(nranks, rank, config);
  commRegister(c);
  tcclUniqueId idCopy = id;
  tcclResult_t res =
      jobRun("tcclCommInitRankConfig", {c}, true, [c, idCopy] { return commSetup(c, idCopy.internal); });
  if (res != tcclInProgress) {  // (no job: nothing else knows the communicator)
    if (commClaim(c, "tcclCommInitRankConfig") == tcclSuccess) commFree(c, true);
    return res;
  }
  *comm = c;
  return tcclInProgress;
}

}  // namespace

extern "C" tcclResult_t tcclGetUniqueId(tcclUniqueId* uniqueId) {
  TCCL_ARG_CHECK(uniqueId != nullptr, "tcclGetUniqueId: uniqueId is NULL");
  static_assert(sizeof(tcclUniqueId) == kUniqueIdBytes, "unique id size");
  return bootstrapGetUniqueId(uniqueId->internal);
}

extern "C" tcclResult_t tcclCommInitRank(tcclComm_t* comm, int nranks, tcclUniqueId commId,
                                         int rank) {
  return initRank(comm, nranks, commId, rank, nullptr);
}

extern "C" tcclResult_t tcclCommInitRankConfig(tcclComm_t* comm, int nranks, tcclUniqueId commId,
                                               int rank, tcclConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config);
}

extern "C" tcclResult_t tcclCommInitAll(tcclComm_t* comms, int ndev, const int* devlist) {
  TCCL_ARG_CHECK(comms != nullptr, "tcclCommInitAll: comms is NULL");
  TCCL_ARG_CHECK(ndev >= 1, "tcclCommInitAll: ndev %d must be at least 1", ndev);
  const int ngpus = cudaDeviceCount();
  const bool haveGpu = ngpus > 0;
  // Check every device before starting any rank: a rank that failed to start would leave the
  // others waiting for it in the bootstrap until the timeout.
  for (int i = 0; haveGpu && i < ndev; i++) {
    const int dev = devlist ? devlist[i] : i;
    TCCL_ARG_CHECK(dev >= 0 && dev < ngpus,
                   "tcclCommInitAll: rank %d would use CUDA device %d, but there are %d device(s)",
                   i, dev, ngpus);
  }
  tcclUniqueId id;
  TCCL_CHECK(tcclGetUniqueId(&id));
  // Each rank's init blocks until all have joined: one thread per rank.
  std::vector<tcclResult_t> results(ndev, tcclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; i++) {
    threads.emplace_back([&, i] {
      if (haveGpu) {
        results[i] = setCudaDevice(devlist ? devlist[i] : i);
        if (results[i] != tcclSuccess) return;
      }
      results[i] = initRank(&comms[i], ndev, id, i, nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; i++) {
    if (results[i] != tcclSuccess) {
      for (int j = 0; j < ndev; j++) {
        if (comms[j]) commFree(comms[j], true);
        comms[j] = nullptr;
      }
      return results[i];
    }
  }
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommInitFromEnv(tcclComm_t* comm) {
  tcclUniqueId id;
  int rank = -1, nranks = 0;
  TCCL_CHECK(bootstrapIdFromEnv(id.internal, &rank, &nranks));
  return initRank(comm, nranks, id, rank, nullptr);
}

extern "C" tcclResult_t tcclCommDestroy(tcclComm_t comm) {
  if (comm == nullptr) return tcclSuccess;  // as NCCL: destroying NULL is a no-op
  TCCL_CHECK(commCheck(comm, "tcclCommDestroy"));
  setLogRank(comm->rank);
  if (groupHasTasksFor(comm)) {
    TCCL_WARN("tcclCommDestroy: the communicator has operations queued in an open group; "
              "call tcclGroupEnd first");
    return tcclInvalidUsage;
  }
  // Stage 7: claimed first (a second destroy or abort of another thread is refused), then
  // freed once calls of other threads and non-blocking jobs have left it (commFree waits).
  TCCL_CHECK(commClaim(comm, "tcclCommDestroy"));
  return commFree(comm, false);
}

extern "C" tcclResult_t tcclCommAbort(tcclComm_t comm) {
  if (comm == nullptr) return tcclSuccess;
  TCCL_CHECK(commCheck(comm, "tcclCommAbort"));
  // Stage 7: safe while a call of another thread is stuck in the communicator: commFree
  // raises the abort flag, that call leaves with an error, then the communicator is freed.
  TCCL_CHECK(commClaim(comm, "tcclCommAbort"));
  return commFree(comm, true);
}

extern "C" tcclResult_t tcclCommCount(const tcclComm_t comm, int* count) {
  TCCL_CHECK(commCheckIdle(comm, "tcclCommCount"));  // (stage 7)
  TCCL_ARG_CHECK(count != nullptr, "tcclCommCount: count is NULL");
  *count = comm->nranks;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommCuDevice(const tcclComm_t comm, int* device) {
  TCCL_CHECK(commCheckIdle(comm, "tcclCommCuDevice"));  // (stage 7)
  TCCL_ARG_CHECK(device != nullptr, "tcclCommCuDevice: device is NULL");
  *device = comm->cudaDev;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommUserRank(const tcclComm_t comm, int* rank) {
  TCCL_CHECK(commCheckIdle(comm, "tcclCommUserRank"));  // (stage 7)
  TCCL_ARG_CHECK(rank != nullptr, "tcclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommGetAsyncError(tcclComm_t comm, tcclResult_t* asyncError) {
  TCCL_CHECK(commCheck(comm, "tcclCommGetAsyncError"));
  TCCL_ARG_CHECK(asyncError != nullptr, "tcclCommGetAsyncError: asyncError is NULL");
  // Stage 7: a non-blocking job still running is tcclInProgress; a revoke the user asked for
  // is no error in itself (only an error recorded before or besides it is).
  if (!commAcquire(comm)) return commCheck(comm, "tcclCommGetAsyncError");
  if (comm->jobs.load() > 0) {
    *asyncError = tcclInProgress;
  } else if (comm->revoked.load()) {
    *asyncError = tcclResult_t(comm->asyncError.load());
  } else {
    *asyncError = comm->checkAsyncError();
  }
  commRelease(comm);
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommDumpFlightRecorder(const tcclComm_t comm, const char* path) {
  TCCL_CHECK(commCheck(comm, "tcclCommDumpFlightRecorder"));
  if (path == nullptr && getEnvString("TCCL_FR_DUMP").empty()) {
    TCCL_WARN("tcclCommDumpFlightRecorder: no path given and TCCL_FR_DUMP is not set");
    return tcclInvalidArgument;
  }
  return frDump(comm, *comm->fr, path);  // (watchdog.cc, stage 7)
}
