/*
 * device/kernel.cu: the GPU executor's base kernels -- one thread block per work item (stage
 * 5: a large p2p batch, fewer blocks that take its items in turns) -- and its helper kernels.
 *
 * What it is: the kernels (device/kernel_entry.cuh) run exactly the algorithm code the host
 * executor runs (runWorkItem, primitives, reduceCopy), with the DeviceBackend: the block's
 * leader thread polls and posts the FIFO counters (in mapped host memory, or since stage 5 in
 * a peer GPU's memory), every thread moves data with 16-byte loads and stores. The batch
 * arrives by value as a __grid_constant__ parameter, so no copy to device memory precedes the
 * launch. tcclClockKernel serves the step timeline; tcclCopyKernel (stage 5) a rank's small
 * copies to itself. The host side -- the launch, its ordering, the callback after it -- is
 * executor_gpu.cu.
 *
 * Invariants: every block of the grid is resident at once (items depend on each other through
 * peers: see executor.h), which holds because a batch has at most kMaxWorkItems blocks of
 * kThreads threads (stage 5: and a p2p batch at most its rank's share of the blocks the GPU
 * holds at once, executor_gpu.cu); a failing item writes its status word, never clears one.
 *
 * NCCL counterpart: src/device/common.h (ncclKernelMain).
 * Added in: stage 1.
 */
#include "device/kernel_entry.cuh"

namespace tccl {

// The base kernel: no reducing collective (device/kernel_entry.cuh; stage 5 moved the
// element types' kernels to units of their own).
__global__ void __launch_bounds__(kThreads)
    tcclKernel(const __grid_constant__ WorkBatch batch, bool copies) {
  runKernel<DeviceBackend>(batch, copies);
}
__global__ void __launch_bounds__(kThreads)
    tcclKernelSimple(const __grid_constant__ WorkBatch batch, bool copies) {
  runKernel<SimpleP2pDeviceBackend>(batch, copies);
}

/// Step timeline: publishes %globaltimer into mapped host memory until told to stop, so the
/// host can read the GPU's clock between two reads of its own (traceCalibrateGpuClock).
__global__ void tcclClockKernel(volatile uint64_t* now, const volatile uint32_t* stop) {
  while (*stop == 0) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    *now = t;
  }
}

__global__ void __launch_bounds__(kThreads) tcclCopyKernel(const __grid_constant__ KernelCopies k) {
  const auto& c = k.c[blockIdx.x];
  reduceCopyBlock<uint8_t>(nullptr, c.src, c.dst, nullptr, c.bytes, FuncCopy<uint8_t>(), false);
}

}  // namespace tccl
