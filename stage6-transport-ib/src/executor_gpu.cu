/*
 * executor_gpu.cu: the GPU executor, host side -- launching a batch's kernels on the user's
 * stream.
 *
 * What it is: launchGpuBatch orders the launch after the communicator's previous one (an
 * event, so operations stay in issue order when the user switches streams), runs the phase's
 * copies to itself (stage 5: small ones in one copy kernel, large ones on the copy engine),
 * tells the proxy a kernel may wait on it, launches the kernels (device/kernel.cu,
 * device/kernel_entry.cuh) with one block per work item, and queues a host callback that
 * collects the step records and lets the proxy sleep again. Nothing here waits for the GPU:
 * the call returns once the work is queued, as NCCL's.
 *
 * Invariants: gpuOpsInFlight is raised before a launch and lowered by its callback (or at
 * once when the launch fails), so the proxy never sleeps while a kernel may wait for it;
 * lastLaunch is recorded after every launch outside a capture. A batch whose reducing
 * collectives have several element types runs as one launch per type (stage 5); a p2p batch
 * gets at most its rank's share of the blocks the GPU holds at once (residentBlocks).
 *
 * CUDA graphs (stage 5): a launch inside a stream capture becomes a kernel node whose
 * parameter is the batch, unchanged at every replay. That is enough, because nothing in the
 * batch changes between operations: the FIFO step counters live in the ConnInfo the batch
 * points to, and each replay reads and advances them as a fresh launch would. What cannot be
 * replayed -- the host callback a proxy or the step timeline needs, the event that orders a
 * communicator's launches across streams -- is refused or left out while capturing.
 *
 * NCCL counterpart: src/enqueue.cc (ncclLaunchKernel, hostStreamPlanCallback).
 * Added in: stage 1.
 */
#include <algorithm>

#include <cuda_runtime.h>

#include "comm_context.h"
#include "cuda_wrap.h"
#include "device/kernel_entry.cuh"
#include "executor.h"
#include "launch_state.h"
#include "plan.h"
#include "proxy.h"
#include "trace.h"

namespace tccl {

namespace {
/// Stage 5: how many blocks of kThreads threads of the base kernels this rank's GPU holds at
/// once (its SMs times the blocks an SM takes), asked of CUDA once per communicator.
int residentBlocks(CommContext* comm) {
  if (comm->residentBlocks > 0) return comm->residentBlocks;
  int sms = 0, perSm = 0, perSmSimple = 0;
  const bool asked =
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, comm->cudaDev) == cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, tcclKernel, kThreads, 0) ==
          cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSmSimple, tcclKernelSimple, kThreads, 0) ==
          cudaSuccess;
  if (!asked) {
    (void)cudaGetLastError();  // (not sticky; fall back to the plan's assumption)
    return comm->residentBlocks = kP2pBlockBudget;
  }
  comm->residentBlocks = std::max(1, sms * std::min(perSm, perSmSimple));
  TCCL_INFO(kInit, "GPU %d holds %d blocks of %d threads at once (%d SMs)", comm->cudaDev,
            comm->residentBlocks, kThreads, sms);
  return comm->residentBlocks;
}

/// Launches the copies a KernelCopies holds, and empties it.
tcclResult_t flushKernelCopies(KernelCopies& k, cudaStream_t stream) {
  if (k.n == 0) return tcclSuccess;
  tcclCopyKernel<<<k.n, kThreads, 0, stream>>>(k);
  k.n = 0;
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    TCCL_WARN("copy kernel launch failed: %s", cudaGetErrorString(err));
    return tcclUnhandledCudaError;
  }
  return tcclSuccess;
}

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
                            const std::vector<DeviceCopy>& copies, cudaStream_t stream,
                            bool capturing) {
  if (batch.nItems == 0 && copies.empty()) return tcclSuccess;
  // A host callback after the kernel costs microseconds per launch and serializes the
  // stream: only a proxy (to stop polling) or the step timeline (to collect records) needs
  // one. Kernels over P2P and SHM alone have neither (stage 5).
  const bool tracing = batch.trace != nullptr;
  const bool hostCallback = batch.nItems > 0 && (launch.proxy != nullptr || tracing);
  if (capturing && (hostCallback || tracing)) {
    // A graph replays the kernel without this host code around it: the proxy would not know
    // that a kernel waits for it, and nobody would collect the step records.
    TCCL_WARN("CUDA graph capture: this communicator %s, which cannot follow a replayed "
              "graph; capture over P2P and SHM only, without TCCL_TRACE_FILE",
              tracing ? "records a step timeline (TCCL_TRACE_FILE)"
                      : "has connections through the network proxy");
    return tcclInvalidUsage;
  }
  // Issue order across streams: this launch starts after the previous one on this comm.
  // Not inside a capture: the graph is ordered by the stream it is launched on, and an event
  // recorded outside the capture cannot be waited for inside it (nor the reverse). Not on the
  // stream of the previous launch either: the stream orders the two already (stage 5).
  unsigned long long sid = 0;
  if (!capturing) TCCL_CHECK(streamId(stream, &sid));
  const bool sameStream = launch.lastStreamKnown && sid == launch.lastStreamId;
  if (launch.haveLaunched && !capturing && !sameStream) {
    TCCL_CHECK(streamWaitEvent(stream, launch.lastLaunch));
  }
  KernelCopies small{};
  for (const DeviceCopy& c : copies) {
    // A rank's copy to itself (stage 5): a kernel when it is small, else the copy engine, at
    // the device's rate. The copies of one launch run at once, so a copy that reads or
    // writes what a pending one writes (a group's second collective reading the first's
    // output) waits for the next launch; so do all pending ones before a copy-engine copy.
    const auto* src = static_cast<const uint8_t*>(c.src);
    auto* dst = static_cast<uint8_t*>(c.dst);
    const bool small1 = c.bytes <= kKernelCopyMaxBytes;
    bool overlaps = !small1;
    for (int i = 0; i < small.n && !overlaps; i++) {
      const auto& p = small.c[i];
      auto meet = [](const uint8_t* a, uint64_t an, const uint8_t* b, uint64_t bn) {
        return a < b + bn && b < a + an;
      };
      overlaps = meet(p.dst, p.bytes, src, c.bytes) || meet(p.dst, p.bytes, dst, c.bytes) ||
                 meet(p.src, p.bytes, dst, c.bytes);
    }
    if (overlaps) TCCL_CHECK(flushKernelCopies(small, stream));
    if (small1) {
      small.c[small.n++] = {src, dst, c.bytes};
      if (small.n == KernelCopies::kMax) TCCL_CHECK(flushKernelCopies(small, stream));
      continue;
    }
    cudaError_t err = cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyDefault, stream);
    if (err != cudaSuccess) {
      TCCL_WARN("cudaMemcpyAsync of %zu bytes failed: %s", c.bytes, cudaGetErrorString(err));
      return tcclUnhandledCudaError;
    }
  }
  TCCL_CHECK(flushKernelCopies(small, stream));
  // Stage 5: the kernels to launch -- the base kernel, or one per element type of the
  // batch's reducing collectives, in type order (the same on every rank).
  using Kernel = void (*)(WorkBatch, bool);
  static const Kernel typed[kNumDevTypes] = {
      TCCL_TYPED_KERNEL(0), TCCL_TYPED_KERNEL(1), TCCL_TYPED_KERNEL(2), TCCL_TYPED_KERNEL(3),
      TCCL_TYPED_KERNEL(4), TCCL_TYPED_KERNEL(5), TCCL_TYPED_KERNEL(6), TCCL_TYPED_KERNEL(7),
      TCCL_TYPED_KERNEL(8), TCCL_TYPED_KERNEL(9)};
  uint32_t types = 0;  // bit t: a reducing collective of type t
  bool anyLL = false;
  for (int i = 0; i < batch.nElems; i++) {
    const WorkElem& e = batch.elems[i];
    anyLL = anyLL || e.proto == WorkProto::kLL;
    const bool reducing = e.func == WorkFunc::kAllReduce || e.func == WorkFunc::kReduceScatter ||
                          e.func == WorkFunc::kReduce;
    if (reducing && e.dtype < kNumDevTypes) types |= 1u << e.dtype;
  }
  Kernel kernels[kNumDevTypes];
  int nKernels = 0;
  for (int t = 0; t < kNumDevTypes; t++) {
    if (types & (1u << t)) kernels[nKernels++] = typed[t];
  }
  // (The base kernel without LL send/recv when it can: SimpleP2pDeviceBackend says why.)
  if (nKernels == 0 && batch.nItems > 0) {
    kernels[nKernels++] = anyLL ? tcclKernel : tcclKernelSimple;
  }
  // One block per item; a p2p batch gets at most this rank's share of the blocks its GPU
  // holds at once (plan.h, kP2pBlockBudget): more could not all be resident, with the
  // GPU's other ranks' blocks beside them. The config's maxCTAs bounds it too.
  int blocks = batch.nItems;
  bool allP2p = true;
  for (int i = 0; i < batch.nItems && allP2p; i++) allP2p = batch.items[i].kind == WorkKind::kP2p;
  if (allP2p) {
    int share = std::min(kP2pBlockBudget, residentBlocks(comm)) / comm->ranksPerGpu;
    if (comm->maxChannels > 0) share = std::min(share, comm->maxChannels);
    blocks = std::min(blocks, std::max(1, share));
  }
  for (int k = 0; k < nKernels; k++) {
    // Before the launch: the proxy must poll memory (a kernel cannot kick it) until kernelDone.
    if (hostCallback) comm->gpuOpsInFlight.fetch_add(1, std::memory_order_acq_rel);
    if (launch.proxy) launch.proxy->kick();
    kernels[k]<<<blocks, kThreads, 0, stream>>>(batch, /*copies=*/k == 0);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      if (hostCallback) comm->gpuOpsInFlight.fetch_sub(1);
      TCCL_WARN("kernel launch failed: %s", cudaGetErrorString(err));
      return tcclUnhandledCudaError;
    }
    // (One callback per launch: it collects that launch's step records before the next
    // launch, which it holds back in stream order, writes over them.)
    if (hostCallback) TCCL_CHECK(launchHostFunc(stream, kernelDone, comm));
  }
  if (!capturing) {
    TCCL_CHECK(eventRecord(launch.lastLaunch, stream));
    launch.haveLaunched = true;
    launch.lastStreamId = sid;
    launch.lastStreamKnown = true;
  }
  return tcclSuccess;
}

}  // namespace tccl
