/*
 * device/reduce_op.h: the element-wise reduction functions.
 *
 * What it is: one small functor per reduction (sum, prod, max, min, premulsum, integer avg),
 * usable on the host and in CUDA kernels, applied by reduceCopy() to pairs of elements. A
 * functor has three parts:
 *   pre(x)      applied once to each element of a rank's own input as it enters (identity, but
 *               for premulsum, which multiplies by its scalar)
 *   op(a, b)    combines two partial results
 *   post(x)     applied once to each final result (identity, but for integer avg, which divides
 *               by the number of ranks)
 * kPlain says pre and post are both identity, which lets pure copies use memcpy. FuncCopy is
 * the functor of the pure data-movement primitives (send, recv, copySend, recvCopySend). The
 * element types are the native arithmetic ones and float16/bfloat16 (device/float16.h).
 *
 * Invariants: every functor is commutative and associative up to floating-point rounding, so a
 * ring may combine ranks' contributions in any order; integer arithmetic wraps as in C (unsigned)
 * and is done in the element type.
 *
 * NCCL counterpart: src/device/reduce_kernel.h (FuncSum, FuncProd, FuncMinMax, FuncPreMulSum,
 * FuncSumPostDiv).
 * Added in: stage 2.
 */
#ifndef TCCL_DEVICE_REDUCE_OP_H_
#define TCCL_DEVICE_REDUCE_OP_H_

#include "device/fifo.h"

namespace tccl {

/// The identity pre/post shared by the plain reductions.
template <typename T>
struct PlainPrePost {
  static constexpr bool kPlain = true;
  TCCL_HOST_DEVICE T pre(T x) const { return x; }
  TCCL_HOST_DEVICE T post(T x) const { return x; }
};

template <typename T>
struct FuncSum : PlainPrePost<T> {
  TCCL_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};

template <typename T>
struct FuncProd : PlainPrePost<T> {
  TCCL_HOST_DEVICE T operator()(T a, T b) const { return a * b; }
};

template <typename T>
struct FuncMax : PlainPrePost<T> {
  TCCL_HOST_DEVICE T operator()(T a, T b) const { return a < b ? b : a; }
};

template <typename T>
struct FuncMin : PlainPrePost<T> {
  TCCL_HOST_DEVICE T operator()(T a, T b) const { return b < a ? b : a; }
};

/// Used by the pure data-movement primitives (send, recv, copySend, recvCopySend): they have
/// one source, so the function is never called; it only gives Primitives its template argument.
template <typename T>
struct FuncCopy : PlainPrePost<T> {
  TCCL_HOST_DEVICE T operator()(T a, T) const { return a; }
};

/// premulsum: sum of (scalar * x_r). The scalar has the element type.
template <typename T>
struct FuncPreMulSum {
  static constexpr bool kPlain = false;
  T scalar;
  TCCL_HOST_DEVICE T pre(T x) const { return x * scalar; }
  TCCL_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
  TCCL_HOST_DEVICE T post(T x) const { return x; }
};

/// Integer average: sum, then one division by the number of ranks (C truncation, as NCCL).
template <typename T>
struct FuncSumPostDiv {
  static constexpr bool kPlain = false;
  T divisor;
  TCCL_HOST_DEVICE T pre(T x) const { return x; }
  TCCL_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
  TCCL_HOST_DEVICE T post(T x) const { return T(x / divisor); }
};

// 8-bit integers promote to int in C++; the functors above return the narrowed value, which is
// the wrap-around result the element type would give. Nothing else to specialise.

}  // namespace tccl

#endif  // TCCL_DEVICE_REDUCE_OP_H_
