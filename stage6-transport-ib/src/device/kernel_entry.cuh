/*
 * device/kernel_entry.cuh: the GPU executor's kernels -- a base kernel and one per element
 * type -- and the body they share.
 *
 * What it is: every kernel runs one thread block per work item of a batch, with the same
 * body (runKernel): the algorithm code the host executor runs, on a DeviceBackend. They differ
 * in the reducing collectives they contain:
 *
 *   tcclKernel           (kernel.cu)           none: send/recv, broadcast, all-gather
 *   tcclKernelSimple     (kernel.cu)           the same, with send/recv on Simple only
 *   tcclKernelType<N>    (kernel_type.cuh, in  all-reduce, reduce-scatter and reduce of
 *                         generated unit N)    element type N (a tcclDataType_t), on every
 *                                              algorithm, with every reduction; and the rest
 *
 * The launcher (executor_gpu.cu) sends a batch with no reducing collective to the base
 * kernel, and one with reducing collectives to the kernel of each type it holds, one launch
 * per type in a fixed order; the copying collectives run in the first of those launches only.
 * The clock kernel (the step timeline) and the copy kernel (a rank's small copies to itself)
 * are declared here too.
 *
 * Why: ptxas compiles one translation unit on one core, and its time grows faster than the
 * code: in one unit, the kernel with every type (ten types, six reductions, ring, trees and
 * recursive doubling) is one long job for one core while the others wait (chapter 5, "The
 * fast GPU path", has the build times). Ten units of one type each are ten small problems
 * that the cores share. Nothing is lost at run time: a batch mixes element types rarely (a
 * group of collectives of several types), and then costs one launch more per extra type.
 *
 * Invariants: every block of a grid is resident at once (items depend on each other through
 * peers: see executor.h); a block that runs several items (a large p2p batch) runs them in
 * the batch's order; a batch split over several launches runs each elem in exactly one
 * of them, on every rank alike (the split depends on the elems alone), so both ends of every
 * connection still see the same sequence of steps.
 *
 * NCCL counterpart: src/device/generate.py (one .cu file per collective, reduction, type,
 * algorithm and protocol; NCCL links them with -rdc into one table, tccl keeps whole-program
 * kernels instead, whose registers ptxas allocates knowing the block size).
 * Added in: stage 1 (the declarations); the per-type kernels and their body in stage 5.
 */
#ifndef TCCL_DEVICE_KERNEL_ENTRY_CUH_
#define TCCL_DEVICE_KERNEL_ENTRY_CUH_

#include "device/device_backend.cuh"
#include "device/run_work.h"
#include "device/work.h"

namespace tccl {

// 512 threads (NCCL's Simple protocol count on Hopper): with 8 packs in flight per thread
// (reduce_copy.h), 64 KiB per block, which is what one SM needs to reach its share of the
// memory's and the link's bandwidth (stage 5; 256 before).
constexpr int kThreads = 512;

/// The body of every kernel: block b runs items b, b + gridDim.x, b + 2 gridDim.x, ... of the
/// batch, one after the other. The grid has one block per item, except a p2p batch with more
/// items than its share of the GPU's blocks (plan.h, kP2pBlockBudget; stage 5): its items
/// are ordered so that running them in turns cannot deadlock (plan_p2p.cc,
/// orderP2pItems).
template <class Backend>
__device__ __forceinline__ void runKernel(const WorkBatch& batch, bool copies) {
  for (int i = int(blockIdx.x); i < batch.nItems; i += int(gridDim.x)) {
    // The LL protocol's stop word starts lowered (device_backend.cuh); the barrier makes that
    // visible to every thread before any can raise it.
    if (threadIdx.x == 0) DeviceBackend::stopWord() = 0;
    __syncthreads();
    Backend be;
    be.abortFlag = batch.abortFlag;
    be.copies = copies;
    if (batch.trace != nullptr) be.trace = &batch.trace[i];
    WorkStatus status = runWorkItem(be, batch, i);
    if (threadIdx.x == 0 && status != WorkStatus::kOk) {
      batch.status[i] = static_cast<uint32_t>(status);
    }
    if (threadIdx.x == 0 && be.trace != nullptr) be.trace->count = be.traceCount;
    // Barrier: every thread has finished with this item (and read the stop word) before the
    // leader lowers the word for the next one.
    if (i + int(gridDim.x) < batch.nItems) __syncthreads();
  }
}

/// The kernels. `copies`: this launch runs the batch's copying collectives too.
__global__ void __launch_bounds__(kThreads)
    tcclKernel(const __grid_constant__ WorkBatch batch, bool copies);
/// The base kernel without LL send/recv, for batches that have no LL step (stage 5).
__global__ void __launch_bounds__(kThreads)
    tcclKernelSimple(const __grid_constant__ WorkBatch batch, bool copies);
#define TCCL_TYPED_KERNEL(dtype) tcclKernelType##dtype
#define TCCL_DECLARE_TYPED_KERNEL(dtype)           \
  __global__ void __launch_bounds__(kThreads)      \
      TCCL_TYPED_KERNEL(dtype)(const __grid_constant__ WorkBatch batch, bool copies)
TCCL_DECLARE_TYPED_KERNEL(0);
TCCL_DECLARE_TYPED_KERNEL(1);
TCCL_DECLARE_TYPED_KERNEL(2);
TCCL_DECLARE_TYPED_KERNEL(3);
TCCL_DECLARE_TYPED_KERNEL(4);
TCCL_DECLARE_TYPED_KERNEL(5);
TCCL_DECLARE_TYPED_KERNEL(6);
TCCL_DECLARE_TYPED_KERNEL(7);
TCCL_DECLARE_TYPED_KERNEL(8);
TCCL_DECLARE_TYPED_KERNEL(9);
constexpr int kNumDevTypes = 10;

__global__ void tcclClockKernel(volatile uint64_t* now, const volatile uint32_t* stop);

/// Stage 5: a rank's small copies to itself (one-rank collectives, sends to oneself), in one
/// launch, one block each. Below kKernelCopyMaxBytes a kernel launch costs the host less than
/// the copy engine's cudaMemcpyAsync, and moves a few KiB in about a microsecond.
constexpr size_t kKernelCopyMaxBytes = 64 << 10;
struct KernelCopies {
  static constexpr int kMax = 16;
  int32_t n;
  struct {
    const uint8_t* src;
    uint8_t* dst;
    uint64_t bytes;
  } c[kMax];
};
__global__ void __launch_bounds__(kThreads) tcclCopyKernel(const __grid_constant__ KernelCopies k);

}  // namespace tccl

#endif  // TCCL_DEVICE_KERNEL_ENTRY_CUH_
