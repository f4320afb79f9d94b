/*
 * p2p_patterns.cc: the P2P patterns, each a group of sends and receives.
 *
 * What it is: the patterns chapter 1 teaches, written exactly as a user would write them with
 * tcclGroupStart / tcclSend / tcclRecv / tcclGroupEnd. Nothing here knows about connections or
 * executors: it shows that grouped send/recv is enough to express them all.
 *
 *   sendrecv           send to one peer, receive from another (or the same) peer
 *   all-to-all         block j to rank j, block i from rank i
 *   gather             everyone -> root
 *   scatter            root -> everyone
 *   neighbor exchange  left and right neighbours on the ring of ranks
 *
 * Invariants: every rank issues its sends and receives in an order that matches the peers'
 * (sends and receives between two ranks match in issue order), including the degenerate cases
 * where a peer is oneself or left == right (two ranks).
 *
 * NCCL counterpart: src/collectives.cc (ncclAlltoAll, ncclGather, ncclScatter in 2.28) and the
 * grouped send/recv examples of NCCL's documentation.
 * Added in: stage 1.
 */
#include "comm_context.h"
#include "enqueue.h"
#include "group.h"

using namespace tccl;

namespace {

const char* at(const void* buf, size_t blockBytes, int i) {
  return static_cast<const char*>(buf) + blockBytes * size_t(i);
}
char* at(void* buf, size_t blockBytes, int i) { return static_cast<char*>(buf) + blockBytes * size_t(i); }

/// Closes the group we opened, whatever happened inside it; returns the first error.
tcclResult_t endGroup(tcclResult_t res) {
  tcclResult_t end = tcclGroupEnd();
  return res != tcclSuccess ? res : end;
}

}  // namespace

extern "C" tcclResult_t tcclSendRecv(const void* sendbuff, void* recvbuff, size_t count,
                                     tcclDataType_t datatype, int sendPeer, int recvPeer,
                                     tcclComm_t comm, cudaStream_t stream) {
  tcclResult_t res;
  TCCL_CHECK(tcclGroupStart());
  TCCL_CHECK_GOTO(tcclSend(sendbuff, count, datatype, sendPeer, comm, stream), res, out);
  TCCL_CHECK_GOTO(tcclRecv(recvbuff, count, datatype, recvPeer, comm, stream), res, out);
out:
  return endGroup(res);
}

extern "C" tcclResult_t tcclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                     tcclDataType_t datatype, tcclComm_t comm,
                                     cudaStream_t stream) {
  size_t bytes = 0;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclAlltoAll", sendbuff, count, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclAlltoAll", recvbuff, count, datatype, &bytes)));
  TCCL_CHECK(groupCheck(checkBlocks("tcclAlltoAll", count, datatype, ctx.nranks)));
  tcclResult_t res = tcclSuccess;
  TCCL_CHECK(tcclGroupStart());
  // One group: every rank posts all its sends and receives, so they progress together.
  for (int r = 0; r < ctx.nranks; r++) {
    TCCL_CHECK_GOTO(tcclSend(at(sendbuff, bytes, r), count, datatype, r, comm, stream), res, out);
    TCCL_CHECK_GOTO(tcclRecv(at(recvbuff, bytes, r), count, datatype, r, comm, stream), res, out);
  }
out:
  return endGroup(res);
}

extern "C" tcclResult_t tcclGather(const void* sendbuff, void* recvbuff, size_t count,
                                   tcclDataType_t datatype, int root, tcclComm_t comm,
                                   cudaStream_t stream) {
  size_t bytes = 0;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclGather", sendbuff, count, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkPeer(comm, "tcclGather root", root)));
  TCCL_CHECK(groupCheck(checkBlocks("tcclGather", count, datatype, ctx.nranks)));
  if (ctx.rank == root) {
    TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclGather", recvbuff, count, datatype, &bytes)));
  }
  tcclResult_t res = tcclSuccess;
  TCCL_CHECK(tcclGroupStart());
  TCCL_CHECK_GOTO(tcclSend(sendbuff, count, datatype, root, comm, stream), res, out);
  if (ctx.rank == root) {
    for (int r = 0; r < ctx.nranks; r++) {
      TCCL_CHECK_GOTO(tcclRecv(at(recvbuff, bytes, r), count, datatype, r, comm, stream), res,
                      out);
    }
  }
out:
  return endGroup(res);
}

extern "C" tcclResult_t tcclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                    tcclDataType_t datatype, int root, tcclComm_t comm,
                                    cudaStream_t stream) {
  size_t bytes = 0;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclScatter", recvbuff, count, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkPeer(comm, "tcclScatter root", root)));
  TCCL_CHECK(groupCheck(checkBlocks("tcclScatter", count, datatype, ctx.nranks)));
  if (ctx.rank == root) {
    TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclScatter", sendbuff, count, datatype, &bytes)));
  }
  tcclResult_t res = tcclSuccess;
  TCCL_CHECK(tcclGroupStart());
  if (ctx.rank == root) {
    for (int r = 0; r < ctx.nranks; r++) {
      TCCL_CHECK_GOTO(tcclSend(at(sendbuff, bytes, r), count, datatype, r, comm, stream), res,
                      out);
    }
  }
  TCCL_CHECK_GOTO(tcclRecv(recvbuff, count, datatype, root, comm, stream), res, out);
out:
  return endGroup(res);
}

extern "C" tcclResult_t tcclNeighborExchange(const void* sendbuff, void* recvbuff, size_t count,
                                             tcclDataType_t datatype, tcclComm_t comm,
                                             cudaStream_t stream) {
  size_t bytes = 0;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclNeighborExchange", sendbuff, count, datatype, &bytes)));
  const CommContext& ctx = commContext(comm);
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclNeighborExchange", recvbuff, count, datatype, &bytes)));
  TCCL_CHECK(groupCheck(checkBlocks("tcclNeighborExchange", count, datatype, 2)));
  const int n = ctx.nranks;
  const int left = (ctx.rank - 1 + n) % n, right = (ctx.rank + 1) % n;
  tcclResult_t res = tcclSuccess;
  TCCL_CHECK(tcclGroupStart());
  // Order matters when left == right (two ranks, or one): messages between a pair match in
  // issue order. Every rank sends right then left and receives left then right, so the first
  // message from my left neighbour (its "to the right" block) lands in my "from the left" slot.
  TCCL_CHECK_GOTO(tcclSend(at(sendbuff, bytes, 1), count, datatype, right, comm, stream), res, out);
  TCCL_CHECK_GOTO(tcclSend(at(sendbuff, bytes, 0), count, datatype, left, comm, stream), res, out);
  TCCL_CHECK_GOTO(tcclRecv(at(recvbuff, bytes, 0), count, datatype, left, comm, stream), res, out);
  TCCL_CHECK_GOTO(tcclRecv(at(recvbuff, bytes, 1), count, datatype, right, comm, stream), res, out);
out:
  return endGroup(res);
}
