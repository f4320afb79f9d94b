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

#include "comm.h"
#include "cuda_wrap.h"
#include "group.h"

using namespace tccl;

namespace {

tcclResult_t checkConfig(const tcclConfig_t* config) {
  if (config == nullptr) return tcclSuccess;
  TCCL_ARG_CHECK(config->magic == TCCL_CONFIG_MAGIC,
                 "tcclCommInitRankConfig: config was not initialised with TCCL_CONFIG_INITIALIZER");
  TCCL_ARG_CHECK(config->size == sizeof(tcclConfig_t),
                 "tcclCommInitRankConfig: config size %zu, expected %zu", config->size,
                 sizeof(tcclConfig_t));
  if (config->blocking != TCCL_CONFIG_UNDEF_INT && config->blocking != 1) {
    TCCL_WARN("tcclCommInitRankConfig: non-blocking communicators (blocking = 0) arrive in "
              "stage 7; this library is stage %d", TCCL_STAGE);
    return tcclInvalidUsage;
  }
  return tcclSuccess;
}

tcclResult_t initRank(tcclComm_t* comm, int nranks, const tcclUniqueId& id, int rank,
                      const tcclConfig_t* config) {
  TCCL_ARG_CHECK(comm != nullptr, "tcclCommInitRank: comm pointer is NULL");
  *comm = nullptr;
  TCCL_ARG_CHECK(nranks >= 1, "tcclCommInitRank: nranks %d must be at least 1", nranks);
  TCCL_ARG_CHECK(rank >= 0 && rank < nranks, "tcclCommInitRank: rank %d out of range [0, %d)",
                 rank, nranks);
  TCCL_CHECK(checkConfig(config));
  return commCreate(id.internal, nranks, rank, config, comm);
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
  return commFree(comm, false);
}

extern "C" tcclResult_t tcclCommAbort(tcclComm_t comm) {
  if (comm == nullptr) return tcclSuccess;
  TCCL_CHECK(commCheck(comm, "tcclCommAbort"));
  return commFree(comm, true);
}

extern "C" tcclResult_t tcclCommCount(const tcclComm_t comm, int* count) {
  TCCL_CHECK(commCheck(comm, "tcclCommCount"));
  TCCL_ARG_CHECK(count != nullptr, "tcclCommCount: count is NULL");
  *count = comm->nranks;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommCuDevice(const tcclComm_t comm, int* device) {
  TCCL_CHECK(commCheck(comm, "tcclCommCuDevice"));
  TCCL_ARG_CHECK(device != nullptr, "tcclCommCuDevice: device is NULL");
  *device = comm->cudaDev;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommUserRank(const tcclComm_t comm, int* rank) {
  TCCL_CHECK(commCheck(comm, "tcclCommUserRank"));
  TCCL_ARG_CHECK(rank != nullptr, "tcclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return tcclSuccess;
}

extern "C" tcclResult_t tcclCommGetAsyncError(tcclComm_t comm, tcclResult_t* asyncError) {
  TCCL_CHECK(commCheck(comm, "tcclCommGetAsyncError"));
  TCCL_ARG_CHECK(asyncError != nullptr, "tcclCommGetAsyncError: asyncError is NULL");
  *asyncError = comm->checkAsyncError();
  return tcclSuccess;
}
