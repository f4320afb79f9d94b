/*
 * executor.h: running a planned WorkBatch, on host threads or on the GPU.
 *
 * What it is: the two executors. The host executor runs the batch to completion before the
 * call returns: each WorkItem gets a thread of its communicator's pool (one item = one thread,
 * as one item = one thread block on the GPU). The GPU executor launches one kernel with one
 * block per item on the user's stream and returns at once.
 *
 * Invariants: items of one batch run concurrently (they may depend on each other through
 * peers: a rank's send item and receive item must both progress, or two ranks exchanging large
 * messages would deadlock), so each has its own thread; several communicators' batches of one
 * group run concurrently too.
 *
 * NCCL counterpart: src/enqueue.cc (ncclLaunchKernel) for the GPU path; the host executor has
 * no NCCL counterpart.
 * Added in: stage 1.
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
  void start(int n, std::function<void(int)> fn);
  void wait();

 private:
  void workerLoop(int index);

  int rank_;
  std::mutex mutex_;
  std::condition_variable cv_;      // workers wait for a new generation
  std::condition_variable doneCv_;  // the caller waits for remaining_ == 0
  std::vector<std::thread> threads_;
  std::function<void(int)> fn_;
  uint64_t generation_ = 0;
  int active_ = 0;     // how many workers take part in this generation
  int remaining_ = 0;  // workers of this generation still running
  bool stop_ = false;
};

/// Host executor: starts the batch on the comm's pool (returns at once). finishHostBatch waits
/// and turns item statuses into a result. Several comms can be started before any is waited.
/// An executor sees the communicator's context and launch state (launch_state.h), not the
/// whole communicator.
tcclResult_t startHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                            std::vector<WorkStatus>* status);
tcclResult_t finishHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                             std::vector<WorkStatus>& status);

/// GPU executor: launches the batch on `stream` after the comm's previous launch.
tcclResult_t launchGpuBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                            cudaStream_t stream);

/// Step timeline, GPU side (executor_gpu.cu): measures how the GPU's %globaltimer relates to the
/// host's clock (host = gpu + *offsetNs; the sample was read within +-*errNs).
tcclResult_t traceCalibrateGpuClock(int64_t* offsetNs, int64_t* errNs);

/// Converts an executor status code to a result, with a WARN naming the item's peer.
tcclResult_t workStatusResult(WorkStatus status, const WorkItem& item);

}  // namespace tccl

#endif  // TCCL_EXECUTOR_H_
