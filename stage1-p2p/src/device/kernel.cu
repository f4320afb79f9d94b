/*
 * device/kernel.cu: the GPU executor's kernels -- one thread block per work item.
 *
 * What it is: tcclKernel runs exactly the algorithm code the host executor runs (runWorkItem,
 * primitives, the copy loop), with the DeviceBackend: the block's leader thread polls and posts
 * the FIFO counters in mapped host memory, every thread moves data with 16-byte loads and
 * stores. The batch arrives by value as a __grid_constant__ parameter, so no copy to device
 * memory precedes the launch. tcclClockKernel serves the step timeline. The host side -- the
 * launch, its ordering, the callback after it -- is executor_gpu.cu.
 *
 * Invariants: every block of the grid is resident at once (items depend on each other through
 * peers: see executor.h), which holds because a batch has at most kMaxWorkItems blocks of
 * kThreads threads; a failing item writes its status word, never clears one.
 *
 * NCCL counterpart: src/device/common.h (ncclKernelMain).
 * Added in: stage 1.
 */
#include "device/device_backend.cuh"
#include "device/kernel_entry.cuh"
#include "device/run_work.h"

namespace tccl {

__global__ void __launch_bounds__(kThreads) tcclKernel(const __grid_constant__ WorkBatch batch) {
  DeviceBackend be{batch.abortFlag};
  if (batch.trace != nullptr) be.trace = &batch.trace[blockIdx.x];
  WorkStatus status = runWorkItem(be, batch, blockIdx.x);
  if (threadIdx.x == 0 && status != WorkStatus::kOk) {
    batch.status[blockIdx.x] = static_cast<uint32_t>(status);
  }
  if (threadIdx.x == 0 && be.trace != nullptr) be.trace->count = be.traceCount;
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

}  // namespace tccl
