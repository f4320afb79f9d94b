/*
 * misc.cc: version and error strings.
 *
 * NCCL counterpart: src/init.cc (ncclGetVersion, ncclGetErrorString, ncclGetLastError).
 * Added in: stage 1.
 */
#include "core.h"

#include <mutex>

#include "comm_context.h"

extern "C" tcclResult_t tcclGetVersion(int* version) {
  TCCL_ARG_CHECK(version != nullptr, "tcclGetVersion: version is NULL");
  *version = TCCL_VERSION_CODE;
  return tcclSuccess;
}

extern "C" const char* tcclGetErrorString(tcclResult_t result) {
  switch (result) {
    case tcclSuccess: return "no error";
    case tcclUnhandledCudaError: return "unhandled cuda error (run with TCCL_DEBUG=INFO for details)";
    case tcclSystemError: return "unhandled system error (run with TCCL_DEBUG=INFO for details)";
    case tcclInternalError: return "internal error - please report this issue to the tccl developers";
    case tcclInvalidArgument: return "invalid argument (run with TCCL_DEBUG=WARN for details)";
    case tcclInvalidUsage: return "invalid usage (run with TCCL_DEBUG=WARN for details)";
    case tcclRemoteError: return "remote process exited or there was a network error";
    case tcclInProgress: return "TCCL operation in progress";
    default: return "unknown result code";
  }
}

extern "C" const char* tcclGetLastError(tcclComm_t comm) {
  // Stage 7: a communicator aborted with a reason (the watchdog's) gives that reason to every
  // thread: the warning was logged on the watchdog's thread, not the caller's.
  if (comm != nullptr && tccl::commIsLive(comm)) {
    tccl::CommContext& ctx = tccl::commContext(comm);
    std::lock_guard<std::mutex> lock(ctx.errorMutex);
    if (!ctx.errorReason.empty()) return ctx.errorReason.c_str();
  }
  // Per thread, as NCCL's: the last warning this thread logged.
  return tccl::lastError();
}
