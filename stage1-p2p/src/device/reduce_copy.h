/*
 * device/reduce_copy.h: the one loop that moves data.
 *
 * What it is: copy reads one source -- a received slot or the rank's own input -- and writes
 * it to one or two destinations (the user output and/or a send slot):
 *
 *     dst0[i] = src[i];  if (dst1) dst1[i] = src[i];
 *
 * Every primitive is a call to it between waiting on and posting FIFO counters.
 * Two versions with one contract: copyHost (memcpy) and copyBlock (all threads of a CUDA
 * block, 16-byte vector loads and stores when every pointer allows it).
 * The file has NCCL's name: NCCL's reduceCopy is this loop generalised to combine a received
 * slot with the rank's input, which is what it becomes once an algorithm reduces (chapter 2).
 *
 * Invariants: the source and a destination may alias only exactly (in place), never partially;
 * dst1 may be null (one destination).
 *
 * NCCL counterpart: src/device/common_kernel.h (reduceCopy, reduceCopyPacks, with one source).
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_REDUCE_COPY_H_
#define TCCL_DEVICE_REDUCE_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device/fifo.h"

namespace tccl {

/// Host version: single thread.
template <typename T>
inline void copyHost(const T* src, T* dst0, T* dst1, size_t n) {
  // memcpy is as fast as the host gets. In place (dst == src) is a no-op.
  if (dst0 != src) memcpy(dst0, src, n * sizeof(T));
  if (dst1 != nullptr && dst1 != src) memcpy(dst1, src, n * sizeof(T));
}

#if defined(__CUDACC__)
/// 16 bytes: the widest load/store a thread can issue, which is what saturates memory bandwidth.
struct alignas(16) Pack16 {
  uint64_t lo, hi;
};

/// Device version: every thread of the block calls it with the same arguments.
template <typename T>
__device__ inline void copyBlock(const T* src, T* dst0, T* dst1, size_t n) {
  const int tid = threadIdx.x, nthreads = blockDim.x;
  constexpr size_t kPerPack = sizeof(Pack16) / sizeof(T);
  uintptr_t any = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst0) |
                  reinterpret_cast<uintptr_t>(dst1);
  size_t nPacks = 0;
  if (sizeof(T) <= sizeof(Pack16) && (any % sizeof(Pack16)) == 0) {
    // Fast path: every pointer is 16-byte aligned. Each thread moves one pack per iteration;
    // consecutive threads touch consecutive packs, so a warp's accesses coalesce.
    nPacks = n / kPerPack;
    const Pack16* s = reinterpret_cast<const Pack16*>(src);
    Pack16* d0 = reinterpret_cast<Pack16*>(dst0);
    Pack16* d1 = reinterpret_cast<Pack16*>(dst1);
    for (size_t p = tid; p < nPacks; p += nthreads) {
      Pack16 v = s[p];
      d0[p] = v;
      if (d1 != nullptr) d1[p] = v;
    }
  }
  // The remainder (or everything when misaligned): one element per thread per iteration.
  for (size_t i = nPacks * kPerPack + tid; i < n; i += nthreads) {
    T v = src[i];
    dst0[i] = v;
    if (dst1 != nullptr) dst1[i] = v;
  }
}
#endif  // __CUDACC__

}  // namespace tccl

#endif  // TCCL_DEVICE_REDUCE_COPY_H_
