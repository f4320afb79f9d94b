/*
 * launch_state.h: what running a plan needs beyond the context.
 *
 * What it is: the part of a communicator that the group launch and the executors drive: the
 * engines that move data (the proxy thread for network connectors, the host worker pool) and
 * the chain of GPU launches that keeps a communicator's operations in issue order. The
 * executors receive a CommContext and a LaunchState, never the whole communicator.
 *
 * Invariants:
 *  - Every GPU launch waits for lastLaunch and then records it, so operations stay in issue
 *    order even when the user switches streams; host operations wait for it first.
 *  - The proxy and the pool are created on first use and live until the communicator is
 *    freed (comm.cc stops the proxy before it frees the connectors it progresses).
 *
 * NCCL counterpart: ncclComm's proxyState and the kernel-launch fields of ncclComm
 * (src/include/comm.h); NCCL has no host worker pool.
 * Added in: stage 1.
 */
#ifndef TCCL_LAUNCH_STATE_H_
#define TCCL_LAUNCH_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core.h"

namespace tccl {

struct CudaEvent;
class Fiber;
class Proxy;
class WorkerPool;
struct CommContext;

struct LaunchState {
  LaunchState();
  ~LaunchState();  // comm.cc, where Proxy and WorkerPool are complete

  std::unique_ptr<Proxy> proxy;         // started by ensureProxy (network connectors only)
  std::unique_ptr<WorkerPool> workers;  // the host executor's threads, made by the first batch
  std::vector<std::unique_ptr<Fiber>> fibers;  // host items run on the caller (fiber.h, stage 3)

  CudaEvent* lastLaunch = nullptr;  // recorded after every GPU launch (GPU communicators)
  bool haveLaunched = false;
  // Stage 5: the stream lastLaunch was last recorded on (its streamId, cuda_wrap.h; valid
  // while lastStreamKnown). A launch on that stream is ordered after it by the stream itself
  // and skips the wait (a microsecond of host time).
  unsigned long long lastStreamId = 0;
  bool lastStreamKnown = false;
  // Stage 7: launches so far, counted just after each one's event is recorded
  // (executor_gpu.cu): the flight recorder remembers, per device operation, the count its
  // launch made.
  std::atomic<uint64_t> launches{0};
  // Stage 7: lastLaunch rotates through these events, one launch each (executor_gpu.cu), and
  // launchOf[i] is the launch count event i was last recorded for. With one event the
  // watchdog would learn nothing of a launch once the next was recorded (the first of two
  // launches in a row would look pending for as long as the second runs, and take the blame
  // when the second hangs); with a ring it sees each of the last kLaunchEvents.
  static constexpr int kLaunchEvents = 4;
  CudaEvent* launchEvents[kLaunchEvents] = {};
  std::atomic<uint64_t> launchOf[kLaunchEvents] = {};

  // Operations issued so far, in issue order (their sequence numbers in traces).
  uint64_t opCount = 0;

  /// Starts the proxy thread on first use (a communicator that never talks over the network,
  /// e.g. one rank, never has one).
  tcclResult_t ensureProxy(CommContext& ctx);
};

}  // namespace tccl

#endif  // TCCL_LAUNCH_STATE_H_
