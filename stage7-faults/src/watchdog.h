/*
 * watchdog.h: the watchdog -- one thread per communicator that turns a hang into an error.
 *
 * What it is: every tick (100 ms, or a tenth of the timeout if shorter) the watchdog
 *  1. asks which of the communicator's last launches have completed (the ring of launch
 *     events, launch_state.h): the flight recorder's device operations up to the newest
 *     fired one are then completed;
 *  2. dumps the flight recorder when asked by a signal (TCCL_FR_DUMP_ON_SIGNAL, SIGUSR1);
 *  3. looks at the oldest operation not completed: if it has waited longer than TCCL_TIMEOUT
 *     seconds (since it started, or since the one before it completed), it logs a warning
 *     naming it ("operation 7, nccl:all_reduce of 1000 x float32 (sum), has not completed
 *     after 5 s"), dumps the flight recorder (TCCL_FR_DUMP), and aborts the communicator with
 *     that reason: every executor and kernel leaves its spin loop, the stuck call returns
 *     tcclRemoteError, and tcclGetLastError(comm) says why.
 * Why a timeout and not an answer: a rank cannot tell a slow peer from a dead one or from one
 * that called something else; after long enough, stopping with a precise message (and the
 * dumps that let tools/frtrace name the culprit) beats hanging forever.
 *
 * Invariants: the watchdog fires at most once per communicator; it never frees anything (the
 * communicator stops it before tearing down); TCCL_TIMEOUT=0 turns the timeout off, but the
 * thread still runs for device completions and signal dumps.
 *
 * NCCL counterpart: none in NCCL (ncclCommAbort is the application's to call); PyTorch's
 * ProcessGroupNCCL watchdog (ncclCommWatchdog, TORCH_NCCL_ASYNC_ERROR_HANDLING, the
 * pg timeout, TORCH_NCCL_DUMP_ON_TIMEOUT).
 * Added in: stage 7.
 */
#ifndef TCCL_WATCHDOG_H_
#define TCCL_WATCHDOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "core.h"

namespace tccl {

struct CommContext;
class FlightRecorder;
struct LaunchState;

/// TCCL_TIMEOUT: seconds an operation may wait before the watchdog aborts (0: never).
int64_t watchdogTimeoutSec();

class Watchdog {
 public:
  /// Watches `fr` (the communicator's operations) and the launch events of `launch`.
  Watchdog(CommContext* comm, const LaunchState& launch, FlightRecorder& fr);
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void loop();
  void pollDevice();
  void checkTimeout();
  CommContext* comm_;
  const LaunchState& launch_;
  FlightRecorder& fr_;
  int64_t timeoutNs_;
  bool fired_ = false;
  uint64_t signalsSeen_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

/// Writes the communicator's flight recorder to `path` (null: TCCL_FR_DUMP followed by the
/// rank; nothing when that is unset). Logs where it went.
tcclResult_t frDump(const CommContext* comm, const FlightRecorder& fr, const char* path);

/// "operation 7 (collective 5), nccl:all_reduce of 1000 x float32 (sum)": an entry in words.
/// Operations count from 1 in issue order (record_id + 1), as TCCL_FAULT_OP counts them.
std::string frDescribe(const struct FrEntry& e);

/// Installs the SIGUSR1 handler when TCCL_FR_DUMP_ON_SIGNAL=1 (once per process).
void installDumpSignal();

}  // namespace tccl

#endif  // TCCL_WATCHDOG_H_
