/*
 * executor_host.cc: the host executor: items as fibers on the calling thread, or on the
 * communicator's worker pool. See executor.h.
 *
 * Added in: stage 1; the host fast path (fibers, pre-posted receives, the engine role) in stage 3.
 */
#include "executor.h"

#include <sched.h>

#include "comm_context.h"
#include "device/run_work.h"
#include "fiber.h"
#include "host_backend.h"
#include "launch_state.h"
#include "proxy.h"
#include "transport/shm/peer_watch.h"
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

void WorkerPool::start(int n, std::function<void(int)> fn, std::function<void()> last) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (int(threads_.size()) < n) {
      int index = int(threads_.size());
      threads_.emplace_back([this, index] { workerLoop(index); });
    }
    fn_ = std::move(fn);
    last_ = std::move(last);
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
    if (remaining_ == 1 && last_) {
      // Every other worker of this generation has decremented remaining_ (under mutex_):
      // this one returned last. `last` runs before our decrement, so wait() cannot return
      // (nor the next start() replace last_) while it runs; unlocked, since it may take
      // other locks (Proxy::hostBatchEnd).
      auto last = last_;
      lock.unlock();
      last();
      lock.lock();
    }
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
  HostBackend be{comm->abortFlag, &comm->progress, proxy ? proxy : &noProxy,
                 comm->peerWatch.get()};
  if (comm->oversubscribed) be.spinPolls = 0;  // stage 3 (host_backend.h)
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
                            std::vector<WorkStatus>* status, bool callerRuns) {
  status->assign(batch.nItems, WorkStatus::kOk);
  if (batch.nItems == 0) return tcclSuccess;
  // Receives are posted before any item runs (MPI's pre-posted receives).
  for (int i = 0; i < batch.nItems; i++) prepostP2pRecv(batch, batch.items[i]);
  // From here until the last item returns our items are the progress engine (proxy.h).
  Proxy* proxy = launch.proxy.get();
  if (proxy) proxy->hostBatchBegin();
  if (callerRuns) return tcclSuccess;  // finishHostBatch runs them, as fibers
  if (!launch.workers) launch.workers = std::make_unique<WorkerPool>(comm->rank);
  HostBackend be = hostBackend(comm, launch);
  WorkStatus* out = status->data();
  // The engine role ends on the thread whose item returns last, not in finishHostBatch: an
  // item may return with steps published but not sent (a staged send -- a reduction's, from
  // stage 2 on -- posts and goes on; a full socket keeps the steps in the FIFO), and the
  // caller may be blocked collecting another communicator's batch of the group -- one that
  // waits, through the peers, for exactly those steps. The interleaving this closes:
  //   1. the caller starts X's batch, then R's (hostBatchBegin: R's proxy thread parks);
  //   2. R's item posts its last steps: its send pass fills the socket (or finds the pass
  //      taken) and leaves the rest to the proxy thread with a kick -- which the parked
  //      thread does not act on, since the executors are the engine;
  //   3. R's item returns: no executor of R runs passes any more;
  //   4. the caller blocks in finishHostBatch(X): X's item waits for a peer whose own
  //      collective on R waits for the steps of step 2.
  // Were hostBatchEnd to come only after 4, in finishHostBatch(R), no thread would send them.
  // Here it comes right after 3 and wakes the proxy thread when a send FIFO still holds steps.
  std::function<void()> last;
  if (proxy) last = [proxy] { proxy->hostBatchEnd(); };
  launch.workers->start(
      batch.nItems,
      [comm, be, &batch, out](int i) {
        HostBackend mine = itemBackend(comm, be, kTraceTidWorker, "worker", i);
        out[i] = runWorkItem(mine, batch, i);
      },
      std::move(last));
  return tcclSuccess;
}

namespace {

/// Runs every item of the batch on this thread, one fiber per item (fiber.h; stage 3: a lone
/// item runs without one). A fiber whose item must wait yields; after a round in which no
/// item got past a wait, this thread runs progress passes, yields the core a few times, and
/// finally sleeps where the bytes arrive (the engine's poll(), proxy.h) -- the ladder a pool
/// thread climbs in waitAtLeast.
tcclResult_t runItemsAsFibers(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                              std::vector<WorkStatus>& status) {
  if (batch.nItems == 1) {
    // Stage 3: one item has nobody to yield to: it runs on this thread as a worker would
    // (waiting by the spin-yield-sleep ladder of waitAtLeast). A fiber switch costs a system
    // call (swapcontext saves the signal mask), two per call at least: a visible share of a
    // small call's time (chapter 3, "Where a small call's time goes").
    HostBackend be = itemBackend(comm, hostBackend(comm, launch), kTraceTidFiber, "fiber", 0);
    status[0] = runWorkItem(be, batch, 0);
    return tcclSuccess;
  }
  auto& fibers = launch.fibers;
  while (int(fibers.size()) < batch.nItems) fibers.push_back(std::make_unique<Fiber>());
  uint64_t ticks = 0;  // waits passed and progress passes that moved something
  HostBackend be = hostBackend(comm, launch);
  be.yield = &Fiber::yield;
  be.fiberTicks = &ticks;
  for (int i = 0; i < batch.nItems; i++) {
    tcclResult_t res = fibers[i]->start([comm, &be, &batch, &status, i] {
      HostBackend mine = itemBackend(comm, be, kTraceTidFiber, "fiber", i);
      status[i] = runWorkItem(mine, batch, i);
    });
    // (No fiber has run yet: on failure there is nothing to unwind, and the next batch's
    // start() replaces the functions set here.)
    if (res != tcclSuccess) return res;
  }
  int idle = 0;
  for (;;) {
    const uint64_t before = ticks;
    // Sampled before the round: progress made during it (by the proxy or the engine) moves
    // the sequence, and the sleep below then returns at once (see ProgressSignal).
    const uint32_t seen = comm->progress.seq();
    int live = 0;  // items not finished after this round (resume() of a finished one is a no-op)
    for (int i = 0; i < batch.nItems; i++) live += fibers[i]->resume() ? 0 : 1;
    if (live == 0) break;
    if (ticks != before || be.proxy->tryProgress()) {
      idle = 0;  // something moved: give every item another turn at once
      continue;
    }
    if (++idle < (be.peers != nullptr ? kPeerPollRounds : kYieldPolls)) {
      // A reply usually comes within microseconds: look again soon, but give the core away
      // first if another process wants it (MPI does the same when ranks outnumber cores: a
      // pure spin would burn the core that the peer we wait for needs).
      sched_yield();
      continue;
    }
    // Every item waits and nothing moves: sleep until something may have. (A dead SHM peer
    // never moves anything: first make sure it lives.)
    if (be.peers != nullptr) be.peers->check();
    be.proxy->waitForProgress(comm->progress, seen, be.peers != nullptr ? kPeerPollSleepUs : 1000);
    idle = 0;
  }
  return tcclSuccess;
}

}  // namespace

tcclResult_t finishHostBatch(CommContext* comm, LaunchState& launch, const WorkBatch& batch,
                             std::vector<WorkStatus>& status, bool callerRuns) {
  if (batch.nItems == 0) return tcclSuccess;
  tcclResult_t res = tcclSuccess;
  if (callerRuns) {
    res = runItemsAsFibers(comm, launch, batch, status);
    // The items have all returned, on this thread: what is left in the FIFOs is the proxy's.
    if (launch.proxy) launch.proxy->hostBatchEnd();
  } else {
    launch.workers->wait();  // the last worker has called hostBatchEnd (startHostBatch)
  }
  if (res != tcclSuccess) return res;
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
      // A collective's item has two connections and its `peer` names neither: say both ends
      // (the wrong rank here sent learners after the wrong process).
      if (item.kind != WorkKind::kP2p && item.recvConn != nullptr && item.sendConn != nullptr) {
        TCCL_WARN("a peer closed its connection while we still expected data (this step "
                  "receives from rank %d and sends to rank %d)", item.recvConn->peer,
                  item.sendConn->peer);
      } else if (item.kind != WorkKind::kP2p) {
        TCCL_WARN("a peer closed its connection while we still expected data (the INIT and "
                  "NET lines name each connection's rank)");
      } else {
        TCCL_WARN("rank %d closed its connection while we still expected data", item.peer);
      }
      return tcclRemoteError;
    case WorkStatus::kBadOp:
      TCCL_WARN("reduction not available for this element type");
      return tcclInternalError;
    case WorkStatus::kBadProto:  // stage 5: kernels only; here for completeness
      TCCL_WARN("an LL step on a connection without LL slots (a planner bug)");
      return tcclInternalError;
    default:
      TCCL_WARN("unknown executor status %u", static_cast<uint32_t>(status));
      return tcclInternalError;
  }
}

}  // namespace tccl
