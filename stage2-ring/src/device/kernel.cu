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

#include "comm_context.h"
#include "cuda_wrap.h"
#include "device/device_backend.cuh"
#include "device/run_work.h"
#include "executor.h"
#include "launch_state.h"
#include "proxy.h"
#include "trace.h"

namespace tccl {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) tcclKernel(const __grid_constant__ WorkBatch batch) {
  DeviceBackend be{batch.abortFlag};
  if (batch.trace != nullptr) be.trace = &batch.trace[blockIdx.x];
  uint32_t status = runWorkItem(be, batch, blockIdx.x);
  if (threadIdx.x == 0 && status != kWorkOk) batch.status[blockIdx.x] = status;
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

namespace {
// Runs on a CUDA host thread once the kernel has finished: its step records are collected,
// and the proxy may go back to sleeping.
void CUDART_CB kernelDone(void* arg) {
  auto* comm = static_cast<CommContext*>(arg);
  if (comm->traceBufs != nullptr) traceCollectGpu(comm);
  comm->gpuOpsInFlight.fetch_sub(1, std::memory_order_acq_rel);
}
}  // namespace

tcclResult_t traceCalibrateGpuClock(int64_t* offsetNs, int64_t* errNs) {
  void* mem = nullptr;
  TCCL_CHECK(hostCalloc(&mem, 128, /*mapped=*/true));
  auto* now = static_cast<volatile uint64_t*>(mem);
  auto* stop = reinterpret_cast<volatile uint32_t*>(static_cast<char*>(mem) + 64);
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    hostFree(mem, true);
    TCCL_WARN("trace: cannot create a stream to calibrate the GPU clock");
    return tcclUnhandledCudaError;
  }
  tcclClockKernel<<<1, 1, 0, s>>>(now, stop);
  tcclResult_t res = tcclSuccess;
  // The kernel's first store shows it runs; then keep the sample read in the shortest window
  // of our own clock: the GPU's value was current somewhere inside it.
  const uint64_t giveUp = traceNowNs() + 5000000000ull;
  while (*now == 0 && traceNowNs() < giveUp) {
  }
  if (*now == 0) {
    TCCL_WARN("trace: the GPU clock kernel did not start within 5 s");
    res = tcclUnhandledCudaError;
  } else {
    uint64_t best = ~uint64_t(0);
    for (int i = 0; i < 1000; i++) {
      const uint64_t t0 = traceNowNs();
      const uint64_t g = *now;
      const uint64_t t1 = traceNowNs();
      if (t1 - t0 < best) {
        best = t1 - t0;
        *offsetNs = int64_t(t0 + (t1 - t0) / 2) - int64_t(g);
      }
    }
    *errNs = int64_t(best / 2);
  }
  *stop = 1;  // volatile store to mapped memory: the kernel's next poll sees it
  if (cudaStreamSynchronize(s) != cudaSuccess && res == tcclSuccess) res = tcclUnhandledCudaError;
  cudaStreamDestroy(s);
  hostFree(mem, true);
  return res;
}

tcclResult_t launchGpuBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                            cudaStream_t stream) {
  if (batch.nItems == 0) return tcclSuccess;
  // Issue order across streams: this launch starts after the previous one on this comm.
  if (launch.haveLaunched) TCCL_CHECK(streamWaitEvent(stream, launch.lastLaunch));
  // Before the launch: the proxy must poll memory (a kernel cannot kick it) until kernelDone.
  comm->gpuOpsInFlight.fetch_add(1, std::memory_order_acq_rel);
  if (launch.proxy) launch.proxy->kick();
  tcclKernel<<<batch.nItems, kThreads, 0, stream>>>(batch);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    comm->gpuOpsInFlight.fetch_sub(1);
    TCCL_WARN("kernel launch failed: %s", cudaGetErrorString(err));
    return tcclUnhandledCudaError;
  }
  TCCL_CHECK(launchHostFunc(stream, kernelDone, comm));
  TCCL_CHECK(eventRecord(launch.lastLaunch, stream));
  launch.haveLaunched = true;
  return tcclSuccess;
}

}  // namespace tccl
