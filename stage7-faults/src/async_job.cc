/*
 * async_job.cc: non-blocking communicators' jobs. See async_job.h.
 *
 * Added in: stage 7.
 */
#include "async_job.h"

#include <memory>
#include <string>
#include <system_error>
#include <thread>

#include "comm.h"
#include "cuda_wrap.h"

namespace tccl {

namespace {

/// Marks every communicator in use; on failure releases what it took and says which was gone.
tcclResult_t acquireAll(const char* call, const std::vector<tcclComm*>& comms) {
  for (size_t i = 0; i < comms.size(); i++) {
    if (!commAcquire(comms[i])) {
      for (size_t j = 0; j < i; j++) commRelease(comms[j]);
      TCCL_WARN("%s: communicator %p was destroyed or aborted before the call could use it",
                call, (void*)comms[i]);
      return tcclInvalidArgument;
    }
  }
  return tcclSuccess;
}

void releaseAll(const std::vector<tcclComm*>& comms) {
  for (tcclComm* c : comms) commRelease(c);
}

}  // namespace

tcclResult_t jobRun(const char* call, const std::vector<tcclComm*>& comms, bool nonBlocking,
                    std::function<tcclResult_t()> work) {
  TCCL_CHECK(acquireAll(call, comms));
  if (!nonBlocking) {
    tcclResult_t res = work();
    releaseAll(comms);
    return res;
  }
  // >>> exercise 7.3: the non-blocking job's thread
  // Counted before the call returns: the caller's next tcclCommGetAsyncError must already
  // see the job.
  for (tcclComm* c : comms) c->jobs.fetch_add(1);
  const int dev = currentCudaDevice();
  const int logRank = comms.empty() ? -1 : comms[0]->rank;
  try {
    std::thread([comms, dev, logRank, work = std::move(work)] {
      setLogRank(logRank);
      tcclResult_t res = dev >= 0 ? setCudaDevice(dev) : tcclSuccess;
      if (res == tcclSuccess) res = work();
      // The reason is this thread's last warning: keep it with each communicator, where
      // tcclGetLastError(comm) finds it (the caller's thread never saw it).
      const std::string why = res == tcclSuccess ? "" : lastError();
      for (tcclComm* c : comms) {
        if (res != tcclSuccess) c->setError(res, why.c_str());  // (not after a revoke)
        // Order matters: the error is recorded before the job stops counting, so whoever
        // sees jobs == 0 sees it; the release is the last touch (the communicator may be
        // freed right after it).
        c->jobs.fetch_sub(1);
        commRelease(c);
      }
    }).detach();
  } catch (const std::system_error& e) {
    for (tcclComm* c : comms) c->jobs.fetch_sub(1);
    releaseAll(comms);
    TCCL_WARN("%s: cannot start the non-blocking job's thread: %s", call, e.what());
    return tcclSystemError;
  }
  return tcclInProgress;
  // <<< exercise 7.3
}

tcclResult_t groupLaunchInUse(std::vector<CommTasks>& comms) {
  int nonBlocking = 0;
  for (const CommTasks& t : comms) nonBlocking += t.comm->blocking ? 0 : 1;
  TCCL_ARG_CHECK(nonBlocking == 0 || nonBlocking == int(comms.size()),
                 "tcclGroupEnd: the group mixes blocking and non-blocking communicators (%d of "
                 "%zu are non-blocking): put them in groups of their own", nonBlocking,
                 comms.size());
  if (nonBlocking == 0) {
    // (jobRun's work, without its list and std::function: this runs on every call, and an
    // 8-byte all-reduce's host path is a few hundred nanoseconds.)
    size_t got = 0;
    while (got < comms.size() && commAcquire(comms[got].comm)) got++;
    if (got < comms.size()) {
      for (size_t i = 0; i < got; i++) commRelease(comms[i].comm);
      TCCL_WARN("tcclGroupEnd: communicator %p was destroyed or aborted while the group was "
                "open", (void*)comms[got].comm);
      return tcclInvalidArgument;
    }
    // One thread at a time per communicator (NCCL's rule, which NCCL does not check: two
    // threads' calls interleave their steps on the same connections and corrupt or hang).
    size_t entered = 0;
    while (entered < comms.size() && !comms[entered].comm->inCall.exchange(true)) entered++;
    tcclResult_t res = tcclSuccess;
    if (entered < comms.size()) {
      const tcclComm* c = comms[entered].comm;
      TCCL_WARN("rank %d: communicator %p is already running a call of another thread: a "
                "communicator takes one thread at a time (its operations would race on the "
                "same connections); this call is refused", c->rank, (const void*)c);
      res = tcclInvalidUsage;
    } else {
      res = groupLaunch(comms);
    }
    for (size_t i = 0; i < entered; i++) comms[i].comm->inCall.store(false);
    for (CommTasks& t : comms) commRelease(t.comm);
    return res;
  }
  // The job owns the group's task lists from here (the caller's thread may open the next
  // group at once).
  std::vector<tcclComm*> list;
  for (const CommTasks& t : comms) list.push_back(t.comm);
  auto owned = std::make_shared<std::vector<CommTasks>>(std::move(comms));
  comms.clear();
  return jobRun("tcclGroupEnd", list, true, [owned] { return groupLaunch(*owned); });
}

}  // namespace tccl
