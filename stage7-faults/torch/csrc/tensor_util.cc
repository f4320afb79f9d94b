/**
 * tensor_util.cc: tensor checks and the dtype / reduce-op tables (see tensor_util.h).
 * Added in: stage 4.
 */
#include "tensor_util.h"

#include <c10/util/Exception.h>

namespace tccl_torch {

namespace {

// The dtypes tccl can reduce, by their torch name. Bool is not here: it is mapped to uint8
// with its own ops in reduction().
bool tcclTypeOf(at::ScalarType s, tcclDataType_t* out) {
  switch (s) {
    case at::kChar:
      *out = tcclInt8;
      return true;
    case at::kByte:
      *out = tcclUint8;
      return true;
    case at::kInt:
      *out = tcclInt32;
      return true;
    case at::kLong:
      *out = tcclInt64;
      return true;
    case at::kHalf:
      *out = tcclFloat16;
      return true;
    case at::kFloat:
      *out = tcclFloat32;
      return true;
    case at::kDouble:
      *out = tcclFloat64;
      return true;
    case at::kBFloat16:
      *out = tcclBfloat16;
      return true;
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 3 || TORCH_VERSION_MAJOR > 2
    case at::kUInt32:
      *out = tcclUint32;
      return true;
    case at::kUInt64:
      *out = tcclUint64;
      return true;
#endif
    default:
      return false;
  }
}

bool isIntegral(at::ScalarType s) { return at::isIntegralType(s, /*includeBool=*/true); }

}  // namespace

const char* reduceOpName(c10d::ReduceOp::RedOpType kind) {
  switch (kind) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNKNOWN";
  }
}

void checkTensor(const at::Tensor& t, const std::string& what) {
  TCCL_TORCH_CHECK(t.defined(), "tccl: ", what, ": undefined tensor");
  TCCL_TORCH_CHECK(t.layout() == at::kStrided, "tccl: ", what,
                   ": only dense (strided) tensors are supported, got layout ", t.layout());
  TCCL_TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "tccl: ", what,
                   ": tensors must be on the CPU or a CUDA device, got ", t.device());
  // tccl reads count * elemsize bytes from the data pointer: gaps or overlaps would be wrong.
  TCCL_TORCH_CHECK(t.is_contiguous(), "tccl: ", what,
                   ": tensors must be contiguous (call .contiguous() first)");
}

at::Tensor& singleTensor(std::vector<at::Tensor>& tensors, const std::string& what) {
  TCCL_TORCH_CHECK(tensors.size() == 1, "tccl: ", what, ": expected one tensor per process, got ",
                   tensors.size(),
                   " (tccl drives one device per process, as ProcessGroupNCCL does)");
  checkTensor(tensors[0], what);
  return tensors[0];
}

void checkSameShape(const std::vector<at::Tensor>& list, const at::Tensor& like,
                    const std::string& what) {
  for (size_t i = 0; i < list.size(); i++) {
    checkTensor(list[i], what);
    TCCL_TORCH_CHECK(list[i].scalar_type() == like.scalar_type(), "tccl: ", what, ": tensor ", i,
                     " has dtype ", list[i].scalar_type(), ", expected ", like.scalar_type());
    TCCL_TORCH_CHECK(list[i].device() == like.device(), "tccl: ", what, ": tensor ", i, " is on ",
                     list[i].device(), ", expected ", like.device());
    TCCL_TORCH_CHECK(list[i].numel() == like.numel(), "tccl: ", what, ": tensor ", i, " has ",
                     list[i].numel(), " elements, expected ", like.numel());
  }
}

Buffer moveBuffer(const at::Tensor& t) {
  Buffer b;
  b.ptr = t.data_ptr();
  if (tcclTypeOf(t.scalar_type(), &b.type)) {
    b.count = size_t(t.numel());
  } else {  // bool, complex, float8...: moving bytes is exact for any dtype
    b.type = tcclUint8;
    b.count = size_t(t.nbytes());
  }
  return b;
}

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, const std::string& what) {
  Reduction r;
  r.kind = op.op_;
  r.buf.ptr = t.data_ptr();
  r.buf.count = size_t(t.numel());
  const at::ScalarType s = t.scalar_type();
  const char* name = reduceOpName(r.kind);

  if (r.kind == c10d::ReduceOp::BAND || r.kind == c10d::ReduceOp::BOR ||
      r.kind == c10d::ReduceOp::BXOR) {
    TCCL_TORCH_CHECK(isIntegral(s), "tccl: ", what, ": ReduceOp.", name,
                     " needs an integer or bool tensor, got ", s);
    r.bitwise = true;
    return r;
  }
  if (s == at::kBool) {
    // Sum of bools is "any", product is "all": uint8 with MAX / MIN gives exactly that.
    r.buf.type = tcclUint8;
    if (r.kind == c10d::ReduceOp::SUM || r.kind == c10d::ReduceOp::MAX) {
      r.op = tcclMax;
    } else if (r.kind == c10d::ReduceOp::PRODUCT || r.kind == c10d::ReduceOp::MIN) {
      r.op = tcclMin;
    } else {
      TCCL_TORCH_CHECK(false, "tccl: ", what, ": ReduceOp.", name, " is not supported for bool");
    }
    return r;
  }
  if (at::isComplexType(s)) {
    // (a+bi) + (c+di) adds the parts independently, and so does a real factor: the real view
    // reduces exactly. Products and orderings of complex numbers are not elementwise.
    TCCL_TORCH_CHECK(r.kind == c10d::ReduceOp::SUM || r.kind == c10d::ReduceOp::AVG ||
                         r.kind == c10d::ReduceOp::PREMUL_SUM,
                     "tccl: ", what, ": ReduceOp.", name, " is not supported for complex dtype ",
                     s);
    at::Tensor real = at::view_as_real(t);
    TCCL_TORCH_CHECK(tcclTypeOf(real.scalar_type(), &r.buf.type), "tccl: ", what, ": dtype ", s,
                     " is not supported for reductions");
    r.buf.count = size_t(real.numel());
  } else {
    TCCL_TORCH_CHECK(tcclTypeOf(s, &r.buf.type), "tccl: ", what, ": dtype ", s,
                     " is not supported for reductions (tccl reduces int8, uint8, int32, int64, "
                     "float16, bfloat16, float32, float64; bool and complex by mapping)");
  }
  switch (r.kind) {
    case c10d::ReduceOp::SUM:
      r.op = tcclSum;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = tcclProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = tcclMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = tcclMax;
      break;
    case c10d::ReduceOp::AVG:
      r.op = tcclAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TCCL_TORCH_CHECK(sup != nullptr, "tccl: ", what, ": PREMUL_SUM without its factor");
      const at::ScalarType real = at::isComplexType(s) ? c10::toRealValueType(s) : s;
#if TORCH_VERSION_MAJOR >= 2
      at::Tensor tf = sup->tensor_factor;
#else
      at::Tensor tf = sup->tensor_factors.empty() ? at::Tensor() : sup->tensor_factors[0];
#endif
      if (tf.defined()) {
        TCCL_TORCH_CHECK(tf.numel() == 1, "tccl: ", what,
                         ": PREMUL_SUM factor must have one element");
        // A factor on the tensor's device is read by the collective itself (tcclScalarDevice);
        // any other is read once, now, from host memory.
        r.factor = tf.device() == t.device() && t.is_cuda() ? tf.to(real).contiguous()
                                                            : tf.to(at::kCPU, real).contiguous();
      } else {
        r.factor = at::scalar_tensor(sup->double_factor, at::TensorOptions().dtype(real));
      }
      r.premul = true;
      break;
    }
    default:
      TCCL_TORCH_CHECK(false, "tccl: ", what, ": ReduceOp.", name, " is not supported");
  }
  return r;
}

tcclResult_t makeRedOp(Reduction& r, tcclComm_t comm) {
  if (!r.premul) return tcclSuccess;
  const tcclScalarResidence_t where =
      r.factor.is_cuda() ? tcclScalarDevice : tcclScalarHostImmediate;
  return tcclRedOpCreatePreMulSum(&r.op, r.factor.data_ptr(), r.buf.type, where, comm);
}

void dropRedOp(Reduction& r, tcclComm_t comm) {
  if (r.premul) (void)tcclRedOpDestroy(r.op, comm);
}

void bitwiseReduceRows(const at::Tensor& gathered, int n, c10d::ReduceOp::RedOpType kind,
                       at::Tensor& out) {
  at::Tensor acc = gathered[0].clone();
  for (int i = 1; i < n; i++) {
    if (kind == c10d::ReduceOp::BAND)
      acc.bitwise_and_(gathered[i]);
    else if (kind == c10d::ReduceOp::BOR)
      acc.bitwise_or_(gathered[i]);
    else
      acc.bitwise_xor_(gathered[i]);
  }
  out.copy_(acc.view(out.sizes()));
}

}  // namespace tccl_torch
