/*
 * async_job.h: non-blocking communicators -- a call's work on a thread of its own.
 *
 * What it is: with config blocking = 0, every call that may wait for other ranks (init, a
 * group's launch, split, shrink, finalize, revoke) hands its work to a job and returns
 * tcclInProgress at once. The job runs on a new thread, with the caller's CUDA device. While
 * it runs, tcclCommGetAsyncError says tcclInProgress and every other call on the communicator
 * is refused (commCheckReady: tcclInvalidArgument, as NCCL). When it ends,
 * tcclCommGetAsyncError says tcclSuccess, or the job's error -- which is then the
 * communicator's error for good, as in NCCL: a non-blocking communicator whose call failed is
 * to be aborted.
 *
 *   caller                         job thread
 *   tcclAllReduce ->  jobs++, use   ---------> plan, connect, launch (or move host data)
 *   <- tcclInProgress                          error? setError(comm)
 *   tcclCommGetAsyncError: InProgress ...      jobs--, release the use
 *   tcclCommGetAsyncError: Success
 *
 * Blocking communicators run the same work on the caller's thread (jobRun), holding the same
 * use, so tcclCommAbort from another thread waits for them too (comm.h, commAcquire).
 *
 * Invariants: a job holds a use of each of its communicators from before the call returns
 * until its very last touch of them, so freeing one waits for it; `jobs` goes up before the
 * call returns and down before the use ends; a group mixes no blocking and non-blocking
 * communicators.
 *
 * NCCL counterpart: src/group.cc (ncclAsyncJob, ncclAsyncLaunch, the non-blocking group
 * launch), src/init.cc (ncclCommInitRankConfig with blocking = 0), ncclCommGetAsyncError.
 * Added in: stage 7.
 */
#ifndef TCCL_ASYNC_JOB_H_
#define TCCL_ASYNC_JOB_H_

#include <functional>
#include <vector>

#include "core.h"
#include "group.h"

struct tcclComm;

namespace tccl {

/// Runs `work` for `comms`: on a new thread when `nonBlocking` (returns tcclInProgress; the
/// work's error becomes each communicator's), else on the caller's (returns its result). The
/// communicators are in use meanwhile; one that is no longer live refuses the call.
tcclResult_t jobRun(const char* call, const std::vector<tcclComm*>& comms, bool nonBlocking,
                    std::function<tcclResult_t()> work);

/// tcclGroupEnd's launch: in use while it runs, and in a job when its communicators are
/// non-blocking (all or none of them: tcclInvalidArgument otherwise). `comms` is emptied when a
/// job took it.
tcclResult_t groupLaunchInUse(std::vector<CommTasks>& comms);

}  // namespace tccl

#endif  // TCCL_ASYNC_JOB_H_
