/*
 * device/kernel.cu: the GPU executor -- one kernel, one thread block per work item.
 *
 * What it is: the kernel runs exactly the algorithm code the host executor runs
 * (runWorkItem, primitives, reduceCopy), with the DeviceBackend: the block's leader thread
 * polls and posts the FIFO counters in mapped host memory, every thread moves data with
 * 16-byte loads and stores. The batch arrives by value as a __grid_constant__ parameter, so
 * no copy to device memory precedes the launch.
 *
 * Invariants: every block of the grid is resident at once (items depend on each other through
 * peers: see executor.h), which holds because a batch has at most kMaxWorkItems blocks of
 * kThreads threads; a failing item writes its status word, never clears one.
 *
 * NCCL counterpart: src/device/common.h (ncclKernelMain), src/enqueue.cc (launch).
 * Added in: stage 1.
 */
#include <cuda_runtime.h>

#include "comm.h"
#include "device/device_backend.cuh"
#include "device/run_work.h"
#include "executor.h"
#include "proxy.h"

namespace tccl {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) tcclKernel(const __grid_constant__ WorkBatch batch) {
  DeviceBackend be{batch.abortFlag};
  uint32_t status = runWorkItem(be, batch, blockIdx.x);
  if (threadIdx.x == 0 && status != kWorkOk) batch.status[blockIdx.x] = status;
}

namespace {
// Runs on a CUDA host thread once the kernel has finished: the proxy may go back to sleeping.
void CUDART_CB kernelDone(void* arg) {
  static_cast<tcclComm*>(arg)->gpuOpsInFlight.fetch_sub(1, std::memory_order_acq_rel);
}
}  // namespace

tcclResult_t launchGpuBatch(tcclComm* comm, const WorkBatch& batch, cudaStream_t stream) {
  if (batch.nItems == 0) return tcclSuccess;
  // Issue order across streams: this launch starts after the previous one on this comm.
  if (comm->haveLaunched) TCCL_CHECK(streamWaitEvent(stream, comm->lastLaunch));
  // Before the launch: the proxy must poll memory (a kernel cannot kick it) until kernelDone.
  comm->gpuOpsInFlight.fetch_add(1, std::memory_order_acq_rel);
  if (comm->proxy) comm->proxy->kick();
  tcclKernel<<<batch.nItems, kThreads, 0, stream>>>(batch);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    comm->gpuOpsInFlight.fetch_sub(1);
    TCCL_WARN("kernel launch failed: %s", cudaGetErrorString(err));
    return tcclUnhandledCudaError;
  }
  TCCL_CHECK(launchHostFunc(stream, kernelDone, comm));
  TCCL_CHECK(eventRecord(comm->lastLaunch, stream));
  comm->haveLaunched = true;
  return tcclSuccess;
}

}  // namespace tccl
