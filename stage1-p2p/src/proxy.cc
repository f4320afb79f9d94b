/*
 * proxy.cc: the proxy thread's loop. See proxy.h.
 *
 * Added in: stage 1.
 */
#include "proxy.h"

#include <poll.h>
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

bool Proxy::progressOnce() {
  if (havePending_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex_);
    conns_.insert(conns_.end(), pending_.begin(), pending_.end());
    pending_.clear();
    havePending_.store(false);
  }
  bool didWork = false;
  for (Connector* c : conns_) {
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
  // Only this thread sleeps on the eventfd, so sleeping_ and kicked_ have one owner.
  std::vector<pollfd> fds;
  fds.push_back({eventFd_, POLLIN, 0});
  for (Connector* c : conns_) {
    short events = 0;
    int fd = c->transportComm->pollFd(*c, &events);
    if (fd >= 0) fds.push_back({fd, events, 0});
  }
  sleeping_.store(true);
  if (!kicked_.load() && !stop_.load()) {
    // The cap: a counter moved by someone who cannot kick (never in stage 1 outside GPU ops,
    // which keep the proxy thread awake) is still noticed.
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
    if (progressOnce()) {
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
    sleep(100);  // 100 ms: see sleep(); an executor's post kicks us out of it at once
    idle = 0;
  }
  TCCL_INFO(kProxy, "proxy thread stopped");
}

}  // namespace tccl
