/*
 * executor_gpu.cu: the GPU executor, host side -- launching a batch's kernel on the user's
 * stream.
 *
 * What it is: launchGpuBatch orders the launch after the communicator's previous one (an
 * event, so operations stay in issue order when the user switches streams), tells the proxy
 * a kernel may wait on it, launches tcclKernel (device/kernel.cu) with one block per work
 * item, and queues a host callback that collects the step records and lets the proxy sleep
 * again. Nothing here waits for the GPU: the call returns once the work is queued, as NCCL's.
 *
 * Invariants: gpuOpsInFlight is raised before the launch and lowered by its callback (or at
 * once when the launch fails), so the proxy never sleeps while a kernel may wait for it;
 * lastLaunch is recorded after every launch.
 *
 * NCCL counterpart: src/enqueue.cc (ncclLaunchKernel, hostStreamPlanCallback).
 * Added in: stage 1.
 */
#include <cuda_runtime.h>

#include "comm_context.h"
#include "cuda_wrap.h"
#include "device/kernel_entry.cuh"
#include "executor.h"
#include "launch_state.h"
#include "proxy.h"
#include "trace.h"

namespace tccl {

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
