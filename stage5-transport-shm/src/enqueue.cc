/*
 * enqueue.cc: tcclSend and tcclRecv -- argument checks, then a task in the current group.
 *
 * What it is: the front door of every point-to-point call. Each argument is checked before
 * anything is queued, and each failure says which argument and why (TCCL_DEBUG=WARN shows it,
 * tcclGetLastError returns it).
 *
 * Invariants: a call that returns an error queued nothing; inside a group it also marks the
 * group failed, so tcclGroupEnd launches nothing and returns the error.
 *
 * NCCL counterpart: src/collectives.cc / src/enqueue.cc (ncclEnqueueCheck), src/misc/argcheck.cc.
 * Added in: stage 1.
 */
#include <cstdint>

#include "comm_context.h"
#include "enqueue.h"
#include "group.h"

namespace tccl {

/// Checks the arguments common to every data-moving call. `buffOptional` buffers may be null
/// (e.g. gather's recvbuff on a non-root rank).
tcclResult_t checkDataArgs(tcclComm* comm, const char* call, const void* buff, size_t count,
                           tcclDataType_t type, size_t* bytes) {
  TCCL_CHECK(commCheck(comm, call));
  size_t size = typeSize(type);
  TCCL_ARG_CHECK(size != 0, "%s: invalid data type %d", call, int(type));
  TCCL_ARG_CHECK(count <= SIZE_MAX / size,
                 "%s: count %zu of %zu-byte elements overflows the byte size", call, count, size);
  TCCL_ARG_CHECK(count == 0 || buff != nullptr, "%s: buffer is NULL with count %zu", call, count);
  *bytes = count * size;
  return tcclSuccess;
}

tcclResult_t checkBlocks(const char* call, size_t count, tcclDataType_t type, size_t blocks) {
  const size_t size = typeSize(type);
  TCCL_ARG_CHECK(size == 0 || blocks == 0 || count <= SIZE_MAX / size / blocks,
                 "%s: %zu blocks of count %zu overflow the byte size of the buffer", call, blocks,
                 count);
  return tcclSuccess;
}

tcclResult_t checkPeer(tcclComm* comm, const char* call, int peer) {
  const int nranks = commContext(comm).nranks;
  TCCL_ARG_CHECK(peer >= 0 && peer < nranks, "%s: peer %d is out of range [0, %d)", call, peer,
                 nranks);
  return tcclSuccess;
}

}  // namespace tccl

using namespace tccl;

extern "C" tcclResult_t tcclSend(const void* sendbuff, size_t count, tcclDataType_t datatype,
                                 int peer, tcclComm_t comm, cudaStream_t stream) {
  size_t bytes = 0;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclSend", sendbuff, count, datatype, &bytes)));
  setLogRank(commContext(comm).rank);
  TCCL_CHECK(groupCheck(checkPeer(comm, "tcclSend", peer)));
  TCCL_INFO(kCall, "tcclSend: %zu bytes to rank %d, buff %p, stream %p", bytes, peer, sendbuff,
            (void*)stream);
  return groupEnqueueP2p(comm, P2pTask{true, peer, sendbuff, nullptr, bytes}, stream);
}

extern "C" tcclResult_t tcclRecv(void* recvbuff, size_t count, tcclDataType_t datatype, int peer,
                                 tcclComm_t comm, cudaStream_t stream) {
  size_t bytes = 0;
  TCCL_CHECK(groupCheck(checkDataArgs(comm, "tcclRecv", recvbuff, count, datatype, &bytes)));
  setLogRank(commContext(comm).rank);
  TCCL_CHECK(groupCheck(checkPeer(comm, "tcclRecv", peer)));
  TCCL_INFO(kCall, "tcclRecv: %zu bytes from rank %d, buff %p, stream %p", bytes, peer, recvbuff,
            (void*)stream);
  return groupEnqueueP2p(comm, P2pTask{false, peer, nullptr, recvbuff, bytes}, stream);
}
