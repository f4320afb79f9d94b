/** @file
 * tccl/result.h: the result codes every tccl call returns.
 *
 * Shared by common/ and every stage's public tccl.h, so that a result means the same thing
 * everywhere. The values equal NCCL's ncclResult_t one to one (nccl.h), which lets the nccl.h
 * shim (stage 2) pass results through unchanged.
 *
 * Added in: foundation (common/).
 */
#ifndef TCCL_RESULT_H_
#define TCCL_RESULT_H_

/// Result of every tccl call. Values match NCCL's ncclResult_t.
typedef enum {
  tcclSuccess = 0,             ///< The call did what it was asked.
  tcclUnhandledCudaError = 1,  ///< A CUDA call failed.
  tcclSystemError = 2,         ///< A system call failed (socket, memory, thread...).
  tcclInternalError = 3,       ///< A bug in tccl: an invariant did not hold.
  tcclInvalidArgument = 4,     ///< An argument was invalid (null pointer, bad type, bad peer...).
  tcclInvalidUsage = 5,        ///< The call was valid alone but not here (group misuse, ...).
  tcclRemoteError = 6,         ///< A remote rank failed or closed its connections.
  tcclInProgress = 7,          ///< A non-blocking operation is still in progress.
  tcclNumResults = 8
} tcclResult_t;

#endif  // TCCL_RESULT_H_
