/*
 * proxy.cc: the proxy thread's loop. See proxy.h.
 *
 * Added in: stage 1; the host fast path (tryProgress, waitForProgress, the park) in stage 3.
 */
#include "proxy.h"

#include <poll.h>
#include <chrono>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "comm_context.h"

namespace tccl {

Proxy::Proxy(CommContext* comm) : comm_(comm) {}

Proxy::~Proxy() { stop(); }

tcclResult_t Proxy::start() {
  eventFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  TCCL_SYS_CHECK(eventFd_, "eventfd");
  thread_ = std::thread([this] { loop(); });
  return tcclSuccess;
}

void Proxy::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  kick();  // if it sleeps in poll()
  {
    // If it is parked: taking mutex_ orders our stop_ store before its predicate check.
    std::lock_guard<std::mutex> lock(mutex_);
  }
  parkCv_.notify_all();
  thread_.join();
  close(eventFd_);
  eventFd_ = -1;
}

void Proxy::add(Connector* c) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(c);
  havePending_.store(true, std::memory_order_release);
  kick();
}

void Proxy::kick() {
  // Dekker-style handshake with sleep(): we set kicked_ then read sleeping_; the proxy sets
  // sleeping_ then reads kicked_. With sequentially consistent atomics at least one of us sees
  // the other's store, so the proxy either notices the kick or is woken by the eventfd.
  kicked_.store(true);
  if (sleeping_.load()) {
    uint64_t one = 1;
    ssize_t r = write(eventFd_, &one, sizeof(one));
    (void)r;  // EAGAIN means the counter is already non-zero: the proxy will wake anyway
  }
}

bool Proxy::tryProgress() { return tryPass(false); }

bool Proxy::trySendProgress() { return tryPass(/*sendsOnly=*/true); }

bool Proxy::tryPass(bool sendsOnly) {
  std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // someone is progressing right now: good enough
  bool did = progressOnce(sendsOnly);
  lock.unlock();
  if (did) comm_->progress.notify();  // wake executors waiting on what we moved
  return did;
}

void Proxy::waitForProgress(ProgressSignal& signal, uint32_t seen, long timeoutUs) {
  std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    // Another thread is the engine; it notifies the signal whenever anything moves.
    signal.wait(seen, timeoutUs);
    return;
  }
  // We are the engine: sleep where the bytes arrive, then move them ourselves.
  sleep(int((timeoutUs + 999) / 1000));
  bool did = progressOnce();
  lock.unlock();
  // Wake the other waiters: what moved may be theirs, and one of them must become the engine
  // if our own wait is now over.
  if (did) comm_->progress.notify();
}

void Proxy::hostBatchBegin() {
  hostBatches_.fetch_add(1);
  kick();  // a proxy thread asleep in poll() holds the engine role: wake it so it parks
}

void Proxy::hostBatchEnd() {
  // Called once the batch's last item has returned (see proxy.h): from here on no executor of
  // this communicator runs passes, so whatever its FIFOs still hold is the proxy thread's.
  // Sequentially consistent, like the thread's load of it before it parks.
  if (hostBatches_.fetch_sub(1) != 1) return;
  // Wake the parked thread only if a send FIFO still holds published steps (a collective's
  // last sends may outlive its items); otherwise it resumes within one park period anyway, and
  // not waking it spares a thread hand-off on every call of a back-to-back loop.
  bool pending = false;
  {
    // try_lock, never lock: waiting could take a whole poll() period, since the proxy thread
    // sleeps with the mutex held. With every item returned, the holder is the proxy thread
    // (a batch too short for it to have parked): it checks hostBatches_ again after releasing
    // the mutex, sees our decrement, and runs passes instead of parking. The kick covers the
    // case where it holds the mutex asleep in poll(): it wakes now, not at the timeout.
    std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      kick();
      return;
    }
    for (const Connector* c : conns_) {
      const ConnFifo* f = c->conn->fifo;
      if (c->isSend && loadAcquire(&f->tail) > loadAcquire(&f->head)) pending = true;
    }
  }
  if (!pending) return;
  {
    // Taking mutex_ orders our decrement before the parked thread's predicate check, so the
    // notify cannot fall between its check and its wait.
    std::lock_guard<std::mutex> lock(mutex_);
  }
  parkCv_.notify_all();
}

void Proxy::parkWhileHostRuns() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Bounded, so that a connector no executor is looking at (a peer failing on a connection
  // this batch does not use) is still noticed within a few milliseconds.
  parkCv_.wait_for(lock, std::chrono::milliseconds(10),
                   [this] { return stop_.load() || hostBatches_.load() == 0; });
}

bool Proxy::progressOnce(bool sendsOnly) {
  if (havePending_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    conns_.insert(conns_.end(), pending_.begin(), pending_.end());
    pending_.clear();
    havePending_.store(false);
  }
  bool didWork = false;
  for (Connector* c : conns_) {
    if (sendsOnly && !c->isSend) continue;
    tcclResult_t res = c->transportComm->progress(*comm_, *c, &didWork);
    if (res != tcclSuccess) {
      // The connection is broken (peer died, protocol violation). Record it on the
      // communicator: that raises the abort flag, which releases every waiting executor.
      comm_->setError(res);
    }
  }
  return didWork;
}

void Proxy::sleep(int timeoutMs) {
  // Called by the engine, with progressMutex_ held: the connectors' state is ours to read,
  // and nobody else sleeps on the eventfd, so sleeping_ and kicked_ have one owner.
  std::vector<pollfd> fds;
  fds.push_back({eventFd_, POLLIN, 0});
  for (Connector* c : conns_) {
    short events = 0;
    int fd = c->transportComm->pollFd(*c, &events);
    if (fd >= 0) fds.push_back({fd, events, 0});
  }
  sleeping_.store(true);
  if (!kicked_.load() && !stop_.load()) {
    // The cap: a counter moved by someone who cannot kick (on a host-only communicator only
    // a GPU op, which keeps the proxy thread awake anyway) is still noticed.
    poll(fds.data(), fds.size(), timeoutMs);
  }
  sleeping_.store(false);
  kicked_.store(false);
  uint64_t drain;
  while (read(eventFd_, &drain, sizeof(drain)) > 0) {
  }
}

void Proxy::loop() {
  setLogRank(comm_->rank);
  TCCL_INFO(kProxy, "proxy thread started");
  int idle = 0;
  while (!stop_.load()) {
    if (hostBatches_.load() > 0 && comm_->cudaDev < 0) {
      // Host executors are running: they are the engine (see proxy.h). Stay out of their way,
      // and wake any of them that found us holding the role and went to sleep on the signal.
      // A kick left unanswered here (a post whose pass could not send everything) is answered
      // by a running item's next pass, or by hostBatchEnd once the last item has returned.
      // (Not on a communicator with a GPU: there the next operation may be a kernel, which
      // cannot drive progress, so this thread stays on duty and shares the role.)
      comm_->progress.notify();
      parkWhileHostRuns();
      idle = 0;
      continue;
    }
    bool did;
    {
      std::lock_guard<std::mutex> lock(progressMutex_);
      did = progressOnce();
    }
    if (did) {
      idle = 0;
      // Executors sleeping on the signal re-check their counters.
      comm_->progress.notify();
      continue;
    }
    if (comm_->gpuOpsInFlight.load(std::memory_order_acquire) > 0) {
      // A kernel polls and posts through mapped memory and cannot kick us: keep polling,
      // yielding the core between passes.
      sched_yield();
      continue;
    }
    // A few idle passes before sleeping: an executor usually posts again within microseconds.
    if (++idle < 64) {
      cpuRelax();
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(progressMutex_);
      // 100 ms: see sleep(). A host batch starting kicks us out of it at once.
      sleep(100);
    }
    idle = 0;
  }
  TCCL_INFO(kProxy, "proxy thread stopped");
}

}  // namespace tccl
