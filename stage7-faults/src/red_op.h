/*
 * red_op.h: reduction operations -- the built-in ones and premulsum ops made by the user.
 *
 * What it is: the table behind tcclRedOpCreatePreMulSum / tcclRedOpDestroy, and
 * resolveRedOp, which turns the tcclRedOp_t of a call into what the executor runs: a DevRedOp
 * plus its argument. It runs when the call is queued, so the op may be destroyed right after
 * the call, even inside a group (NCCL allows it); applyRedOp finishes the job at plan time. tcclAvg becomes premulsum by 1/nranks for floating types (each input is
 * scaled as it enters, as NCCL does) and sum-then-divide for integer types.
 *
 * Invariants: a user op belongs to one communicator and one data type, and is rejected with
 * any other; a destroyed op's slot is reused only after it is destroyed; op values below
 * tcclNumOps are the built-ins.
 *
 * NCCL counterpart: src/enqueue.cc (hostToDevRedOp), src/init.cc
 * (ncclRedOpCreatePreMulSum, ncclRedOpDestroy), src/include/comm.h (ncclUserRedOp).
 * Added in: stage 2.
 */
#ifndef TCCL_RED_OP_H_
#define TCCL_RED_OP_H_

#include <cstdint>

#include "core.h"
#include "device/work.h"

struct tcclComm;

namespace tccl {

/// A resolved reduction: what the executor runs and its argument.
struct RedOpChoice {
  DevRedOp op = DevRedOp::kSum;
  uint64_t arg = 0;              // premulsum scalar / avg divisor bits, in the element type
  const void* argPtr = nullptr;  // a tcclScalarDevice scalar, read when the operation runs
};

/// Checks `op` for a call on `dtype` and resolves it (when the call is queued).
tcclResult_t resolveRedOp(tcclComm* comm, const char* call, tcclRedOp_t op,
                          tcclDataType_t dtype, RedOpChoice* out);

/// Fills elem's reduction fields (at plan time). For the host executor (onDevice false) a
/// device-resident scalar is read now; a kernel reads it itself.
tcclResult_t applyRedOp(const RedOpChoice& choice, tcclDataType_t dtype, bool onDevice,
                        WorkElem* elem);

}  // namespace tccl

#endif  // TCCL_RED_OP_H_
