/*
 * executor_host.cc: the host executor and its worker pool. See executor.h.
 *
 * Added in: stage 1.
 */
#include "executor.h"

#include "comm.h"
#include "device/run_work.h"
#include "host_backend.h"
#include "proxy.h"

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
HostBackend hostBackend(tcclComm* comm) {
  static NoProxy noProxy;
  Kickable* proxy = comm->proxy.get();
  return HostBackend{comm->abortFlag, &comm->progress, proxy ? proxy : &noProxy};
}

}  // namespace

tcclResult_t startHostBatch(tcclComm* comm, const WorkBatch& batch, std::vector<uint32_t>* status,
                            bool callerRunsFirst) {
  status->assign(batch.nItems, kWorkOk);
  if (batch.nItems == 0) return tcclSuccess;
  // Receives are posted before any item waits for a thread (MPI's pre-posted receives).
  for (int i = 0; i < batch.nItems; i++) prepostP2pRecv(batch, batch.items[i]);
  // From here until finishHostBatch our items are the progress engine (proxy.h).
  if (comm->proxy) comm->proxy->hostBatchBegin();
  const int first = callerRunsFirst ? 1 : 0;  // items the pool runs: [first, nItems)
  if (batch.nItems - first <= 0) return tcclSuccess;
  if (!comm->workers) comm->workers = std::make_unique<WorkerPool>(comm->rank);
  HostBackend be = hostBackend(comm);
  uint32_t* out = status->data();
  comm->workers->start(batch.nItems - first, [be, &batch, out, first](int i) mutable {
    out[first + i] = runWorkItem(be, batch, first + i);
  });
  return tcclSuccess;
}

tcclResult_t finishHostBatch(tcclComm* comm, const WorkBatch& batch,
                             std::vector<uint32_t>& status, bool callerRunsFirst) {
  if (batch.nItems == 0) return tcclSuccess;
  if (callerRunsFirst) {
    HostBackend be = hostBackend(comm);
    status[0] = runWorkItem(be, batch, 0);
  }
  if (batch.nItems > (callerRunsFirst ? 1 : 0)) comm->workers->wait();
  if (comm->proxy) comm->proxy->hostBatchEnd();  // what is left in the FIFOs is the proxy's
  tcclResult_t res = tcclSuccess;
  for (int i = 0; i < batch.nItems; i++) {
    if (status[i] != kWorkOk && res == tcclSuccess) res = workStatusResult(status[i], batch.items[i]);
  }
  if (res == tcclSuccess) res = comm->checkAsyncError();
  return res;
}

tcclResult_t workStatusResult(uint32_t status, const WorkItem& item) {
  switch (status) {
    case kWorkOk:
      return tcclSuccess;
    case kWorkAborted:
      TCCL_WARN("operation with rank %d aborted (communicator failed or was aborted)", item.peer);
      return tcclRemoteError;
    case kWorkSizeMismatch:
      TCCL_WARN("message size mismatch with rank %d: the send and the receive counts differ",
                item.peer);
      return tcclInvalidUsage;
    case kWorkPeerClosed:
      TCCL_WARN("rank %d closed its connection while we still expected data", item.peer);
      return tcclRemoteError;
    case kWorkBadOp:
      TCCL_WARN("reduction not available for this element type");
      return tcclInternalError;
    default:
      TCCL_WARN("unknown executor status %u", status);
      return tcclInternalError;
  }
}

}  // namespace tccl
