/** @file
 * tccl.h: the public API of tccl, stage 2 (stage 1's grouped send/recv and P2P patterns, plus
 * the ring collectives: AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, and the
 * premulsum reduction).
 *
 * What it is: nccl.h with the prefix `tccl`. Every function, type and constant mirrors its NCCL
 * namesake one to one (tcclSend is ncclSend), so a learner can read NCCL programs and tccl
 * programs side by side. The P2P patterns (tcclSendRecv, tcclNeighborExchange) are tccl
 * extensions written on top of grouped send/recv; tcclAlltoAll, tcclGather and tcclScatter match
 * the calls NCCL 2.28 added.
 *
 * Buffers may live in host memory (any build, any machine) or in CUDA device memory (when the
 * communicator has a GPU). Device-buffer calls are enqueued on `stream` and return before the
 * data moves, as in NCCL. Host-buffer calls first wait for `stream` (when a GPU exists), then
 * complete before they return.
 *
 * NCCL counterpart: src/nccl.h.in.
 * Added in: stage 1; collectives and custom reductions in stage 2.
 */
#ifndef TCCL_H_
#define TCCL_H_

#include <stddef.h>
#include <stdint.h>

#include "tccl/result.h"

/* The stream type. Identical to CUDA's own typedef, so this header needs no CUDA headers and a
 * cudaStream_t from cuda_runtime.h is accepted as it is (repeating a typedef is legal). */
/// A CUDA stream (identical to cuda_runtime.h's cudaStream_t).
typedef struct CUstream_st* cudaStream_t;

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden symbols; everything declared here is its exported API. */
#pragma GCC visibility push(default)

/** @name Version
 *  @{ */
#define TCCL_MAJOR 0    ///< Major version.
#define TCCL_MINOR 1    ///< Minor version.
#define TCCL_PATCH 0    ///< Patch level.
#define TCCL_SUFFIX ""  ///< Version suffix (empty for releases).
/// Encodes a version the way NCCL does (for NCCL >= 2.9): major*10000 + minor*100 + patch.
#define TCCL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
/// The version of this header, as tcclGetVersion reports the library's.
#define TCCL_VERSION_CODE TCCL_VERSION(TCCL_MAJOR, TCCL_MINOR, TCCL_PATCH)
/// The stage this header belongs to (1 = p2p, 2 = ring, ...).
#define TCCL_STAGE 7
/** @} */

/// Opaque handle to a communicator: one rank's view of a group of ranks.
typedef struct tcclComm* tcclComm_t;

/// Size of a tcclUniqueId in bytes (as NCCL_UNIQUE_ID_BYTES).
#define TCCL_UNIQUE_ID_BYTES 128
/// Identifies one communicator while it is being created: rank 0's bootstrap address plus a
/// random secret. Create it once (tcclGetUniqueId) and give it to every rank.
typedef struct {
  char internal[TCCL_UNIQUE_ID_BYTES];  ///< Opaque: never interpret or modify.
} tcclUniqueId;

/// Communicator configuration, as ncclConfig_t. Fill with TCCL_CONFIG_INITIALIZER first.
typedef struct tcclConfig_v1 {
  size_t size;           ///< sizeof(tcclConfig_t); set by the initializer.
  unsigned int magic;    ///< Set by the initializer; a config without it is rejected.
  unsigned int version;  ///< TCCL_VERSION_CODE at build time; set by the initializer.
  int blocking;          ///< 1: calls block (the default). 0 (stage 7): calls return tcclInProgress.
  int minCTAs;           ///< Lower bound on channels (thread blocks) per operation.
  int maxCTAs;           ///< Upper bound on channels (thread blocks) per operation.
  const char* commName;  ///< A name shown in logs; may be NULL.
} tcclConfig_t;

/// Marks a config field the user left unset.
#define TCCL_CONFIG_UNDEF_INT (-2147483647 - 1)
/// Proves a config was made with TCCL_CONFIG_INITIALIZER.
#define TCCL_CONFIG_MAGIC 0x7cc1c0f1u
/// Initial value of every tcclConfig_t: all fields unset.
#define TCCL_CONFIG_INITIALIZER                                                       \
  {                                                                                   \
    sizeof(tcclConfig_t), TCCL_CONFIG_MAGIC, TCCL_VERSION_CODE, TCCL_CONFIG_UNDEF_INT, \
        TCCL_CONFIG_UNDEF_INT, TCCL_CONFIG_UNDEF_INT, NULL                            \
  }

/// Element types. Values equal NCCL's ncclDataType_t.
typedef enum {
  tcclInt8 = 0,
  tcclChar = 0,
  tcclUint8 = 1,
  tcclInt32 = 2,
  tcclInt = 2,
  tcclUint32 = 3,
  tcclInt64 = 4,
  tcclUint64 = 5,
  tcclFloat16 = 6,
  tcclHalf = 6,
  tcclFloat32 = 7,
  tcclFloat = 7,
  tcclFloat64 = 8,
  tcclDouble = 8,
  tcclBfloat16 = 9,
  tcclNumTypes = 10
} tcclDataType_t;

/// Reduction operations. Values equal NCCL's ncclRedOp_t. tcclAvg divides the sum by the
/// number of ranks (for integers, with C truncation after summing). Values from tcclNumOps up
/// are custom operations made by tcclRedOpCreatePreMulSum.
typedef enum {
  tcclSum = 0,
  tcclProd = 1,
  tcclMax = 2,
  tcclMin = 3,
  tcclAvg = 4,
  tcclNumOps = 5,
  tcclMaxRedOp = 0x7fffffff
} tcclRedOp_t;

/** @name Version and errors
 *  @{ */
/// Writes TCCL_VERSION_CODE of the library (not of the header) to *version.
tcclResult_t tcclGetVersion(int* version);
/// A short human-readable name for a result code. Never NULL.
const char* tcclGetErrorString(tcclResult_t result);
/// The last warning this thread logged (why the last call failed), or "" when none.
/// `comm` may be NULL.
const char* tcclGetLastError(tcclComm_t comm);
/// The asynchronous error state of a communicator: tcclSuccess, or the error that broke it
/// (for example tcclRemoteError after a peer died). Stage 7, non-blocking communicators:
/// tcclInProgress while the last call's work is still going on.
tcclResult_t tcclCommGetAsyncError(tcclComm_t comm, tcclResult_t* asyncError);
/** @} */

/** @name Communicator life cycle
 *  @{ */
/// Creates a new unique id. Call it on one rank (rank 0) and send the id to the others (for
/// example with MPI_Bcast). The calling process then serves the bootstrap of one communicator.
tcclResult_t tcclGetUniqueId(tcclUniqueId* uniqueId);
/// Creates rank `rank` of a communicator of `nranks` ranks. Blocks until every rank has joined
/// (or TCCL_BOOTSTRAP_TIMEOUT seconds pass). Uses the current CUDA device when there is one.
tcclResult_t tcclCommInitRank(tcclComm_t* comm, int nranks, tcclUniqueId commId, int rank);
/// tcclCommInitRank with a configuration (see tcclConfig_t).
tcclResult_t tcclCommInitRankConfig(tcclComm_t* comm, int nranks, tcclUniqueId commId, int rank,
                                    tcclConfig_t* config);
/// Creates `ndev` ranks of one communicator in this process, rank i on CUDA device devlist[i]
/// (devlist NULL: devices 0..ndev-1; on a machine without GPUs the ranks use host buffers).
tcclResult_t tcclCommInitAll(tcclComm_t* comms, int ndev, const int* devlist);
/// tccl extension: creates a communicator from a torchrun-style environment (RANK,
/// WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Rank 0 serves the bootstrap on MASTER_ADDR:MASTER_PORT.
tcclResult_t tcclCommInitFromEnv(tcclComm_t* comm);
/// Waits for the communicator's outstanding work, then frees it.
tcclResult_t tcclCommDestroy(tcclComm_t comm);
/// Frees the communicator without waiting: outstanding operations are aborted. (Stage 7: safe
/// from another thread while a call on the communicator is stuck: that call returns an error
/// first, then the communicator is freed.)
tcclResult_t tcclCommAbort(tcclComm_t comm);
/// Number of ranks.
tcclResult_t tcclCommCount(const tcclComm_t comm, int* count);
/// CUDA device of this rank (-1 when it has none).
tcclResult_t tcclCommCuDevice(const tcclComm_t comm, int* device);
/// This rank's index.
tcclResult_t tcclCommUserRank(const tcclComm_t comm, int* rank);
/// Stage 7: writes the communicator's flight recorder -- its last operations, PyTorch's
/// Flight Recorder JSON -- to `path`, or, when `path` is NULL, to TCCL_FR_DUMP followed by the
/// rank (tccl's addition; NCCL has no flight recorder, PyTorch's is
/// torch._C._distributed_c10d._dump_nccl_trace).
tcclResult_t tcclCommDumpFlightRecorder(const tcclComm_t comm, const char* path);
/// Stage 7: waits for the communicator's outstanding operations and puts their data on the
/// wire; afterwards only tcclCommDestroy remains. Non-blocking communicators: returns
/// tcclInProgress, poll tcclCommGetAsyncError.
tcclResult_t tcclCommFinalize(tcclComm_t comm);
/// Color of a rank that joins no new communicator in tcclCommSplit (its *newcomm is NULL).
#define TCCL_SPLIT_NOCOLOR (-1)
/// Stage 7: every rank of `comm` calls it; the ranks of one `color` (>= 0) form a new
/// communicator, ranked by `key` (ties: by their rank in `comm`). `config` NULL: the new
/// communicator takes `comm`'s configuration. Collective over `comm`.
tcclResult_t tcclCommSplit(tcclComm_t comm, int color, int key, tcclComm_t* newcomm,
                           tcclConfig_t* config);
/// tcclCommShrink's flag when `comm` has no operation in flight.
#define TCCL_SHRINK_DEFAULT 0x00
/// tcclCommShrink's flag after a failure: first stop the operations in flight (some wait for
/// the failed ranks), as tcclCommRevoke does.
#define TCCL_SHRINK_ABORT 0x01
/// Stage 7: every rank of `comm` not in `excludeRanksList` calls it (the excluded ones, failed
/// or leaving, do not): the others form a new communicator, keeping their order. Talks only to
/// the ranks that stay, so it works when the excluded ones are dead.
tcclResult_t tcclCommShrink(tcclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            tcclComm_t* newcomm, tcclConfig_t* config, int shrinkFlags);
/// tcclCommRevoke's flags (none yet).
#define TCCL_REVOKE_DEFAULT 0x00
/// Stage 7: stops the communicator's operations in flight (they return an error) without
/// freeing it; afterwards only tcclCommShrink and tcclCommDestroy remain. Local: each rank
/// calls it when it decides to. Non-blocking communicators: tcclInProgress, then poll.
tcclResult_t tcclCommRevoke(tcclComm_t comm, int revokeFlags);
/** @} */

/** @name Groups
 *  Calls between tcclGroupStart and tcclGroupEnd are batched: they are planned and launched
 *  together at tcclGroupEnd, so a rank can send to and receive from many peers without
 *  deadlock. Groups nest; only the outermost tcclGroupEnd launches.
 *  @{ */
/// Opens a group (groups nest).
tcclResult_t tcclGroupStart(void);
/// Closes a group; the outermost close launches everything queued since the first open.
tcclResult_t tcclGroupEnd(void);
/** @} */

/** @name Point-to-point
 *  A send and the matching receive must have the same count and type. Sends and receives
 *  between the same two ranks are matched in the order they are issued.
 *  @{ */
/// Sends `count` elements of `sendbuff` to rank `peer`.
tcclResult_t tcclSend(const void* sendbuff, size_t count, tcclDataType_t datatype, int peer,
                      tcclComm_t comm, cudaStream_t stream);
/// Receives `count` elements from rank `peer` into `recvbuff`.
tcclResult_t tcclRecv(void* recvbuff, size_t count, tcclDataType_t datatype, int peer,
                      tcclComm_t comm, cudaStream_t stream);
/** @} */

/** @name Collectives (ring algorithms)
 *  In place when sendbuff and recvbuff are the same (for AllGather: sendbuff == recvbuff +
 *  rank * sendcount; for ReduceScatter: recvbuff == sendbuff + rank * recvcount). Every rank
 *  must call the same collectives in the same order with the same count, type, op and root.
 *  @{ */
/// Reduces `count` elements across ranks with `op`; every rank receives the result.
tcclResult_t tcclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           tcclDataType_t datatype, tcclRedOp_t op, tcclComm_t comm,
                           cudaStream_t stream);
/// Every rank contributes `sendcount` elements; recvbuff gets nranks*sendcount, rank i's at
/// offset i*sendcount.
tcclResult_t tcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           tcclDataType_t datatype, tcclComm_t comm, cudaStream_t stream);
/// Reduces nranks*recvcount elements across ranks; rank i receives block i of the result.
tcclResult_t tcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               tcclDataType_t datatype, tcclRedOp_t op, tcclComm_t comm,
                               cudaStream_t stream);
/// Copies `count` elements from the root's sendbuff to every rank's recvbuff.
tcclResult_t tcclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           tcclDataType_t datatype, int root, tcclComm_t comm,
                           cudaStream_t stream);
/// Reduces `count` elements across ranks; only the root's recvbuff receives the result.
tcclResult_t tcclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        tcclDataType_t datatype, tcclRedOp_t op, int root, tcclComm_t comm,
                        cudaStream_t stream);
/** @} */

/** @name Custom reductions
 *  @{ */
/// Where the premulsum scalar lives. Values equal NCCL's ncclScalarResidence_t.
typedef enum {
  tcclScalarDevice = 0,         ///< a pointer to device memory, read when the operation runs
  tcclScalarHostImmediate = 1,  ///< a pointer to host memory, read once, now
} tcclScalarResidence_t;
/// Creates a reduction that computes sum over ranks of (scalar * x_r), scalar of `datatype`.
/// The op may be used only with `datatype` on `comm`; destroy it with tcclRedOpDestroy.
tcclResult_t tcclRedOpCreatePreMulSum(tcclRedOp_t* op, void* scalar, tcclDataType_t datatype,
                                      tcclScalarResidence_t residence, tcclComm_t comm);
/// Destroys a reduction made by tcclRedOpCreatePreMulSum.
tcclResult_t tcclRedOpDestroy(tcclRedOp_t op, tcclComm_t comm);
/** @} */

/** @name P2P patterns (built from grouped send/recv)
 *  @{ */
/// tccl extension: sends `count` elements to `sendPeer` and receives `count` from `recvPeer`
/// in one group (a peer exchange when both are the same rank; a shift when they differ).
tcclResult_t tcclSendRecv(const void* sendbuff, void* recvbuff, size_t count,
                          tcclDataType_t datatype, int sendPeer, int recvPeer, tcclComm_t comm,
                          cudaStream_t stream);
/// All-to-all: block j (count elements) of sendbuff goes to rank j; block i of recvbuff comes
/// from rank i. Both buffers hold nranks*count elements. As ncclAlltoAll.
tcclResult_t tcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          tcclDataType_t datatype, tcclComm_t comm, cudaStream_t stream);
/// Gather (all to one): every rank's `count` elements land in block `rank` of the root's
/// recvbuff (nranks*count elements, significant on the root only). As ncclGather.
tcclResult_t tcclGather(const void* sendbuff, void* recvbuff, size_t count,
                        tcclDataType_t datatype, int root, tcclComm_t comm, cudaStream_t stream);
/// Scatter (one to all): block i of the root's sendbuff (nranks*count elements, significant on
/// the root only) lands in rank i's recvbuff. As ncclScatter.
tcclResult_t tcclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         tcclDataType_t datatype, int root, tcclComm_t comm, cudaStream_t stream);
/// tccl extension: neighbor exchange on the ring of ranks. sendbuff holds 2*count elements:
/// [0,count) go to the left neighbour (rank-1), [count,2count) to the right (rank+1).
/// recvbuff gets [0,count) from the left neighbour and [count,2count) from the right.
tcclResult_t tcclNeighborExchange(const void* sendbuff, void* recvbuff, size_t count,
                                  tcclDataType_t datatype, tcclComm_t comm, cudaStream_t stream);
/** @} */

#pragma GCC visibility pop

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // TCCL_H_
