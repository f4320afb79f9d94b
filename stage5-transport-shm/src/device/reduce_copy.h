/*
 * device/reduce_copy.h: the one loop that moves and combines data.
 *
 * What it is: reduceCopy reads a received slot and/or the rank's own input, combines them
 * element-wise with a reduction functor when there are two, and writes the result to one or two
 * destinations:
 *
 *     v = recvIn && userIn ? op(recvIn[i], pre(userIn[i]))
 *       : recvIn           ? recvIn[i]
 *       :                    pre(userIn[i])
 *     if (postOp) v = post(v);   dst0[i] = v;  if (dst1) dst1[i] = v;
 *
 * pre() touches only the rank's own input, once, as it enters the algorithm; received data has
 * been through it already on the rank that sent it. Every primitive is a call to it between waiting on and posting FIFO counters.
 * Two versions with one contract: reduceCopyHost (a plain loop; memcpy for pure copies) and
 * reduceCopyBlock (all threads of a CUDA block, 16-byte vector loads and stores when every
 * pointer allows it, kUnroll packs in flight per thread: stage 5).
 *
 * Invariants: sources and destinations may alias only exactly (in place), never partially;
 * dst1 may be null (one destination); at least one of recvIn and userIn is non-null.
 *
 * NCCL counterpart: src/device/common_kernel.h (reduceCopy, reduceCopyPacks).
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_REDUCE_COPY_H_
#define TCCL_DEVICE_REDUCE_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device/fifo.h"

namespace tccl {

/// Element i of the result (the formula above).
template <typename T, typename Fn>
TCCL_HOST_DEVICE inline T reduceElem(const T* recvIn, const T* userIn, size_t i, Fn fn,
                                     bool postOp) {
  T v = recvIn ? (userIn ? fn(recvIn[i], fn.pre(userIn[i])) : recvIn[i]) : fn.pre(userIn[i]);
  return postOp ? fn.post(v) : v;
}

/// Host version: single thread.
template <typename T, typename Fn>
inline void reduceCopyHost(const T* recvIn, const T* userIn, T* dst0, T* dst1, size_t n, Fn fn,
                           bool postOp) {
  const T* only = recvIn ? recvIn : userIn;
  if ((recvIn == nullptr || userIn == nullptr) && (Fn::kPlain || (recvIn && !postOp))) {
    // A pure copy: memcpy is as fast as the host gets. In place (dst == src) is a no-op.
    if (dst0 != only) memcpy(dst0, only, n * sizeof(T));
    if (dst1 != nullptr && dst1 != only) memcpy(dst1, only, n * sizeof(T));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    T v = reduceElem(recvIn, userIn, i, fn, postOp);
    dst0[i] = v;
    if (dst1 != nullptr) dst1[i] = v;
  }
}

#if defined(__CUDACC__)
/// 16 bytes: the widest load/store a thread can issue, which is what saturates memory bandwidth.
struct alignas(16) Pack16 {
  uint64_t lo, hi;
};

/// Packs each thread has in flight at once (stage 5). One load at a time leaves a thread
/// waiting a memory latency (about a microsecond across NVLink) per 16 bytes: 256 threads
/// then move 4 KiB per microsecond, a few GB/s per block. Issuing kUnroll loads before the
/// first use keeps kUnroll times as many bytes in flight (NCCL's reduceCopyPacks unrolls the
/// same way).
constexpr int kUnroll = 8;

/// One pack of results: reduceElem applied to the 16/sizeof(T) elements of packs a (received)
/// and b (own input) already in registers; has* say which of the two exist.
template <typename T, typename Fn>
__device__ inline Pack16 combinePack(const Pack16& a, const Pack16& b, bool hasRecv,
                                     bool hasUser, Fn fn, bool postOp) {
  // Element views built by value (memcpy into a local array, never a pointer into the pack):
  // a pointer cast would make the packs addressable and push them to the stack (local
  // memory), which makes every copy several times slower.
  constexpr int kN = int(sizeof(Pack16) / sizeof(T));
  T x[kN], y[kN];
  memcpy(x, &a, sizeof(Pack16));
  memcpy(y, &b, sizeof(Pack16));
#pragma unroll
  for (int i = 0; i < kN; i++) {  // reduceElem's formula, on values rather than pointers
    T v = hasRecv ? (hasUser ? fn(x[i], fn.pre(y[i])) : x[i]) : fn.pre(y[i]);
    x[i] = postOp ? fn.post(v) : v;
  }
  Pack16 out;
  memcpy(&out, x, sizeof(Pack16));
  return out;
}

/// Device version: every thread of the block calls it with the same arguments.
template <typename T, typename Fn>
__device__ inline void reduceCopyBlock(const T* recvIn, const T* userIn, T* dst0, T* dst1,
                                       size_t n, Fn fn, bool postOp) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  constexpr size_t kPerPack = sizeof(Pack16) / sizeof(T);
  uintptr_t any = reinterpret_cast<uintptr_t>(recvIn) | reinterpret_cast<uintptr_t>(userIn) |
                  reinterpret_cast<uintptr_t>(dst0) | reinterpret_cast<uintptr_t>(dst1);
  size_t nPacks = 0;
  if (sizeof(T) <= sizeof(Pack16) && (any % sizeof(Pack16)) == 0) {
    // Fast path: every pointer is 16-byte aligned. Each thread moves one pack per iteration;
    // consecutive threads touch consecutive packs, so a warp's accesses coalesce.
    nPacks = n / kPerPack;
    const Pack16* r = reinterpret_cast<const Pack16*>(recvIn);
    const Pack16* u = reinterpret_cast<const Pack16*>(userIn);
    Pack16* d0 = reinterpret_cast<Pack16*>(dst0);
    Pack16* d1 = reinterpret_cast<Pack16*>(dst1);
    const size_t stride = size_t(nthreads);
    size_t p = size_t(tid);
    // Main loop: kUnroll packs per thread, stride apart (a warp still touches consecutive
    // packs); all loads are issued before the first result is computed.
    for (; p + (kUnroll - 1) * stride < nPacks; p += kUnroll * stride) {
      Pack16 a[kUnroll] = {}, b[kUnroll] = {};
#pragma unroll
      for (int k = 0; k < kUnroll; k++) {
        if (r) a[k] = r[p + k * stride];
        if (u) b[k] = u[p + k * stride];
      }
#pragma unroll
      for (int k = 0; k < kUnroll; k++) {
        Pack16 v = combinePack<T>(a[k], b[k], r != nullptr, u != nullptr, fn, postOp);
        d0[p + k * stride] = v;
        if (d1 != nullptr) d1[p + k * stride] = v;
      }
    }
    // The packs left over: one at a time.
    for (; p < nPacks; p += stride) {
      Pack16 a{}, b{};
      if (r) a = r[p];
      if (u) b = u[p];
      Pack16 v = combinePack<T>(a, b, r != nullptr, u != nullptr, fn, postOp);
      d0[p] = v;
      if (d1 != nullptr) d1[p] = v;
    }
  }
  // The remainder (or everything when misaligned): one element per thread per iteration.
  for (size_t i = nPacks * kPerPack + tid; i < n; i += nthreads) {
    T v = reduceElem(recvIn, userIn, i, fn, postOp);
    dst0[i] = v;
    if (dst1 != nullptr) dst1[i] = v;
  }
}
#endif  // __CUDACC__

}  // namespace tccl

#endif  // TCCL_DEVICE_REDUCE_COPY_H_
