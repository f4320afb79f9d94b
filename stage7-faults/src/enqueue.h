/*
 * enqueue.h: argument checks shared by every data-moving call.
 *
 * NCCL counterpart: src/include/argcheck.h.
 * Added in: stage 1.
 */
#ifndef TCCL_ENQUEUE_H_
#define TCCL_ENQUEUE_H_

#include "core.h"

struct tcclComm;

namespace tccl {

/// Checks comm, type, count overflow and a null buffer with count > 0; *bytes = count * size.
tcclResult_t checkDataArgs(tcclComm* comm, const char* call, const void* buff, size_t count,
                           tcclDataType_t type, size_t* bytes);
/// Checks that `blocks` blocks of `count` elements (all-to-all's nranks, neighbour exchange's
/// 2, all-gather's nranks...) still have a byte size that fits in size_t.
tcclResult_t checkBlocks(const char* call, size_t count, tcclDataType_t type, size_t blocks);
/// Checks 0 <= peer < nranks.
tcclResult_t checkPeer(tcclComm* comm, const char* call, int peer);

}  // namespace tccl

#endif  // TCCL_ENQUEUE_H_
