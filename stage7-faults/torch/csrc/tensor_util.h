/**
 * tensor_util.h: from torch tensors and reduce ops to tccl buffers, types and ops.
 *
 * What it is: the checks every collective makes on its tensors before anything is queued
 * (so a mistake raises at the call, on the rank that made it, with the collective's name), and
 * the translation tables: at::ScalarType -> tcclDataType_t, c10d::ReduceOp -> tcclRedOp_t.
 *
 * Invariants:
 *  - A tensor handed to tccl is dense and contiguous, on the CPU or one CUDA device, and not
 *    sparse; count * element size == nbytes.
 *  - Moving data without reducing it (broadcast, all-gather, send...) works for every dtype:
 *    a dtype tccl has no name for travels as bytes (tcclUint8, nbytes).
 *  - Reducing needs a dtype tccl can add: bool reduces as uint8 with SUM -> MAX and
 *    PRODUCT -> MIN (logical or / and, as ProcessGroupNCCL does); complex SUM/AVG/PREMUL_SUM
 *    reduce the real view (pairs of floats); anything else raises, naming dtype and op.
 *  - BAND/BOR/BXOR have no tccl op (nor an NCCL one): Reduction::bitwise marks them, and the
 *    backend all-gathers and reduces locally (process_group_tccl.cc).
 * NCCL counterpart: ProcessGroupNCCL.cpp's getNcclDataType / getNcclReduceOp, and its
 *   check_gpu_single_tensor.
 * Added in: stage 4.
 */
#ifndef TCCL_TORCH_TENSOR_UTIL_H_
#define TCCL_TORCH_TENSOR_UTIL_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tccl.h"
#include "torch_compat.h"

namespace tccl_torch {

/// A tensor's memory as tccl sees it: base pointer, element count and element type.
struct Buffer {
  void* ptr = nullptr;
  size_t count = 0;
  tcclDataType_t type = tcclUint8;
};

/// Raises (c10::Error, a Python RuntimeError) unless `t` is dense, contiguous, not sparse, on
/// the CPU or a CUDA device. `what` names the collective and the argument.
void checkTensor(const at::Tensor& t, const std::string& what);

/// The one tensor of a list (this backend, like ProcessGroupNCCL, drives one device per process).
at::Tensor& singleTensor(std::vector<at::Tensor>& tensors, const std::string& what);

/// Raises unless every tensor of `list` has `like`'s dtype, device and element count.
void checkSameShape(const std::vector<at::Tensor>& list, const at::Tensor& like,
                    const std::string& what);

/// For moving data: the dtype's tccl name when it has one, else bytes.
Buffer moveBuffer(const at::Tensor& t);

/// The tccl side of a reduction, ready to call with.
struct Reduction {
  Buffer buf;                ///< what to reduce (a real view for complex tensors)
  tcclRedOp_t op = tcclSum;  ///< tccl's op (a premulsum op once makeRedOp has run)
  bool bitwise = false;      ///< BAND/BOR/BXOR: all-gather, then reduce locally
  c10d::ReduceOp::RedOpType kind = c10d::ReduceOp::SUM;  ///< torch's op, for the bitwise path
  bool premul = false;  ///< PREMUL_SUM: makeRedOp creates a tccl op, dropRedOp frees it
  at::Tensor factor;    ///< PREMUL_SUM's factor, in the reduced dtype (kept alive)
};

/// Translates op and dtype, or raises naming both when tccl cannot reduce that pair.
Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, const std::string& what);

/// Creates the premulsum op (a no-op for other ops) on `comm`: call it where the collective is
/// issued, and dropRedOp right after (tccl, like NCCL, keeps the op alive for queued work).
tcclResult_t makeRedOp(Reduction& r, tcclComm_t comm);
void dropRedOp(Reduction& r, tcclComm_t comm);

/// The bitwise reduction of the `n` rows of `gathered` ([n, numel]) into `out`.
void bitwiseReduceRows(const at::Tensor& gathered, int n, c10d::ReduceOp::RedOpType kind,
                       at::Tensor& out);

/// "allreduce"-style name of a torch op, for messages.
const char* reduceOpName(c10d::ReduceOp::RedOpType kind);

}  // namespace tccl_torch

#endif  // TCCL_TORCH_TENSOR_UTIL_H_
