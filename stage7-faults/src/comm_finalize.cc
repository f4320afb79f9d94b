/*
 * comm_finalize.cc: ending a communicator's work without freeing it -- tcclCommFinalize and
 * tcclCommRevoke.
 *
 * What it is: the two halves NCCL split teardown into.
 *  - Finalize is the polite end: wait for the last launch, let the proxy put every step of
 *    data on the wire (an operation completes once its data is in the FIFO, not once it has
 *    left), and mark the communicator finalized. Destroy then only frees. Non-blocking
 *    communicators do it in a job: the call returns tcclInProgress.
 *  - Revoke is the impolite one, for after a failure: raise the abort flag so every executor,
 *    kernel and bootstrap wait in progress leaves (their calls return tcclRemoteError), wait
 *    until they have, and keep everything else. The communicator can no longer run anything
 *    (its FIFOs stopped mid-protocol), but its bootstrap still works: tcclCommShrink builds
 *    the next communicator from it (comm_split.cc). tcclCommGetAsyncError says tcclSuccess
 *    once a revoke has finished, unless a real error was recorded first.
 *
 * Invariants: after either, every call but destroy (and, after revoke, shrink) is refused
 * (commCheckReady); revoke is local (each rank decides, as in NCCL: a rank that saw its peer
 * die revokes, the others learn it from their own errors or watchdogs) and may be called
 * while another thread's call or a non-blocking job is stuck (that is what it is for).
 *
 * NCCL counterpart: src/init.cc (ncclCommFinalize, commDestroySync), ncclCommRevoke (2.29).
 * Added in: stage 7.
 */
#include "async_job.h"
#include "comm.h"
#include "cuda_wrap.h"
#include "group.h"

namespace tccl {

tcclResult_t commRevokeNow(tcclComm* comm) {
  comm->revoked.store(true);
  // The flag every executor's and kernel's spin loop checks (0 -> 1 only). Release: the
  // revoked state above is visible to whoever sees the flag. The interrupt ends bootstrap
  // waits in progress; the notify wakes host waiters asleep on the progress signal.
  __atomic_store_n(comm->abortFlag, 1u, __ATOMIC_RELEASE);
  comm->interrupts.fetch_add(1);
  comm->progress.notify();
  // Calls of other threads and other jobs leave (ours is the one use left), then kernels
  // (they read FIFOs and flags: the communicator must stay whole until they have exited).
  commWaitUses(comm, 1);
  if (comm->launch.haveLaunched) TCCL_CHECK(eventSynchronize(comm->launch.lastLaunch));
  TCCL_INFO(kInit, "comm %p rank %d revoked: its operations stopped", (void*)comm, comm->rank);
  return tcclSuccess;
}

}  // namespace tccl

using namespace tccl;

extern "C" tcclResult_t tcclCommFinalize(tcclComm_t comm) {
  TCCL_CHECK(commCheckReady(comm, "tcclCommFinalize"));
  setLogRank(comm->rank);
  if (groupHasTasksFor(comm)) {
    TCCL_WARN("tcclCommFinalize: the communicator has operations queued in an open group; "
              "call tcclGroupEnd first");
    return tcclInvalidUsage;
  }
  return jobRun("tcclCommFinalize", {comm}, !comm->blocking, [comm] {
    tcclResult_t res = commFlush(comm);
    comm->finalized.store(true);  // (also after an error: all that remains is to destroy it)
    return res;
  });
}

extern "C" tcclResult_t tcclCommRevoke(tcclComm_t comm, int revokeFlags) {
  // Not commCheckReady: a revoke is for a communicator whose job or call is stuck.
  TCCL_CHECK(commCheck(comm, "tcclCommRevoke"));
  setLogRank(comm->rank);
  TCCL_ARG_CHECK(revokeFlags == TCCL_REVOKE_DEFAULT,
                 "tcclCommRevoke: revokeFlags 0x%x (only TCCL_REVOKE_DEFAULT exists)",
                 unsigned(revokeFlags));
  if (comm->revoked.load()) return tcclSuccess;  // (once is enough)
  TCCL_ARG_CHECK(comm->abortFlag != nullptr,
                 "tcclCommRevoke: the communicator never finished its init (abort it)");
  return jobRun("tcclCommRevoke", {comm}, !comm->blocking, [comm] { return commRevokeNow(comm); });
}
