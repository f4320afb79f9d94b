/*
 * red_op.cc: the reduction-op table and tcclAvg's rewriting. See red_op.h.
 *
 * Added in: stage 2.
 */
#include "red_op.h"

#include <cstring>

#include "comm.h"
#include "cuda_wrap.h"
#include "device/float16.h"

namespace tccl {

namespace {

bool isFloatType(tcclDataType_t t) {
  return t == tcclFloat16 || t == tcclBfloat16 || t == tcclFloat32 || t == tcclFloat64;
}

/// `v` converted to `t`, as raw bits in the low bytes (the executor memcpy's them into a T).
uint64_t valueBits(tcclDataType_t t, double v) {
  uint64_t bits = 0;
  auto put = [&](auto x) { memcpy(&bits, &x, sizeof(x)); };
  switch (t) {
    case tcclInt8: put(int8_t(v)); break;
    case tcclUint8: put(uint8_t(v)); break;
    case tcclInt32: put(int32_t(v)); break;
    case tcclUint32: put(uint32_t(v)); break;
    case tcclInt64: put(int64_t(v)); break;
    case tcclUint64: put(uint64_t(v)); break;
    case tcclFloat16: put(Half::fromFloat(float(v))); break;
    case tcclBfloat16: put(Bf16::fromFloat(float(v))); break;
    case tcclFloat32: put(float(v)); break;
    case tcclFloat64: put(v); break;
    default: break;
  }
  return bits;
}

}  // namespace

tcclResult_t resolveRedOp(tcclComm* comm, const char* call, tcclRedOp_t op,
                          tcclDataType_t dtype, RedOpChoice* out) {
  *out = RedOpChoice{};
  switch (op) {
    case tcclSum: out->op = DevRedOp::kSum; return tcclSuccess;
    case tcclProd: out->op = DevRedOp::kProd; return tcclSuccess;
    case tcclMax: out->op = DevRedOp::kMax; return tcclSuccess;
    case tcclMin: out->op = DevRedOp::kMin; return tcclSuccess;
    case tcclAvg:
      // >>> exercise 2.3: tcclAvg and premulsum as device ops
      if (isFloatType(dtype)) {
        // Scale each input by 1/n as it enters, then sum: the result never overflows where the
        // plain sum would, at the price of rounding the scaled inputs (NCCL does the same).
        out->op = DevRedOp::kPreMulSum;
        out->arg = valueBits(dtype, 1.0 / comm->nranks);
      } else {
        out->op = DevRedOp::kSumPostDiv;
        out->arg = valueBits(dtype, comm->nranks);
      }
      return tcclSuccess;
      // <<< exercise 2.3
    default:
      break;
  }
  // >>> exercise 2.3: tcclAvg and premulsum as device ops
  const int index = int(op) - int(tcclNumOps);
  TCCL_ARG_CHECK(index >= 0 && index < int(comm->userRedOps.size()) && comm->userRedOps[index].live,
                 "%s: invalid reduction operation %d", call, int(op));
  const UserRedOp& u = comm->userRedOps[index];
  TCCL_ARG_CHECK(u.dtype == dtype,
                 "%s: reduction operation %d was created for data type %d, not %d", call, int(op),
                 int(u.dtype), int(dtype));
  out->op = DevRedOp::kPreMulSum;
  out->arg = u.scalarBits;
  out->argPtr = u.scalarPtr;
  return tcclSuccess;
  // <<< exercise 2.3
}

tcclResult_t applyRedOp(const RedOpChoice& choice, tcclDataType_t dtype, bool onDevice,
                        WorkElem* e) {
  e->redOp = uint8_t(choice.op);
  e->redOpArg = choice.arg;
  e->redOpArgPtr = nullptr;
  if (choice.argPtr != nullptr) {
    if (onDevice) {
      e->redOpArgPtr = choice.argPtr;  // the kernel reads it when it runs, as NCCL does
    } else {
      // The host executor cannot dereference device memory: read the scalar now.
      TCCL_CHECK(memcpyToHost(&e->redOpArg, choice.argPtr, typeSize(dtype)));
    }
  }
  return tcclSuccess;
}

}  // namespace tccl

using namespace tccl;

extern "C" tcclResult_t tcclRedOpCreatePreMulSum(tcclRedOp_t* op, void* scalar,
                                                 tcclDataType_t datatype,
                                                 tcclScalarResidence_t residence,
                                                 tcclComm_t comm) {
  TCCL_CHECK(commCheck(comm, "tcclRedOpCreatePreMulSum"));
  TCCL_ARG_CHECK(op != nullptr, "tcclRedOpCreatePreMulSum: op is NULL");
  TCCL_ARG_CHECK(scalar != nullptr, "tcclRedOpCreatePreMulSum: scalar is NULL");
  TCCL_ARG_CHECK(typeSize(datatype) != 0, "tcclRedOpCreatePreMulSum: invalid data type %d",
                 int(datatype));
  TCCL_ARG_CHECK(residence == tcclScalarDevice || residence == tcclScalarHostImmediate,
                 "tcclRedOpCreatePreMulSum: invalid scalar residence %d", int(residence));
  UserRedOp u;
  u.live = true;
  u.dtype = datatype;
  if (residence == tcclScalarHostImmediate) {
    memcpy(&u.scalarBits, scalar, typeSize(datatype));  // "immediate": the value as of now
  } else {
    // Read when each operation runs (by the kernel, or copied to the host for host buffers).
    // NCCL requires device memory here; host memory also works, read the same way.
    u.scalarPtr = scalar;
  }
  // Reuse a destroyed slot first, so long-running programs do not grow the table.
  size_t index = 0;
  while (index < comm->userRedOps.size() && comm->userRedOps[index].live) index++;
  if (index == comm->userRedOps.size()) comm->userRedOps.push_back(u);
  else comm->userRedOps[index] = u;
  *op = tcclRedOp_t(int(tcclNumOps) + int(index));
  return tcclSuccess;
}

extern "C" tcclResult_t tcclRedOpDestroy(tcclRedOp_t op, tcclComm_t comm) {
  TCCL_CHECK(commCheck(comm, "tcclRedOpDestroy"));
  const int index = int(op) - int(tcclNumOps);
  TCCL_ARG_CHECK(int(op) >= int(tcclNumOps),
                 "tcclRedOpDestroy: %d is a built-in operation and cannot be destroyed", int(op));
  TCCL_ARG_CHECK(index < int(comm->userRedOps.size()) && comm->userRedOps[index].live,
                 "tcclRedOpDestroy: operation %d does not exist on this communicator", int(op));
  comm->userRedOps[index].live = false;
  return tcclSuccess;
}
