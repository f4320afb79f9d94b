/*
 * executor_host.cc: the host executor: one thread of the communicator's worker pool per item.
 * See executor.h.
 *
 * Added in: stage 1.
 */
#include "executor.h"

#include "comm_context.h"
#include "device/run_work.h"
#include "host_backend.h"
#include "launch_state.h"
#include "proxy.h"
#include "trace.h"

namespace tccl {

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::start(int n, std::function<void(int)> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (int(threads_.size()) < n) {
      int index = int(threads_.size());
      threads_.emplace_back([this, index] { workerLoop(index); });
    }
    fn_ = std::move(fn);
    active_ = n;
    remaining_ = n;
    generation_++;
  }
  // Notified after unlocking: a worker woken while we still held the mutex would only go
  // back to sleep on it (two context switches instead of one on a busy core).
  cv_.notify_all();
}

void WorkerPool::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  doneCv_.wait(lock, [this] { return remaining_ == 0; });
}

void WorkerPool::workerLoop(int index) {
  setLogRank(rank_);
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= active_) continue;  // this batch is narrower than the pool
    auto fn = fn_;
    lock.unlock();
    fn(index);
    lock.lock();
    if (--remaining_ == 0) {
      lock.unlock();  // as in start(): the waiter should not wake into a held mutex
      doneCv_.notify_all();
      lock.lock();
    }
  }
}

namespace {

struct NoProxy : Kickable {
  void kick() override {}
};

/// The backend for this communicator's host items. Connectors with a proxy get kicked after
/// each post; a batch with only local copies has no proxy, and nobody needs kicking.
HostBackend hostBackend(CommContext* comm, LaunchState& launch) {
  static NoProxy noProxy;
  Kickable* proxy = launch.proxy.get();
  HostBackend be{comm->abortFlag, &comm->progress, proxy ? proxy : &noProxy};
  if (comm->tracePid >= 0) {
    be.traceSink = &traceRecordEmit;
    be.tracePid = comm->tracePid;
  }
  return be;
}

/// The backend of item `i` of a batch: the shared one, with the item's own trace lane.
HostBackend itemBackend(const CommContext* comm, HostBackend be, int laneBase, const char* lane,
                        int i) {
  be.traceTid = laneBase + i;
  traceLane(comm, be.traceTid, lane, i);
  return be;
}

}  // namespace

tcclResult_t startHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                            std::vector<WorkStatus>* status) {
  status->assign(batch.nItems, WorkStatus::kOk);
  if (batch.nItems == 0) return tcclSuccess;
  if (!launch.workers) launch.workers = std::make_unique<WorkerPool>(comm->rank);
  HostBackend be = hostBackend(comm, launch);
  WorkStatus* out = status->data();
  launch.workers->start(batch.nItems, [comm, be, &batch, out](int i) {
    HostBackend mine = itemBackend(comm, be, kTraceTidWorker, "worker", i);
    out[i] = runWorkItem(mine, batch, i);
  });
  return tcclSuccess;
}

tcclResult_t finishHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                             std::vector<WorkStatus>& status) {
  if (batch.nItems == 0) return tcclSuccess;
  launch.workers->wait();
  tcclResult_t res = tcclSuccess;
  for (int i = 0; i < batch.nItems; i++) {
    if (status[i] != WorkStatus::kOk && res == tcclSuccess) {
      res = workStatusResult(status[i], batch.items[i]);
    }
  }
  if (res == tcclSuccess) res = comm->checkAsyncError();
  return res;
}

tcclResult_t workStatusResult(WorkStatus status, const WorkItem& item) {
  switch (status) {
    case WorkStatus::kOk:
      return tcclSuccess;
    case WorkStatus::kAborted:
      TCCL_WARN("operation with rank %d aborted (communicator failed or was aborted)", item.peer);
      return tcclRemoteError;
    case WorkStatus::kSizeMismatch:
      TCCL_WARN("message size mismatch with rank %d: the send and the receive counts differ",
                item.peer);
      return tcclInvalidUsage;
    case WorkStatus::kPeerClosed:
      TCCL_WARN("rank %d closed its connection while we still expected data", item.peer);
      return tcclRemoteError;
    default:
      TCCL_WARN("unknown executor status %u", static_cast<uint32_t>(status));
      return tcclInternalError;
  }
}

}  // namespace tccl
