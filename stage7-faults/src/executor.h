/*
 * executor.h: running a planned WorkBatch, on host threads or on the GPU.
 *
 * What it is: the two executors. The host executor runs the batch to completion before the
 * call returns. When the calling thread drives one communicator (the usual case) it runs every
 * WorkItem itself, each as a fiber (fiber.h) that yields whenever it must wait, as an SM
 * switches between resident warps; when one thread drives several communicators in a group,
 * each WorkItem gets a thread of its communicator's pool (one item = one thread, as one item
 * = one thread block on the GPU). The GPU executor launches one kernel with one block per
 * item on the user's stream and returns at once.
 *
 * Invariants: items of one batch run concurrently (they may depend on each other through
 * peers: a rank's send item and receive item must both progress, or two ranks exchanging large
 * messages would deadlock) -- interleaved on one thread, or in parallel on the pool; several
 * communicators' batches of one group run concurrently too.
 *
 * NCCL counterpart: src/enqueue.cc (ncclLaunchKernel) for the GPU path; the host executor has
 * no NCCL counterpart (its single-thread mode is MPI's progress engine).
 * Added in: stage 1; the host fast path (fibers on the calling thread) in stage 3.
 */
#ifndef TCCL_EXECUTOR_H_
#define TCCL_EXECUTOR_H_

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core.h"
#include "device/work.h"

namespace tccl {

struct CommContext;
struct LaunchState;

/// A pool of host threads for one communicator. Grows to the widest batch it has seen.
class WorkerPool {
 public:
  explicit WorkerPool(int rank) : rank_(rank) {}
  ~WorkerPool();
  /// Runs fn(i) for i in [0, n) on n pool threads; wait() blocks until all have returned.
  /// `last`, when given, runs on the thread whose fn(i) returns last, before wait() returns:
  /// the end of the batch as its own threads see it, which may come long before the caller
  /// calls wait() (it may be collecting another communicator's batch first).
  void start(int n, std::function<void(int)> fn, std::function<void()> last = nullptr);
  void wait();

 private:
  void workerLoop(int index);

  int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;      // workers wait for a new generation
  std::condition_variable doneCv_;  // the caller waits for remaining_ == 0
  std::vector<std::thread> threads_;
  std::function<void(int)> fn_;
  std::function<void()> last_;      // this generation's `last` (start); may be empty
  uint64_t generation_ = 0;
  int active_ = 0;     // how many workers take part in this generation
  int remaining_ = 0;  // workers of this generation still running
  bool stop_ = false;
};

/// Host executor: pre-posts the batch's receives, then starts it on the comm's pool (returns
/// at once). finishHostBatch waits and turns item statuses into a result. Several comms can be
/// started before any is waited. With callerRuns, nothing starts: finishHostBatch runs every
/// item on the calling thread, as fibers; only right when this thread drives no other
/// communicator in the group, since it is busy with this one until all its items end.
/// An executor sees the communicator's context and launch state (launch_state.h), not the
/// whole communicator.
tcclResult_t startHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                            std::vector<WorkStatus>* status, bool callerRuns);
tcclResult_t finishHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                             std::vector<WorkStatus>& status, bool callerRuns);

/// GPU executor: the phase's local copies (cudaMemcpyAsync, stage 5), then the batch's
/// kernel, on `stream`, after the comm's previous launch. Inside a CUDA graph capture
/// (`capturing`, stage 5) the cross-stream ordering is left to the graph's stream.
struct DeviceCopy;
tcclResult_t launchGpuBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                            const std::vector<DeviceCopy>& copies, cudaStream_t stream,
                            bool capturing);

/// Step timeline, GPU side (executor_gpu.cu): measures how the GPU's %globaltimer relates to the
/// host's clock (host = gpu + *offsetNs; the sample was read within +-*errNs).
tcclResult_t traceCalibrateGpuClock(int64_t* offsetNs, int64_t* errNs);

/// Converts an executor status code to a result, with a WARN naming the item's peer.
tcclResult_t workStatusResult(WorkStatus status, const WorkItem& item);

}  // namespace tccl

#endif  // TCCL_EXECUTOR_H_
