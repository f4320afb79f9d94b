/*
 * watchdog.cc: the watchdog thread, the dump, and the dump signal. See watchdog.h.
 *
 * Added in: stage 7.
 */
#include "watchdog.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "comm_context.h"
#include "cuda_wrap.h"
#include "flight_recorder.h"
#include "launch_state.h"
#include "tccl/common/param.h"

// Seconds an operation may wait before the communicator is aborted (PyTorch's default
// process-group timeout is also 10 minutes); 0 turns the timeout off.
TCCL_PARAM(Timeout, "TIMEOUT", 600)
// 1: SIGUSR1 makes every communicator's watchdog dump its flight recorder.
TCCL_PARAM(FrDumpOnSignal, "FR_DUMP_ON_SIGNAL", 0)

namespace tccl {

namespace {

constexpr int64_t kTickNs = 100'000'000;  // 100 ms

// Bumped by the signal handler (async-signal-safe: a lock-free atomic); each watchdog dumps
// when it sees a new value.
std::atomic<uint64_t> dumpSignals{0};

void onDumpSignal(int) { dumpSignals.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int64_t watchdogTimeoutSec() { return tcclParamTimeout(); }

void installDumpSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (tcclParamFrDumpOnSignal() == 0) return;
    struct sigaction sa {};
    sa.sa_handler = &onDumpSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // a blocked read or poll in the program goes on
    sigaction(SIGUSR1, &sa, nullptr);
    TCCL_INFO(kInit, "flight recorder: SIGUSR1 dumps it (TCCL_FR_DUMP_ON_SIGNAL=1)");
  });
}

std::string frDescribe(const FrEntry& e) {
  char buf[256];
  if (e.peer >= 0) {
    snprintf(buf, sizeof buf, "operation %lu (p2p %lu), nccl:%s of %ld bytes %s rank %d",
             (unsigned long)(e.recordId + 1), (unsigned long)e.p2pSeq, e.name, (long)e.inCount,
             std::string(e.name) == "send" ? "to" : "from", e.peer);
  } else {
    snprintf(buf, sizeof buf, "operation %lu (collective %lu), nccl:%s",
             (unsigned long)(e.recordId + 1),
             (unsigned long)e.collSeq,
             // (the call's count: all-gather's input, reduce-scatter's output)
             frCallWords(e.func, uint64_t(std::min(e.inCount, e.outCount)), e.dtype, e.redop,
                         e.root).c_str());
  }
  return buf;
}

tcclResult_t frDump(const CommContext* comm, const FlightRecorder& fr, const char* path) {
  std::string file;
  if (path != nullptr && *path != '\0') {
    file = path;
  } else {
    const std::string prefix = getEnvString("TCCL_FR_DUMP");
    if (prefix.empty()) return tcclSuccess;  // nowhere to write: not asked for
    file = prefix + std::to_string(comm->rank);
  }
  const std::string json =
      fr.toJson(comm->rank, comm->nranks, comm->name, watchdogTimeoutSec() * 1000);
  // Written next to its final name, then renamed: a reader never sees half a dump.
  const std::string tmp = file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
    if (!out.good()) {
      TCCL_WARN("flight recorder: cannot write %s", tmp.c_str());
      return tcclSystemError;
    }
  }
  if (rename(tmp.c_str(), file.c_str()) != 0) {
    TCCL_WARN("flight recorder: cannot rename %s to %s", tmp.c_str(), file.c_str());
    return tcclSystemError;
  }
  TCCL_WARN("flight recorder: rank %d's last operations written to %s", comm->rank, file.c_str());
  return tcclSuccess;
}

Watchdog::Watchdog(CommContext* comm, const LaunchState& launch, FlightRecorder& fr)
    : comm_(comm), launch_(launch), fr_(fr), timeoutNs_(watchdogTimeoutSec() * 1'000'000'000) {
  signalsSeen_ = dumpSignals.load();
  if (timeoutNs_ > 0 && fr_.capacity() == 0) {
    // The timeout is measured on the recorder's entries: with none kept, there is nothing to
    // watch. Said once per communicator rather than silently ignored.
    TCCL_WARN("watchdog: TCCL_FR_ENTRIES=0 keeps no operations, so TCCL_TIMEOUT=%ld cannot "
              "be watched: the timeout is off", (long)watchdogTimeoutSec());
    timeoutNs_ = 0;
  }
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::loop() {
  setLogRank(comm_->rank);
  // A tick short enough that a short timeout (tests use 2 to 5 s) fires on time.
  const int64_t tick = timeoutNs_ > 0 ? std::min(kTickNs, timeoutNs_ / 10) : kTickNs;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::nanoseconds(tick), [this] { return stop_; })) {
    lock.unlock();
    pollDevice();
    const uint64_t signals = dumpSignals.load(std::memory_order_relaxed);
    if (signals != signalsSeen_) {
      signalsSeen_ = signals;
      frDump(comm_, fr_, nullptr);
    }
    if (timeoutNs_ > 0 && !fired_) checkTimeout();
    lock.lock();
  }
}

void Watchdog::pollDevice() {
  // Each event of the ring: its label first, then the event (executor_gpu.cu records before it
  // labels, so a fired event covers at least the launch its label names). The newest fired
  // one says how far the GPU has got.
  uint64_t done = 0;
  for (int i = 0; i < LaunchState::kLaunchEvents; i++) {
    const uint64_t n = launch_.launchOf[i].load(std::memory_order_acquire);
    if (n <= done) continue;
    bool fired = false;
    if (eventQuery(launch_.launchEvents[i], &fired) == tcclSuccess && fired) done = n;
  }
  if (done > 0) fr_.pollDevice(done, comm_->asyncError.load());
}

void Watchdog::checkTimeout() {
  // A revoked communicator's operations were stopped on purpose: no timeout to report.
  if (comm_->revoked.load()) return;
  FrEntry e;
  uint64_t since = 0;
  if (!fr_.oldestPending(&e, &since)) return;
  const uint64_t now = frNowNs();
  if (now < since || int64_t(now - since) < timeoutNs_) return;
  fired_ = true;
  char reason[512];
  // (A named communicator says its name: a process with several needs to know which.)
  const std::string which = comm_->name.empty() ? "" : " of communicator \"" + comm_->name + "\"";
  snprintf(reason, sizeof reason,
           "watchdog: %s%s has not completed after %ld s on rank %d (TCCL_TIMEOUT=%ld): a peer "
           "may be dead, slow, or in another call; aborting the communicator",
           frDescribe(e).c_str(), which.c_str(), (long)((now - since) / 1'000'000'000),
           comm_->rank, (long)watchdogTimeoutSec());
  TCCL_WARN("%s", reason);
  frDump(comm_, fr_, nullptr);
  comm_->setError(tcclRemoteError, reason);
}

}  // namespace tccl
