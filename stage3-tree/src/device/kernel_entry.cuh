/*
 * device/kernel_entry.cuh: the GPU executor's kernels, as the launcher sees them.
 *
 * What it is: the kernels that executor_gpu.cu launches and device/kernel.cu defines:
 *
 *   tcclKernel       a batch, one thread block of kThreads threads per work item
 *   tcclClockKernel  the GPU's clock, published to the host (the step timeline)
 *
 * Invariants: a kernel is declared here exactly as kernel.cu defines it (launch bounds,
 * __grid_constant__): the launcher's view and the definition are one function.
 *
 * NCCL counterpart: src/device/common.h (the kernel declarations), src/include/device.h.
 * Added in: stage 1.
 */
#ifndef TCCL_DEVICE_KERNEL_ENTRY_CUH_
#define TCCL_DEVICE_KERNEL_ENTRY_CUH_

#include <cstdint>

#include "device/work.h"

namespace tccl {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) tcclKernel(const __grid_constant__ WorkBatch batch);

__global__ void tcclClockKernel(volatile uint64_t* now, const volatile uint32_t* stop);

}  // namespace tccl

#endif  // TCCL_DEVICE_KERNEL_ENTRY_CUH_
