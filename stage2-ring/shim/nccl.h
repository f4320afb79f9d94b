/** @file
 * nccl.h: NCCL's public API, as NCCL 2.19.4 declares it, served by tccl.
 *
 * What it is: the header half of the nccl.h shim (the library half is nccl_shim.cc, built as
 * libnccl.so.2). A program written for NCCL 2.19 -- nccl-tests first among them -- compiles
 * against this header unchanged, links -lnccl, and runs on tccl. Every type and constant has
 * the value NCCL gives it, so results, data types and reduction ops cross the shim unchanged.
 *
 * Invariants:
 *  - Only NCCL's names appear here; nothing of tccl.h leaks in (a program that includes this
 *    header sees NCCL 2.19, nothing more). The version claimed is 2.19.4, so programs take
 *    their 2.19 code paths (ncclCommInitRankConfig, ncclConfig_t, ncclAvg, premulsum,
 *    ncclMemAlloc, ncclCommRegister), and skip the later ones (symmetric windows, device API).
 *  - Plain C: the header compiles as C11 and as C++, with or without CUDA's headers. When
 *    <cuda_runtime.h> exists it is included (with the fp16/bf16 headers, as NCCL's header
 *    does, so __CUDA_BF16_TYPES_EXIST__ is defined for programs that test it); otherwise
 *    cudaStream_t is declared the way CUDA declares it.
 *  - Every function has its p-prefixed twin (pncclAllReduce for ncclAllReduce). As in NCCL,
 *    the pnccl* symbol is the implementation and nccl* a weak alias, so a profiling library
 *    can define ncclAllReduce itself and call pncclAllReduce.
 *
 * Written for tccl from the documented NCCL 2.19 API, not copied from NVIDIA's header.
 * NCCL counterpart: src/nccl.h.in (generated as nccl.h), at v2.19.4-1.
 * Added in: stage 2.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if defined(CUDART_VERSION) && CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#define NCCL_SHIM_HAVE_CUDA_RUNTIME_H 1
#endif
#endif
#ifndef NCCL_SHIM_HAVE_CUDA_RUNTIME_H
/* Without CUDA's headers: the stream type exactly as cuda_runtime_api.h declares it, so a
 * later #include <cuda_runtime.h> repeats an identical typedef (legal in C11 and C++). */
typedef struct CUstream_st* cudaStream_t;
#endif

/** @name Version
 *  The version this header claims. ncclGetVersion returns the same code from the library.
 *  @{ */
#define NCCL_MAJOR 2     ///< Major version.
#define NCCL_MINOR 19    ///< Minor version.
#define NCCL_PATCH 4     ///< Patch level.
#define NCCL_SUFFIX ""   ///< Version suffix.
/// Encodes a version the way NCCL does since 2.9: major*10000 + minor*100 + patch.
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
/// 21904.
#define NCCL_VERSION_CODE 21904
/** @} */

#ifdef __cplusplus
extern "C" {
#endif

/* The shim is built with hidden symbols; what this header declares is its exported API. */
#pragma GCC visibility push(default)

/// Opaque handle to a communicator.
typedef struct ncclComm* ncclComm_t;
/// A communicator handle that refers to nothing.
#define NCCL_COMM_NULL NULL

/// Size of an ncclUniqueId.
#define NCCL_UNIQUE_ID_BYTES 128
/// Identifies a communicator while it is created (opaque; made by ncclGetUniqueId).
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];  ///< Opaque bytes: copy them, never interpret them.
} ncclUniqueId;

/// Result of every call. The same values as tcclResult_t (tccl/result.h).
typedef enum {
  ncclSuccess = 0,             ///< The call did what it was asked.
  ncclUnhandledCudaError = 1,  ///< A CUDA call failed.
  ncclSystemError = 2,         ///< A system call failed.
  ncclInternalError = 3,       ///< An invariant of the library did not hold.
  ncclInvalidArgument = 4,     ///< An argument was invalid.
  ncclInvalidUsage = 5,        ///< The call was valid alone but not here, or not implemented.
  ncclRemoteError = 6,         ///< A remote rank failed or the network broke.
  ncclInProgress = 7,          ///< A non-blocking operation is still in progress.
  ncclNumResults = 8
} ncclResult_t;

/** @name Communicator configuration
 *  @{ */
/// Marks an int field of ncclConfig_t that the user left unset.
#define NCCL_CONFIG_UNDEF_INT INT_MIN
/// Marks a pointer field of ncclConfig_t that the user left unset.
#define NCCL_CONFIG_UNDEF_PTR NULL
/// Passed as `color` to ncclCommSplit: this rank joins no new communicator.
#define NCCL_SPLIT_NOCOLOR -1

/// Options for ncclCommInitRankConfig (the 2.18/2.19 layout). Start from NCCL_CONFIG_INITIALIZER.
typedef struct ncclConfig_v21700 {
  size_t size;                ///< sizeof(ncclConfig_t) of the program's header.
  unsigned int magic;         ///< 0xcafebeef: proves the initializer was used.
  unsigned int version;       ///< NCCL_VERSION_CODE of the program's header.
  int blocking;               ///< 1: calls block (default). 0: non-blocking.
  int cgaClusterSize;         ///< CUDA thread-block cluster size (ignored by tccl).
  int minCTAs;                ///< Lower bound on thread blocks (channels) per operation.
  int maxCTAs;                ///< Upper bound on thread blocks (channels) per operation.
  const char* netName;        ///< Network plugin to use (ignored by tccl).
  int splitShare;             ///< ncclCommSplit: share resources with the parent (ignored).
} ncclConfig_t;

/// The value every ncclConfig_t must start from: every option unset.
#define NCCL_CONFIG_INITIALIZER                                                      \
  {                                                                                  \
    sizeof(ncclConfig_t), /* size */                                                 \
        0xcafebeef,       /* magic */                                                \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */              \
        NCCL_CONFIG_UNDEF_INT,                            /* blocking */             \
        NCCL_CONFIG_UNDEF_INT,                            /* cgaClusterSize */       \
        NCCL_CONFIG_UNDEF_INT,                            /* minCTAs */              \
        NCCL_CONFIG_UNDEF_INT,                            /* maxCTAs */              \
        NCCL_CONFIG_UNDEF_PTR,                            /* netName */              \
        NCCL_CONFIG_UNDEF_INT                             /* splitShare */           \
  }
/** @} */

/// Element types. The same values as tcclDataType_t.
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 10
} ncclDataType_t;

/// Reduction operations. The same values as tcclRedOp_t. Values from ncclNumOps up are
/// operations made by ncclRedOpCreatePreMulSum.
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,  ///< Sum divided by the number of ranks.
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff  ///< Keeps the enum 32 bits wide.
} ncclRedOp_t;

/// Where the scalar of a premulsum operation lives. The same values as tcclScalarResidence_t.
typedef enum {
  ncclScalarDevice = 0,         ///< Device memory, read when the operation runs.
  ncclScalarHostImmediate = 1,  ///< Host memory, read once, by ncclRedOpCreatePreMulSum.
} ncclScalarResidence_t;

/** @name Version and errors
 *  @{ */
/// The library's version code (NCCL_VERSION_CODE of the shim: 21904).
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);
/// A short description of a result code. Never NULL.
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);
/// Why the last failing call of this thread failed ("" when none). `comm` may be NULL.
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);
/// The asynchronous error of a communicator (ncclSuccess while it is healthy).
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
/** @} */

/** @name Communicator life cycle
 *  @{ */
/// Makes a new unique id (call on one rank, send it to the others).
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);
/// Creates rank `rank` of `nranks` on the current CUDA device. Inside a group, the creation
/// is deferred to ncclGroupEnd, where all ranks created in the group are set up together.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
/// ncclCommInitRank with options.
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                     int rank, ncclConfig_t* config);
/// Creates `ndev` ranks in this process, rank i on device devlist[i] (NULL: 0..ndev-1).
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
/// Flushes outstanding work before ncclCommDestroy. Not implemented by tccl (ncclInvalidUsage):
/// ncclCommDestroy waits for outstanding work itself.
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);
/// Waits for outstanding work, then frees the communicator.
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);
/// Frees the communicator without waiting; outstanding operations are aborted.
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);
/// Splits a communicator by color. Not implemented by tccl (ncclInvalidUsage).
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);
/// Allocates `size` bytes of GPU memory on the current device (NCCL 2.19; cudaMalloc here).
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
/// Frees memory from ncclMemAlloc.
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);
/// Buffer registration (NCCL 2.19). Not implemented before tccl stage 5 (ncclInvalidUsage).
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);
/// Number of ranks.
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/// CUDA device of this rank (-1 without one).
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
/// This rank's index.
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);
/** @} */

/** @name Custom reductions
 *  @{ */
/// Creates an op computing the sum over ranks of scalar * x (scalar of type `datatype`).
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/// Destroys an op made by ncclRedOpCreatePreMulSum.
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
/** @} */

/** @name Collectives
 *  @{ */
/// Reduces `count` elements across ranks; only the root receives the result.
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);
/// In-place broadcast (the pre-2.2 form of ncclBroadcast).
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
/// Copies `count` elements from the root's sendbuff into every rank's recvbuff.
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);
/// Reduces `count` elements across ranks; every rank receives the result.
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);
/// Reduces nranks*recvcount elements; rank i receives block i of the result.
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);
/// Gathers `sendcount` elements from every rank into every rank's recvbuff, by rank.
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
/** @} */

/** @name Point-to-point
 *  @{ */
/// Sends `count` elements to rank `peer` (matched by a ncclRecv there).
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
/// Receives `count` elements from rank `peer`.
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
/** @} */

/** @name Groups
 *  @{ */
/// Opens a group: calls until the matching ncclGroupEnd are launched together.
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
/// Closes a group; the outermost close creates deferred communicators, then launches.
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);
/** @} */

#pragma GCC visibility pop

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_H_
