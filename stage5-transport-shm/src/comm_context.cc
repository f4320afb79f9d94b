/*
 * comm_context.cc: the communicator's failure state -- recording an asynchronous error and
 * reading it back.
 *
 * What it is: setError is called from any thread that finds the communicator broken (the
 * proxy, a worker, the group launch); checkAsyncError is how the user's thread learns of it
 * (every group launch, every finished host batch, tcclCommGetAsyncError).
 *
 * Invariants: the first error wins (compare-exchange from tcclSuccess); the abort flag is
 * raised after the error is stored, with release order, so whoever sees the flag also sees
 * the error; the flag never goes back to 0.
 *
 * NCCL counterpart: ncclCommSetAsyncError and ncclCommGetAsyncError (src/init.cc), the abort
 * flag in src/include/comm.h.
 * Added in: stage 1.
 */
#include "comm_context.h"

#include <cstring>

#include "device/work.h"

namespace tccl {

void CommContext::setError(tcclResult_t err) {
  int expected = tcclSuccess;
  if (asyncError.compare_exchange_strong(expected, err)) {
    TCCL_WARN("communicator failed (%s): aborting its operations", tcclGetErrorString(err));
  }
  // Raise the flag every executor's spin loop checks. Only ever 0 -> 1. Release: the error
  // recorded above is visible to whoever sees the flag.
  __atomic_store_n(abortFlag, 1u, __ATOMIC_RELEASE);
  progress.notify();  // host executors asleep on the signal look at the flag
}

tcclResult_t CommContext::checkAsyncError() {
  int err = asyncError.load();
  // A kernel that failed left its status word; the first one names the error. Stage 5: only
  // kernels write the status words, so a communicator without a GPU has nothing to look at;
  // one with a GPU makes one comparison of the whole array first (this runs twice per call,
  // and a scan of 128 words one by one is a visible share of a small call's host time:
  // chapter 5, "Measured").
  static const uint32_t kAllOk[kMaxWorkItems] = {};
  if (err == tcclSuccess && cudaDev >= 0 && memcmp(devStatus, kAllOk, sizeof kAllOk) != 0) {
    for (int i = 0; i < kMaxWorkItems; i++) {
      const auto st = static_cast<WorkStatus>(devStatus[i]);  // a kernel's word (work.h)
      if (st != WorkStatus::kOk) {
        err = st == WorkStatus::kSizeMismatch ? tcclInvalidUsage : tcclRemoteError;
        // (Stage 5: a reduction or a protocol the kernel lacks is tccl's bug, not a peer's.)
        if (st == WorkStatus::kBadOp || st == WorkStatus::kBadProto) err = tcclInternalError;
        break;
      }
    }
  }
  // Acquire: pairs with the release in setError and tcclCommAbort.
  if (err == tcclSuccess && __atomic_load_n(abortFlag, __ATOMIC_ACQUIRE)) {
    err = tcclRemoteError;  // aborted by tcclCommAbort
  }
  if (err != tcclSuccess) {
    TCCL_WARN("communicator is in error state (%s)", tcclGetErrorString(tcclResult_t(err)));
  }
  return tcclResult_t(err);
}

}  // namespace tccl
